"""Per-owner HNSW indexes: the vector side's fast path for the few owners with many rows.

The vector side (search/ranking.py `vector_side`) is an exact scan of one owner's rows,
found through the btree on (owner, embedding_model): right and fast up to some tens of
thousands of rows, then it grows with the owner's rows (bench/heavy.py: ~400 ms at
100,000). For an owner with more than MNEMO_SEARCH_OWN_INDEX_ROWS rows of a source's
current model, this module keeps a partial HNSW index over exactly those rows:

    CREATE INDEX CONCURRENTLY <name> ON <table> USING hnsw
        ((embedding::halfvec(<dims>)) halfvec_cosine_ops)
        WHERE embedding_model = '<model>' AND <owner column> = <owner>

The vector side orders by the same expression, so PostgreSQL's planner picks the index
when the statement's literal owner and model match its predicate (Django binds parameters
client-side: they are literals) and the btree plus an exact sort for everyone else. One
index over every row would serve small owners badly (the owner filter is applied after the
graph search) and costs every writer; these cost only the owners that need them.

`reconcile()` makes the indexes match the registry (search/registry.py) and the row counts:
for each source whose model has an owner (a foreign key named `user`) and each owner above
the threshold it builds the missing index; it drops an index whose model is no longer the
source's current one, whose owner is gone or has shrunk to half the threshold or less
(hysteresis: an owner near the line is not rebuilt and dropped in turns), and an INVALID
one (a concurrent build that failed) is dropped and built again. Names are a hash of
(table, owner, model), so nothing else records which indexes exist: the catalog is the
state. Runs outside any transaction (CONCURRENTLY needs that) and under a PostgreSQL
advisory lock, so the beat task (search/tasks.py, every ten minutes) and
`manage.py vector_indexes` never build or drop the same index at once.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import DatabaseError, connection

from search import registry
from search.embedder_base import EmbeddingError
from search.embeddings import get_embedder

if TYPE_CHECKING:
    from search.registry import SearchSource

logger = logging.getLogger(__name__)

OWNER_FIELD = "user"  # a source's owner: the foreign key of this name, when its model has one
NAME_MARK = "_ownvec_"  # every managed index's name: <table prefix>_ownvec_<hash>
HNSW_MAX_HALFVEC_DIMENSIONS = 4000  # pgvector's limit for an HNSW index on halfvec
# The graph's parameters (pgvector's defaults) and what a build may use; bench/heavy.py
# measured them: 100,000 rows of 384 dimensions build in ~30 s into ~112 MB.
HNSW_OPTIONS = "m = 16, ef_construction = 64"
BUILD_MEMORY = "256MB"
# Any constant, shared by every process that reconciles: pg_try_advisory_lock's key.
LOCK_KEY = 0x6D6E656D6F5F7669  # "mnemo_vi"


@dataclass(frozen=True)
class OwnIndex:
    """A per-owner index as the catalog has it, or as reconcile wants it."""

    name: str
    table: str
    owner: int | None = None
    model: str = ""
    valid: bool = True
    size: int = 0  # bytes, of an existing index
    rows: int = 0  # of a wanted index: the owner's rows of the model now
    column: str = ""  # of a wanted index: the owner column
    dimensions: int = 0  # of a wanted index: the model's


@dataclass
class Plan:
    """What reconcile found and did (or, in a dry run, would do)."""

    limit: int = 0  # the threshold it judged by
    wanted: list[OwnIndex] = field(default_factory=list)  # every index there should be
    existing: list[OwnIndex] = field(default_factory=list)  # managed indexes found
    create: list[OwnIndex] = field(default_factory=list)
    drop: list[OwnIndex] = field(default_factory=list)  # an invalid one is also in create
    skipped: list[str] = field(default_factory=list)  # sources left alone, and why
    busy: bool = False  # another process held the lock: nothing was done
    seconds: dict[str, float] = field(default_factory=dict)  # each build's time
    failed: dict[str, str] = field(default_factory=dict)  # builds that failed, and why


def threshold() -> int:
    """Rows of the current model above which an owner gets an index (0: none do)."""
    return settings.MNEMO_SEARCH_OWN_INDEX_ROWS


def keep_above(limit: int) -> int:
    """An existing index is kept while its owner has more rows than this."""
    return limit // 2


def owner_column(source: SearchSource) -> str | None:
    """The column naming a row's owner, or None when the source's rows have no owner."""
    try:
        owner = source.model._meta.get_field(getattr(source, "owner_field", OWNER_FIELD))
    except LookupError:
        return None
    if not (owner.is_relation and owner.many_to_one):
        return None
    return owner.column


def index_prefix(table: str) -> str:
    return f"{table[:30]}{NAME_MARK}"


def index_name(table: str, owner: int, model: str) -> str:
    """Deterministic and at most 63 bytes (PostgreSQL's limit): the table's first 30
    characters, the mark, 16 hex digits of SHA-256 of (table, owner, model)."""
    digest = hashlib.sha256(f"{table}\x00{owner}\x00{model}".encode()).hexdigest()[:16]
    return f"{index_prefix(table)}{digest}"


def quote_literal(text: str) -> str:
    """A SQL string literal (standard_conforming_strings is on, PostgreSQL's default).

    DDL takes no bound parameters, so the model id is quoted here."""
    if "\x00" in text:
        raise ValueError("A model id cannot contain NUL.")
    return "'" + text.replace("'", "''") + "'"


def distance_cast(dimensions: int) -> str:
    """The type both the index and the vector side cast vectors to."""
    return f"halfvec({int(dimensions)})"


def create_sql(index: OwnIndex) -> str:
    quote = connection.ops.quote_name
    return (
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {quote(index.name)} ON {quote(index.table)} "
        f"USING hnsw ((embedding::{distance_cast(index.dimensions)}) halfvec_cosine_ops) "
        f"WITH ({HNSW_OPTIONS}) "
        f"WHERE embedding_model = {quote_literal(index.model)} "
        f"AND {quote(index.column)} = {int(index.owner or 0)}"
    )


# --- the catalog and the counts -------------------------------------------------------------


def existing_indexes(table: str) -> list[OwnIndex]:
    """The managed indexes on `table`, valid or not, with the owner and model their
    comment records (set after each build; empty if the build never finished)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, i.indisvalid AND i.indisready, pg_relation_size(c.oid),
                   obj_description(c.oid, 'pg_class')
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = to_regclass(%s) AND starts_with(c.relname, %s)
            ORDER BY c.relname
            """,
            [connection.ops.quote_name(table), index_prefix(table)],
        )
        found = cursor.fetchall()
    indexes = []
    for name, valid, size, comment in found:
        owner, model = parse_comment(comment)
        indexes.append(OwnIndex(name, table, owner, model, bool(valid), size))
    return indexes


def comment_for(owner: int, model: str) -> str:
    return f"mnemo per-owner vector index: owner {owner}, model {model}"


def parse_comment(comment: str | None) -> tuple[int | None, str]:
    head = "mnemo per-owner vector index: owner "
    if not comment or not comment.startswith(head):
        return None, ""
    owner, _, model = comment.removeprefix(head).partition(", model ")
    return (int(owner) if owner.isdigit() else None), model


def owner_rows(table: str, column: str, model: str, above: int) -> dict[int, int]:
    """Owner → rows of `model`, for owners with more than `above` (read from the btree
    on (owner, embedding_model) that every source has: an index-only scan, no vectors)."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote(column)}, count(*) FROM {quote(table)} "  # noqa: S608 - names quoted
            f"WHERE embedding_model = %s AND {quote(column)} IS NOT NULL "
            f"GROUP BY {quote(column)} HAVING count(*) > %s",
            [model, above],
        )
        return dict(cursor.fetchall())


# --- reconciling ------------------------------------------------------------------------------


def plan(limit: int | None = None) -> Plan:
    """What reconcile would do now: the indexes wanted, those found, what to create and
    drop. Reads only."""
    limit = threshold() if limit is None else limit
    result = Plan(limit=limit)
    for source in registry.sources():
        table = source.model._meta.db_table
        existing = {index.name: index for index in existing_indexes(table)}
        result.existing += existing.values()
        wanted = _wanted(source, limit, result.skipped)
        if wanted is None:  # nothing can be judged: leave its indexes alone
            continue
        for name, index in wanted.items():
            have = existing.get(name)
            if have is not None and have.valid:
                result.wanted.append(index)  # kept while above half the threshold
            elif index.rows > limit:  # built (again, if invalid) only above it
                result.wanted.append(index)
                result.create.append(index)
        kept = {index.name for index in result.wanted}
        result.drop += [
            index for name, index in existing.items() if not index.valid or name not in kept
        ]
    return result


def _wanted(source: SearchSource, limit: int, skipped: list[str]) -> dict[str, OwnIndex] | None:
    """The indexes the source's owners may have: every owner with more than half the
    threshold of rows of the current model. None when that cannot be known."""
    column = owner_column(source)
    if column is None:
        skipped.append(f"{source.name}: its rows have no owner")
        return {}
    try:
        embedder = get_embedder(source.embedder_role)
        model, dimensions = embedder.model, embedder.dimensions
    except EmbeddingError as error:
        skipped.append(f"{source.name}: no embedder ({error}); its indexes left as they are")
        return None
    if limit <= 0:
        return {}
    if dimensions > HNSW_MAX_HALFVEC_DIMENSIONS:
        skipped.append(
            f"{source.name}: {dimensions} dimensions, more than an HNSW index on halfvec "
            f"takes ({HNSW_MAX_HALFVEC_DIMENSIONS}); its owners keep the exact scan"
        )
        return {}
    table = source.model._meta.db_table
    wanted = {}
    for owner, rows in owner_rows(table, column, model, keep_above(limit)).items():
        name = index_name(table, owner, model)
        wanted[name] = OwnIndex(
            name, table, owner, model, rows=rows, column=column, dimensions=dimensions
        )
    return wanted


def reconcile(*, dry_run: bool = False, limit: int | None = None) -> Plan:
    """Build the per-owner indexes that are missing and drop those no longer wanted (see
    the module's docstring). Outside any transaction; under the advisory lock, or does
    nothing (busy) while another process reconciles."""
    if connection.in_atomic_block:
        raise RuntimeError(
            "Per-owner vector indexes are built CONCURRENTLY, which cannot run in a "
            "transaction: call reconcile() outside atomic()."
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        (locked,) = cursor.fetchone()
    if not locked:
        return Plan(busy=True)
    try:
        result = plan(limit)
        if not dry_run:
            _apply(result)
        return result
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def _apply(result: Plan) -> None:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for index in result.drop:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(index.name)}")
            logger.info("Dropped the vector index %s (%s)", index.name, describe_drop(index))
        for index in result.create:
            started = time.monotonic()
            cursor.execute(f"SET maintenance_work_mem = {quote_literal(BUILD_MEMORY)}")
            try:
                cursor.execute(create_sql(index))
                comment = quote_literal(comment_for(index.owner or 0, index.model))
                cursor.execute(f"COMMENT ON INDEX {quote(index.name)} IS {comment}")
            except DatabaseError as error:
                # A concurrent build that fails leaves an INVALID index: drop it now; the
                # next run builds it again. The other owners' builds go on.
                logger.exception("Could not build the vector index %s", index.name)
                result.failed[index.name] = str(error).strip()
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(index.name)}")
                continue
            finally:
                cursor.execute("RESET maintenance_work_mem")
            result.seconds[index.name] = time.monotonic() - started
            logger.info(
                "Built the vector index %s for owner %s of %s (%s rows of %s) in %.1f s",
                index.name,
                index.owner,
                index.table,
                index.rows,
                index.model,
                result.seconds[index.name],
            )


def describe_drop(index: OwnIndex) -> str:
    """Why reconcile drops this index."""
    if not index.valid:
        return "invalid: a build that did not finish"
    if index.owner is None:
        return "no record of its owner"
    return f"owner {index.owner}, model {index.model}: no longer needed"
