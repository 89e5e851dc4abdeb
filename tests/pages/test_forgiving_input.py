"""Issue 30, forgiving input on the pages: tags, platforms and time zones typed as people
write them are saved by the one rule of each (lib/tags.py, lib/timezones.py), the page
says what was saved when it differs from what was typed, and the entry filter takes a tag
as typed."""

import pytest

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def text(response):
    return response.content.decode()


def test_adding_an_entry_says_what_its_tags_were_saved_as(as_alice, alice):
    response = as_alice.post(
        "/entries/add/",
        {
            "entry-kind": "fact",
            "entry-value": "Walks the dog at seven",
            "entry-tags": "Morning Routine, 🍣, 日本語",
        },
        headers=HX,
    )

    assert response.status_code == 200
    body = text(response)
    assert (
        "Added “Walks the dog at seven” as a fact. Tags: &#x27;Morning Routine&#x27; saved as "
        "#morning-routine; &#x27;🍣&#x27; left out: a tag needs a letter or a digit."
    ) in body
    memory = Memory.objects.get(user=alice, value="Walks the dog at seven")
    assert memory.tags == ["morning-routine", "日本語"]


def test_an_entry_whose_tags_were_kept_as_typed_gets_no_tag_note(as_alice):
    response = as_alice.post(
        "/entries/add/",
        {"entry-kind": "fact", "entry-value": "Drinks tea", "entry-tags": "food, 日本語"},
        headers=HX,
    )

    assert "Added “Drinks tea” as a fact." in text(response)
    assert "saved as" not in text(response)
    assert "left out" not in text(response)


def test_editing_an_entry_says_what_its_tags_were_saved_as(as_alice, alice):
    memory = memory_upsert(
        user=alice, key="fact:walks", value="Walks at seven", actor=Actor.for_user(alice)
    ).memory

    response = as_alice.post(
        f"/memories/{memory.pk}/edit/",
        {f"edit-{memory.pk}-value": "Walks at seven", f"edit-{memory.pk}-tags": "Morning_Routine"},
        headers=HX,
    )

    assert response.status_code == 200
    assert "Saved. Tag: &#x27;Morning_Routine&#x27; saved as #morning-routine." in text(response)
    memory.refresh_from_db()
    assert memory.tags == ["morning-routine"]


@pytest.mark.parametrize(
    "typed", ["Morning Routine", "morning_routine", "MORNING-ROUTINE", "#morning-routine"]
)
def test_the_entry_filter_takes_a_tag_as_typed(as_alice, alice, typed):
    you = Actor.for_user(alice)
    memory_upsert(
        user=alice, key="fact:walks", value="Walks the dog", actor=you, tags=["Morning Routine"]
    )
    memory_upsert(user=alice, key="fact:tea", value="Drinks green tea", actor=you, tags=["tea"])

    body = text(as_alice.get("/", {"tab": "entries", "tag": typed}))

    assert '<code class="key">fact:walks</code>' in body
    assert '<code class="key">fact:tea</code>' not in body
    if typed == "#morning-routine":
        assert 'id="tag-typed"' not in body  # typed as it is stored: nothing to say
    else:
        assert f"Tag “{typed}” is #morning-routine." in body


def test_an_emoji_in_the_tag_filter_is_said_to_be_no_tag(as_alice, alice):
    memory_upsert(user=alice, key="fact:tea", value="Drinks tea", actor=Actor.for_user(alice))

    body = text(as_alice.get("/", {"tab": "entries", "tag": "🍣"}))

    assert "“🍣” has no letter or digit, so it is no tag: not filtered by tag." in body
    assert '<code class="key">fact:tea</code>' in body


def test_a_time_zone_in_any_case_is_saved_by_its_name(as_alice, alice):
    response = as_alice.post("/profile/", {"profile-timezone": "europe/berlin"}, headers=HX)

    assert response.status_code == 200
    assert Memory.objects.get(user=alice, key="timezone").value == "Europe/Berlin"
    assert 'value="Europe/Berlin"' in text(response)
    assert 'value="europe/berlin"' not in text(response)


def test_a_misspelt_time_zone_is_refused_naming_the_close_one(as_alice, alice):
    response = as_alice.post("/profile/", {"profile-timezone": "Europe/Berlni"}, headers=HX)

    assert response.status_code == 200
    assert "Did you mean Europe/Berlin?" in text(response)
    assert 'value="Europe/Berlni"' in text(response)  # kept as typed, to correct
    assert not Memory.objects.filter(user=alice).exists()


def test_a_platform_named_as_people_do_is_added_and_the_page_says_as_what(as_alice, alice):
    response = as_alice.post(
        "/styles/add/",
        {"style-platform": "Microsoft Teams", "style-tone": "formal"},
        headers=HX,
    )

    assert response.status_code == 200
    assert "Added Microsoft Teams (saved as microsoft_teams)." in text(response)
    assert list(Memory.objects.filter(user=alice).values_list("key", "value")) == [
        ("tone_microsoft_teams", "formal")
    ]
    again = as_alice.post(
        "/styles/add/", {"style-platform": "microsoft-teams", "style-tone": "casual"}, headers=HX
    )
    assert "&#x27;microsoft_teams&#x27; already has styles" in text(again)
    assert Memory.objects.get(user=alice, key="tone_microsoft_teams").value == "formal"


def test_re_tagging_entries_says_what_the_tags_were_saved_as(as_alice, alice):
    memory = memory_upsert(
        user=alice, key="fact:walks", value="Walks at seven", actor=Actor.for_user(alice)
    ).memory

    response = as_alice.post(
        "/entries/bulk/",
        {"bulk-action": "tag_add", "bulk-ids": str(memory.pk), "bulk-tags": "Morning Routine"},
        headers=HX,
    )

    assert response.status_code == 200
    assert "Tag: &#x27;Morning Routine&#x27; saved as #morning-routine." in text(response)
    memory.refresh_from_db()
    assert memory.tags == ["morning-routine"]
