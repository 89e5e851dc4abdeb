"""Each invariant is held by the database itself: a violating insert fails there."""

import pytest
from django.db import DataError, IntegrityError, connection, transaction

from activity.models import ActivityEvent
from context.models import Document
from memory.models import LookAlikeDismissal, Memory, MemoryHistory
from profiles.models import Agent, AgentToken, Profile
from work.models import WorkItem


def _fails(create) -> None:
    # DataError: a value too long for its column, refused before any check runs.
    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        create()


def _memory(user, **overrides):
    fields = {
        "user": user,
        "key": "fact:x",
        "value": "v",
        "source": "user_stated",
        "confidence": 1.0,
    }
    return lambda: Memory.objects.create(**{**fields, **overrides})


def test_memory_key_is_unique_per_user(alice, bob):
    _memory(alice)()
    _memory(bob)()  # another user may use the same key

    _fails(_memory(alice, value="again"))
    assert Memory.objects.filter(user=alice).count() == 1


@pytest.mark.parametrize("key", ["nickname", "fact:", "fact:Bad", "tone_", "note:x", ""])
def test_memory_key_grammar_is_checked_by_the_database(alice, key):
    _fails(_memory(alice, key=key))


@pytest.mark.parametrize(
    ("source", "confidence"),
    [
        ("user_stated", 0.9),
        ("tp_extracted", 1.0),
        ("tp_extracted", 0.0),
        ("document", 1.5),
        ("document", -0.1),
        ("rumour", 0.5),
    ],
)
def test_memory_source_and_confidence_rules(alice, source, confidence):
    _fails(_memory(alice, source=source, confidence=confidence))


@pytest.mark.parametrize("value", ["", "x" * 2001])
def test_memory_value_length(alice, value):
    _fails(_memory(alice, value=value))


def test_memory_valid_rows_are_accepted(alice):
    _memory(alice, key="fact:a", value="x" * 2000)()
    _memory(alice, key="fact:b", source="tp_extracted", confidence=0.99)()
    _memory(alice, key="fact:c", source="document", confidence=0.01)()

    assert Memory.objects.filter(user=alice).count() == 3


@pytest.mark.parametrize("budget", [499, 8001, 0])
def test_profile_token_budget_range(alice, budget):
    _fails(lambda: Profile.objects.create(user=alice, token_budget=budget))


def test_profile_is_one_per_user(alice):
    Profile.objects.create(user=alice)

    _fails(lambda: Profile.objects.create(user=alice))


@pytest.mark.parametrize("name", ["Bob", "-bob", "bob smith", "a" * 65, "", "bøb"])
def test_agent_name_format(alice, name):
    _fails(lambda: Agent.objects.create(user=alice, name=name))


def test_agent_name_unique_per_user(alice, bob):
    Agent.objects.create(user=alice, name="scout")
    Agent.objects.create(user=bob, name="scout")

    _fails(lambda: Agent.objects.create(user=alice, name="scout"))


def test_token_hash_must_be_sha256_hex_and_unique(alice_agent):
    _fails(lambda: AgentToken.objects.create(agent=alice_agent, prefix="p", token_hash="secret"))
    AgentToken.objects.create(agent=alice_agent, prefix="p", token_hash="a" * 64)
    _fails(lambda: AgentToken.objects.create(agent=alice_agent, prefix="q", token_hash="a" * 64))


def test_history_states_must_match_action(alice):
    def history(**fields):
        base = {"user": alice, "key": "fact:x", "source": "user_stated", "actor_type": "system"}
        return lambda: MemoryHistory.objects.create(**{**base, **fields})

    _fails(history(action="create", before={"value": "a"}, after={"value": "b"}))
    _fails(history(action="delete", before=None, after={"value": "b"}))
    _fails(history(action="update", before={"value": "a"}, after=None))
    _fails(history(action="explode", after={"value": "b"}))
    # A merge keeps the memory's state and, in `after`, the note merged into it.
    _fails(history(action="merge", before=None, after={"value": "a", "merged": {"value": "b"}}))
    _fails(history(action="merge", before={"value": "a"}, after={"value": "a"}))
    history(action="merge", before={"value": "a"}, after={"value": "a", "merged": {"value": "b"}})()


def test_a_look_alike_dismissal_names_a_group(alice):
    _fails(lambda: LookAlikeDismissal.objects.create(user=alice, memory_ids=[1]))
    LookAlikeDismissal.objects.create(user=alice, memory_ids=[1, 2])


def test_actor_columns_must_agree_with_actor_type(alice, alice_agent):
    event = {"user": alice, "event_type": "memory_written"}
    _fails(lambda: ActivityEvent.objects.create(**event, actor_type="system", actor_user=alice))
    _fails(
        lambda: ActivityEvent.objects.create(**event, actor_type="user", actor_agent=alice_agent)
    )
    _fails(lambda: ActivityEvent.objects.create(**event, actor_type="robot"))
    _fails(
        lambda: ActivityEvent.objects.create(user=alice, event_type="nonsense", actor_type="system")
    )


@pytest.mark.parametrize(("field", "value"), [("kind", "poem"), ("status", "lost"), ("title", "")])
def test_work_item_choices_and_title(alice, field, value):
    fields = {"user": alice, "title": "T", field: value}
    _fails(lambda: WorkItem.objects.create(**fields))


def test_document_path_unique_per_scope_including_global(alice, alice_agent):
    Document.objects.create(user=alice, path="MEMORY.md")
    Document.objects.create(user=alice, agent=alice_agent, path="MEMORY.md")
    Document.objects.create(user=None, path="MEMORY.md")

    _fails(lambda: Document.objects.create(user=alice, path="MEMORY.md"))
    _fails(lambda: Document.objects.create(user=alice, agent=alice_agent, path="MEMORY.md"))
    _fails(lambda: Document.objects.create(user=None, path="MEMORY.md"))


@pytest.mark.parametrize("path", ["", "/etc/passwd", "a/../b", "..", "a//b", "a\\b", "./a", "a/"])
def test_document_path_rules_in_the_database(alice, path):
    _fails(lambda: Document.objects.create(user=alice, path=path))


def test_document_agent_needs_a_user(alice_agent):
    _fails(lambda: Document.objects.create(user=None, agent=alice_agent, path="x.md"))


def test_constraints_exist_in_the_schema(db):
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "user_context")
    assert constraints["user_context_unique_key"]["unique"] is True
    assert constraints["user_context_confidence_for_source"]["check"] is True
