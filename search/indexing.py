"""Keeping the search index in step with writes: chunks at once, vectors after commit.

The write services call `rechunk_document` / `schedule_memory_embedding` inside their
transaction. Chunk rows (and their full-text vectors, a generated column) change in that
same transaction, so keyword search sees a write as soon as it commits. Vectors come from
a Celery task enqueued on commit; `embed_memories` / `embed_chunks` do that work, skip rows
whose text and model have not changed (a content hash), and are what the tasks,
`manage.py backfill_embeddings` and `manage.py reindex` all call.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet

from context.models import Document, DocumentChunk
from lib.search_fields import vector_literal
from memory.models import Memory
from search.chunking import split_into_chunks
from search.embeddings import EmbeddingError, EmbeddingUnavailable

if TYPE_CHECKING:
    from search.embeddings import Embedder

EMBED_BATCH = 64
logger = logging.getLogger(__name__)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rechunk_document(document: Document, *, new: bool = False) -> None:
    """Make the document's chunk rows match its body; unchanged chunks keep their vectors.
    A new document (just created in this transaction) has no chunks to compare with."""
    texts = split_into_chunks(document.body)
    existing = {} if new else {chunk.ordinal: chunk for chunk in document.chunks.all()}
    changed = []
    for ordinal, text in enumerate(texts):
        chunk = existing.get(ordinal)
        if chunk is None:
            changed.append(
                DocumentChunk(
                    document=document,
                    user_id=document.user_id,
                    agent_id=document.agent_id,
                    ordinal=ordinal,
                    text=text,
                )
            )
        elif chunk.text != text:
            chunk.text, chunk.embedding, chunk.embedding_model, chunk.embedded_hash = (
                text,
                None,
                "",
                "",
            )
            chunk.save(update_fields=["text", "embedding", "embedding_model", "embedded_hash"])
    DocumentChunk.objects.bulk_create([chunk for chunk in changed if chunk.pk is None])
    if len(existing) > len(texts):
        document.chunks.filter(ordinal__gte=len(texts)).delete()
    if texts:
        _enqueue_on_commit("embed_document", document.pk)


def schedule_memory_embedding(memory: Memory) -> None:
    _enqueue_on_commit("embed_memory", memory.pk)


def _enqueue_on_commit(task_name: str, pk: int) -> None:
    from search import tasks

    task = getattr(tasks, task_name)

    def enqueue() -> None:
        # The write has committed; a broker that is down must not turn it into an error.
        # The row is found by keywords meanwhile, and backfill_embeddings embeds it later.
        try:
            task.delay(pk)
        except Exception as error:
            logger.warning(
                "Could not enqueue %s(%s): %r; run backfill_embeddings", task_name, pk, error
            )

    transaction.on_commit(enqueue)


def memories_needing_vectors(model: str) -> QuerySet[Memory]:
    """Rows with no vector for this model; rows whose text changed since are caught on embed."""
    return Memory.objects.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model))


def chunks_needing_vectors(model: str) -> QuerySet[DocumentChunk]:
    return DocumentChunk.objects.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model))


@dataclass(frozen=True)
class EmbeddingFailure:
    """A row the provider refused to embed (a permanent error for that text)."""

    model: str  # "memory" or "chunk"
    pk: int
    error: str


def embed_memories(
    rows: QuerySet[Memory], embedder: Embedder, failures: list[EmbeddingFailure] | None = None
) -> int:
    """Embed each row's value unless it already has a vector of it by this model.

    The vector is stored only if the value is still the one embedded, so a slow task
    never overwrites a newer value's vector with an older one. A text the provider
    refuses is left without a vector (keyword search still finds it), noted in failures
    and logged; the rest of its batch is embedded. Returns rows embedded.
    """
    return _embed(rows, embedder, field="value", failures=failures)


def embed_chunks(
    rows: QuerySet[DocumentChunk],
    embedder: Embedder,
    failures: list[EmbeddingFailure] | None = None,
) -> int:
    return _embed(rows, embedder, field="text", failures=failures)


def _embed(
    rows: QuerySet, embedder: Embedder, *, field: str, failures: list[EmbeddingFailure] | None
) -> int:
    """Embed each row's `field` (its text) as embed_memories says."""
    done = 0
    rows = rows.annotate(
        has_vector=ExpressionWrapper(Q(embedding__isnull=False), output_field=BooleanField())
    )
    for batch in _batches(rows.iterator(chunk_size=EMBED_BATCH * 4), EMBED_BATCH):
        todo = [row for row in batch if not _is_current(row, getattr(row, field), embedder.model)]
        texts = [getattr(row, field) for row in todo]
        try:
            vectors = embedder.embed(texts) if todo else []
        except EmbeddingUnavailable:
            raise
        except EmbeddingError:
            # One refused text must not keep the others of its batch from their vectors.
            todo, texts, vectors = _embed_one_by_one(todo, texts, embedder, failures)
        if todo:
            done += _store_vectors(rows.model, field, todo, texts, vectors, embedder.model)
    return done


def _embed_one_by_one(
    rows: list, texts: list[str], embedder: Embedder, failures: list[EmbeddingFailure] | None
) -> tuple[list, list[str], list[list[float]]]:
    """The rows, texts and vectors of those the provider embeds when asked one by one."""
    kept_rows, kept_texts, vectors = [], [], []
    for row, text in zip(rows, texts, strict=True):
        try:
            (vector,) = embedder.embed([text])
        except EmbeddingUnavailable:
            raise
        except EmbeddingError as error:
            name = row._meta.model_name
            logger.warning("Not embedding %s %s: %s", name, row.pk, error)
            if failures is not None:
                failures.append(EmbeddingFailure(name, row.pk, str(error)))
            continue
        kept_rows.append(row)
        kept_texts.append(text)
        vectors.append(vector)
    return kept_rows, kept_texts, vectors


def _store_vectors(
    model_class, field: str, rows: list, texts: list[str], vectors: list, model: str
) -> int:
    """Store each row's vector where the row still holds the text embedded; return how many.

    One UPDATE per row (each row has its own vector and guard), sent together: psycopg
    pipelines executemany, where the ORM's update() would wait for each in turn.
    """
    quote = connection.ops.quote_name
    update = (
        f"UPDATE {quote(model_class._meta.db_table)} "  # noqa: S608 - names from the model
        "SET embedding = %s::vector, embedding_model = %s, embedded_hash = %s "
        f"WHERE id = %s AND {quote(model_class._meta.get_field(field).column)} = %s"
    )
    params = [
        (vector_literal(vector), model, text_hash(text), row.pk, text)
        for row, text, vector in zip(rows, texts, vectors, strict=True)
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(update, params)
        return cursor.rowcount


def _is_current(row: Memory | DocumentChunk, text: str, model: str) -> bool:
    return row.has_vector and row.embedding_model == model and row.embedded_hash == text_hash(text)


def _batches(rows: Iterable, size: int) -> Iterator[list]:
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
