"""Keeping the vectors in step with writes, for every registered source (registry.py).

The write services change their rows (and so their full-text vectors, a generated
column) in their own transaction, so keyword search sees a write as soon as it commits,
and call `request_embedding` there. A row that needs a vector says so itself (its
`embedding` is NULL, or made by another model), so the database is the queue: after
commit, `request_embedding` makes sure one Celery task (`embed_pending`) is on its way,
and that task embeds every row of every source still missing a vector, many per provider
call. A burst of writes sends one task, not one per write.

Nothing depends on a message arriving: Celery beat runs the same task every minute and
the worker runs it when it starts, so a lost message, a killed worker or a provider that
was down delay a vector, never lose it. `embed_rows` does the work, skips rows whose text
and model have not changed (a content hash), and is what the task,
`manage.py backfill_embeddings` and `manage.py reindex` all call.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, Model, Q, QuerySet

from lib.kept_redis import shared_redis
from search.embedder_base import EmbeddingError, EmbeddingUnavailable
from search.embeddings import get_embedder
from search.fields import vector_literal
from search.registry import SearchSource, source_for, sources

if TYPE_CHECKING:
    from search.embedder_base import Embedder

EMBED_BATCH = 64
logger = logging.getLogger(__name__)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# The flag says "rows are waiting and a task was sent for them"; the lease says "a task
# is embedding now". Both live in the shared cache (Valkey/Redis), with expiries, so a
# crashed holder never blocks the work for long: the periodic run clears them anyway.
PENDING_KEY = "mnemo:embeddings:pending"
LEASE_KEY = "mnemo:embeddings:lease"
PENDING_SECONDS = 120
LEASE_SECONDS = 60
PASS_ROWS = 512  # rows of each source read per pass of the runner


def request_embedding() -> None:
    """After this transaction commits, make sure a task will embed the rows it changed."""
    transaction.on_commit(_send_embedding_task)


def _send_embedding_task() -> None:
    from search import tasks

    # The write has committed; a broker or cache that is down must not turn it into an
    # error. The row is found by keywords meanwhile, and the periodic run embeds it.
    try:
        if not _raise_pending_flag():
            return  # a task is already on its way; it looks for rows when it starts
    except Exception as error:
        logger.warning("Could not reach the cache to request embeddings: %r", error)
        return
    try:
        tasks.embed_pending.delay()
    except Exception as error:
        logger.warning("Could not enqueue embed_pending: %r; the periodic run will embed it", error)
        # So the next write tries again; if the cache has gone too, the flag expires.
        with contextlib.suppress(Exception):
            cache.delete(PENDING_KEY)


def _raise_pending_flag() -> bool:
    """Set the pending flag unless it is set; whether this call set it. Through the kept
    client on Valkey/Redis (lib/kept_redis.py: no client built per write); the value 1 is
    stored as the cache's serializer stores an int, so cache.get reads it as 1."""
    client = shared_redis()
    if client is None:
        return cache.add(PENDING_KEY, 1, PENDING_SECONDS)
    return bool(client.set(cache.make_key(PENDING_KEY), 1, ex=PENDING_SECONDS, nx=True))


def embed_pending(embedder: Embedder | None = None) -> int:
    """Embed every row that has no vector by its source's current model; return how many.
    Each source is embedded by its role's embedder, or all by `embedder` when one is given.

    One runner at a time (a lease in the cache); a task that finds the lease taken leaves
    the work to its holder, which looks again before it lets go. Each pass first clears
    the pending flag, then reads what is missing, so a write that commits during a pass
    is either read by it or raises the flag again and gets another pass.
    """
    done, refused, me = 0, [], _lease_holder()
    while _take_lease(me):
        try:
            while True:
                cache.delete(PENDING_KEY)
                found, stored = _embed_a_pass(embedder, refused)
                done += stored
                _renew_lease(me)
                if found == 0 and not cache.get(PENDING_KEY):
                    break
        finally:
            _release_lease(me)
        # A write between the last look and letting go raised the flag with no runner.
        if not cache.get(PENDING_KEY):
            break
    return done


# The lease names its holder (host, process, thread): only the holder renews or releases
# it, so a runner whose lease expired during a long pass never ends the next holder's; and
# a lease whose holder died on this host (a worker killed mid-run) is taken over at once
# instead of blocking the restarted worker's catch-up until it expires. The cache offers
# no compare-and-delete, so a check and its delete are two steps: a lease that expires in
# between can let two runners overlap, which costs duplicate work, never a wrong vector
# (each vector is stored only where the row still holds the text that was embedded).


def _lease_holder() -> str:
    return f"{socket.gethostname()}|{os.getpid()}|{threading.get_ident()}"


def _take_lease(me: str) -> bool:
    if cache.add(LEASE_KEY, me, LEASE_SECONDS):
        return True
    holder = cache.get(LEASE_KEY)
    if holder is None or _holder_died(holder):
        cache.delete(LEASE_KEY)
        return cache.add(LEASE_KEY, me, LEASE_SECONDS)
    return False


def _holder_died(holder: str) -> bool:
    host, _, rest = str(holder).partition("|")
    pid = rest.partition("|")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    return False


def _renew_lease(me: str) -> None:
    if cache.get(LEASE_KEY) == me:
        cache.touch(LEASE_KEY, LEASE_SECONDS)


def _release_lease(me: str) -> None:
    if cache.get(LEASE_KEY) == me:
        cache.delete(LEASE_KEY)


def _embed_a_pass(embedder: Embedder | None, refused: list[EmbeddingFailure]) -> tuple[int, int]:
    """(rows read, vectors stored) for up to PASS_ROWS missing rows of each source.

    Rows the provider refuses are left out of the later passes of this run (the next run
    tries them again); rows whose text changed under us are read again next pass.
    """
    found = stored = 0
    for source in sources():
        source_embedder = embedder or get_embedder(source.embedder_role)
        name = source.model._meta.model_name
        pks = list(
            rows_needing_vectors(source, source_embedder.model)
            .exclude(pk__in=[f.pk for f in refused if f.model == name])
            .order_by("pk")
            .values_list("pk", flat=True)[:PASS_ROWS]
        )
        if pks:
            rows = source.model._default_manager.filter(pk__in=pks).order_by("pk")
            stored += embed_rows(rows, source_embedder, refused)
        found += len(pks)
    return found, stored


def rows_needing_vectors(source: SearchSource | type[Model], model: str) -> QuerySet:
    """The source's rows with no vector for this model; rows whose text changed since are
    caught on embed."""
    if not isinstance(source, SearchSource):
        source = source_for(source)
    return source.model._default_manager.filter(
        Q(embedding__isnull=True) | ~Q(embedding_model=model)
    )


@dataclass(frozen=True)
class EmbeddingFailure:
    """A row the provider refused to embed (a permanent error for that text)."""

    model: str  # the row's model name: "memory", "documentchunk"
    pk: int
    error: str


def embed_rows(
    rows: QuerySet, embedder: Embedder, failures: list[EmbeddingFailure] | None = None
) -> int:
    """Embed each row's text (its source's text_field) unless it already has a vector of
    it by this model.

    The vector is stored only if the text is still the one embedded, so a slow task
    never overwrites a newer text's vector with an older one. A text the provider
    refuses is left without a vector (keyword search still finds it), noted in failures
    and logged; the rest of its batch is embedded. Returns rows embedded.
    """
    return _embed(rows, embedder, field=source_for(rows.model).text_field, failures=failures)


def _embed(
    rows: QuerySet, embedder: Embedder, *, field: str, failures: list[EmbeddingFailure] | None
) -> int:
    """Embed each row's `field` (its text) as embed_rows says."""
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


def _is_current(row: Model, text: str, model: str) -> bool:
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
