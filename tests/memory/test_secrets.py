"""Secrets never become memories: an agent's write that looks like a credential is refused
with 422 secret_refused naming the kind, and nothing is written (no row, no history, no
event, no proposal); the user may still store one, and the write says what it looks like."""

from __future__ import annotations

import pytest

from activity.actors import Actor
from activity.models import ActivityEvent
from lib.credentials import find_credential
from lib.errors import SecretRefused
from memory.entries import memory_store
from memory.models import Memory, MemoryHistory, MemoryProposal
from memory.services import memory_update, memory_upsert
from profiles.services import profile_update
from tests.lib.test_credentials import NEGATIVES, POSITIVES

pytestmark = pytest.mark.django_db

# One example of each kind, the first of the table's.
ONE_OF_EACH = list(dict(reversed(POSITIVES)).items())[::-1]
LABELS = {kind: find_credential(text).label for kind, text in ONE_OF_EACH}


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


def state(user) -> tuple:
    """Everything an agent's write could leave behind."""
    return (
        list(Memory.objects.filter(user=user).values_list("key", "value", "tags")),
        MemoryHistory.objects.filter(user=user).count(),
        MemoryProposal.objects.filter(user=user).count(),
        ActivityEvent.objects.filter(user=user).count(),
    )


def assert_refused(response, kind: str, field: str = "value", where: str = "as memories"):
    assert response.status_code == 422, response.content
    assert error(response) == {
        "code": "secret_refused",
        "message": f"This looks like {LABELS[kind]}; Mnemo does not store credentials {where}.",
        "field": field,
    }


@pytest.mark.parametrize(("kind", "text"), ONE_OF_EACH)
def test_create_memory_refuses_each_kind(call_tool, alice, alice_token, kind, text):
    memory_upsert(user=alice, key="fact:tea", value="green tea", actor=Actor.for_user(alice))
    before = state(alice)

    response = call_tool(alice_token, "create_memory", {"key": "fact:note", "value": text})

    assert_refused(response, kind)
    assert state(alice) == before


@pytest.mark.parametrize(("kind", "text"), ONE_OF_EACH)
def test_memory_store_refuses_each_kind(call_tool, alice, alice_token, kind, text):
    response = call_tool(alice_token, "memory_store", {"content": text, "category": "fact"})

    assert_refused(response, kind)
    assert state(alice) == ([], 0, 0, 0)


@pytest.mark.parametrize(("kind", "text"), ONE_OF_EACH)
def test_update_memory_refuses_each_kind(call_tool, alice, alice_agent, alice_token, kind, text):
    memory_upsert(user=alice, key="fact:note", value="a note", actor=Actor.for_agent(alice_agent))
    before = state(alice)

    response = call_tool(alice_token, "update_memory", {"key": "fact:note", "value": text})

    assert_refused(response, kind)
    assert state(alice) == before
    assert Memory.objects.get(user=alice, key="fact:note").value == "a note"


def test_a_change_of_what_the_user_stated_is_refused_not_proposed(call_tool, alice, alice_token):
    """The review inbox would keep the secret as a proposal: it is refused before."""
    memory_upsert(user=alice, key="fact:wifi", value="guest network", actor=Actor.for_user(alice))
    before = state(alice)

    response = call_tool(
        alice_token,
        "update_memory",
        {"key": "fact:wifi", "value": "guest network, password: GuestNet2024"},
    )

    assert_refused(response, "password")
    assert state(alice) == before


def test_while_the_user_reviews_new_memories_nothing_waits_either(call_tool, alice, alice_token):
    profile_update(user=alice, review_agent_memories=True)
    before = state(alice)

    created = call_tool(
        alice_token, "create_memory", {"key": "fact:card", "value": "Card 4111 1111 1111 1111"}
    )
    stored = call_tool(
        alice_token, "memory_store", {"content": "Card 4111 1111 1111 1111", "category": "fact"}
    )

    assert_refused(created, "card_number")
    assert_refused(stored, "card_number")
    assert state(alice) == before


CARD = "4111 1111 1111 1111"


@pytest.mark.parametrize(
    ("tool", "body", "kind", "field"),
    [
        ("create_memory", {"key": "fact:a", "value": "ok", "tags": [CARD]}, "card_number", "tags"),
        (
            "memory_store",
            {"content": "ok", "category": "fact", "tags": ["x", CARD.replace(" ", "-")]},
            "card_number",
            "tags",
        ),
        ("create_memory", {"key": "fact:4111-1111-1111-1111", "value": "a"}, "card_number", "key"),
        (
            "create_memory",
            {"key": "fact:a", "value": "ok", "reason": "password: hunter2"},
            "password",
            "reason",
        ),
        ("delete_memory", {"key": "fact:kept", "reason": "pwd=Tr0ub4dor&3"}, "password", "reason"),
    ],
)
def test_tags_keys_and_reasons_are_checked_too(
    call_tool, alice, alice_token, tool, body, kind, field
):
    memory_upsert(user=alice, key="fact:kept", value="kept", actor=Actor.for_user(alice))
    before = state(alice)

    response = call_tool(alice_token, tool, body)

    assert_refused(response, kind, field)
    assert state(alice) == before


def test_two_tags_never_make_one_card_number(call_tool, alice, alice_token):
    response = call_tool(
        alice_token,
        "create_memory",
        {"key": "fact:a", "value": "ok", "tags": ["4111", "1111", "1111", "1111"]},
    )

    assert response.status_code == 201
    assert Memory.objects.get(user=alice, key="fact:a").tags == ["1111", "4111"]


@pytest.mark.parametrize("text", [text for text in NEGATIVES if len(text) <= 2000])
def test_ordinary_memories_are_stored(call_tool, alice, alice_token, text):
    response = call_tool(alice_token, "memory_store", {"content": text, "category": "fact"})

    assert response.status_code == 201, response.content
    assert Memory.objects.get(user=alice).value == text.strip()


def test_the_system_is_refused_too(alice):
    with pytest.raises(SecretRefused) as refused:
        memory_store(
            user=alice,
            actor=Actor.system(),
            kind="fact",
            text="ssh key: -----BEGIN OPENSSH PRIVATE KEY-----",
        )

    assert (refused.value.kind, refused.value.field) == ("private_key", "value")
    assert state(alice) == ([], 0, 0, 0)


def test_the_user_may_store_one_and_the_write_says_what_it_looks_like(alice):
    user = Actor.for_user(alice)
    key = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"

    written = memory_upsert(user=alice, key="fact:stripe", value=f"Stripe key {key}", actor=user)
    plain = memory_upsert(user=alice, key="fact:tea", value="green tea", actor=user)
    tagged = memory_update(user=alice, key="fact:tea", tags=["4111 1111 1111 1111"], actor=user)

    assert Memory.objects.get(user=alice, key="fact:stripe").value == f"Stripe key {key}"
    assert (written.credential.kind, written.credential.label) == (
        "stripe_secret_key",
        "a Stripe secret key",
    )
    assert plain.credential is None
    assert tagged.credential.kind == "card_number"
