"""Per-owner HNSW indexes (search/vector_index.py) and the vector side that uses them
(search/ranking.py vector_side), on the test suite's real PostgreSQL with pgvector.

CREATE INDEX CONCURRENTLY cannot run in a transaction: these tests commit (transaction=True)
and drop whatever index they made when they end."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction

from memory.models import Memory, Source
from search import vector_index
from search.embeddings import get_embedder
from search.ranking import QueryVector, vector_side
from search.tasks import maintain_vector_indexes
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLD = 1000
HEAVY, LIGHT = 1200, 150
PLANNED_THRESHOLD, PLANNED_HEAVY = 3000, 4000
CANDIDATES = 50
TABLE = Memory._meta.db_table


@dataclass
class Fixture:
    heavy: object
    light: object
    model: str
    dimensions: int
    rng: np.random.Generator
    centres: np.ndarray

    def vectors(self, count: int) -> np.ndarray:
        """Unit vectors around a few dozen centres, as text embeddings cluster."""
        picks = self.rng.integers(0, len(self.centres), count)
        noise = self.rng.standard_normal((count, self.dimensions)).astype(np.float32)
        raw = self.centres[picks] + 0.35 * noise / np.sqrt(self.dimensions)
        return (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)

    def query(self) -> QueryVector:
        return QueryVector(model=self.model, vector=[float(x) for x in self.vectors(1)[0]])


def add_rows(user, vectors, model: str, start: int = 0) -> None:
    Memory.objects.bulk_create(
        [
            Memory(
                user=user,
                key=f"fact:item-{start + n}",
                value=f"Row {start + n}",
                source=Source.USER_STATED,
                confidence=1.0,
                embedding=vector,
                embedding_model=model,
            )
            for n, vector in enumerate(vectors)
        ],
        batch_size=500,
    )


def drop_managed_indexes() -> None:
    with connection.cursor() as cursor:
        for index in vector_index.existing_indexes(TABLE):
            cursor.execute(f'DROP INDEX IF EXISTS "{index.name}"')


def make_rows(settings, heavy: int, threshold: int):
    settings.MNEMO_SEARCH_OWN_INDEX_ROWS = threshold
    embedder = get_embedder("memories")
    rng = np.random.default_rng(13)
    centres = rng.standard_normal((24, embedder.dimensions)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    fixture = Fixture(
        UserFactory(), UserFactory(), embedder.model, embedder.dimensions, rng, centres
    )
    add_rows(fixture.heavy, fixture.vectors(heavy), fixture.model)
    add_rows(fixture.light, fixture.vectors(LIGHT), fixture.model)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TABLE}")
    return fixture


@pytest.fixture
def rows(settings):
    """An owner just above the threshold and one far below, for the manager's decisions."""
    yield make_rows(settings, HEAVY, THRESHOLD)
    drop_managed_indexes()


@pytest.fixture
def planned(settings):
    """An owner with enough rows that the planner prefers an index over sorting them all
    (on a table this small, a few thousand), and one far below."""
    yield make_rows(settings, PLANNED_HEAVY, PLANNED_THRESHOLD)
    drop_managed_indexes()


def name_for(user, model: str) -> str:
    return vector_index.index_name(TABLE, user.pk, model)


def managed() -> dict[str, vector_index.OwnIndex]:
    return {index.name: index for index in vector_index.existing_indexes(TABLE)}


def statement(user, query: QueryVector, **filters) -> tuple[str, list]:
    rows = Memory.objects.filter(user=user, **filters)
    return vector_side(rows, query, CANDIDATES, ()).query.sql_with_params()


def explain(user, query: QueryVector, **filters) -> str:
    sql, params = statement(user, query, **filters)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def run(user, query: QueryVector, **filters) -> list[tuple[int, float]]:
    sql, params = statement(user, query, **filters)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(pk, order) for _side, order, _coverage, pk in cursor.fetchall()]


def exact(user, query: QueryVector) -> list[tuple[int, float]]:
    """The float32 exact scan: the vector side before the per-owner indexes."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, embedding <=> %s::vector AS d FROM {TABLE} "  # noqa: S608
            "WHERE user_id = %s AND embedding_model = %s AND embedding IS NOT NULL "
            "ORDER BY d, id LIMIT %s",
            [str(query.vector), user.pk, query.model, CANDIDATES],
        )
        return cursor.fetchall()


# --- building and dropping ----------------------------------------------------------------


def test_an_owner_above_the_threshold_gets_an_index_and_one_below_does_not(rows):
    done = vector_index.reconcile()

    assert [index.name for index in done.create] == [name_for(rows.heavy, rows.model)]
    found = managed()
    assert set(found) == {name_for(rows.heavy, rows.model)}
    index = found[name_for(rows.heavy, rows.model)]
    assert index.valid
    assert (index.owner, index.model) == (rows.heavy.pk, rows.model)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_indexdef(%s::regclass)", [index.name])
        (definition,) = cursor.fetchone()
    assert "USING hnsw" in definition
    assert f"halfvec({rows.dimensions})" in definition
    assert f"user_id = {rows.heavy.pk}" in definition
    assert rows.model in definition

    again = vector_index.reconcile()  # nothing left to do
    assert (again.create, again.drop) == ([], [])


def test_names_are_short_and_deterministic():
    name = vector_index.index_name("context_documentchunk" * 3, 2**62, "m" * 120)
    assert len(name.encode()) <= 63
    assert name == vector_index.index_name("context_documentchunk" * 3, 2**62, "m" * 120)
    assert name != vector_index.index_name("context_documentchunk" * 3, 2**62, "n" * 120)


def test_an_index_is_kept_down_to_half_the_threshold_then_dropped(rows):
    vector_index.reconcile()
    name = name_for(rows.heavy, rows.model)

    # 1,200 rows: not enough to build at a threshold of 2,000, enough to keep (above 1,000).
    kept = vector_index.reconcile(limit=2000)
    assert (kept.create, kept.drop) == ([], [])
    assert name in managed()

    dropped = vector_index.reconcile(limit=2400)  # keeps above 1,200 only
    assert [index.name for index in dropped.drop] == [name]
    assert managed() == {}
    # ... and not built again at 2,000 once it is gone.
    assert vector_index.reconcile(limit=2000).create == []


def test_a_deleted_owner_loses_the_index(rows):
    vector_index.reconcile()
    name = name_for(rows.heavy, rows.model)
    rows.heavy.delete()

    assert [index.name for index in vector_index.reconcile().drop] == [name]
    assert managed() == {}


def test_a_model_change_replaces_the_index(planned, monkeypatch):
    vector_index.reconcile()
    Memory.objects.filter(user=planned.heavy).update(embedding_model="test:next-model")
    with connection.cursor() as cursor:  # as autovacuum would after a reindex
        cursor.execute(f"ANALYZE {TABLE}")

    @dataclass
    class NextEmbedder:
        model: str = "test:next-model"
        dimensions: int = planned.dimensions

    monkeypatch.setattr(vector_index, "get_embedder", lambda role: NextEmbedder())
    done = vector_index.reconcile()

    assert [index.name for index in done.drop] == [name_for(planned.heavy, planned.model)]
    assert [index.name for index in done.create] == [name_for(planned.heavy, "test:next-model")]
    assert set(managed()) == {name_for(planned.heavy, "test:next-model")}
    query = QueryVector(model="test:next-model", vector=planned.query().vector)
    assert name_for(planned.heavy, "test:next-model") in explain(planned.heavy, query)


def test_an_invalid_index_is_dropped_and_built_again(planned):
    # A concurrent build that fails (here: a unique index over duplicates) leaves its index
    # behind, INVALID, under the name the manager would use.
    name = name_for(planned.heavy, planned.model)
    with connection.cursor() as cursor, pytest.raises(Exception, match="could not create"):
        cursor.execute(
            f'CREATE UNIQUE INDEX CONCURRENTLY "{name}" ON {TABLE} (user_id) '
            f"WHERE user_id = {planned.heavy.pk}"
        )
    assert not managed()[name].valid

    done = vector_index.reconcile()

    assert [index.name for index in done.drop] == [name]
    assert [index.name for index in done.create] == [name]
    rebuilt = managed()[name]
    assert rebuilt.valid
    assert name in explain(planned.heavy, planned.query())


def test_a_failed_build_is_cleaned_up_and_reported(rows, monkeypatch):
    monkeypatch.setattr(vector_index, "HNSW_OPTIONS", "m = 1")  # pgvector refuses m < 2
    done = vector_index.reconcile()

    assert set(done.failed) == {name_for(rows.heavy, rows.model)}
    assert managed() == {}  # nothing INVALID left behind


def test_it_refuses_to_run_inside_a_transaction(rows):
    with transaction.atomic(), pytest.raises(RuntimeError, match="outside atomic"):
        vector_index.reconcile()


def test_a_second_run_at_the_same_time_does_nothing(rows):
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [vector_index.LOCK_KEY])
        assert vector_index.reconcile().busy
        assert managed() == {}
        # Let go before the next run: a closed connection's backend may still hold the
        # lock for a moment while it exits (a busy machine saw the next run find it held).
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [vector_index.LOCK_KEY])
    finally:
        other.close()
    assert not vector_index.reconcile().busy


def test_zero_turns_them_off(rows):
    vector_index.reconcile()
    assert [index.name for index in vector_index.reconcile(limit=0).drop] == [
        name_for(rows.heavy, rows.model)
    ]
    assert managed() == {}


def test_the_beat_task_reconciles(rows):
    assert maintain_vector_indexes() == {"created": 1, "dropped": 0, "failed": 0, "busy": 0}
    assert set(managed()) == {name_for(rows.heavy, rows.model)}


# --- the vector side: which plan, which rows ------------------------------------------------


def test_the_planner_uses_the_index_for_its_owner_and_the_btree_for_others(planned):
    vector_index.reconcile()
    name = name_for(planned.heavy, planned.model)
    query = planned.query()

    heavy = explain(planned.heavy, query)
    light = explain(planned.light, query)

    assert name in heavy, heavy
    assert name not in light, light
    assert 'Sort Key: ((("U0".embedding)::halfvec' in light, light  # the exact sort


def test_without_an_index_the_heavy_owner_gets_the_exact_scan(planned):
    plan = explain(planned.heavy, planned.query())
    assert 'Sort Key: ((("U0".embedding)::halfvec' in plan, plan


def test_the_vector_side_equals_the_exact_scan_for_an_owner_without_an_index(planned):
    vector_index.reconcile()
    for _ in range(5):
        query = planned.query()
        found, truth = run(planned.light, query), exact(planned.light, query)
        assert [pk for pk, _ in found] == [pk for pk, _ in truth]
        assert [d for _, d in found] == pytest.approx([d for _, d in truth], abs=1e-9)


def test_the_vector_side_through_the_index_finds_the_exact_scans_rows(planned):
    """An HNSW index is approximate, and its graph differs from build to build: a row near
    the 50th can be swapped for its neighbour (seen once in a fresh clone's run). What the
    product promises is recall >= 0.95 of the exact scan (issue 13) over queries (one query
    of ten once found 47 of 50 here, so a single query is held to 0.9), each row with its
    exact float32 distance, in (distance, pk) order."""
    vector_index.reconcile()
    recalls = []
    for _ in range(10):
        query = planned.query()
        found, truth = run(planned.heavy, query), exact(planned.heavy, query)
        assert len(found) == len(truth) == CANDIDATES
        shared = {pk for pk, _ in found} & {pk for pk, _ in truth}
        recalls.append(len(shared) / CANDIDATES)
        assert recalls[-1] >= 0.9
        distances = dict(exact_distances(planned.heavy, query, [pk for pk, _ in found]))
        assert [d for _, d in found] == pytest.approx([distances[pk] for pk, _ in found], abs=1e-9)
        assert found == sorted(found, key=lambda row: (row[1], row[0]))
    assert sum(recalls) / len(recalls) >= 0.95


def exact_distances(user, query: QueryVector, ids: list[int]) -> list[tuple[int, float]]:
    """The float32 distance of each of these rows to the query."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, embedding <=> %s::vector FROM {TABLE} "  # noqa: S608
            "WHERE user_id = %s AND id = ANY(%s)",
            [str(query.vector), user.pk, ids],
        )
        return cursor.fetchall()


def test_pgvector_takes_the_connection_settings(planned):
    """hnsw.ef_search and hnsw.iterative_scan are sent at connection start (config/
    settings.py), before pgvector is loaded; once it is, they are its settings. With the
    iterative scan on, a filter that keeps one row in ten still gets all it asked for."""
    connection.close()  # a new session, pgvector not loaded yet
    with connection.cursor() as cursor:
        cursor.execute("SELECT NULL::vector")
        cursor.execute("SHOW hnsw.ef_search")
        assert cursor.fetchone() == ("200",)
        cursor.execute("SHOW hnsw.iterative_scan")
        assert cursor.fetchone() == ("relaxed_order",)
    vector_index.reconcile()
    name = name_for(planned.heavy, planned.model)
    query = planned.query()
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")  # keep the index plan despite the filter
        try:
            assert name in explain(planned.heavy, query, key__endswith="0")
            found = run(planned.heavy, query, key__endswith="0")
        finally:
            cursor.execute("RESET enable_sort")
    assert len(found) == CANDIDATES  # 400 rows match; ef_search alone would give ~20


# --- the command --------------------------------------------------------------------------


def test_the_command_lists_and_builds(rows):
    out = io.StringIO()
    call_command("vector_indexes", "--list", stdout=out)
    name = name_for(rows.heavy, rows.model)
    assert f"Would build {name} on {TABLE} for owner {rows.heavy.pk}" in out.getvalue()
    assert managed() == {}

    out = io.StringIO()
    call_command("vector_indexes", stdout=out)
    assert f"Built {name}" in out.getvalue()

    out = io.StringIO()
    call_command("vector_indexes", "--list", stdout=out)
    listing = out.getvalue()
    assert f"{name}  {TABLE}  owner {rows.heavy.pk}, {HEAVY:,} rows now  {rows.model}" in listing
    assert "ok" in listing
    assert "Nothing to change." in listing

    out = io.StringIO()
    call_command("vector_indexes", "--dry-run", "--rows", "0", stdout=out)
    assert f"Would drop {name}" in out.getvalue()
    assert name in managed()


def test_the_command_says_when_another_run_is_busy(rows):
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [vector_index.LOCK_KEY])
        with pytest.raises(CommandError, match="Another process"):
            call_command("vector_indexes", stdout=io.StringIO())
    finally:
        other.close()
