"""The agent write path's budget and guarantees (issue 12, "Faster writes").

A write is the token lookup, the row lock (which reads the pause and the review rule too)
and one statement that saves the row, its history row and its activity event (issue 29:
built from the models' fields with public Django API, the rows read back through
`Model.from_db`; three ORM saves cost a fifth more CPU a write, bench/README.md);
an agent's new entry is looked at by the near-duplicate check between the lock and the saves
(one statement, issue 14; an embedding too only when the user has other entries of its
kind). These tests fail if a round trip comes back, or if the pause is read too early.
"""

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from activity.actors import Actor
from activity.models import ActivityEvent
from lib.errors import MemoryPaused, NotFound
from memory import review_gate, services
from memory.api_fields import MemorySerializer, memory_body
from memory.models import HistoryAction, Memory, MemoryHistory, MemoryProposal
from memory.uses import memory_record_access
from memory.working_memory import build_working_memory
from memory.working_memory_api import WorkingMemorySerializer, working_memory_body
from profiles.services import profile_update
from tests.factories import MemoryFactory

pytestmark = pytest.mark.django_db

SAVEPOINTS = ("SAVEPOINT", "RELEASE SAVEPOINT")  # what atomic() sends inside the test's transaction


def _statements(queries):
    """The SQL sent, without the savepoints a test's outer transaction turns BEGIN/COMMIT into."""
    return [query["sql"] for query in queries if not query["sql"].startswith(SAVEPOINTS)]


def _warm(call_tool, token):
    # The first request of a token records its last use (once a minute): not a write's cost.
    call_tool(token, "get_memory", {"key": "name"})


def test_an_agent_write_of_a_new_entry_is_four_statements(call_tool, alice, alice_token):
    _warm(call_tool, alice_token)

    with CaptureQueriesContext(connection) as queries:
        response = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "green"})

    assert response.status_code == 201
    statements = _statements(queries.captured_queries)
    assert len(statements) == 4, statements
    token_lookup, lock, duplicate_check, write = statements
    assert "profiles_agenttoken" in token_lookup
    assert "profiles_profile" in token_lookup
    _assert_row_lock(lock)
    # The lock on the user's new entries of the kind, taken in the same statement, before
    # the check: two agents adding the same note cannot both find nothing near (issue 26).
    assert "pg_advisory_xact_lock" in lock
    assert "has_key" in duplicate_check
    _assert_write(write, new=True)
    # One transaction: one savepoint pair around the lock, the check and the write.
    assert len(queries.captured_queries) == 6


def test_a_new_entry_beside_a_near_agent_note_costs_no_more_statements(
    call_tool, alice, alice_token, monkeypatch
):
    """Near an agent's note and adding to it, a new entry is stored as its own row
    (memory/review_gate.py _near_entry): the check's own reading decides that, with no
    second look at the near row and no lock on it."""
    MemoryFactory(
        user=alice,
        key="fact:weekly-report",
        value="Prefers the weekly report summary as bullets on Monday.",
        source="tp_extracted",
        confidence=0.8,
    )
    _warm(call_tool, alice_token)
    found = []
    check = review_gate.find_near_duplicate
    monkeypatch.setattr(
        review_gate,
        "find_near_duplicate",
        lambda **kwargs: found.append(check(**kwargs)) or found[-1],
    )

    with CaptureQueriesContext(connection) as queries:
        response = call_tool(
            alice_token,
            "create_memory",
            {
                "key": "fact:weekly-report-format",
                "value": "Prefers the weekly report summary as bullets on Monday morning.",
            },
        )

    assert response.status_code == 201, response.content
    statements = _statements(queries.captured_queries)
    assert len(statements) == 4, statements
    assert "has_key" in statements[2]
    (match,) = found  # the check found the note near, and the new text adds to it
    assert (match.key, match.adds_something) == ("fact:weekly-report", True)
    assert Memory.objects.filter(user=alice, key__startswith="fact:weekly-report").count() == 2


def test_an_agent_write_of_an_existing_key_is_three_statements(call_tool, alice, alice_token):
    MemoryFactory(
        user=alice, key="fact:tea", value="black tea", source="tp_extracted", confidence=0.8
    )
    _warm(call_tool, alice_token)

    with CaptureQueriesContext(connection) as queries:
        response = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "green"})

    assert response.status_code == 200
    statements = _statements(queries.captured_queries)
    assert len(statements) == 3, statements
    token_lookup, lock, write = statements  # a write to the key: nothing to compare it with
    assert "profiles_agenttoken" in token_lookup
    _assert_row_lock(lock)
    _assert_write(write, new=False)
    assert len(queries.captured_queries) == 5


def _assert_row_lock(lock):
    assert "FOR UPDATE" in lock
    assert "memory_paused" in lock
    assert "review_agent_memories" in lock


def _assert_write(write, *, new):
    row = 'WITH memory AS (INSERT INTO "user_context"' if new else "WITH memory AS (UPDATE"
    assert write.startswith(row), write
    assert 'INSERT INTO "user_context_history"' in write
    assert 'INSERT INTO "activity_log"' in write


def test_the_working_memory_render_is_two_statements(client, alice, alice_token):
    MemoryFactory(user=alice, key="name", value="Alice")
    client.get("/api/v1/working-memory", headers={"Authorization": f"Bearer {alice_token}"})

    with CaptureQueriesContext(connection) as queries:
        response = client.get(
            "/api/v1/working-memory", headers={"Authorization": f"Bearer {alice_token}"}
        )

    assert response.status_code == 200
    assert response.content == b"### About you\nAlice\n"
    assert len(queries.captured_queries) == 2  # the token lookup (with the budget) and the rows


def test_a_write_returns_exactly_what_it_stored(alice, alice_agent):
    actor = Actor.for_agent(alice_agent)
    first = services.memory_upsert(
        user=alice, key="fact:tea", value="green tea", actor=actor, tags=["Food"]
    )
    second = services.memory_upsert(
        user=alice, key="fact:tea", value="black tea", actor=actor, confidence=0.6, pinned=True
    )

    stored = Memory.objects.get(user=alice, key="fact:tea")
    for write in (first, second):
        assert write.memory.pk == stored.pk
        assert write.history == MemoryHistory.objects.get(pk=write.history.pk)
        assert write.history.memory_id == stored.pk
        # Read back as saved rows, as a queryset's are: saving them again is an UPDATE.
        assert not write.memory._state.adding
        assert not write.history._state.adding
    assert (second.memory.created_at, second.memory.updated_at) == (
        stored.created_at,
        stored.updated_at,
    )
    assert first.memory.created_at == stored.created_at < stored.updated_at
    assert memory_body(second.memory) == memory_body(stored)
    assert [
        (h.action, h.before and h.before["value"], h.after["value"], h.actor_agent_id)
        for h in MemoryHistory.objects.filter(user=alice).order_by("id")
    ] == [
        (HistoryAction.CREATE, None, "green tea", alice_agent.pk),
        (HistoryAction.UPDATE, "green tea", "black tea", alice_agent.pk),
    ]
    events = ActivityEvent.objects.filter(user=alice).order_by("id")
    assert [(e.event_type, e.actor_agent_id, e.payload) for e in events] == [
        (
            "memory_written",
            alice_agent.pk,
            {
                "key": "fact:tea",
                "action": "create",
                "source": "tp_extracted",
                "history_id": first.history.pk,
            },
        ),
        (
            "memory_written",
            alice_agent.pk,
            {
                "key": "fact:tea",
                "action": "update",
                "source": "tp_extracted",
                "history_id": second.history.pk,
            },
        ),
    ]
    # A new value drops the stale vector; the same value keeps it.
    Memory.objects.filter(pk=stored.pk).update(embedding=[1.0, 0.0], embedding_model="m")
    services.memory_update(user=alice, key="fact:tea", actor=actor, tags=["drinks"])
    kept = Memory.objects.defer(None).get(pk=stored.pk)
    assert (kept.embedding_model, list(kept.embedding)) == ("m", [1.0, 0.0])
    services.memory_update(user=alice, key="fact:tea", actor=actor, value="oolong")
    dropped = Memory.objects.defer(None).get(pk=stored.pk)
    assert (dropped.embedding, dropped.embedding_model, dropped.embedded_hash) == (None, "", "")


def test_a_pause_that_commits_after_authentication_still_stops_the_write(
    call_tool, alice, alice_token, monkeypatch
):
    # The token lookup reads the profile too (for the render budget); a write must not
    # trust that copy. Here the pause lands between authentication and the write.
    upsert = services.memory_upsert

    def pause_then_upsert(**kwargs):
        profile_update(user=alice, memory_paused=True)
        return upsert(**kwargs)

    monkeypatch.setattr(services, "memory_upsert", pause_then_upsert)

    response = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "green"})

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "memory_paused"
    assert not Memory.objects.filter(user=alice).exists()
    assert not MemoryHistory.objects.exists()
    assert not ActivityEvent.objects.exists()


@pytest.mark.parametrize(
    ("write", "for_the_user"),
    [
        (
            lambda user, actor: services.memory_upsert(
                user=user, key="fact:tea", value="green", actor=actor
            ),
            "written",
        ),
        (
            lambda user, actor: services.memory_update(
                user=user, key="fact:tea", value="green", actor=actor
            ),
            "written",
        ),
        (
            lambda user, actor: services.memory_update(
                user=user, key="fact:missing", value="green", actor=actor
            ),
            NotFound,
        ),
        (
            lambda user, actor: services.memory_delete(user=user, key="fact:tea", actor=actor),
            "written",
        ),
    ],
    ids=["upsert", "update", "update of a missing key", "delete"],
)
def test_a_pause_stops_every_agent_write_and_changes_nothing(
    alice, alice_agent, write, for_the_user
):

    MemoryFactory(user=alice, key="fact:tea", value="black tea")
    profile_update(user=alice, memory_paused=True)

    with pytest.raises(MemoryPaused):
        write(alice, Actor.for_agent(alice_agent))

    assert list(Memory.objects.filter(user=alice).values_list("key", "value")) == [
        ("fact:tea", "black tea")
    ]
    assert not MemoryHistory.objects.exists()
    assert not ActivityEvent.objects.exists()
    # The user's own change goes past the pause (to the missing key's 404 for that one).
    if for_the_user is NotFound:
        with pytest.raises(NotFound):
            write(alice, Actor.for_user(alice))
    else:
        write(alice, Actor.for_user(alice))
        assert MemoryHistory.objects.filter(actor_type="user").count() == 1


def test_only_a_race_for_the_same_new_key_is_retried(alice, monkeypatch):
    # A write that breaks another constraint is an error, not a retry.
    calls = []
    write_once = services._write_once

    def counted(**write):
        calls.append(write["key"])
        return write_once(**write)

    monkeypatch.setattr(services, "_write_once", counted)
    with pytest.raises(IntegrityError, match="user_context_confidence_for_source"):
        services._write(
            user=alice,
            key="fact:tea",
            fields={"value": "green", "source": "user_stated", "confidence": 0.5},
            actor=Actor.for_user(alice),
            action=HistoryAction.UPDATE,
        )
    assert calls == ["fact:tea"]
    assert not Memory.objects.exists()


def test_the_response_bodies_are_the_serializers_to_the_byte(alice, alice_agent):
    actor = Actor.for_agent(alice_agent)
    services.memory_upsert(user=alice, key="name", value="Alice", actor=actor)
    services.memory_upsert(
        user=alice, key="fact:tea", value="green tea", actor=actor, tags=["b", "a"]
    )
    memory_record_access(user=alice, key="fact:tea")
    rows = list(Memory.objects.filter(user=alice).order_by("key"))
    assert any(row.last_accessed_at for row in rows)
    assert any(not r.last_accessed_at for r in rows)

    for row in rows:
        assert memory_body(row) == MemorySerializer(row).data
    block = build_working_memory(user=alice, budget=500)
    assert working_memory_body(block) == WorkingMemorySerializer(block).data


def test_a_write_that_changes_nothing_records_nothing(alice, alice_agent):
    agent = Actor.for_agent(alice_agent)
    services.memory_upsert(user=alice, key="fact:tea", value="Likes green tea", actor=agent)
    services.memory_update(user=alice, key="fact:tea", pinned=True, actor=agent)
    pinned = Memory.objects.get(user=alice, key="fact:tea")
    stated = services.memory_upsert(
        user=alice, key="fact:home", value="Lives in Lisbon", actor=Actor.for_user(alice)
    ).memory
    rows, events = MemoryHistory.objects.count(), ActivityEvent.objects.count()

    again = services.memory_update(user=alice, key="fact:tea", pinned=True, actor=agent)
    # An agent saying what the user said, as the user said it: nothing for the Inbox either.
    same = services.memory_update(
        user=alice, key="fact:home", occurred_at=stated.occurred_at.isoformat(), actor=agent
    )

    assert (again.status, again.history, same.status) == ("unchanged", None, "unchanged")
    assert Memory.objects.get(pk=pinned.pk).updated_at == pinned.updated_at
    assert (MemoryHistory.objects.count(), ActivityEvent.objects.count()) == (rows, events)
    assert not MemoryProposal.objects.filter(user=alice).exists()
