"""What search returns and in what order: BM25 on the keyword side (key words and tags
count), the relevance floor, and age raising the bar for old agent notes."""

import datetime
import math

import pytest
from django.utils import timezone

from activity.actors import Actor
from memory import search as memory_search
from memory.models import Memory
from memory.search import search_memory
from memory.services import memory_upsert
from search.ranking import QueryVector
from tests.search.test_search import HANDMADE_MODEL, index_everything, keys, remember, set_vector

pytestmark = pytest.mark.django_db


def test_a_tag_matches_like_a_word_and_the_name_does_not(alice):
    """The new user's "coffee" search: the entry tagged #coffee first, not `name: Kevin`."""
    memory_upsert(user=alice, key="name", value="Kevin", actor=Actor.for_user(alice))
    memory_upsert(
        user=alice,
        key="preference:morning-order",
        value="Oat milk flat white, no sugar",
        tags=["coffee"],
        actor=Actor.for_user(alice),
    )
    remember(alice, {"fact:cello": "Plays the cello in an amateur orchestra"})
    index_everything()

    hits = search_memory(user=alice, query="coffee")

    assert keys(hits)[0] == "preference:morning-order"
    assert hits[0].ranks.keyword_rank == 1
    assert "name" not in keys(hits)


def test_the_words_of_a_key_match(alice):
    remember(
        alice,
        {"preference:report-format": "Bullets, never tables", "fact:car": "Drives a blue Volvo"},
    )  # not embedded: the keyword side alone

    hits = search_memory(user=alice, query="which format for the report?")

    assert keys(hits) == ["preference:report-format"]


def test_a_rare_word_outweighs_a_common_one(alice):
    """BM25's IDF: ts_rank_cd ranked these by id, each row matching one query word."""
    remember(
        alice,
        {
            "fact:a": "Kevin went hiking in the Alps",
            "fact:b": "Kevin likes late-night jazz",
            "fact:c": "Kevin fixed the old bike",
            "fact:d": "Bakes sourdough on Sundays",
        },
    )

    hits = search_memory(user=alice, query="Kevin sourdough")

    assert keys(hits)[0] == "fact:d"
    assert hits[0].ranks.keyword == 1.0
    assert all(hit.ranks.keyword < 0.5 for hit in hits[1:])


def test_a_short_match_beats_the_same_word_in_a_long_text(alice):
    long_text = "Notes from the offsite: " + " ".join(f"topic{n}" for n in range(60)) + " tea"
    remember(alice, {"fact:long": long_text, "fact:short": "Drinks green tea"})

    hits = search_memory(user=alice, query="tea")

    assert keys(hits) == ["fact:short", "fact:long"]


def test_repeating_a_word_saturates(alice):
    """Twelve times one query word count for less than once each of two."""
    remember(
        alice,
        {
            "fact:spam": "tea tea tea tea tea tea tea tea tea tea tea tea",
            "fact:both": "tea and biscuits",
        },
    )

    hits = search_memory(user=alice, query="tea and biscuits")

    assert keys(hits)[0] == "fact:both"


def test_a_nonsense_query_finds_nothing(alice):
    remember(
        alice,
        {
            "preference:tea": "Prefers green tea over coffee in the morning",
            "fact:home": "Lives in Singapore with a dog named Biscuit",
            "fact:cello": "Plays the cello in an amateur orchestra on weekends",
        },
    )
    index_everything()

    for query in ("xylophone quartet", "zzzz qqqq", "torque specification for a gearbox"):
        assert search_memory(user=alice, query=query) == [], query
    assert keys(search_memory(user=alice, query="cello"))[0] == "fact:cello"


# --- age raises the bar --------------------------------------------------------------


@pytest.fixture
def floor_of_the_handmade_model(settings, monkeypatch):
    """The handmade model's floor: rows nearer than 0.5 are meaning matches."""
    settings.MNEMO_SEARCH_FLOOR_QUERY = settings.MNEMO_SEARCH_FLOOR_ROW = 0.5
    settings.MNEMO_SEARCH_AGE_BAR, settings.MNEMO_SEARCH_AGE_BAR_DAYS = 0.03, 365
    query = QueryVector(model=HANDMADE_MODEL, vector=[1.0, 0.0, 0.0])
    monkeypatch.setattr(memory_search, "query_vector_soon", lambda _query, _role, **_: query)


def at_similarity(similarity):
    return [similarity, math.sqrt(1 - similarity**2), 0.0]


def test_an_old_agent_note_needs_a_closer_match(alice, alice_agent, floor_of_the_handmade_model):
    notes = {"fact:old-note": "mountain cabin", "fact:new-note": "alpine chalet"}
    for key, value in notes.items():
        memory_upsert(user=alice, key=key, value=value, actor=Actor.for_agent(alice_agent))
    memory_upsert(user=alice, key="fact:old-said", value="ski lodge", actor=Actor.for_user(alice))
    for key in (*notes, "fact:old-said"):
        set_vector(alice, key, at_similarity(0.52))  # above the floor, below floor + bar
    a_year_ago = timezone.now() - datetime.timedelta(days=400)
    Memory.objects.filter(key__in=["fact:old-note", "fact:old-said"]).update(updated_at=a_year_ago)

    hits = search_memory(user=alice, query="holiday house")

    # The user's own statement never fades; the old note is not close enough any more.
    assert sorted(keys(hits)) == ["fact:new-note", "fact:old-said"]

    set_vector(alice, "fact:old-note", at_similarity(0.54))  # clears 0.5 + 0.03
    assert "fact:old-note" in keys(search_memory(user=alice, query="holiday house"))


def test_an_old_agent_note_found_by_its_words_is_returned(
    alice, alice_agent, floor_of_the_handmade_model
):
    memory_upsert(
        user=alice, key="fact:cabin", value="mountain cabin", actor=Actor.for_agent(alice_agent)
    )
    a_year_ago = timezone.now() - datetime.timedelta(days=400)
    Memory.objects.filter(key="fact:cabin").update(updated_at=a_year_ago)

    assert keys(search_memory(user=alice, query="mountain cabin")) == ["fact:cabin"]
