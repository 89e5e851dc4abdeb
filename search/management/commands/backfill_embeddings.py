"""Embed whatever has no current vector: rows a killed worker or a down provider missed."""

from django.core.management.base import BaseCommand, CommandParser

from search.progress import run_embedding_command


class Command(BaseCommand):
    help = (
        "Embed every memory and document chunk that has no vector from the current "
        "embedding model, in batches. Safe to run any time, and again after an interruption."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quiet-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: object, **options: object) -> None:
        run_embedding_command(
            self,
            quiet=bool(options["quiet_progress"]),
            done_verb="Embedded",
            to_continue="run backfill_embeddings again to continue.",
        )
