"""The fusion of the two sides and the relevance floor, without a database."""

import pytest

from search.fusion import WORDS_ONLY, Floor, KeywordRow, VectorRow, fuse

WEIGHTS = {"vector_weight": 0.7, "keyword_weight": 0.3}
FLOOR = Floor(query=0.82, row=0.78)


def test_scores_are_normalised_per_side_and_blended():
    """Keyword: BM25 / the best; vector: from the model's row floor (0) to the best (1)."""
    keyword = [KeywordRow(1, score=8.0, coverage=0.9), KeywordRow(2, score=4.0, coverage=0.4)]
    vector = [VectorRow(2, similarity=0.90), VectorRow(3, similarity=0.84), VectorRow(1, 0.78)]
    fused = fuse(keyword, vector, floor=FLOOR, **WEIGHTS)
    assert (fused[1].keyword, fused[1].vector) == (1.0, 0.0)
    assert (fused[2].keyword, fused[2].vector) == (0.5, 1.0)
    assert (fused[3].keyword, fused[3].vector) == (0.0, pytest.approx(0.5))
    assert fused[2].fused == pytest.approx(0.7 + 0.15)
    assert list(fused) == [2, 3, 1]  # 0.85, 0.35, 0.30
    assert (fused[1].keyword_rank, fused[1].vector_rank) == (1, 3)
    assert fused[3].keyword_rank is None


def test_a_few_good_matches_keep_their_meaning_score():
    """Two close matches of a user with two rows: the second is not scored as the worst."""
    vector = [VectorRow(1, similarity=0.90), VectorRow(2, similarity=0.88)]
    fused = fuse([], vector, floor=FLOOR, **WEIGHTS)
    assert fused[2].vector == pytest.approx(10 / 12)


def test_a_model_without_a_floor_spreads_from_the_lowest_candidate():
    vector = [VectorRow(1, similarity=0.5), VectorRow(2, similarity=0.3), VectorRow(3, 0.1)]
    fused = fuse([], vector, floor=Floor(query=-1.0, row=-1.0), **WEIGHTS)
    assert [ranks.vector for ranks in fused.values()] == [1.0, pytest.approx(0.5), 0.0]


def test_a_row_on_both_sides_beats_a_row_on_one():
    keyword = [KeywordRow(1, 5.0, 0.6), KeywordRow(2, 5.0, 0.6)]
    vector = [VectorRow(1, 0.9), VectorRow(3, 0.9)]
    assert next(iter(fuse(keyword, vector, floor=FLOOR, **WEIGHTS))) == 1


def test_nonsense_below_the_floor_returns_nothing():
    """No row near in meaning and no word match: no results, not the least bad rows."""
    vector = [VectorRow(pk, similarity=0.80 - pk / 100) for pk in range(10)]
    assert fuse([], vector, floor=FLOOR, **WEIGHTS) == {}
    closest = fuse([], vector, floor=FLOOR, enforce_floor=False, **WEIGHTS)
    assert len(closest) == 10  # what was closest, on request


def test_a_chance_word_match_alone_does_not_answer_a_query():
    chance = [KeywordRow(7, score=1.0, coverage=0.2)]
    vector = [VectorRow(8, similarity=0.79)]
    assert fuse(chance, vector, floor=FLOOR, **WEIGHTS) == {}
    covering = [KeywordRow(7, score=1.0, coverage=0.6)]
    fused = fuse(covering, vector, floor=FLOOR, **WEIGHTS)
    assert set(fused) == {7, 8}  # answerable: the row above the row floor is kept too


def test_rows_below_the_row_floor_are_not_meaning_matches():
    vector = [VectorRow(1, 0.90), VectorRow(2, 0.70)]
    fused = fuse([KeywordRow(3, 2.0, 1.0)], vector, floor=FLOOR, **WEIGHTS)
    assert set(fused) == {1, 3}


def test_keyword_only_when_there_is_no_vector_side():
    rows = [KeywordRow(1, 3.0, 1.0), KeywordRow(2, 1.5, 0.2)]
    fused = fuse(rows, [], floor=WORDS_ONLY, **WEIGHTS)
    assert [ranks.keyword for ranks in fused.values()] == [1.0, 0.5]
    assert fuse(rows[1:], [], floor=WORDS_ONLY, **WEIGHTS) == {}  # one chance word


def test_raised_floor():
    assert FLOOR.raised(0.02) == Floor(query=pytest.approx(0.84), row=pytest.approx(0.80))


def test_each_model_has_its_own_floor(settings):
    from search.e5_embedder import E5_MODEL_ID
    from search.fusion import floor_for_model
    from search.wordllama_embedder import WORDLLAMA_MODEL_ID

    assert floor_for_model(E5_MODEL_ID).query > 0.8
    assert floor_for_model(WORDLLAMA_MODEL_ID).query < 0.5
    assert floor_for_model(f"{E5_MODEL_ID}+0123456789ab") == floor_for_model(E5_MODEL_ID)
    settings.MNEMO_SEARCH_FLOOR_QUERY, settings.MNEMO_SEARCH_FLOOR_ROW = 0.5, 0.4
    assert floor_for_model("openai:text-embedding-3-small@256") == Floor(0.5, 0.4)
    assert floor_for_model(None) == WORDS_ONLY


# --- a calibrated model: a fixed meaning scale, a floor by query length, pending rows -------

E5_FLOOR = Floor(query=0.82, row=0.78, strong=0.88)


def test_a_weak_best_candidate_stays_weak():
    """Calibrated: 0 at the row floor, 1 at a strong match, whatever the other candidates.
    (Before, the best candidate of every query scored 1: "tea" put `timezone` at 0.70.)"""
    weak = fuse([], [VectorRow(1, 0.83), VectorRow(2, 0.80)], floor=E5_FLOOR, **WEIGHTS)
    assert [ranks.vector for ranks in weak.values()] == [pytest.approx(0.5), pytest.approx(0.2)]
    strong = fuse([], [VectorRow(1, 0.95), VectorRow(2, 0.80)], floor=E5_FLOOR, **WEIGHTS)
    assert [ranks.vector for ranks in strong.values()] == [1.0, pytest.approx(0.2)]


def test_a_short_query_needs_a_closer_match():
    from search.fusion import SHORT_RAISE, floor_for_query

    assert floor_for_query(E5_FLOOR, "what did she say about the budget?") == E5_FLOOR
    # The query floor rises by SHORT_RAISE a word under three; the row floor joins it.
    two = floor_for_query(E5_FLOOR, "oat milk")
    assert two.query == two.row == pytest.approx(0.82 + SHORT_RAISE)
    assert two.strong == pytest.approx(two.row + 0.10)
    assert floor_for_query(E5_FLOOR, "tea") == Floor(
        query=pytest.approx(0.87), row=pytest.approx(0.87), strong=pytest.approx(0.97)
    )
    # An uncalibrated model (no strong match known) keeps its floor.
    assert floor_for_query(FLOOR, "tea") == FLOOR
    vector = [VectorRow(1, 0.86)]  # a one-word query's nearest unrelated row
    assert fuse([], vector, floor=floor_for_query(E5_FLOOR, "tea"), **WEIGHTS) == {}


def test_a_row_waiting_for_its_vector_stands_on_its_coverage():
    """It holds every word of the query: until it has a vector, it is not outranked by a
    meaning-only neighbour, however near that is."""
    keyword = [KeywordRow(1, score=3.0, coverage=1.0)]
    vector = [VectorRow(2, similarity=0.95)]
    fused = fuse(keyword, vector, floor=E5_FLOOR, pending=frozenset({1}), **WEIGHTS)
    assert list(fused) == [1, 2]
    assert (fused[1].vector, fused[1].fused) == (1.0, pytest.approx(1.0))
    # Once embedded and not near, it is only a word match.
    assert list(fuse(keyword, vector, floor=E5_FLOOR, **WEIGHTS)) == [2, 1]


def test_what_came_closest_is_ordered_by_meaning_below_a_calibrated_floor():
    """The page's "show the closest": nothing clears the floor, and the fixed scale would
    score every row 0; what was closest is relative, so it spreads as before."""
    vector = [VectorRow(pk, similarity=0.77 - pk / 100) for pk in range(1, 6)]
    assert fuse([], vector, floor=E5_FLOOR, **WEIGHTS) == {}
    closest = fuse([], vector, floor=E5_FLOOR, enforce_floor=False, **WEIGHTS)
    assert list(closest) == [1, 2, 3, 4, 5]
    assert closest[1].vector == 1.0 > closest[2].vector > closest[5].vector == 0.0
