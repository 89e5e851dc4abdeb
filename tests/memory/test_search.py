"""Memory search's nudges: use and age move a fused score a little, and only a little.

score = fused * freshness * use (memory/search.py); both factors are bounded
(search/ranking.py), so they reorder near ties and never a clearly better match.
"""

import datetime
import math

import pytest
from django.utils import timezone

from activity.actors import Actor
from memory import search as memory_search
from memory.models import Memory, Source
from memory.search import search_memory
from memory.services import memory_upsert
from search.ranking import USES_AT_FULL_NUDGE, QueryVector, freshness, use_factor

pytestmark = pytest.mark.django_db

HANDMADE_MODEL = "test:handmade-3"
DAY = datetime.timedelta(days=1)


def say(user, key, value, actor):
    return memory_upsert(user=user, key=key, value=value, actor=actor).memory


def keys(hits):
    return [hit.memory.key for hit in hits]


def test_a_memory_searched_100_times_does_not_outrank_a_clearly_better_match(alice, monkeypatch):
    me = Actor.for_user(alice)
    say(alice, "fact:better", "alpine lake kayak trip", me)  # every word, and by meaning
    say(alice, "fact:used", "alpine hut", me)  # one word, nothing by meaning
    Memory.objects.filter(key="fact:better").update(
        embedding=[1.0, 0.0, 0.0], embedding_model=HANDMADE_MODEL, embedded_hash="x"
    )
    Memory.objects.filter(key="fact:used").update(access_count=100)
    query = QueryVector(model=HANDMADE_MODEL, vector=[1.0, 0.0, 0.0])
    monkeypatch.setattr(memory_search, "query_vector_soon", lambda _query, _role, **_: query)

    hits = search_memory(user=alice, query="alpine lake kayak")

    assert keys(hits) == ["fact:better", "fact:used"]
    better, used = hits
    assert (better.ranks.keyword_rank, better.ranks.vector_rank) == (1, 1)
    assert (used.ranks.keyword_rank, used.ranks.vector_rank) == (2, None)
    assert used.use_factor == pytest.approx(1.05)  # the most use can give
    assert better.use_factor == 1.0
    assert used.score == pytest.approx(used.ranks.fused * 1.05)


def test_a_year_old_user_stated_memory_that_matches_best_still_ranks_first(
    alice, alice_agent, monkeypatch
):
    # Words only: no query vector.
    monkeypatch.setattr(memory_search, "query_vector_soon", lambda _query, _role, **_: None)
    stated = say(
        alice, "fact:home", "Lives in Singapore with a dog named Biscuit", Actor.for_user(alice)
    )
    noted = say(alice, "fact:pet", "Has a dog", Actor.for_agent(alice_agent))
    now = timezone.now()
    Memory.objects.filter(pk=stated.pk).update(updated_at=now - 365 * DAY)
    Memory.objects.filter(pk=noted.pk).update(updated_at=now - DAY)
    assert (stated.source, noted.source) == (Source.USER_STATED, Source.TP_EXTRACTED)

    hits = search_memory(user=alice, query="a dog named Biscuit in Singapore")

    assert keys(hits) == ["fact:home", "fact:pet"]
    assert [hit.ranks.keyword_rank for hit in hits] == [1, 2]
    assert hits[0].freshness == 1.0  # what the user said never fades
    assert hits[1].freshness == pytest.approx(1 - 0.05 * (1 - 0.5 ** (1 / 180)), rel=1e-4)
    # An agent's note of the same age does fade, by at most the age nudge.
    Memory.objects.filter(pk=noted.pk).update(updated_at=now - 365 * DAY)
    aged = search_memory(user=alice, query="a dog named Biscuit in Singapore")
    assert aged[1].freshness == pytest.approx(1 - 0.05 * (1 - 0.5 ** (365 / 180)), rel=1e-4)
    assert aged[1].freshness > 0.95


def test_the_use_factor_grows_with_the_log_of_uses_and_saturates():
    assert use_factor(0) == 1.0
    assert use_factor(-3) == 1.0
    assert use_factor(1) == pytest.approx(1 + 0.05 * math.log(2) / math.log(101))
    assert use_factor(USES_AT_FULL_NUDGE) == pytest.approx(1.05)
    assert use_factor(10**9) == pytest.approx(1.05)
    factors = [use_factor(uses) for uses in range(200)]
    assert factors == sorted(factors)
    assert all(1.0 <= factor <= 1.05 for factor in factors)


def test_freshness_fades_to_a_floor_and_never_for_what_does_not_fade():
    assert freshness(datetime.timedelta(0)) == 1.0
    assert freshness(-DAY) == 1.0  # a clock a little ahead is not "fresher than new"
    assert freshness(180 * DAY) == pytest.approx(0.975)
    assert freshness(36500 * DAY) == pytest.approx(0.95)
    ages = [freshness(days * DAY) for days in range(0, 3650, 10)]
    assert ages == sorted(ages, reverse=True)
    assert all(0.95 <= factor <= 1.0 for factor in ages)
    assert freshness(36500 * DAY, fades=False) == 1.0


@pytest.mark.parametrize("nudge", [0.0, 0.05, 0.1])
def test_both_nudges_together_move_a_score_by_at_most_ten_percent(settings, nudge):
    settings.MNEMO_SEARCH_USE_NUDGE = nudge
    settings.MNEMO_SEARCH_AGE_NUDGE = nudge
    products = [
        freshness(days * DAY) * use_factor(uses)
        for days in (0, 1, 180, 100_000)
        for uses in (0, 1, 100, 10**9)
    ]
    assert min(products) == pytest.approx(1 - nudge)
    assert max(products) == pytest.approx(1 + nudge)
    assert all(0.9 <= product <= 1.1 for product in products)
