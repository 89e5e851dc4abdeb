"""Hybrid search over one user's memories and documents.

Two sides, each taking its top MNEMO_SEARCH_CANDIDATES rows, fused by Reciprocal Rank
Fusion, score = Σ 1/(k + rank):

- Keyword: full-text search, matching ANY of the query's words. plainto_tsquery and
  websearch_to_tsquery AND every word, and a question asked in the user's own words
  rarely shares all of its words with a short fact, so the query's lexemes are OR-ed
  (AnyWordQuery) and ranked by ts_rank_cd: rows matching more words rank higher.
- Vector: cosine distance to the query's embedding, among rows embedded by the current
  model only (a model change never compares vectors of two models).

  The vector side is an exact scan of the user's rows, found through the btree index on
  (user, embedding_model); there is no HNSW index. An approximate index applies the
  `WHERE user_id = …` filter after it returns its candidates, and one user owns 1 row in
  100. bench/search.py measures the choice at 100 users x 1,000 entries (pgvector 0.8.5,
  2 cores); for the top 10 / top 50 of the user's rows, recall and p50/p95:
    exact scan                          1.00 / 1.00   2.4/3.3 ms  /  2.6/3.2 ms
    HNSW, defaults (ef_search 40)       0.07 / 0.01   0.7 rows returned of 10 or 50
    HNSW, iterative_scan relaxed_order  0.93 / 0.91   13.5/25.5 ms  /  54/67 ms
    HNSW, iterative_scan strict_order   0.79 / 0.82   11.6/22.9 ms  /  36/55 ms
  Exact is both right and the fastest at the sizes one person's memory reaches; its cost
  grows with that one user's rows, never with the whole table.

Both sides are one statement (UNION ALL). Memory hits are then ranked by freshness and use
(the agent-memory design): score = fused * 1/(1 + decay*age_days) * (1 + boost*access_count);
an agent's search counts the returned rows as used (access_count, last_accessed_at) and
logs its latency (SearchLog, for the user's stats) in one more statement.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import Avg, Count, F, FloatField, Func, Q, QuerySet, TextField, Value
from django.utils import timezone
from pgvector.django import CosineDistance

from context.models import DocumentChunk
from context.workspace import private_folder, shared_global_documents
from lib.errors import InvalidInput
from lib.search_fields import SEARCH_COLUMNS
from memory.models import Memory
from memory.selectors import memory_list
from search.embeddings import EmbeddingError, get_query_embedder
from search.models import SearchLog, SearchTool

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

logger = logging.getLogger(__name__)

MAX_QUERY_LENGTH = 1000
MAX_LIMIT = 50
# Private-use characters mark highlighted words in snippets; callers turn them into
# **bold** (API) or <mark> (pages) after escaping.
HIGHLIGHT_START = "\ue000"
HIGHLIGHT_END = "\ue001"


class AnyWordQuery(SearchQuery):
    """A tsquery matching any lexeme of the text: 'english' stems, drops stop words, ORs."""

    template = "replace(strip(to_tsvector(%(expressions)s))::text, ' ', ' | ')::tsquery"


@dataclass(frozen=True)
class Ranks:
    """Where a row came on each side (None: not among that side's candidates)."""

    keyword_rank: int | None
    vector_rank: int | None
    fused: float


@dataclass(frozen=True)
class MemoryHit:
    memory: Memory
    score: float
    ranks: Ranks
    decay: float  # 1/(1 + decay*age_days)
    use_boost: float  # 1 + boost*access_count


@dataclass(frozen=True)
class DocumentHit:
    chunk: DocumentChunk
    path: str
    scope: str
    snippet: str  # with HIGHLIGHT_START/END around matched words
    score: float
    ranks: Ranks
    decay: float


@dataclass(frozen=True)
class QueryVector:
    """The query embedded by the current model (None when the provider is unavailable)."""

    model: str
    vector: list[float]


def search_memory(
    *,
    user: AbstractBaseUser,
    query: str,
    limit: int = 10,
    kind: str | None = None,
    tags: list[str] | None = None,
) -> list[MemoryHit]:
    """The user's memories best matching the query, for an agent: the hits count as a use
    (access_count and last_accessed_at), and the search is logged."""
    started = time.perf_counter()
    query, limit = _check(query, limit)
    ranked = _rank_memories(user, query, query_vector(query), limit, kind, tags)
    used = _record(user, SearchTool.SEARCH_MEMORY, started, used=[pk for pk, *_ in ranked])
    return _memory_hits(ranked, used)


def search_documents(
    *,
    user: AbstractBaseUser | None,
    query: str,
    limit: int = 10,
    path_prefix: str = "",
    agent: Agent | None = None,
    include_global: bool = False,
) -> list[DocumentHit]:
    """The best chunk of each best-matching document an agent (or, with user=None, a
    system token: the global scope only) may read. Logged (for the user's stats)."""
    started = time.perf_counter()
    query, limit = _check(query, limit)
    scope = _document_scope(user, agent, all_agents=False, include_global=include_global)
    hits = _document_hits(scope, query, query_vector(query), limit, path_prefix, agent)
    _record(user, SearchTool.MEMORY_SEARCH, started, results=len(hits))
    return hits


@dataclass(frozen=True)
class PageResults:
    memories: list[MemoryHit]
    documents: list[DocumentHit]


def search_everything(
    *, user: AbstractBaseUser, query: str, limit: int = 10, include_global: bool = False
) -> PageResults:
    """The search box: the user's memories and documents, their agents' private notes
    included, with one query embedding and one log row. Looking is not using: the hits'
    access counts (which rank the working memory) stay as they are."""
    started = time.perf_counter()
    query, limit = _check(query, limit)
    vector = query_vector(query)
    scope = _document_scope(user, None, all_agents=True, include_global=include_global)
    ranked = _rank_memories(user, query, vector, limit, None, None)
    results = PageResults(
        memories=_memory_hits(ranked, Memory.objects.in_bulk([pk for pk, *_ in ranked])),
        documents=_document_hits(scope, query, vector, limit, "", None),
    )
    _record(user, SearchTool.PAGE, started, results=len(results.memories) + len(results.documents))
    return results


def _rank_memories(
    user: AbstractBaseUser,
    query: str,
    vector: QueryVector | None,
    limit: int,
    kind: str | None,
    tags: list[str] | None,
) -> list[tuple[int, float, Ranks, float, float]]:
    """The best `limit` memory ids with their score, ranks, decay and use boost."""
    rows = memory_list(user=user, kind=kind)
    if tags:
        rows = rows.filter(tags__contains=[tag.lower() for tag in tags])
    # Each side also reads what the ranking needs, so no candidate is fetched again.
    fused, (updated_at, access_count) = _fuse(rows, query, vector, "updated_at", "access_count")
    now = timezone.now()
    scored = []
    for pk, ranks in fused.items():
        decay = _decay(now - updated_at[pk])
        use_boost = 1 + settings.MNEMO_SEARCH_ACCESS_BOOST * access_count[pk]
        scored.append((ranks.fused * decay * use_boost, pk, ranks, decay, use_boost))
    scored.sort(key=lambda row: (-row[0], row[1]))
    return [(pk, score, ranks, decay, boost) for score, pk, ranks, decay, boost in scored[:limit]]


def _memory_hits(
    ranked: list[tuple[int, float, Ranks, float, float]], memories: dict[int, Memory]
) -> list[MemoryHit]:
    """The ranked memories as hits, leaving out any deleted since it was ranked."""
    return [
        MemoryHit(memories[pk], score, ranks, decay, use_boost)
        for pk, score, ranks, decay, use_boost in ranked
        if pk in memories
    ]


def _document_hits(
    scope: Q,
    query: str,
    vector: QueryVector | None,
    limit: int,
    path_prefix: str,
    agent: Agent | None,
) -> list[DocumentHit]:
    chunks = DocumentChunk.objects.filter(scope)
    if path_prefix:
        chunks = chunks.filter(_path_filter(path_prefix, agent))
    fused, _ = _fuse(chunks, query, vector)
    rows = (
        DocumentChunk.objects.filter(pk__in=list(fused))
        .select_related("document")
        .annotate(snippet=_headline(query))
    )
    now = timezone.now()
    best: dict[int, DocumentHit] = {}
    for chunk in rows:
        ranks = fused[chunk.pk]
        decay = _decay(now - chunk.document.updated_at)
        hit = DocumentHit(
            chunk=chunk,
            path=chunk.document.path,
            scope=chunk.document.scope,
            snippet=chunk.snippet,
            score=ranks.fused * decay,
            ranks=ranks,
            decay=decay,
        )
        current = best.get(chunk.document_id)
        if current is None or hit.score > current.score:
            best[chunk.document_id] = hit
    return sorted(best.values(), key=lambda hit: (-hit.score, hit.path))[:limit]


@dataclass(frozen=True)
class SearchStats:
    queries: int
    average_ms: float
    by_tool: list[tuple[str, int, float]]  # (what searched, queries, average ms), busiest first


def search_stats(*, user: AbstractBaseUser) -> SearchStats:
    """How many searches the user's agents and search box ran, and their average latency."""
    logs = SearchLog.objects.filter(user=user)
    total = logs.aggregate(queries=Count("id"), average_ms=Avg("latency_ms"))
    per_tool = (
        logs.values("tool")
        .annotate(queries=Count("id"), average_ms=Avg("latency_ms"))
        .order_by("-queries", "tool")
    )
    labels = dict(SearchTool.choices)
    return SearchStats(
        queries=total["queries"],
        average_ms=total["average_ms"] or 0.0,
        by_tool=[(labels[row["tool"]], row["queries"], row["average_ms"]) for row in per_tool],
    )


# --- the two sides and their fusion ------------------------------------------------------


def _fuse(
    rows: QuerySet, query: str, vector: QueryVector | None, *columns: str
) -> tuple[dict[int, Ranks], list[dict[int, Any]]]:
    """Row id → ranks for every row among either side's top candidates, best fused first;
    and for each of `columns`, row id → that column's value. Both sides are one statement
    (UNION ALL): one round trip, and the user's rows are read while still in cache."""
    candidates = settings.MNEMO_SEARCH_CANDIDATES
    sides = _keyword_side(rows, query, candidates, columns)
    if vector is not None:
        vector_side = _vector_side(rows, vector, candidates, columns)
        sides = sides.union(vector_side, all=True).order_by()  # each side keeps its own
    keyword_rows, vector_rows = [], []
    for side, order, *row in sides:
        (keyword_rows if side == KEYWORD else vector_rows).append((order, *row))
    # A UNION ALL promises no order, so each side is sorted again here, as its SQL did.
    keyword_rows.sort(key=lambda row: (-row[0], row[1]))
    vector_rows.sort(key=lambda row: (row[0], row[1]))
    k = settings.MNEMO_SEARCH_RRF_K
    keyword_rank = {row[1]: rank for rank, row in enumerate(keyword_rows, start=1)}
    vector_rank = {row[1]: rank for rank, row in enumerate(vector_rows, start=1)}
    fused = {}
    for pk in dict.fromkeys([*keyword_rank, *vector_rank]):
        ranks = (keyword_rank.get(pk), vector_rank.get(pk))
        score = sum(1 / (k + rank) for rank in ranks if rank is not None)
        fused[pk] = Ranks(keyword_rank=ranks[0], vector_rank=ranks[1], fused=score)
    values = [
        {row[1]: row[i] for row in (*keyword_rows, *vector_rows)} for i, _ in enumerate(columns, 2)
    ]
    return dict(sorted(fused.items(), key=lambda item: -item[1].fused)), values


KEYWORD, VECTOR = "keyword", "vector"


def _keyword_side(
    rows: QuerySet, query: str, candidates: int, columns: tuple[str, ...]
) -> QuerySet:
    """(KEYWORD, rank, pk, *columns) of the best `candidates` rows by ts_rank_cd."""
    words = AnyWordQuery(query, config="english")
    return (
        rows.filter(search_vector=words)
        .annotate(
            side=Value(KEYWORD),
            order=Func(F("search_vector"), words, function="ts_rank_cd", output_field=FloatField()),
        )
        .order_by("-order", "pk")
        .values_list("side", "order", "pk", *columns)[:candidates]
    )


def _vector_side(
    rows: QuerySet, query: QueryVector, candidates: int, columns: tuple[str, ...]
) -> QuerySet:
    """(VECTOR, cosine distance, pk, *columns) of the `candidates` nearest rows."""
    return (
        rows.filter(embedding_model=query.model, embedding__isnull=False)
        .annotate(side=Value(VECTOR), order=CosineDistance("embedding", query.vector))
        .order_by("order", "pk")
        .values_list("side", "order", "pk", *columns)[:candidates]
    )


class _Cooldown:
    """Until when (time.monotonic()) this process leaves the vector side out, after the
    embedding provider failed a query."""

    until = 0.0


def reset_query_cooldown() -> None:
    """Let the next search try the embedding provider again."""
    _Cooldown.until = 0.0


def query_vector(query: str) -> QueryVector | None:
    """The query's embedding, or None while the provider is failing: the keyword side
    still answers, and no search waits on a provider that just failed."""
    if time.monotonic() < _Cooldown.until:
        return None
    try:
        embedder = get_query_embedder()
        (vector,) = embedder.embed([query])
    except EmbeddingError as error:
        pause = settings.MNEMO_SEARCH_EMBED_COOLDOWN
        _Cooldown.until = time.monotonic() + pause
        logger.warning("Searching by keywords only for the next %g s: %s", pause, error)
        return None
    return QueryVector(model=embedder.model, vector=vector)


def _document_scope(
    user: AbstractBaseUser | None, agent: Agent | None, all_agents: bool, include_global: bool
) -> Q:
    if user is None:
        return Q(user__isnull=True, agent__isnull=True)
    scope = Q(user=user, agent__isnull=True)
    if all_agents:
        scope |= Q(user=user, agent__isnull=False)
    elif agent is not None:
        scope |= Q(user=user, agent=agent)
    if include_global:
        # Identity files and agents' notes are read from the user's own scope only.
        scope |= shared_global_documents(path_field="document__path")
    return scope


def _path_filter(prefix: str, agent: Agent | None) -> Q:
    """Chunks of documents whose path, as the agent names it, starts with prefix: its
    private documents are named under its folder agents/<name>/ (context/workspace.py)."""
    shared = Q(agent__isnull=True, document__path__startswith=prefix)
    if agent is None:
        return shared
    folder = private_folder(agent)
    if folder.startswith(prefix):
        return shared | Q(agent=agent)
    if prefix.startswith(folder):
        return shared | Q(agent=agent, document__path__startswith=prefix.removeprefix(folder))
    return shared


def _headline(query: str) -> Func:
    options = (
        f"StartSel={HIGHLIGHT_START}, StopSel={HIGHLIGHT_END}, "
        'MaxWords=40, MinWords=15, MaxFragments=2, FragmentDelimiter=" … "'
    )
    clean_text = Func(
        F("text"),
        Value(HIGHLIGHT_START + HIGHLIGHT_END),
        Value(""),
        function="translate",
        output_field=TextField(),
    )
    return Func(
        Value("english"),
        clean_text,
        AnyWordQuery(query, config="english"),
        Value(options),
        function="ts_headline",
        output_field=TextField(),
    )


def _decay(age: datetime.timedelta) -> float:
    age_days = max(age.total_seconds(), 0) / 86400
    return 1 / (1 + settings.MNEMO_SEARCH_DECAY_PER_DAY * age_days)


def _record(
    user: AbstractBaseUser | None,
    tool: str,
    started: float,
    *,
    results: int = 0,
    used: list[int] | None = None,
) -> dict[int, Memory]:
    """Log the search with its latency so far and count a use of each `used` memory, in one
    statement; return those memories as they are after it (a row deleted meanwhile is not
    among them, and then the log counts what was returned).

    On its own (not inside a caller's transaction) the statement commits without waiting
    for the disk (synchronous_commit off for its transaction only): a crash of the machine,
    not of PostgreSQL, may lose the last fraction of a second of counts and logs, never a
    memory, and no search waits for a flush. Inside a caller's transaction the caller's
    commit stays durable."""
    params = {
        "user": user.pk if user is not None else None,
        "tool": tool,
        "results": results,
        "latency": (time.perf_counter() - started) * 1000,
        "now": timezone.now(),
        "ids": used or [],
    }
    sql = _record_sql(relaxed=not connection.in_atomic_block, count_used=used is not None)
    if used is None:  # nothing to count: the log row alone
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return {}
    return {memory.pk: memory for memory in Memory.objects.raw(sql, params)}


def _record_sql(*, relaxed: bool, count_used: bool) -> str:
    """The log row's INSERT; with count_used, inside the UPDATE of the used memories,
    which it counts and whose rows the statement returns."""
    quote = connection.ops.quote_name
    columns = ", ".join(
        quote(field.column)
        for field in Memory._meta.concrete_fields
        if field.name not in SEARCH_COLUMNS  # as Memory.objects reads rows
    )
    memories, logs = quote(Memory._meta.db_table), quote(SearchLog._meta.db_table)
    results = "(SELECT count(*) FROM used)" if count_used else "%(results)s"
    log = (
        f"INSERT INTO {logs} (user_id, tool, results, latency_ms, created_at) "  # noqa: S608 - names from the models
        f"SELECT %(user)s, %(tool)s, {results}, %(latency)s, %(now)s"
        + (" FROM relaxed" if relaxed else "")
    )
    parts = ["relaxed AS (SELECT set_config('synchronous_commit', 'off', true))"] if relaxed else []
    if not count_used:
        return f"WITH {parts[0]} {log}" if relaxed else log
    parts += [
        f"used AS (UPDATE {memories} SET access_count = access_count + 1, "  # noqa: S608 - names from the models
        f"last_accessed_at = %(now)s WHERE id = ANY(%(ids)s) RETURNING {columns})",
        f"logged AS ({log})",
    ]
    return f"WITH {', '.join(parts)} SELECT {columns} FROM used"  # noqa: S608 - names from the models


def _check(query: object, limit: object) -> tuple[str, int]:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("Say what to search for: the query is empty.", field="query")
    if "\x00" in query:
        raise InvalidInput("The query contains a NUL character (U+0000).", field="query")
    if len(query) > MAX_QUERY_LENGTH:
        raise InvalidInput(
            f"The query is {len(query)} characters long; at most {MAX_QUERY_LENGTH}.",
            field="query",
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"Limit must be a whole number from 1 to {MAX_LIMIT}.", field="limit")
    return query.strip(), limit
