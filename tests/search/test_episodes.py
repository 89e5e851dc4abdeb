"""The episode lift (search/ranking.py episode_lift), without a database: rows of a group
(a memory's session, a chunk's document) with a strong hit are pulled part of the way up
to it, never above it."""

import pytest

from search import ranking
from search.ranking import EPISODE_PULL, STRONG_SCORE, episode_lift


def test_a_row_of_a_strong_hits_session_is_pulled_toward_it_and_stays_below():
    scores = {1: 0.9, 2: 0.3, 3: 0.3}
    sessions = {1: "session-4", 2: "session-4", 3: "session-7"}

    lifted = episode_lift(scores, sessions)

    assert lifted[1] == 0.9  # the hit itself
    assert lifted[2] == pytest.approx(0.3 + EPISODE_PULL * 0.6)
    assert lifted[2] < lifted[1]
    assert lifted[3] == 0.3  # another session


def test_it_never_outranks_a_direct_match_of_equal_strength():
    """Row 4 matches the query directly as strongly as the hit that lifts row 2: row 2
    stays below both, whatever its own score was."""
    for own in (0.0, 0.2, 0.5, 0.79, 0.8):
        scores = {1: 0.8, 2: own, 4: 0.8}
        lifted = episode_lift(scores, {1: "s", 2: "s", 4: ""})
        assert lifted[2] <= lifted[4] == 0.8
        assert lifted[2] < 0.8 or own == 0.8


def test_no_lift_without_a_session_or_without_a_strong_hit():
    weak = STRONG_SCORE - 0.01
    assert episode_lift({1: weak, 2: 0.1}, {1: "s", 2: "s"}) == {1: weak, 2: 0.1}
    assert episode_lift({1: 0.9, 2: 0.1}, {1: "", 2: ""}) == {1: 0.9, 2: 0.1}


def test_only_the_best_rows_are_strong_hits(monkeypatch):
    monkeypatch.setattr(ranking, "STRONG_HITS", 1)
    scores = {1: 0.9, 2: 0.8, 3: 0.1}

    lifted = episode_lift(scores, {1: "a", 2: "b", 3: "b"})

    assert lifted[3] == 0.1  # row 2 is strong enough, but not among the best 1
