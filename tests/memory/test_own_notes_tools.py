"""An agent's own notes through the tools (issue 27, item 1): memory_store writes the calling
agent's own note unless share: true; get/update/delete/promote address it with own: true;
every memory body says its audience; memory_list_recent and the scratchpad list the calling
agent's own notes only; another agent's note is never found, whatever the call."""

from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from memory.models import Memory, MemoryProposal
from memory.services import memory_upsert
from profiles.services import profile_update, system_token_create, token_create
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

TEA = {"content": "The CI runners are ARM machines", "category": "discovery"}
TEA_KEY = "discovery:the-ci-runners-are-arm-machines"


@pytest.fixture
def coder(alice):
    return AgentFactory(user=alice, name="coder")


@pytest.fixture
def coder_token(coder):
    return token_create(agent=coder).raw


def test_memory_store_writes_the_callers_own_note_by_default(
    call_tool, alice, alice_agent, alice_token
):
    profile_update(user=alice, review_agent_memories=True)  # a note is not reviewed

    response = call_tool(alice_token, "memory_store", TEA)

    assert response.status_code == 201, response.content
    assert response.json()["memory"]["audience"] == "own"
    row = Memory.objects.get(user=alice)
    assert row.owner_agent_id == alice_agent.pk
    assert not MemoryProposal.objects.exists()


def test_memory_store_with_share_writes_the_users_memory_under_review(
    call_tool, alice, alice_token
):
    profile_update(user=alice, review_agent_memories=True)

    response = call_tool(alice_token, "memory_store", {**TEA, "share": True})

    assert response.status_code == 202
    assert MemoryProposal.objects.get().key == TEA_KEY
    assert not Memory.objects.exists()
    profile_update(user=alice, review_agent_memories=False)
    other = {"content": "Deploys on Fridays", "category": "fact", "share": True}
    stored = call_tool(alice_token, "memory_store", other)
    assert stored.json()["memory"]["audience"] == "user"
    assert Memory.objects.get().owner_agent is None


def test_own_flag_addresses_the_callers_note_on_each_tool(call_tool, alice, alice_token):
    call_tool(alice_token, "memory_store", TEA)
    call_tool(alice_token, "create_memory", {"key": TEA_KEY, "value": "The user's version"})

    own = call_tool(alice_token, "get_memory", {"key": TEA_KEY, "own": True}).json()["memory"]
    mine = call_tool(alice_token, "get_memory", {"key": TEA_KEY}).json()["memory"]
    assert (own["audience"], own["value"]) == ("own", "The CI runners are ARM machines")
    assert (mine["audience"], mine["value"]) == ("user", "The user's version")

    updated = call_tool(
        alice_token, "update_memory", {"key": TEA_KEY, "value": "ARM, Graviton", "own": True}
    )
    assert updated.json()["memory"]["value"] == "ARM, Graviton"
    promoted = call_tool(alice_token, "memory_promote", {"memory_id": TEA_KEY, "own": True})
    assert promoted.status_code == 200, promoted.content
    assert promoted.json()["memory"] == {**promoted.json()["memory"], "pinned": True}
    deleted = call_tool(alice_token, "delete_memory", {"key": TEA_KEY, "own": True})
    assert deleted.status_code == 200
    left = list(Memory.objects.values_list("owner_agent", "value"))
    assert left == [(None, "The user's version")]


def test_memory_promote_takes_key_or_memory_id_but_not_both(call_tool, alice, alice_token):
    call_tool(alice_token, "create_memory", {"key": TEA_KEY, "value": "ARM"})

    by_id = call_tool(alice_token, "memory_promote", {"memory_id": TEA_KEY})
    both = call_tool(alice_token, "memory_promote", {"memory_id": TEA_KEY, "key": TEA_KEY})
    neither = call_tool(alice_token, "promote_memory", {})

    assert by_id.status_code == 200
    assert Memory.objects.get().pinned
    assert (both.status_code, neither.status_code) == (400, 400)


def test_another_agents_note_is_never_found(call_tool, alice, alice_token, coder, coder_token):
    call_tool(coder_token, "memory_store", TEA)  # the coder's own note
    note = Memory.objects.get()

    answers = [
        call_tool(alice_token, "get_memory", {"key": TEA_KEY, "own": True}),
        call_tool(alice_token, "get_memory", {"key": TEA_KEY}),
        call_tool(alice_token, "update_memory", {"key": TEA_KEY, "value": "x", "own": True}),
        call_tool(alice_token, "update_memory", {"key": TEA_KEY, "value": "x"}),
        call_tool(alice_token, "delete_memory", {"key": TEA_KEY, "own": True}),
        call_tool(alice_token, "delete_memory", {"key": TEA_KEY}),
        call_tool(alice_token, "promote_memory", {"key": TEA_KEY, "own": True}),
        call_tool(alice_token, "memory_promote", {"memory_id": TEA_KEY}),
    ]

    for answer in answers:
        assert answer.status_code == 404, answer.content
        assert b"ARM machines" not in answer.content
        assert b"coder" not in answer.content
    note.refresh_from_db()
    assert (note.value, note.pinned, note.access_count) == (TEA["content"], False, 0)
    assert call_tool(alice_token, "memory_list_recent", {}).json()["results"] == []


def test_memory_list_recent_and_the_scratchpad_are_the_callers_own_notes(
    call_tool, client, alice, alice_token, coder, coder_token
):
    call_tool(coder_token, "memory_store", TEA)
    call_tool(alice_token, "memory_store", {**TEA, "share": True})  # the user's memory
    call_tool(alice_token, "memory_store", {"content": "Deploys on Fridays", "category": "fact"})

    recent = call_tool(alice_token, "memory_list_recent", {}).json()["results"]
    pad = client.get(
        "/api/v1/working-memory?format=scratchpad",
        headers={"Authorization": f"Bearer {alice_token}"},
    ).content.decode()
    coders = call_tool(coder_token, "memory_list_recent", {}).json()["results"]

    assert [(item["key"], item["audience"]) for item in recent] == [
        ("fact:deploys-on-fridays", "own")
    ]
    assert "Deploys on Fridays" in pad
    assert "ARM" not in pad
    assert [item["key"] for item in coders] == [TEA_KEY]


def test_the_scratchpad_keeps_unpromoted_notes_of_the_last_7_days(
    call_tool, client, alice, alice_agent, alice_token
):
    agent = Actor.for_agent(alice_agent)
    for key, pinned in (("fact:old", False), ("fact:old-pinned", True), ("fact:new", False)):
        memory_upsert(
            user=alice, key=key, value=key, actor=agent, pinned=pinned, owner_agent=alice_agent
        )
    old = timezone.now() - timedelta(days=8)
    Memory.objects.filter(key__startswith="fact:old").update(updated_at=old)
    Memory.objects.filter(key="fact:new").update(updated_at=timezone.now() - timedelta(days=6))

    recent = call_tool(alice_token, "memory_list_recent", {}).json()["results"]

    assert [item["key"] for item in recent] == ["fact:old-pinned", "fact:new"]


def test_a_system_token_writes_no_own_notes(call_tool, alice):
    system = system_token_create(label="sync").raw

    for tool, body in (
        ("memory_store", TEA),
        ("get_memory", {"key": TEA_KEY, "own": True}),
        ("memory_list_recent", {}),
    ):
        response = call_tool(system, tool, body)
        assert response.status_code == 403
        assert "agent token" in response.json()["error"]["message"]
    assert not Memory.objects.exists()
