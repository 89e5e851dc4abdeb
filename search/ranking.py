"""Hybrid ranking over any registered source's rows (search/registry.py).

Two sides, each taking its top MNEMO_SEARCH_CANDIDATES rows, one statement each. The
keyword side runs while the query is being embedded on another thread (`query_vector_soon`,
`PendingVector`); the vector side, once the vector is there:

- Keyword: Okapi BM25 over the stored tsvector (search/keyword.py), matching ANY of the
  query's words, a key word or tag counting more than a word of the text.
- Vector: cosine distance to the query's embedding, among rows embedded by the current
  model only (a model change never compares vectors of two models).

  The vector side orders by `embedding::halfvec(n) <=> query::halfvec(n)`, then ranks the
  2 x candidates it found by the float32 distance (`vector_side`). For most owners that is
  an exact scan of their rows, found through the btree on (user, embedding_model): an
  approximate index over every row applies the `WHERE user_id = …` filter after it
  returns its candidates, and one user owns 1 row in 100. bench/search.py measured it at
  100 users x 1,000 entries (pgvector 0.8.5, 2 cores); for the top 10 / top 50 of the
  user's rows, recall and p50/p95:
    exact scan                          1.00 / 1.00   2.4/3.3 ms  /  2.6/3.2 ms
    HNSW, defaults (ef_search 40)       0.07 / 0.01   0.7 rows returned of 10 or 50
    HNSW, iterative_scan relaxed_order  0.93 / 0.91   13.5/25.5 ms  /  54/67 ms
    HNSW, iterative_scan strict_order   0.79 / 0.82   11.6/22.9 ms  /  36/55 ms
  The exact scan's cost grows with the owner's rows: an owner with more than
  MNEMO_SEARCH_OWN_INDEX_ROWS rows gets a partial HNSW index over exactly their rows of
  the model, on the same halfvec expression (search/vector_index.py), which the planner
  picks for that owner alone (bench/heavy.py: 100,000 rows among 1,000,000).

search/fusion.py blends the two sides' normalised scores and applies the relevance floor
of the query's embedding model. The layer that owns the rows then nudges the fused score
with two bounded factors (`use_factor`, `freshness`): they reorder near ties, never a
clearly better match, and together move a score by at most ±10%.

The caller passes the rows it may search (a queryset of its own model, already filtered
to the user's scope); nothing here knows which table they come from.
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection
from django.db.models import F, FloatField, Func, QuerySet, TextField, Value
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, HalfVectorField

from lib.errors import InvalidInput
from search import fusion
from search.embedder_base import EmbeddingError
from search.embeddings import get_query_embedder, query_thread, recent_query_vectors
from search.fields import vector_literal
from search.fusion import Floor, KeywordRow, Ranks, VectorRow
from search.keyword import SIDE as KEYWORD
from search.keyword import AnyWordQuery, keyword_side

if TYPE_CHECKING:
    from collections.abc import Iterable
    from concurrent.futures import Future

    from search.embedder_base import Embedder

logger = logging.getLogger(__name__)

MAX_QUERY_LENGTH = 1000
MAX_LIMIT = 50
# Private-use characters mark highlighted words in snippets; callers turn them into
# **bold** (API) or <mark> (pages) after escaping.
HIGHLIGHT_START = "\ue000"
HIGHLIGHT_END = "\ue001"
# The number of uses at which the use factor reaches 1 + MNEMO_SEARCH_USE_NUDGE.
USES_AT_FULL_NUDGE = 100


@dataclass(frozen=True)
class QueryVector:
    """The query embedded by the current model (None when the provider is unavailable)."""

    model: str
    vector: list[float]


def check_query(query: object, limit: object) -> tuple[str, int]:
    """The query stripped and the limit, or InvalidInput saying what is wrong."""
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


# --- the bounded nudges ----------------------------------------------------------------------


def use_factor(uses: int) -> float:
    """In [1, 1 + MNEMO_SEARCH_USE_NUDGE]: grows with log(1 + uses), full at
    USES_AT_FULL_NUDGE uses and no higher after, so being used can break a near tie but
    never lift a row over a clearly better match."""
    grown = math.log1p(max(uses, 0)) / math.log1p(USES_AT_FULL_NUDGE)
    return 1 + settings.MNEMO_SEARCH_USE_NUDGE * min(grown, 1.0)


def freshness(age: datetime.timedelta, *, fades: bool = True) -> float:
    """In [1 - MNEMO_SEARCH_AGE_NUDGE, 1]: 1 when new, halfway down after
    MNEMO_SEARCH_AGE_HALF_LIFE_DAYS, never below the floor. 1 for a row that does not fade
    (what the user stated stays as true as the day it was said)."""
    if not fades:
        return 1.0
    days = max(age.total_seconds(), 0) / 86400
    faded = 1 - 0.5 ** (days / settings.MNEMO_SEARCH_AGE_HALF_LIFE_DAYS)
    return 1 - settings.MNEMO_SEARCH_AGE_NUDGE * faded


def episode_lift(scores: dict[int, float], group: dict[int, str]) -> dict[int, float]:
    """Each row pulled EPISODE_PULL of the way up to the best score among the STRONG_HITS
    best rows of its group (a memory's session, a chunk's document), when that score is
    higher: facts said together come back together. A lifted row stays below the hit that
    lifted it, so it never outranks a row matching the query directly as well as that hit
    does; a row of no group ("") or of a group with no strong hit keeps its score."""
    strongest: dict[str, float] = {}
    for pk in sorted(scores, key=lambda pk: (-scores[pk], pk))[:STRONG_HITS]:
        if group[pk] and scores[pk] >= STRONG_SCORE:
            strongest.setdefault(group[pk], scores[pk])
    lifted = {}
    for pk, score in scores.items():
        hit = strongest.get(group[pk], 0.0) if group[pk] else 0.0
        lifted[pk] = score + EPISODE_PULL * (hit - score) if hit > score else score
    return lifted


# The episode lift (`episode_lift`): a strong hit is one of the STRONG_HITS best rows with a
# score of at least STRONG_SCORE; a row of its group is pulled EPISODE_PULL of the way up to
# it. Calibration: bench/README.md, "Time and conversations".
STRONG_HITS = 3
STRONG_SCORE = 0.5
EPISODE_PULL = 0.5


# --- the two sides and their fusion ------------------------------------------------------


def fuse(
    rows: QuerySet,
    query: str,
    vector: QueryVector | PendingVector | None,
    *columns: str,
    closest: bool = False,
    keyword_query: str | None = None,
) -> tuple[dict[int, Ranks], list[dict[int, Any]]]:
    """Row id → ranks for every row among either side's top candidates that clears the
    relevance floor of the query's model, best fused first; and for each of `columns`, row
    id → that column's value. `closest` leaves the floor out (what was closest, on request).
    `keyword_query`: what the keyword side searches for, when not the whole query (the
    query without the words naming a period, memory/search.py); `vector` is the embedding
    of `query`, whose length sets the floor (search/fusion.py, floor_for_query).

    The keyword side's statement runs first: with a PendingVector, while the query is
    being embedded on another thread (query_vector_soon); then the vector side's."""
    candidates = settings.MNEMO_SEARCH_CANDIDATES
    words = query if keyword_query is None else keyword_query
    read = (*columns, "embedding_model")  # which keyword rows still wait for a vector
    found = keyword_side(rows, words, candidates, read)
    vector = resolved(vector)
    if vector is not None:
        found += _fetch(*vector_side(rows, vector, candidates, read).query.sql_with_params())
    keyword_rows, vector_rows, values = _split_sides(found, len(read))
    *values, models = values
    pending = frozenset(
        row.pk for row in keyword_rows if vector is not None and models[row.pk] != vector.model
    )
    fused = fusion.fuse(
        keyword_rows,
        vector_rows,
        floor=floor_for(vector, query),
        enforce_floor=not closest,
        vector_weight=settings.MNEMO_SEARCH_VECTOR_WEIGHT,
        keyword_weight=settings.MNEMO_SEARCH_KEYWORD_WEIGHT,
        pending=pending,
    )
    return fused, values


def _fetch(sql: str, params: Any) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _split_sides(
    found: list[tuple], column_count: int
) -> tuple[list[KeywordRow], list[VectorRow], list[dict[int, Any]]]:
    """The statement's rows as each side's candidates, each sorted again as its SQL did
    (a UNION ALL promises no order), and the columns' values by row id."""
    keyword_rows, vector_rows = [], []
    values: list[dict[int, Any]] = [{} for _ in range(column_count)]
    for side, order, coverage, pk, *columns in found:
        if side == KEYWORD:
            keyword_rows.append(KeywordRow(pk=pk, score=order, coverage=coverage or 0.0))
        else:
            vector_rows.append(VectorRow(pk=pk, similarity=1 - order))
        for index, value in enumerate(columns):
            values[index][pk] = value
    keyword_rows.sort(key=lambda row: (-row.score, row.pk))
    vector_rows.sort(key=lambda row: (-row.similarity, row.pk))
    return keyword_rows, vector_rows, values


def floor_for(vector: QueryVector | None, query: str) -> Floor:
    """The relevance floor of the query's embedding model, raised for a short query
    (search/fusion.py); without a query vector, only words can answer."""
    model_floor = fusion.floor_for_model(vector.model if vector is not None else None)
    return fusion.floor_for_query(model_floor, query)


VECTOR = "vector"  # the keyword side's rows say KEYWORD (search/keyword.py)


def vector_side(
    rows: QuerySet, query: QueryVector, candidates: int, columns: tuple[str, ...]
) -> QuerySet:
    """(VECTOR, cosine distance, NULL, pk, *columns) of the `candidates` nearest rows: the
    keyword side's columns, its coverage left empty.

    Two steps in one statement: the inner query takes the POOL * `candidates` rows nearest
    by `embedding::halfvec(n) <=> query::halfvec(n)`, the expression of the per-owner HNSW
    indexes (search/vector_index.py), so the planner can answer it from an owner's index
    or else from the btree and an exact sort; the outer one ranks those by the float32
    cosine distance, ties by pk, and keeps `candidates`. An index scan with
    hnsw.iterative_scan = relaxed_order returns rows nearly in order; the outer sort puts
    them in order, and the pool absorbs halfvec's rounding (~1e-3) at the cut."""
    dimensions = len(query.vector)
    nearest = (
        rows.filter(embedding_model=query.model, embedding__isnull=False)
        .annotate(near=HalfvecCosineDistance("embedding", query.vector, dimensions))
        .order_by("near")
        .values("pk")[: candidates * POOL]
    )
    # The outer query finds the pool by primary key alone (the filters were the inner
    # query's), so the planner never reads the owner's rows a second time.
    return (
        rows.model._base_manager.filter(pk__in=nearest)
        .annotate(
            side=Value(VECTOR),
            order=CosineDistance("embedding", query.vector),
            coverage=Value(None, output_field=FloatField()),
        )
        .order_by("order", "pk")
        .values_list("side", "order", "coverage", "pk", *columns)[:candidates]
    )


# The vector side's inner query takes this many times the candidates it returns.
POOL = 2


class HalfvecCosineDistance(Func):
    """`column::halfvec(n) <=> 'query'::halfvec(n)`: the expression the per-owner HNSW
    indexes are built on (search/vector_index.py), written the same way so the planner
    matches them."""

    arg_joiner = " <=> "
    template = "(%(expressions)s)"
    output_field = FloatField()

    def __init__(self, column: str, vector: list[float], dimensions: int) -> None:
        half = HalfVectorField(dimensions=dimensions)
        super().__init__(Cast(F(column), half), Cast(Value(vector_literal(vector)), half))


def headline(query: str, field: str) -> Func:
    """The best passages of `field` for the query, matched words between the highlight
    markers (any markers already in the text are taken out first)."""
    options = (
        f"StartSel={HIGHLIGHT_START}, StopSel={HIGHLIGHT_END}, "
        'MaxWords=40, MinWords=15, MaxFragments=2, FragmentDelimiter=" … "'
    )
    clean_text = Func(
        F(field),
        Value(HIGHLIGHT_START + HIGHLIGHT_END),
        Value(""),
        function="translate",
        output_field=TextField(),
    )
    # Parsed as the row's own words were (search/migrations/0003_text_search_any_script.py),
    # so a word is marked where it matched. Text written without spaces is parsed as runs,
    # not as the character pairs that matched: its snippet is its opening, unmarked.
    return Func(
        Func(F(field), function="mnemo_text_config"),
        clean_text,
        AnyWordQuery(query),
        Value(options),
        function="ts_headline",
        output_field=TextField(),
    )


# --- the query's embedding ---------------------------------------------------------------


class _Cooldown:
    """Until when (time.monotonic()) this process leaves the vector side out, after the
    embedding provider failed a query."""

    until = 0.0


def reset_query_cooldown() -> None:
    """Let the next search try the embedding provider again."""
    _Cooldown.until = 0.0


class PendingVector:
    """A query's embedding under way on another thread (query_vector_soon), or already
    known (`value`, a query asked recently); with neither, none is coming (the provider is
    failing)."""

    def __init__(
        self, future: Future[QueryVector | None] | None = None, *, value: QueryVector | None = None
    ) -> None:
        self._future = future
        self._value = value

    def result(self) -> QueryVector | None:
        return self._future.result() if self._future is not None else self._value


def resolved(vector: QueryVector | PendingVector | None) -> QueryVector | None:
    """The query's vector, waiting for it if it is still being embedded."""
    return vector.result() if isinstance(vector, PendingVector) else vector


def query_vector_soon(query: str, role: str, *, user_id: int) -> PendingVector:
    """The query's embedding by the embedder of `role` (a source's embedder_role), made on
    another thread: the caller runs the keyword side meanwhile, and fuse() waits for the
    vector only when the vector side needs it (bench/README.md, "Embedding while the
    keyword side runs"). Its result is None while the provider is failing: the keyword
    side still answers, and no search waits on a provider that just failed."""
    return query_vectors_soon(query, [role], user_id=user_id)[role]


def query_vectors_soon(
    query: str, roles: Iterable[str], *, user_id: int
) -> dict[str, PendingVector]:
    """query_vector_soon() for each role, once per distinct model. The embedders are
    fetched (built, the first time) here, on the caller's thread: building a local model
    runs on the model's thread, which must not be waiting for the lock the builder holds.
    A query this process embedded lately for the same user (`user_id`) takes its vector
    from recent_query_vectors (search/embeddings.py), with no embedding and no other
    thread."""
    roles = list(dict.fromkeys(roles))
    if time.monotonic() < _Cooldown.until:
        return {role: PendingVector() for role in roles}
    try:
        embedders = {role: get_query_embedder(role) for role in roles}
    except EmbeddingError as error:
        _cool_down(error)
        return {role: PendingVector() for role in roles}
    by_model: dict[str, PendingVector] = {}
    for embedder in embedders.values():
        if embedder.model in by_model:
            continue
        remembered = recent_query_vectors.get(user_id, embedder.model, query)
        if remembered is not None:  # asked again: no embedding, no hop to another thread
            known = QueryVector(model=embedder.model, vector=remembered)
            by_model[embedder.model] = PendingVector(value=known)
        else:
            future = query_thread(embedder).submit(_embed_or_cool_down, embedder, query, user_id)
            by_model[embedder.model] = PendingVector(future)
    return {role: by_model[embedder.model] for role, embedder in embedders.items()}


def _embed_or_cool_down(embedder: Embedder, query: str, user_id: int) -> QueryVector | None:
    try:
        vector = _embed_query(embedder, query)
    except EmbeddingError as error:
        _cool_down(error)
        return None
    recent_query_vectors.put(user_id, vector.model, query, vector.vector)
    return vector


def _cool_down(error: EmbeddingError) -> None:
    pause = settings.MNEMO_SEARCH_EMBED_COOLDOWN
    _Cooldown.until = time.monotonic() + pause
    logger.warning("Searching by keywords only for the next %g s: %s", pause, error)


def _embed_query(embedder: Embedder, query: str) -> QueryVector:
    (vector,) = embedder.embed_query([query])
    return QueryVector(model=embedder.model, vector=vector)
