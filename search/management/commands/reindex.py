"""Re-embed everything with the configured model, e.g. after changing MNEMO_EMBEDDING_MODEL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.management.base import BaseCommand, CommandParser

from search.progress import run_embedding_command

if TYPE_CHECKING:
    from search.embedder_base import Embedder
    from search.registry import SearchSource


class Command(BaseCommand):
    help = (
        "Re-embed every memory and document chunk whose vector was made by another model "
        "than the configured one, in batches with a progress bar. Interrupted, it resumes "
        "where it stopped when run again; keyword search works throughout. --all re-embeds "
        "rows of the current model too."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--all",
            action="store_true",
            help="Also re-embed rows the current model already embedded (marks them first).",
        )
        parser.add_argument("--quiet-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: object, **options: object) -> None:
        run_embedding_command(
            self,
            quiet=bool(options["quiet_progress"]),
            done_verb="Re-embedded",
            # Not --all again: that would mark the rows redone so far as outdated once more.
            to_continue="run reindex (without --all) to continue where it stopped.",
            prepare=_mark_all_outdated if options["all"] else None,
        )


def _mark_all_outdated(source: SearchSource, embedder: Embedder) -> None:
    # Marking rows as outdated (not deleting their vectors) keeps this resumable.
    rows = source.model._default_manager.filter(embedding_model=embedder.model)
    rows.update(embedding_model="")
