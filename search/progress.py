"""The batch loop behind backfill_embeddings and reindex, with a progress bar on a terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from django.core.management.base import BaseCommand, CommandError, OutputWrapper

from search.embedder_base import EmbeddingError
from search.embeddings import get_embedder
from search.indexing import EMBED_BATCH, EmbeddingFailure, embed_rows, rows_needing_vectors
from search.registry import SearchSource, sources

if TYPE_CHECKING:
    from collections.abc import Callable

    from search.embedder_base import Embedder

BAR_WIDTH = 30


def embed_outdated(
    embedders: dict[str, Embedder],
    *,
    out: TextIO | None = None,
    failures: list[EmbeddingFailure],
) -> dict[str, int]:
    """Embed, source by source and batch by batch in id order, every row without a
    current vector; return how many of each source (by name). `embedders` maps each
    source's name to its embedder.

    Each batch commits on its own, so an interruption loses at most one batch and the
    next run starts with what is still outdated. Rows the provider refuses are skipped
    and added to failures; the run goes on past them.
    """
    done = {}
    for source in sources():
        embedder = embedders[source.name]
        total = rows_needing_vectors(source, embedder.model).count()
        done[source.name] = 0
        last_id = 0
        _show(out, source.label, 0, total)
        try:
            while True:
                pending = rows_needing_vectors(source, embedder.model)
                batch = pending.filter(pk__gt=last_id).order_by("pk")
                ids = list(batch.values_list("pk", flat=True)[:EMBED_BATCH])
                if not ids:
                    break
                last_id = ids[-1]
                done[source.name] += embed_rows(pending.filter(pk__in=ids), embedder, failures)
                _show(out, source.label, min(done[source.name], total), total)
        finally:  # end the bar's line, also when a batch fails
            if out is not None and total:
                _write(out, "\n")
    return done


def _show(out: TextIO | None, name: str, done: int, total: int) -> None:
    if out is None or not total:
        return
    filled = BAR_WIDTH * done // total
    _write(out, f"\r{name:>8} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}")
    out.flush()


def _write(out: TextIO, text: str) -> None:
    if isinstance(out, OutputWrapper):
        # A command's self.stderr would end each write with a newline (no bar, a line per
        # batch) and colour it as an error on a terminal.
        out.write(text, style_func=lambda plain: plain, ending="")
    else:
        out.write(text)


def failures_report(failures: list[EmbeddingFailure], *, shown: int = 10) -> str:
    """What a command says about the rows it could not embed."""
    lines = [
        f"{len(failures)} row(s) could not be embedded and are found by keywords only; fix "
        "the cause and run the command again:"
    ]
    lines += [f"  {failure.model} {failure.pk}: {failure.error}" for failure in failures[:shown]]
    if len(failures) > shown:
        lines.append(f"  … and {len(failures) - shown} more")
    return "\n".join(lines)


def run_embedding_command(
    command: BaseCommand,
    *,
    quiet: bool,
    done_verb: str,
    to_continue: str,
    prepare: Callable[[SearchSource, Embedder], None] | None = None,
) -> None:
    """What backfill_embeddings and reindex do: embed_outdated with each source's
    configured model, a bar on stderr unless quiet, a summary on stdout, errors as
    CommandError. `prepare` runs first, once per source."""
    try:
        embedders = {source.name: get_embedder(source.embedder_role) for source in sources()}
    except EmbeddingError as error:  # bad configuration
        raise CommandError(str(error)) from error
    if prepare is not None:
        for source in sources():
            prepare(source, embedders[source.name])
    failures: list[EmbeddingFailure] = []
    try:
        done = embed_outdated(embedders, out=None if quiet else command.stderr, failures=failures)
    except EmbeddingError as error:  # e.g. the provider went down partway
        raise CommandError(
            f"{error}\nThe batches {done_verb.lower()} so far are kept; {to_continue}"
        ) from error
    command.stdout.write(f"{done_verb} {_summary(done, embedders)}.")
    if failures:
        raise CommandError(failures_report(failures))


def _summary(done: dict[str, int], embedders: dict[str, Embedder]) -> str:
    """ "7 memories and 2 document chunks with <model>"; each source names its own model
    when they differ."""
    models = {embedder.model for embedder in embedders.values()}
    parts = [
        f"{done[source.name]} {source.plural}"
        + ("" if len(models) == 1 else f" with {embedders[source.name].model}")
        for source in sources()
    ]
    summary = " and ".join(parts)
    return f"{summary} with {models.pop()}" if len(models) == 1 else summary
