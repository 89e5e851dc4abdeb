"""Benchmark of the vector side for a heavy user (issue 13; `make bench`, never the tests).

    .tools/bin/uv run --frozen python bench/heavy.py [--rows 1000000] [--heavy 100000]
        [--medium 10000] [--small 1000] [--queries 200] [--vector-hnsw] [--no-inline]
    .tools/bin/uv run --frozen python bench/heavy.py --rows 300000 --queries 100  # smaller

One table of ROWS memory rows of the current model (multilingual-e5-small: 384 dimensions,
L2-normalised float32): one heavy user with HEAVY rows, one medium user with MEDIUM rows,
the rest spread over users with SMALL rows each, in an interleaved order (as months of
writes from everyone would leave them), plus OLD rows of the previous model (256
dimensions) spread over the same users. For the heavy user, the medium one and random
small users, QUERIES queries each measure the vector side, the statement search runs to
take a user's top 50 rows of the current model by cosine distance, for each plan: recall
against the exact answer, p50/p95 of the statement, and the plan PostgreSQL picks. The
plans: today's exact scan (and cast to halfvec, and without parallel workers); one HNSW
index over every row of the model (partial on embedding_model, on embedding::halfvec(384),
or also vector(384) with --vector-hnsw) with hnsw.iterative_scan = relaxed_order at
several hnsw.ef_search, left to the planner and forced; a partial HNSW index over the
heavy user's rows only; then the table rewritten so rows keep their vector inline
(toast_tuple_target 4080) and the exact scan and the per-user index measured again.

It does not run Django's migrations: the table is created here with user_context's
columns and types (the generated tsvector included, so rows are as wide as the real ones
and the vector is TOASTed the same way), its (user_id, embedding_model) index, and
nothing else (no foreign keys, checks or unique key: they cost load time and no search
reads them). The vectors are synthetic but structured: a common direction (real text
embeddings all lie in a narrow cone), a few hundred topic centres, and inside each topic
a 16-dimensional latent offset plus noise, so that a query's nearest rows are the rows of
its topic closest in the latent space; each user writes about a few of the topics.
Queries come from the same distribution, from topics the user writes about. Loaded with a
binary COPY built with numpy.

The embedded PostgreSQL runs with its own defaults (shared_buffers, work_mem: printed);
only index builds raise maintenance_work_mem (4GB, in their session). Each query runs in
its own transaction with the plan's settings as SET LOCAL; only the statement is timed;
each plan gets 20 warm-up queries first. The data dir is deleted at exit. The full run
takes about 25 minutes on 2 cores and ~4 GB of disk.
A benchmark reports, it does not gate: the exit code is 0 whether targets are met or not.
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402 - needs the project root on sys.path
    CpuMeter,
    percentile,
    prepare_environment,
    print_machine,
    process_tree,
    verdict,
)
from bench.search import TextMaker  # noqa: E402

MODEL = "local:multilingual-e5-small"
DIMS = 384
OLD_MODEL = "local:wordllama-l2-supercat-256"
OLD_DIMS = 256
LIMIT = 50  # MNEMO_SEARCH_CANDIDATES: what the vector side asks for
TARGET_P95_MS = 50.0
TARGET_RECALL = 0.95
SEED = 20261125
BATCH = 50_000
WARMUP = 20

# The synthetic embedding space: v = A*mean + B*topic + C*latent offset + D*noise, each
# term of unit length, so two random rows have a cosine similarity of about A², two rows
# of one topic about A² + B², and rows close in the topic's latent space up to ~1 - D².
TOPICS = 400
LATENT = 16
A, B, C, D = (0.70**0.5, 0.10**0.5, 0.14**0.5, 0.06**0.5)
TOPICS_PER_USER = {"heavy": 250, "medium": 100, "small": 25}


# --- the synthetic data ------------------------------------------------------------------


def unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)


class Space:
    """Topic centres, each with its latent basis, around one common direction."""

    def __init__(self, rng: np.random.Generator, dims: int) -> None:
        self.dims = dims
        self.mean = unit(rng.standard_normal(dims)).astype(np.float32)
        self.centres = unit(rng.standard_normal((TOPICS, dims))).astype(np.float32)
        self.bases = (rng.standard_normal((TOPICS, LATENT, dims)) / dims**0.5).astype(np.float32)
        weights = 1.0 / np.arange(1, TOPICS + 1)  # some topics are far more common
        self.popularity = weights / weights.sum()

    def user_topics(self, rng: np.random.Generator, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """Which topics one user writes about, and how often (a few of them most)."""
        topics = rng.choice(TOPICS, TOPICS_PER_USER[kind], replace=False, p=self.popularity)
        weights = 1.0 / np.arange(1, len(topics) + 1) ** 0.7
        return topics, weights / weights.sum()

    def sample(self, rng: np.random.Generator, topics: np.ndarray) -> np.ndarray:
        """One L2-normalised float32 vector per topic id."""
        n = len(topics)
        noise = unit(rng.standard_normal((n, self.dims), dtype=np.float32))
        out = A * self.mean + B * self.centres[topics] + D * noise
        latent = rng.standard_normal((n, LATENT), dtype=np.float32) / LATENT**0.5
        order = np.argsort(topics, kind="stable")
        bounds = np.flatnonzero(np.diff(topics[order])) + 1
        for rows in np.split(order, bounds):
            out[rows] += C * (latent[rows] @ self.bases[topics[rows[0]]])
        return unit(out).astype(np.float32)


@dataclass
class Users:
    """Who owns which rows: the heavy user, the medium one, the small ones."""

    heavy: int
    medium: int | None
    small: list[int]
    counts: dict[int, int]
    topics: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def kind(self, user: int) -> str:
        return "heavy" if user == self.heavy else "medium" if user == self.medium else "small"


def make_users(args: argparse.Namespace, space: Space, rng: np.random.Generator) -> Users:
    rest = args.rows - args.heavy - args.medium
    n_small = max(1, rest // args.small)
    counts = {1: args.heavy}
    medium = None
    if args.medium:
        medium = 2
        counts[medium] = args.medium
    small = list(range(3, 3 + n_small))
    for index, user in enumerate(small):  # the remainder goes to the first ones
        counts[user] = args.small + (1 if index < rest - n_small * args.small else 0)
    users = Users(heavy=1, medium=medium, small=small, counts=counts)
    for user in counts:
        users.topics[user] = space.user_topics(rng, users.kind(user))
    return users


# --- loading: a binary COPY ---------------------------------------------------------------

COLUMNS = (
    "user_id, key, value, source, confidence, pinned, access_count, created_at, updated_at, "
    "embedding, embedding_model, embedded_hash"
)
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def text_field(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">i", len(data)) + data


def copy_rows(
    users: np.ndarray,
    vectors: np.ndarray,
    model: str,
    texts: list[tuple[bytes, bytes]],
    rng: np.random.Generator,
) -> bytes:
    """Binary COPY rows (no header) for one batch."""
    n, dims = vectors.shape
    vector_prefix = struct.pack(">ihh", 4 + 4 * dims, dims, 0)
    big_endian = vectors.astype(">f4")
    model_field = text_field(model)
    now = int((datetime.now(UTC) - PG_EPOCH).total_seconds() * 1e6)
    ages = rng.integers(0, 365 * 86400 * 10**6, n)
    picks = rng.integers(0, len(texts), n)
    stated = rng.random(n) < 0.4
    confidence = np.where(stated, 1.0, rng.uniform(0.5, 0.95, n))
    hashes = rng.bytes(32 * n).hex()
    head = struct.pack(">hi", 12, 8)
    source_stated, source_extracted = text_field("user_stated"), text_field("tp_extracted")
    parts = []
    for i in range(n):
        key, value = texts[picks[i]]
        created = now - int(ages[i])
        parts += [
            head,
            struct.pack(">q", int(users[i])),
            key,
            value,
            source_stated if stated[i] else source_extracted,
            struct.pack(">id", 8, float(confidence[i])),
            b"\x00\x00\x00\x01\x00\x00\x00\x00\x04\x00\x00\x00\x00",  # pinned, access_count
            struct.pack(">iqiq", 8, created, 8, created),
            vector_prefix,
            big_endian[i].tobytes(),
            model_field,
            b"\x00\x00\x00\x40",
            hashes[64 * i : 64 * (i + 1)].encode(),
        ]
    return b"".join(parts)


TABLE_SQL = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE OR REPLACE FUNCTION mnemo_memory_tsvector(key text, tags text[], value text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(
               to_tsvector('english'::regconfig,
                           translate(key, ':-_./', '     ') || ' ' || array_to_string(tags, ' ')),
               'A')
           || to_tsvector('english'::regconfig, value)
$$;
CREATE TABLE user_context (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    key varchar(92) NOT NULL,
    value text NOT NULL,
    source varchar(16) NOT NULL,
    confidence double precision NOT NULL,
    tags varchar(40)[] NOT NULL DEFAULT '{}',
    pinned boolean NOT NULL,
    access_count integer NOT NULL,
    last_accessed_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    user_id bigint NOT NULL,
    embedded_hash varchar(64) NOT NULL,
    embedding vector,
    embedding_model varchar(120) NOT NULL,
    search_vector tsvector GENERATED ALWAYS AS (mnemo_memory_tsvector(key, tags, value)) STORED
);
"""


def load(conn: Any, args: argparse.Namespace, users: Users, space: Space) -> None:
    """Create and fill the table: every user's rows interleaved in a random order, then
    the old model's rows, then the (user_id, embedding_model) index and VACUUM ANALYZE."""
    rng = np.random.default_rng(SEED)
    maker = TextMaker(SEED)
    texts = []
    for n in range(20_000):
        key, value = maker.entry(n)
        texts.append((text_field(key), text_field(value)))
    owners = np.repeat(np.fromiter(users.counts, dtype=np.int64), list(users.counts.values()))
    rng.shuffle(owners)
    topics = np.empty(len(owners), dtype=np.int64)
    order = np.argsort(owners, kind="stable")
    start = 0
    for user, count in users.counts.items():  # counts are in ascending user order
        choices, weights = users.topics[user]
        topics[order[start : start + count]] = rng.choice(choices, count, p=weights)
        start += count
    old_owners = rng.choice(owners, args.old) if args.old else np.empty(0, dtype=np.int64)
    conn.execute(TABLE_SQL)
    started = time.perf_counter()
    generating = 0.0
    with conn.cursor().copy(f"COPY user_context ({COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(COPY_HEADER)
        for begin in range(0, len(owners), BATCH):
            t0 = time.perf_counter()
            vectors = space.sample(rng, topics[begin : begin + BATCH])
            data = copy_rows(owners[begin : begin + BATCH], vectors, MODEL, texts, rng)
            generating += time.perf_counter() - t0
            copy.write(data)
        if args.old:
            vectors = unit(rng.standard_normal((args.old, OLD_DIMS))).astype(np.float32)
            copy.write(copy_rows(old_owners, vectors, OLD_MODEL, texts, rng))
        copy.write(COPY_TRAILER)
    loaded = time.perf_counter() - started
    conn.execute("CREATE INDEX user_context_embedding ON user_context (user_id, embedding_model)")
    indexed = time.perf_counter() - started - loaded
    conn.execute("VACUUM ANALYZE user_context")
    total = len(owners) + args.old
    print(
        f"loaded     {total:,} rows in {loaded:.0f} s (numpy and COPY rows in Python "
        f"{generating:.0f} s), (user_id, embedding_model) index {indexed:.0f} s, "
        f"VACUUM ANALYZE {time.perf_counter() - started - loaded - indexed:.0f} s"
    )


def print_table(conn: Any) -> None:
    heap, toast, index = conn.execute(
        "SELECT pg_relation_size(c.oid), pg_total_relation_size(c.reltoastrelid), "
        "pg_indexes_size(c.oid) FROM pg_class c WHERE c.relname = 'user_context'"
    ).fetchone()
    toast_name = conn.execute(
        "SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'user_context'"
    ).fetchone()[0]
    toasted = conn.execute(f"SELECT count(DISTINCT chunk_id) FROM {toast_name}").fetchone()[0]  # noqa: S608
    rows = conn.execute("SELECT count(*) FROM user_context").fetchone()[0]
    width = conn.execute(
        "SELECT avg(pg_column_size(t.*))::int FROM user_context t TABLESAMPLE SYSTEM (1)"
    ).fetchone()[0]
    print(
        f"table      heap {heap / 2**20:,.0f} MB, TOAST {toast / 2**20:,.0f} MB, btree indexes "
        f"{index / 2**20:,.0f} MB; {toasted:,} of {rows:,} rows have a TOASTed value "
        f"({toasted / rows:.0%}: the vector, stored out of line); mean row {width} bytes"
    )


# --- the plans -----------------------------------------------------------------------------

WHERE = "user_id = %(user)s AND embedding_model = %(model)s AND embedding IS NOT NULL"
EXACT_SQL = (
    f"SELECT id FROM user_context WHERE {WHERE} "  # noqa: S608 - constant SQL
    "ORDER BY embedding <=> %(vector)s::vector, id LIMIT %(limit)s"
)


def exact_sql(cast: str) -> str:
    """The exact scan with each row's vector cast (halfvec(384): half the arithmetic)."""
    return (
        f"SELECT id FROM user_context WHERE {WHERE} "  # noqa: S608 - constant SQL
        f"ORDER BY embedding::{cast} <=> %(vector)s::{cast}, id LIMIT %(limit)s"
    )


def index_sql(cast: str) -> str:
    """The query an expression index on (embedding::CAST) can serve: ORDER BY the same
    expression, no tie-break inside (relaxed_order returns rows nearly in order; the outer
    query sorts the 50 again, as pgvector's documentation does)."""
    distance = f"embedding::{cast} <=> %(vector)s::{cast}"
    return (
        "WITH nearest AS MATERIALIZED ("  # noqa: S608 - constant SQL
        f"SELECT id, {distance} AS distance FROM user_context WHERE {WHERE} "
        "ORDER BY distance LIMIT %(limit)s) SELECT id FROM nearest ORDER BY distance, id"
    )


@dataclass
class Plan:
    label: str
    sql: str
    settings: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    ms: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    ids: list[list[int]] = field(default_factory=list)
    explain: str = ""


PLAN_NODE = re.compile(r"^\s*(?:->\s*)?([A-Z][^(]*?)\s*\(cost")
NODE_NAMES = {
    "Index Scan using user_context_embedding": "btree",
    "Bitmap Index Scan on user_context_embedding": "btree bitmap",
    "Bitmap Heap Scan on user_context": "heap",
    "Parallel Bitmap Heap Scan on user_context": "parallel heap",
}


def run(conn: Any, plan: Plan, query: dict[str, Any], explain: bool = False) -> Any:
    """One query in its own transaction, the plan's settings as SET LOCAL."""
    with conn.transaction(), conn.cursor() as cursor:
        for name, value in plan.settings.items():
            cursor.execute(f"SET LOCAL {name} = {value}")
        if explain:
            cursor.execute(f"EXPLAIN {plan.sql}", query)
            lines = [row[0] for row in cursor.fetchall()]
            nodes = [match[1] for line in lines if (match := PLAN_NODE.match(line))]
            return " > ".join(NODE_NAMES.get(node, node) for node in nodes)
        started = time.perf_counter()
        cursor.execute(plan.sql, query)
        ids = [row[0] for row in cursor.fetchall()]
        return ids, (time.perf_counter() - started) * 1000


def measure(
    conn: Any, plan: Plan, queries: list[dict[str, Any]], truth: list[list[int]] | None
) -> Result:
    result = Result(explain=run(conn, plan, queries[0], explain=True))
    for query in queries[:WARMUP]:
        run(conn, plan, query)
    for index, query in enumerate(queries):
        ids, ms = run(conn, plan, query)
        result.ms.append(ms)
        result.returned.append(len(ids))
        result.ids.append(ids)
        exact = truth[index] if truth is not None else ids
        result.recall.append(len(set(ids) & set(exact)) / len(exact) if exact else 1.0)
    return result


@dataclass
class Row:
    plan: str
    per_kind: dict[str, Result]
    build: str = ""


def report(row: Row) -> None:
    print(f"  {row.plan}{'  [' + row.build + ']' if row.build else ''}")
    for kind, result in row.per_kind.items():
        print(
            f"    {kind:7} n={len(result.ms):<3} recall@50 {np.mean(result.recall):5.3f} "
            f"(min {min(result.recall):.2f}, "
            f"rows {np.mean(result.returned):4.1f})  p50 {percentile(result.ms, 50):7.2f} ms  "
            f"p95 {percentile(result.ms, 95):7.2f} ms   {result.explain}"
        )


def build_index(conn: Any, name: str, ddl: str) -> str:
    conn.execute("SET maintenance_work_mem = '4GB'")
    started = time.perf_counter()
    conn.execute(ddl)
    seconds = time.perf_counter() - started
    conn.execute("RESET maintenance_work_mem")
    conn.execute("ANALYZE user_context")
    size = conn.execute(f"SELECT pg_relation_size('{name}')").fetchone()[0]
    return f"built in {seconds:.0f} s, {size / 2**20:,.0f} MB"


def vector_text(vector: np.ndarray) -> str:
    return "[" + ",".join([format(value, ".9g") for value in vector]) + "]"


def make_queries(
    args: argparse.Namespace, users: Users, space: Space
) -> dict[str, list[dict[str, Any]]]:
    rng = np.random.default_rng(SEED + 1)
    picked = {"heavy": [users.heavy] * args.queries}
    if users.medium is not None:
        picked["medium"] = [users.medium] * args.queries
    picked["small"] = [int(u) for u in rng.choice(users.small, args.queries)]
    queries = {}
    for kind, owners in picked.items():
        topics = np.array([rng.choice(users.topics[u][0], p=users.topics[u][1]) for u in owners])
        vectors = space.sample(rng, topics)
        queries[kind] = [
            {"user": user, "model": MODEL, "vector": vector_text(vector), "limit": LIMIT}
            for user, vector in zip(owners, vectors, strict=True)
        ]
    return queries


def bench(
    conn: Any,
    args: argparse.Namespace,
    queries: dict[str, list[dict[str, Any]]],
    meter: Callable[[], CpuMeter],
) -> None:
    rows: list[Row] = []
    truth: dict[str, list[list[int]]] = {}
    half = f"halfvec({DIMS})"

    def measure_all(
        plan: Plan, kinds: Sequence[str] | None = None, count: int | None = None, build: str = ""
    ) -> Row:
        row = Row(plan.label, {}, build)
        with meter() as cpu:
            for kind in kinds or queries:
                some = queries[kind][:count]
                exact = truth[kind][:count] if kind in truth else None
                row.per_kind[kind] = measure(conn, plan, some, exact)
        report(row)
        print(f"    {cpu.line}")
        rows.append(row)
        return row

    print(f"\nplans: top {LIMIT} of the user's rows of {MODEL}; recall against the exact scan")
    exact = measure_all(Plan("exact scan, vector (today's query)", EXACT_SQL))
    for kind, result in exact.per_kind.items():  # its answers are the truth
        truth[kind] = result.ids
    slow = args.slow_queries  # for plans that take long on the heavy user, fewer queries
    measure_all(Plan(f"exact scan, cast to {half}", exact_sql(half)), count=slow)
    plan = Plan("exact scan, vector, no parallel workers", EXACT_SQL, NO_PARALLEL)
    measure_all(plan, count=slow)
    # Every user but the heavy one keeps the btree plan whatever ef_search is (the EXPLAIN
    # column says so): they are measured at the middle value only.
    everyone, heavy_only = list(queries), ["heavy"]

    casts = [(half, "halfvec_cosine_ops")]
    if args.vector_hnsw:
        casts.append((f"vector({DIMS})", "vector_cosine_ops"))
    for cast, ops in casts:
        name = f"user_context_hnsw_{cast.split('(')[0]}"
        build = build_index(
            conn,
            name,
            f"CREATE INDEX {name} ON user_context USING hnsw ((embedding::{cast}) {ops}) "
            f"WITH (m = 16, ef_construction = 64) WHERE embedding_model = '{MODEL}'",
        )
        middle = args.ef[len(args.ef) // 2]
        for ef in args.ef:
            measure_all(
                Plan(f"HNSW {cast}, ef_search {ef}", index_sql(cast), iterative(ef)),
                everyone if ef == middle else heavy_only,
                build=f"all rows of the model, {build}" if ef == args.ef[0] else "",
            )
        forced = {**iterative(middle), **FORCE_INDEX}
        measure_all(
            Plan(f"HNSW {cast}, ef_search {middle}, forced", index_sql(cast), forced),
            [kind for kind in queries if kind != "heavy"],
            slow,
        )
        conn.execute(f"DROP INDEX {name}")

    middle = args.ef_user[len(args.ef_user) // 2]
    for ef in args.ef_user:
        build = ""
        if ef == args.ef_user[0]:
            build = f"the heavy user's rows, {build_user_index(conn, half)}"
        measure_all(
            Plan(f"per-user HNSW {half}, ef_search {ef}", index_sql(half), iterative(ef)),
            everyone if ef == middle else heavy_only,
            build=build,
        )

    if args.inline:
        rewrite_inline(conn)
        print_table(conn)
        measure_all(Plan("inline rows: exact scan, vector (today's query)", EXACT_SQL), count=slow)
        plan = Plan(f"inline rows: exact scan, cast to {half}", exact_sql(half))
        measure_all(plan, count=slow)
        for ef in args.ef_user:
            build = ""
            if ef == args.ef_user[0]:
                build = f"the heavy user's rows, {build_user_index(conn, half)}"
            plan = Plan(
                f"inline rows: per-user HNSW {half}, ef_search {ef}", index_sql(half), iterative(ef)
            )
            measure_all(plan, everyone if ef == middle else heavy_only, build=build)

    print(f"\n=== summary: recall@{LIMIT} >= {TARGET_RECALL} and p95 <= {TARGET_P95_MS:.0f} ms")
    print(f"  {'':8} {'plan':58} " + " ".join(f"{kind:>22}" for kind in queries))
    for row in rows:
        ok = all(
            np.mean(result.recall) >= TARGET_RECALL and percentile(result.ms, 95) <= TARGET_P95_MS
            for result in row.per_kind.values()
        )
        cells = [
            f"{np.mean(r.recall):5.3f} {percentile(r.ms, 50):6.1f}/{percentile(r.ms, 95):6.1f}"
            if (r := row.per_kind.get(kind))
            else "-"
            for kind in queries
        ]
        print(f"  {verdict(ok):8} {row.plan:58} " + " ".join(f"{cell:>22}" for cell in cells))
    print("  (each cell: recall@50, p50/p95 ms of the statement; met: on the users measured)")


NO_PARALLEL = {"max_parallel_workers_per_gather": "0"}
FORCE_INDEX = {"enable_sort": "off", "enable_bitmapscan": "off", "enable_seqscan": "off"}


def iterative(ef: int) -> dict[str, str]:
    return {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": str(ef)}


def build_user_index(conn: Any, cast: str) -> str:
    """A partial HNSW index over one user's rows of the model: the heavy user's."""
    name = "user_context_hnsw_user_1"
    return build_index(
        conn,
        name,
        f"CREATE INDEX {name} ON user_context USING hnsw ((embedding::{cast}) "
        f"halfvec_cosine_ops) WITH (m = 16, ef_construction = 64) "
        f"WHERE embedding_model = '{MODEL}' AND user_id = 1",
    )


def rewrite_inline(conn: Any) -> None:
    """The same rows in a table that keeps rows of up to 4 kB whole (toast_tuple_target
    4080). pgvector's types are STORAGE EXTERNAL: in a row over ~2 kB the vector, the
    largest value, moves to the TOAST table, and each row the exact scan reads costs a TOAST
    index lookup and one more page. (STORAGE MAIN on the column would move the text or the
    tsvector out instead.)"""
    started = time.perf_counter()
    conn.execute("ALTER TABLE user_context RENAME TO user_context_old")
    conn.execute(
        "CREATE TABLE user_context (LIKE user_context_old INCLUDING DEFAULTS "
        "INCLUDING GENERATED INCLUDING IDENTITY) WITH (toast_tuple_target = 4080)"
    )
    columns = f"id, {COLUMNS}, tags, last_accessed_at"
    conn.execute(
        f"INSERT INTO user_context ({columns}) OVERRIDING SYSTEM VALUE "  # noqa: S608
        f"SELECT {columns} FROM user_context_old ORDER BY id"
    )
    conn.execute("DROP TABLE user_context_old")
    conn.execute("ALTER TABLE user_context ADD PRIMARY KEY (id)")
    conn.execute("CREATE INDEX user_context_embedding ON user_context (user_id, embedding_model)")
    conn.execute("VACUUM ANALYZE user_context")
    print(
        "\nrewritten  WITH (toast_tuple_target = 4080), same rows in the same order, in "
        f"{time.perf_counter() - started:.0f} s"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the current model")
    parser.add_argument("--heavy", type=int, default=100_000, help="the heavy user's rows")
    parser.add_argument("--medium", type=int, default=10_000, help="one medium user (0: none)")
    parser.add_argument("--small", type=int, default=1_000, help="rows of each other user")
    parser.add_argument("--old", type=int, default=10_000, help="rows of the previous model")
    parser.add_argument("--queries", type=int, default=200, help="queries per kind of user")
    parser.add_argument(
        "--slow-queries",
        type=int,
        default=50,
        help="queries for the slow variants (exact ones besides today's, forced HNSW)",
    )
    parser.add_argument(
        "--ef",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[40, 100, 200, 400, 800],
        help="hnsw.ef_search values for the index over all rows (default 40,100,200,400,800)",
    )
    parser.add_argument(
        "--ef-user",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[40, 100, 200],
        help="hnsw.ef_search values for the per-user index (default 40,100,200)",
    )
    parser.add_argument(
        "--vector-hnsw",
        action="store_true",
        help="also an HNSW index on vector(384), besides halfvec(384) (a long build)",
    )
    parser.add_argument(
        "--no-inline",
        dest="inline",
        action="store_false",
        help="skip the rewrite that keeps the vector in the row (toast_tuple_target 4080)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    import psycopg

    from lib.embedded_postgres import start

    data_dir = prepare_environment("mnemo-bench-heavy-")
    print_machine("Mnemo heavy-user vector benchmark", ["psycopg", "numpy"])
    database = start(data_dir, delete_on_exit=True)
    conn = psycopg.connect(
        host=database["HOST"],
        port=database["PORT"],
        user=database["USER"],
        dbname=database["NAME"],
        autocommit=True,
        cursor_factory=psycopg.ClientCursor,  # client-side binding, as Django does
    )
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    settings = ", ".join(
        f"{name} {conn.execute(f'SHOW {name}').fetchone()[0]}"
        for name in (
            "shared_buffers",
            "work_mem",
            "effective_cache_size",
            "max_parallel_workers_per_gather",
            "jit",
        )
    )
    version = conn.execute("SHOW server_version").fetchone()[0]
    vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    print(
        f"database   PostgreSQL {version}, pgvector {vector[0]} (embedded, throwaway): {settings}"
    )
    print(
        f"data       {args.rows:,} rows of {MODEL} ({DIMS} dims): heavy user {args.heavy:,}, "
        f"medium {args.medium:,}, the rest {args.small:,} a user; {args.old:,} rows of "
        f"{OLD_MODEL}; own table with user_context's columns, no Django migrations"
    )
    space = Space(np.random.default_rng(SEED), DIMS)
    users = make_users(args, space, np.random.default_rng(SEED + 2))
    load(conn, args, users, space)
    print_table(conn)
    postmaster = int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0])

    def meter() -> CpuMeter:
        return CpuMeter({"postgres": lambda: process_tree(postmaster)})

    bench(conn, args, make_queries(args, users, space), meter)
    conn.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
