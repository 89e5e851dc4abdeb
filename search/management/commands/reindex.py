"""Re-embed everything with the configured model, e.g. after changing MNEMO_EMBEDDING_MODEL."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from context.models import DocumentChunk
from memory.models import Memory
from search.embeddings import EmbeddingError, get_embedder
from search.indexing import EmbeddingFailure
from search.progress import embed_outdated, failures_report


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
        try:
            embedder = get_embedder()
        except EmbeddingError as error:  # bad configuration
            raise CommandError(str(error)) from error
        if options["all"]:
            # Marking rows as outdated (not deleting their vectors) keeps this resumable.
            for model in (Memory, DocumentChunk):
                model.objects.filter(embedding_model=embedder.model).update(embedding_model="")
        out = None if options["quiet_progress"] else self.stderr
        failures: list[EmbeddingFailure] = []
        try:
            done = embed_outdated(embedder, out=out, failures=failures)
        except EmbeddingError as error:  # e.g. the provider went down partway
            # Not --all again: that would mark the rows redone so far as outdated once more.
            raise CommandError(
                f"{error}\nThe batches re-embedded so far are kept; run reindex (without "
                "--all) to continue where it stopped."
            ) from error
        self.stdout.write(
            f"Re-embedded {done['memories']} memories and {done['chunks']} document chunks "
            f"with {embedder.model}."
        )
        if failures:
            raise CommandError(failures_report(failures))
