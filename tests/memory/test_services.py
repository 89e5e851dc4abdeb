import pytest

from activity.actors import Actor
from activity.models import ActivityEvent
from lib.errors import InvalidInput, MemoryPaused, NotFound
from memory.models import Memory, MemoryHistory
from memory.services import (
    memory_delete,
    memory_restore,
    memory_update,
    memory_upsert,
)
from profiles.services import profile_update


def _events(user):
    return list(
        ActivityEvent.objects.filter(user=user)
        .order_by("id")
        .values_list("event_type", "actor_type", "payload")
    )


def test_upsert_creates_row_history_and_event(alice):
    write = memory_upsert(
        user=alice,
        key="fact:likes-tea",
        value="  Drinks green tea  ",
        actor=Actor.for_user(alice),
        tags=["Drinks", "food"],
    )

    memory = Memory.objects.get(user=alice, key="fact:likes-tea")
    assert write.created is True
    assert (memory.value, memory.source, memory.confidence, memory.tags, memory.pinned) == (
        "Drinks green tea",
        "user_stated",
        1.0,
        ["drinks", "food"],
        False,
    )
    history = MemoryHistory.objects.get(user=alice)
    assert (history.action, history.before, history.source, history.actor_type) == (
        "create",
        None,
        "user_stated",
        "user",
    )
    assert history.after == {
        "value": "Drinks green tea",
        "source": "user_stated",
        "confidence": 1.0,
        "tags": ["drinks", "food"],
        "pinned": False,
        "occurred_at": memory.occurred_at.isoformat(),  # written without one: now, in UTC
        "session": "",
    }
    assert history.actor_user == alice
    assert history.memory == memory
    assert _events(alice) == [
        (
            "memory_written",
            "user",
            {
                "key": "fact:likes-tea",
                "action": "create",
                "source": "user_stated",
                "history_id": history.pk,
            },
        ),
    ]


def test_upsert_on_existing_key_replaces_value_last_write_wins(alice, alice_agent):
    # An agent's note: agents replace each other's notes (what the user stated waits for
    # review, tests/memory/test_review.py).
    memory_upsert(
        user=alice,
        key="role",
        value="Engineer",
        actor=Actor.for_agent(alice_agent),
        tags=["work"],
        pinned=True,
    )

    write = memory_upsert(
        user=alice,
        key="role",
        value="Head of Growth",
        actor=Actor.for_agent(alice_agent),
        confidence=0.7,
    )

    assert write.created is False
    memory = Memory.objects.get(user=alice, key="role")
    assert (memory.value, memory.source, memory.confidence) == (
        "Head of Growth",
        "tp_extracted",
        0.7,
    )
    assert (memory.tags, memory.pinned) == (["work"], True)  # not given: kept
    latest = MemoryHistory.objects.filter(user=alice).first()
    assert (latest.action, latest.before["value"], latest.after["value"]) == (
        "update",
        "Engineer",
        "Head of Growth",
    )
    assert (latest.actor_type, latest.actor_agent) == ("agent", alice_agent)
    assert [e[2]["action"] for e in _events(alice)] == ["create", "update"]


def test_agent_write_defaults_to_tp_extracted_with_confidence_08(alice, alice_agent):
    memory_upsert(user=alice, key="fact:dog", value="Has a dog", actor=Actor.for_agent(alice_agent))

    memory = Memory.objects.get(user=alice, key="fact:dog")
    assert (memory.source, memory.confidence) == ("tp_extracted", 0.8)


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"key": "nickname"}, "key", "Unknown key 'nickname'"),
        ({"value": "   "}, "value", "Value is empty."),
        (
            {"value": "x" * 2001},
            "value",
            "Value is 2001 characters long; the longest allowed is 2000.",
        ),
        ({"value": 42}, "value", "Value must be text."),
        ({"confidence": 0.5}, "confidence", "A 'user_stated' memory has confidence exactly 1.0."),
        (
            {"source": "tp_extracted", "confidence": 1.0},
            "confidence",
            "Confidence for a 'tp_extracted' memory must be greater than 0 and less than 1.",
        ),
        ({"source": "document", "confidence": 0}, "confidence", "Confidence for a 'document'"),
        ({"source": "rumour"}, "source", "Unknown source 'rumour'"),
        (
            {"key": "timezone", "value": "Mars/Olympus"},
            "value",
            "'Mars/Olympus' is not an IANA time zone",
        ),
        ({"tags": [f"t{n}" for n in range(30)]}, "tags", "At most"),
        ({"tags": "work"}, "tags", "Tags must be a list"),
    ],
)
def test_invalid_writes_are_refused_and_change_nothing(alice, kwargs, field, message):
    call = {"user": alice, "key": "fact:x", "value": "v", "actor": Actor.for_user(alice), **kwargs}

    with pytest.raises(InvalidInput) as raised:
        memory_upsert(**call)

    assert raised.value.field == field
    assert raised.value.message.startswith(message)
    assert not Memory.objects.exists()
    assert not MemoryHistory.objects.exists()
    assert not ActivityEvent.objects.exists()


def test_timezone_is_stored_by_its_canonical_name(alice):
    write = memory_upsert(
        user=alice, key="timezone", value="europe/berlin", actor=Actor.for_user(alice)
    )
    assert write.memory.value == "Europe/Berlin"
    assert MemoryHistory.objects.get(memory=write.memory).after["value"] == "Europe/Berlin"


def test_an_emoji_only_tag_is_left_out_and_the_entry_kept(alice):
    write = memory_upsert(
        user=alice,
        key="fact:dinner",
        value="Sushi on Fridays",
        actor=Actor.for_user(alice),
        tags=["🍣", "Friday Dinner"],
    )
    assert write.memory.tags == ["friday-dinner"]


def test_timezone_accepts_an_iana_zone(alice):
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_user(alice))

    assert Memory.objects.get(user=alice, key="timezone").value == "Asia/Singapore"


def test_agent_cannot_claim_user_stated(alice, alice_agent):
    with pytest.raises(InvalidInput, match="Agents cannot write 'user_stated'"):
        memory_upsert(
            user=alice,
            key="fact:x",
            value="v",
            source="user_stated",
            actor=Actor.for_agent(alice_agent),
        )
    assert not Memory.objects.exists()


def test_paused_memory_refuses_agents_but_not_the_user(alice, alice_agent):
    memory_upsert(user=alice, key="fact:x", value="before", actor=Actor.for_user(alice))
    profile_update(user=alice, memory_paused=True)
    agent = Actor.for_agent(alice_agent)

    with pytest.raises(MemoryPaused):
        memory_upsert(user=alice, key="fact:x", value="agent", actor=agent)
    with pytest.raises(MemoryPaused):
        memory_delete(user=alice, key="fact:x", actor=agent)
    assert Memory.objects.get(user=alice, key="fact:x").value == "before"
    assert MemoryHistory.objects.filter(user=alice).count() == 1

    memory_upsert(user=alice, key="fact:x", value="user", actor=Actor.for_user(alice))
    assert Memory.objects.get(user=alice, key="fact:x").value == "user"


def test_update_changes_only_given_fields(alice, alice_agent):
    memory_upsert(
        user=alice, key="fact:x", value="v1", confidence=0.6, actor=Actor.for_agent(alice_agent)
    )

    memory_update(
        user=alice, key="fact:x", pinned=True, tags=["a"], actor=Actor.for_agent(alice_agent)
    )

    memory = Memory.objects.get(user=alice, key="fact:x")
    assert (memory.value, memory.source, memory.confidence, memory.pinned, memory.tags) == (
        "v1",
        "tp_extracted",
        0.6,
        True,
        ["a"],
    )
    latest = MemoryHistory.objects.filter(user=alice).first()
    assert (latest.action, latest.before["pinned"], latest.after["pinned"]) == (
        "update",
        False,
        True,
    )


def test_update_value_by_agent_records_agent_provenance(alice, alice_agent):
    memory_upsert(user=alice, key="fact:x", value="v1", actor=Actor.for_agent(alice_agent))

    memory_update(
        user=alice, key="fact:x", value="v2", confidence=0.6, actor=Actor.for_agent(alice_agent)
    )

    memory = Memory.objects.get(user=alice, key="fact:x")
    assert (memory.value, memory.source, memory.confidence) == ("v2", "tp_extracted", 0.6)


def test_update_missing_key_is_not_found_and_creates_nothing(alice):
    with pytest.raises(NotFound, match="No memory with key 'fact:nope'"):
        memory_update(user=alice, key="fact:nope", value="v", actor=Actor.for_user(alice))

    assert not Memory.objects.exists()
    assert not MemoryHistory.objects.exists()


def test_update_with_nothing_to_change_is_refused(alice):
    memory_upsert(user=alice, key="fact:x", value="v", actor=Actor.for_user(alice))

    with pytest.raises(InvalidInput, match="Nothing to update"):
        memory_update(user=alice, key="fact:x", actor=Actor.for_user(alice))


def test_delete_removes_row_and_keeps_its_state_in_history(alice):
    memory_upsert(user=alice, key="fact:x", value="v", actor=Actor.for_user(alice), pinned=True)

    history = memory_delete(user=alice, key="fact:x", actor=Actor.for_user(alice))

    assert not Memory.objects.filter(user=alice).exists()
    assert (history.action, history.after, history.before["value"], history.before["pinned"]) == (
        "delete",
        None,
        "v",
        True,
    )
    assert _events(alice)[-1] == (
        "memory_deleted",
        "user",
        {"key": "fact:x", "history_id": history.pk},
    )


def test_delete_missing_key_is_not_found(alice):
    with pytest.raises(NotFound):
        memory_delete(user=alice, key="fact:x", actor=Actor.for_user(alice))
    assert not ActivityEvent.objects.exists()


def test_restore_an_earlier_value(alice, alice_agent):
    first = memory_upsert(user=alice, key="fact:x", value="original", actor=Actor.for_user(alice))
    memory_delete(user=alice, key="fact:x", actor=Actor.for_user(alice))
    memory_upsert(user=alice, key="fact:x", value="agent guess", actor=Actor.for_agent(alice_agent))

    write = memory_restore(user=alice, history_id=first.history.pk, actor=Actor.for_user(alice))

    memory = Memory.objects.get(user=alice, key="fact:x")
    assert (memory.value, memory.source, memory.confidence) == ("original", "user_stated", 1.0)
    assert (write.history.action, write.history.before["value"], write.history.after["value"]) == (
        "restore",
        "agent guess",
        "original",
    )
    assert [e[2].get("action") for e in _events(alice)] == [
        "create",
        None,  # the deletion
        "create",
        "restore",
    ]


def test_restore_a_deleted_memory(alice):
    memory_upsert(
        user=alice, key="fact:x", value="keep me", actor=Actor.for_user(alice), tags=["t"]
    )
    deletion = memory_delete(user=alice, key="fact:x", actor=Actor.for_user(alice))

    write = memory_restore(user=alice, history_id=deletion.pk, actor=Actor.for_user(alice))

    assert write.created is True
    memory = Memory.objects.get(user=alice, key="fact:x")
    assert (memory.value, memory.tags) == ("keep me", ["t"])
    assert write.history.action == "restore"
    assert write.history.before is None


def test_restore_of_another_users_history_is_not_found(alice, bob):
    write = memory_upsert(user=alice, key="fact:x", value="secret", actor=Actor.for_user(alice))

    with pytest.raises(NotFound):
        memory_restore(user=bob, history_id=write.history.pk, actor=Actor.for_user(bob))

    assert not Memory.objects.filter(user=bob).exists()
    assert MemoryHistory.objects.count() == 1


def test_users_are_isolated(alice, bob):
    memory_upsert(user=alice, key="fact:x", value="alice's", actor=Actor.for_user(alice))
    memory_upsert(user=bob, key="fact:x", value="bob's", actor=Actor.for_user(bob))

    memory_delete(user=bob, key="fact:x", actor=Actor.for_user(bob))

    assert Memory.objects.get(user=alice, key="fact:x").value == "alice's"
    assert not Memory.objects.filter(user=bob).exists()
