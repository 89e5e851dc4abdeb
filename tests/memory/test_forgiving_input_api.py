"""Issue 30, forgiving input over the agent API: an agent writes tags, platforms and time
zones as people name them; the stored form is what it gets back, with notes saying what
was kept other than as written, and the same rule finds them again on every filter."""

import pytest

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert
from profiles.services import agent_set_read_rules
from work.models import WorkItem

pytestmark = pytest.mark.django_db


def test_an_agent_writes_tags_as_people_type_them(call_tool, alice, alice_token):
    response = call_tool(
        alice_token,
        "create_memory",
        {
            "key": "fact:walks",
            "value": "Walks the dog at seven",
            "tags": ["Morning Routine", "🍣", "日本語", "work"],
        },
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["memory"]["tags"] == ["morning-routine", "work", "日本語"]
    assert body["notes"] == [
        "'Morning Routine' saved as #morning-routine",
        "'🍣' left out: a tag needs a letter or a digit",
    ]
    assert Memory.objects.get(user=alice, key="fact:walks").tags == [
        "morning-routine",
        "work",
        "日本語",
    ]


def test_an_answer_has_no_notes_when_everything_was_kept_as_written(call_tool, alice_token):
    response = call_tool(
        alice_token, "create_memory", {"key": "fact:tea", "value": "Green tea", "tags": ["work"]}
    )

    assert response.status_code == 201
    assert "notes" not in response.json()


def test_an_agent_names_a_platform_as_people_do(call_tool, alice, alice_token):
    response = call_tool(
        alice_token, "create_memory", {"key": "tone_Microsoft Teams", "value": "formal"}
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["memory"]["key"] == "tone_microsoft_teams"
    assert body["notes"] == ["Key 'tone_Microsoft Teams' saved as 'tone_microsoft_teams'"]
    assert list(Memory.objects.filter(user=alice).values_list("key", "value")) == [
        ("tone_microsoft_teams", "formal")
    ]
    # Read, changed and listed by the name it was written with.
    got = call_tool(alice_token, "get_memory", {"key": "tone_microsoft teams"})
    assert got.status_code == 200
    assert got.json()["memory"]["value"] == "formal"
    changed = call_tool(
        alice_token, "update_memory", {"key": "Verbosity_Microsoft-Teams", "value": "brief"}
    )
    assert changed.status_code == 404  # a key that has no memory yet is not created by update
    created = call_tool(
        alice_token, "create_memory", {"key": "Verbosity_Microsoft-Teams", "value": "brief"}
    )
    assert created.json()["memory"]["key"] == "verbosity_microsoft_teams"


def test_a_platform_in_another_script_is_romanised(call_tool, alice, alice_token):
    created = call_tool(alice_token, "create_memory", {"key": "tone_微信", "value": "casual"})
    assert created.json()["memory"]["key"] == "tone_wei_xin"


def test_a_platform_with_no_letter_is_refused_naming_the_key(call_tool, alice, alice_token):
    response = call_tool(alice_token, "create_memory", {"key": "tone_🍣", "value": "casual"})

    assert response.status_code == 400
    assert response.json()["error"]["field"] == "key"
    assert "Platform '🍣'" in response.json()["error"]["message"]
    assert not Memory.objects.filter(user=alice).exists()


def test_an_agent_writes_a_time_zone_in_any_case(call_tool, alice, alice_token):
    response = call_tool(
        alice_token, "create_memory", {"key": "timezone", "value": "europe/berlin"}
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["memory"]["value"] == "Europe/Berlin"
    assert body["notes"] == ["Time zone 'europe/berlin' saved as 'Europe/Berlin'"]
    assert Memory.objects.get(user=alice, key="timezone").value == "Europe/Berlin"


def test_an_unknown_time_zone_names_a_close_one(call_tool, alice, alice_token):
    response = call_tool(alice_token, "create_memory", {"key": "timezone", "value": "berlin"})

    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid",
        "message": "'berlin' is not an IANA time zone. Did you mean Europe/Berlin?",
        "field": "value",
    }
    assert not Memory.objects.filter(user=alice).exists()


def test_update_memory_answers_the_stored_tags_with_notes(call_tool, alice, alice_token):
    call_tool(alice_token, "create_memory", {"key": "fact:walks", "value": "Walks at seven"})

    response = call_tool(
        alice_token, "update_memory", {"key": "fact:walks", "tags": ["Morning_Routine", "☀️"]}
    )

    assert response.status_code == 200, response.content
    assert response.json()["memory"]["tags"] == ["morning-routine"]
    assert response.json()["notes"] == [
        "'Morning_Routine' saved as #morning-routine",
        "'☀️' left out: a tag needs a letter or a digit",
    ]


def test_memory_store_answers_notes_on_its_tags(call_tool, alice_token):
    response = call_tool(
        alice_token,
        "memory_store",
        {"content": "Sushi on Fridays", "category": "preference", "tags": ["Friday Dinner"]},
    )

    assert response.status_code == 201, response.content
    assert response.json()["memory"]["tags"] == ["friday-dinner"]
    assert response.json()["notes"] == ["'Friday Dinner' saved as #friday-dinner"]


def test_filters_take_a_tag_as_people_type_it(call_tool, alice, alice_token):
    you = Actor.for_user(alice)
    memory_upsert(
        user=alice, key="fact:walks", value="Walks the dog", actor=you, tags=["Morning Routine"]
    )
    memory_upsert(user=alice, key="fact:tea", value="Drinks green tea", actor=you, tags=["tea"])

    for typed in ("Morning Routine", "morning_routine", "MORNING-ROUTINE", "#morning-routine"):
        listed = call_tool(alice_token, "list_memories", {"tag": typed})
        assert [row["key"] for row in listed.json()["results"]] == ["fact:walks"], typed
        found = call_tool(alice_token, "search_memory", {"query": "dog", "tags": [typed]})
        assert [row["memory"]["key"] for row in found.json()["results"]] == ["fact:walks"], typed
    emoji = call_tool(alice_token, "list_memories", {"tag": "🍣"})
    assert emoji.json()["results"] == []


def test_a_read_rule_binds_a_tag_however_the_agent_writes_it(
    call_tool, alice, alice_agent, alice_token
):
    agent_set_read_rules(
        agent=alice_agent, memory_rule="except", memory_tags=["Private Life"], document_rule="all"
    )

    for typed in ("private_life", "PRIVATE LIFE", "#private-life"):
        response = call_tool(
            alice_token,
            "create_memory",
            {"key": "fact:secret", "value": "A thing", "tags": [typed]},
        )
        assert response.status_code == 403, typed
    assert not Memory.objects.filter(user=alice).exists()


def test_work_items_take_tags_by_the_same_rule(call_tool, alice, alice_token):
    created = call_tool(
        alice_token,
        "create_work",
        {"title": "Plan", "body": "Steps", "kind": "report", "tags": ["Weekly Review", "🍣"]},
    )

    assert created.status_code == 201, created.content
    body = created.json()
    assert body["work"]["tags"] == ["weekly-review"]
    assert body["notes"] == [
        "'Weekly Review' saved as #weekly-review",
        "'🍣' left out: a tag needs a letter or a digit",
    ]
    updated = call_tool(
        alice_token, "update_work", {"id": body["work"]["id"], "tags": ["Quarterly Plan"]}
    )
    assert updated.json()["work"]["tags"] == ["quarterly-plan"]
    assert updated.json()["notes"] == ["'Quarterly Plan' saved as #quarterly-plan"]
    assert WorkItem.objects.get(user=alice).tags == ["quarterly-plan"]
