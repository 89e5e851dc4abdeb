"""Time and conversations in memory search (memory/search.py rank_memories): a memory
whose occurred_at falls in the period the query names scores 1 + PERIOD_BONUS times as
much, the period's words leave the keyword side, and a memory of the same session as a
strong hit is lifted toward it (search/ranking.py episode_lift), never above it."""

import datetime
import math

import pytest

from activity.actors import Actor
from memory import search as memory_search
from memory.models import Memory
from memory.search import PERIOD_BONUS, search_memory
from memory.services import memory_upsert
from search.ranking import EPISODE_PULL, QueryVector

pytestmark = pytest.mark.django_db

HANDMADE_MODEL = "test:handmade-3"
UTC = datetime.UTC


def write(user, key, value, *, occurred_at=None, session=""):
    memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user))
    changes = {"session": session}
    if occurred_at is not None:
        changes["occurred_at"] = occurred_at
    Memory.objects.filter(user=user, key=key).update(**changes)


def keys(hits):
    return [hit.memory.key for hit in hits]


@pytest.fixture
def words_only(monkeypatch):
    """No query vector: the keyword side alone, so the scores are exact."""
    monkeypatch.setattr(memory_search, "query_vector_soon", lambda _query, _role, **_: None)


def test_a_memory_in_the_named_period_gets_the_bonus_and_no_more(alice, words_only):
    write(
        alice,
        "fact:may",
        "Went hiking with Sam",
        occurred_at=datetime.datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
    )
    write(
        alice, "fact:june", "Sam went hiking", occurred_at=datetime.datetime(2023, 6, 2, tzinfo=UTC)
    )
    write(alice, "fact:other", "Baked bread", occurred_at=datetime.datetime(2023, 5, 9, tzinfo=UTC))

    hits = search_memory(user=alice, query="hiking with Sam in May 2023")

    assert keys(hits) == ["fact:may", "fact:june"]  # "Baked bread" is in May, but no match
    may, june = hits
    assert may.ranks.fused == pytest.approx(june.ranks.fused)
    assert may.score == pytest.approx(june.score * (1 + PERIOD_BONUS))


def test_no_bonus_without_a_period_or_outside_it(alice, words_only):
    write(
        alice,
        "fact:may",
        "Went hiking with Sam",
        occurred_at=datetime.datetime(2023, 5, 8, tzinfo=UTC),
    )
    write(
        alice, "fact:june", "Sam went hiking", occurred_at=datetime.datetime(2023, 6, 2, tzinfo=UTC)
    )

    for query in ("hiking with Sam", "hiking with Sam in 2021"):
        may, june = search_memory(user=alice, query=query)
        assert may.score == pytest.approx(june.score), query


def test_the_words_naming_the_period_leave_the_keyword_side(alice, words_only):
    """ "2023" would match the report by a word; it names the period, not a topic."""
    write(
        alice,
        "fact:hike",
        "Went hiking with Sam",
        occurred_at=datetime.datetime(2023, 5, 8, tzinfo=UTC),
    )
    write(alice, "fact:report", "The 2023 report is late")

    assert keys(search_memory(user=alice, query="hiking in 2023")) == ["fact:hike"]
    assert keys(search_memory(user=alice, query="report 2023")) == ["fact:report"]


# --- the episode lift -----------------------------------------------------------------


def at_similarity(similarity):
    return [similarity, math.sqrt(1 - similarity**2), 0.0]


@pytest.fixture
def handmade_vectors(settings, monkeypatch):
    """The handmade model's floor: rows nearer than 0.5 are meaning matches."""
    settings.MNEMO_SEARCH_FLOOR_QUERY = settings.MNEMO_SEARCH_FLOOR_ROW = 0.5
    query = QueryVector(model=HANDMADE_MODEL, vector=[1.0, 0.0, 0.0])
    monkeypatch.setattr(memory_search, "query_vector_soon", lambda _query, _role, **_: query)

    def set_similarity(user, key, similarity):
        Memory.objects.filter(user=user, key=key).update(
            embedding=at_similarity(similarity), embedding_model=HANDMADE_MODEL, embedded_hash="x"
        )

    return set_similarity


def test_a_memory_of_a_strong_hits_session_is_lifted_below_the_hit(alice, handmade_vectors):
    write(alice, "fact:puppy", "Adopted a puppy named Pixel", session="session-3")
    write(alice, "fact:vet", "Saw the vet on Tuesday", session="session-3")  # said together
    write(alice, "fact:gym", "Saw the gym on Tuesday", session="session-5")
    write(alice, "fact:loose", "Saw the dentist on Tuesday")  # no session
    handmade_vectors(alice, "fact:puppy", 1.0)
    for key in ("fact:vet", "fact:gym", "fact:loose"):
        handmade_vectors(alice, key, 0.6)

    hits = search_memory(user=alice, query="puppy Pixel")

    assert keys(hits) == ["fact:puppy", "fact:vet", "fact:gym", "fact:loose"]
    puppy, vet, gym, loose = hits
    assert vet.ranks.fused == gym.ranks.fused == loose.ranks.fused  # equal direct matches
    assert gym.score == pytest.approx(loose.score)  # no lift: another session, or none
    assert vet.score == pytest.approx(gym.score + EPISODE_PULL * (puppy.score - gym.score))
    assert vet.score < puppy.score


def test_a_lifted_memory_never_outranks_a_direct_match_as_strong_as_its_hit(
    alice, handmade_vectors
):
    write(alice, "fact:puppy", "Adopted a puppy named Pixel", session="session-3")
    write(alice, "fact:kitten", "Adopted a kitten named Pixel")  # as strong, directly
    write(alice, "fact:vet", "Saw the vet on Tuesday", session="session-3")
    handmade_vectors(alice, "fact:puppy", 1.0)
    handmade_vectors(alice, "fact:kitten", 1.0)
    handmade_vectors(alice, "fact:vet", 0.99)

    hits = search_memory(user=alice, query="Adopted Pixel")

    assert keys(hits)[-1] == "fact:vet"
    assert hits[-1].score < min(hit.score for hit in hits[:-1])


def test_no_lift_without_a_strong_hit(alice, handmade_vectors, monkeypatch):
    from search import ranking

    monkeypatch.setattr(ranking, "STRONG_SCORE", 1.5)  # no score reaches it
    write(alice, "fact:puppy", "Adopted a puppy named Pixel", session="session-3")
    write(alice, "fact:vet", "Saw the vet on Tuesday", session="session-3")
    write(alice, "fact:gym", "Saw the gym on Tuesday", session="session-5")
    handmade_vectors(alice, "fact:puppy", 1.0)
    handmade_vectors(alice, "fact:vet", 0.6)
    handmade_vectors(alice, "fact:gym", 0.6)

    _, vet, gym = search_memory(user=alice, query="puppy Pixel")

    assert vet.score == pytest.approx(gym.score)
