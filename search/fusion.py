"""Fusing the keyword and vector sides into one score, and the relevance floor.

Score-normalised blending (measured against weighted reciprocal-rank fusion on the
development data: bench/README.md): each side's scores are brought to [0, 1], so a side
that is sure of its best row says so with a wide gap, which rank fusion throws away:

- keyword: BM25 / the best BM25 of the query (search/keyword.py);
- vector, for a model with a calibrated meaning scale (`Floor.strong`): (similarity -
  row floor) / (strong - row floor), clamped to [0, 1]. The scale is fixed, not stretched
  per query, so a weak best candidate stays weak: "tea" against a profile that never
  mentions it no longer puts `timezone` first at 0.70 (issue 26). What came closest (the
  page's "show the closest", without the floor) is relative and spreads as below. For a
  model with no calibrated scale, (similarity - zero) / (best - zero), zero being its row
  floor or the lowest candidate's similarity;
- a row the keyword side found that has no vector by the query's model yet (written a
  moment ago, its embedding pending) counts its coverage as its meaning score: a row
  holding every word of the query is not outranked by a weak meaning-only neighbour while
  it waits for its vector.

fused = vector_weight * vector + keyword_weight * keyword, the weights in settings
(MNEMO_SEARCH_VECTOR_WEIGHT, MNEMO_SEARCH_KEYWORD_WEIGHT). A row among one side's
candidates only scores 0 on the other.

The floor (`Floor`, calibrated per embedding model, search/embeddings.py): a query that
matches nothing in words and little in meaning returns nothing. Cosine similarity has no
absolute meaning across models (e5 puts unrelated texts at 0.78, WordLlama at 0.2), so each
model carries numbers measured on the development data:

- `query`: below it, the best row's similarity alone does not make the query answerable;
  then only a row that shares at least MIN_COVERAGE of the query's word weight (IDF) does;
- `row`: a row below it is not a meaning match at all (it can still match by words);
- `strong`: the similarity of a strong match, where the meaning score reaches 1.

A short query is nearer to everything (`floor_for_query`): each word short of SHORT_WORDS
raises all three by SHORT_RAISE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from django.conf import settings

from search.e5_embedder import E5_MODEL_ID
from search.wordllama_embedder import WORDLLAMA_MODEL_ID

if TYPE_CHECKING:
    from collections.abc import Callable

# A row covering less than this share of the query's IDF mass is a chance word match
# (one common word of several); alone it does not make a query answerable. Measured on the
# development data with e5: a third or a half leave R@10 at .699/.697 and 96% of unrelated
# queries empty; any word match at all (0) lets 15% of them through.
MIN_COVERAGE = 1 / 3


@dataclass(frozen=True)
class Floor:
    query: float  # the best similarity below which words must carry the query
    row: float  # the similarity below which a row is not a meaning match
    # The similarity of a strong meaning match: the meaning score is 1 there and above,
    # (similarity - row) / (strong - row) below it. None for a model not calibrated here:
    # its meaning is spread from the lowest candidate to the best of each query.
    strong: float | None = None

    def raised(self, by: float) -> Floor:
        strong = None if self.strong is None else self.strong + by
        return Floor(query=self.query + by, row=self.row + by, strong=strong)


# Without a query vector (the provider is down) only words can answer a query: no
# similarity reaches a floor above 1.
WORDS_ONLY = Floor(query=2.0, row=2.0)

# Measured on ../shared/eval (bench/README.md, "The relevance floor") with 30 unrelated
# queries: the lowest query floor that leaves at least 90% of them without results, and
# a row floor below which dropping rows costs no recall. e5 puts the best row of an
# unrelated query at 0.78-0.84 and of a real question at 0.83-0.88 (5th-50th percentile):
# R@10 .699 against .700 with no floor, 96% of unrelated queries empty. WordLlama: 0.09-0.28
# against 0.43-0.65; at 0.25, R@10 .647 against .649, 91% empty (0.22 lets 18% through).
# `strong`: the row floor plus SPAN (below).
CALIBRATED_FLOORS = {
    E5_MODEL_ID: Floor(query=0.82, row=0.78, strong=0.78 + 0.10),
    WORDLLAMA_MODEL_ID: Floor(query=0.25, row=0.20),  # no strong match measured: spread
}

# Short queries sit closer to everything: e5 puts a one-word query 0.82-0.86 from the
# nearest row of a profile that never mentions it, a two-word one 0.80-0.84, a question of
# several words 0.78-0.84 (bench/short_queries.py, bench/README.md "Short queries"). Each
# word short of SHORT_WORDS raises the floor by SHORT_RAISE: a one-word query needs 0.87,
# a two-word one 0.845, more words the floor above; a short query's rows need as much.
SHORT_WORDS = 3
SHORT_RAISE = 0.025


def floor_for_query(floor: Floor, query: str) -> Floor:
    """The model's floor for this query: raised for a query of fewer than SHORT_WORDS
    words, for a model with a calibrated meaning scale (`strong`). For such a query the
    row floor is its query floor too: the rows between the two are unrelated ones, so a
    short query answered by a word ("oat milk") does not bring the profile along."""
    if floor.strong is None:
        return floor
    short = max(SHORT_WORDS - len(WORD.findall(query)), 0)
    if not short:
        return floor
    raised = floor.raised(SHORT_RAISE * min(short, SHORT_WORDS - 1))
    span = floor.strong - floor.row
    return Floor(query=raised.query, row=raised.query, strong=raised.query + span)


WORD = re.compile(r"\w+")


def floor_for_model(model: str | None) -> Floor:
    """The floor calibrated for the model (another release of the same model, whose id
    carries a "+<hash>" suffix, shares it); MNEMO_SEARCH_FLOOR_QUERY/_ROW set one for a
    model not measured here (an OpenAI-compatible server's), which otherwise has none:
    its queries are then answered by words or by whatever is nearest."""
    if model is None:
        return WORDS_ONLY
    calibrated = CALIBRATED_FLOORS.get(model.split("+", 1)[0])
    if calibrated is not None:
        return calibrated
    return Floor(query=settings.MNEMO_SEARCH_FLOOR_QUERY, row=settings.MNEMO_SEARCH_FLOOR_ROW)


@dataclass(frozen=True)
class KeywordRow:
    pk: int
    score: float  # BM25
    coverage: float  # share of the query's IDF this row matches, 0..1


@dataclass(frozen=True)
class VectorRow:
    pk: int
    similarity: float  # cosine similarity, 1 - cosine distance


@dataclass(frozen=True)
class Ranks:
    """Where a row came on each side and what it scored there (None: not a candidate)."""

    keyword_rank: int | None
    vector_rank: int | None
    keyword: float  # normalised keyword score, 0..1
    vector: float  # normalised vector score, 0..1
    similarity: float | None  # raw cosine similarity
    coverage: float  # share of the query's word weight matched
    fused: float


def fuse(
    keyword_rows: list[KeywordRow],
    vector_rows: list[VectorRow],
    *,
    floor: Floor,
    vector_weight: float,
    keyword_weight: float,
    enforce_floor: bool = True,
    pending: frozenset[int] = frozenset(),
) -> dict[int, Ranks]:
    """Row id → Ranks, best fused first; {} when the query is below the floor. Without
    `enforce_floor` every candidate counts (what was closest, on request).

    `keyword_rows` best first by BM25, `vector_rows` best first by similarity (each as
    its side's SQL ordered them; ties broken by id). `pending`: rows with no vector by the
    query's model yet; until they have one, their meaning score is their coverage (a row
    holding every word of the query stands as a strong meaning match, so a weak
    meaning-only neighbour does not outrank it while it waits for its vector)."""
    if enforce_floor and not _answerable(keyword_rows, vector_rows, floor):
        return {}
    vectors = [row for row in vector_rows if not enforce_floor or row.similarity >= floor.row]
    best_keyword = max((row.score for row in keyword_rows), default=0.0)
    # What was closest is relative: below the floor a fixed scale would score every row 0.
    scaled = floor if enforce_floor else replace(floor, strong=None)
    scale = _meaning_scale(scaled, [row.similarity for row in vector_rows])
    keyword = {row.pk: (rank, row) for rank, row in enumerate(keyword_rows, start=1)}
    vector = {row.pk: (rank, row) for rank, row in enumerate(vectors, start=1)}
    fused: dict[int, Ranks] = {}
    for pk in dict.fromkeys([*keyword, *vector]):
        keyword_rank, keyword_row = keyword.get(pk, (None, None))
        vector_rank, vector_row = vector.get(pk, (None, None))
        keyword_score = keyword_row.score / best_keyword if keyword_row and best_keyword else 0.0
        if vector_row is not None:
            vector_score = scale(vector_row.similarity)
        elif keyword_row is not None and pk in pending:
            vector_score = keyword_row.coverage
        else:
            vector_score = 0.0
        fused[pk] = Ranks(
            keyword_rank=keyword_rank,
            vector_rank=vector_rank,
            keyword=keyword_score,
            vector=vector_score,
            similarity=vector_row.similarity if vector_row else None,
            coverage=keyword_row.coverage if keyword_row else 0.0,
            fused=vector_weight * vector_score + keyword_weight * keyword_score,
        )
    return dict(sorted(fused.items(), key=lambda item: (-item[1].fused, item[0])))


def _meaning_scale(floor: Floor, similarities: list[float]) -> Callable[[float], float]:
    """Similarity → meaning score in [0, 1]. A calibrated model's is fixed: 0 at the row
    floor, 1 at a strong match, so a weak best candidate stays weak. Otherwise the best
    candidate of the query gets 1 and the row floor (or, with none, the lowest candidate)
    0, as nothing says what a strong match is for that model."""
    if floor.strong is not None:
        zero, one = floor.row, floor.strong
        return lambda similarity: min(max((similarity - zero) / (one - zero), 0.0), 1.0)
    high = max(similarities, default=0.0)
    low = floor.row if -1 < floor.row < high else min(similarities, default=0.0)
    return lambda similarity: _spread(similarity, low, high)


def _answerable(keyword_rows: list[KeywordRow], vector_rows: list[VectorRow], floor: Floor) -> bool:
    """Does anything match the query in meaning (above the model's query floor) or in
    words (a row covering MIN_COVERAGE of the query's word weight)?"""
    if any(row.similarity >= floor.query for row in vector_rows):
        return True
    return any(row.coverage >= MIN_COVERAGE for row in keyword_rows)


def _spread(similarity: float, zero: float, best: float) -> float:
    """Similarity as 0..1 from `zero` to the best candidate's (1 when they are equal)."""
    return max((similarity - zero) / (best - zero), 0.0) if best > zero else 1.0
