"""Embed whatever has no current vector: rows a killed worker or a down provider missed."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from search.embeddings import EmbeddingError, get_embedder
from search.indexing import EmbeddingFailure
from search.progress import embed_outdated, failures_report


class Command(BaseCommand):
    help = (
        "Embed every memory and document chunk that has no vector from the current "
        "embedding model, in batches. Safe to run any time, and again after an interruption."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quiet-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: object, **options: object) -> None:
        try:
            embedder = get_embedder()
        except EmbeddingError as error:  # bad configuration
            raise CommandError(str(error)) from error
        out = None if options["quiet_progress"] else self.stderr
        failures: list[EmbeddingFailure] = []
        try:
            done = embed_outdated(embedder, out=out, failures=failures)
        except EmbeddingError as error:  # e.g. the provider went down partway
            raise CommandError(
                f"{error}\nThe batches embedded so far are kept; run backfill_embeddings "
                "again to continue."
            ) from error
        self.stdout.write(
            f"Embedded {done['memories']} memories and {done['chunks']} document chunks "
            f"with {embedder.model}."
        )
        if failures:
            raise CommandError(failures_report(failures))
