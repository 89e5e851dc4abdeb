"""An agent's own notes (issue 27, item 1), the write side: every write addresses a row by
(user, audience, key); an agent writes its own notes or the user's memory, never another
agent's notes; a note never waits for review; history, activity and restore carry the
audience; the user moves a note into their memory (memory_share_note)."""

import pytest

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from lib.errors import Conflict, Forbidden, NotFound
from memory.entries import memory_store
from memory.models import HistoryAction, Memory, MemoryHistory, MemoryProposal, Source
from memory.notes import memory_share_note
from memory.outcomes import ReviewRequired
from memory.selectors import memory_states_as_of
from memory.services import memory_delete, memory_restore, memory_update, memory_upsert
from memory.uses import memory_record_access
from profiles.services import profile_update
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

KEY = "fact:build-breaks-on-arm"


@pytest.fixture
def coder(alice):
    return AgentFactory(user=alice, name="coder")


@pytest.fixture
def travel(alice):
    return AgentFactory(user=alice, name="travel")


def _note(alice, agent, key=KEY, value="The build breaks on ARM runners"):
    return memory_upsert(
        user=alice, key=key, value=value, actor=Actor.for_agent(agent), owner_agent=agent
    ).memory


def test_a_key_names_one_row_in_each_audience(alice, you, coder, travel):
    mine = memory_upsert(user=alice, key=KEY, value="Mine", actor=you).memory
    coders = _note(alice, coder, value="Coder's")
    travels = _note(alice, travel, value="Travel's")
    assert len({mine.pk, coders.pk, travels.pk}) == 3
    rows = Memory.objects.filter(user=alice, key=KEY)
    assert {(row.owner_agent_id, row.value) for row in rows} == {
        (None, "Mine"),
        (coder.pk, "Coder's"),
        (travel.pk, "Travel's"),
    }
    # Each write changed its own row only.
    memory_update(
        user=alice, key=KEY, value="Coder's again", actor=Actor.for_agent(coder), owner_agent=coder
    )
    assert Memory.objects.get(user=alice, owner_agent=None, key=KEY).value == "Mine"
    assert Memory.objects.get(owner_agent=travel, key=KEY).value == "Travel's"


def test_another_agents_note_is_not_found_for_every_write(alice, coder, travel):
    _note(alice, coder)
    thief = Actor.for_agent(travel)
    attempts = [
        lambda: memory_update(user=alice, key=KEY, value="x", actor=thief, owner_agent=coder),
        lambda: memory_update(user=alice, key=KEY, pinned=True, actor=thief, owner_agent=coder),
        lambda: memory_delete(user=alice, key=KEY, actor=thief, owner_agent=coder),
    ]
    for attempt in attempts:
        with pytest.raises(NotFound) as error:
            attempt()
        assert "coder" not in error.value.message
        assert "ARM" not in error.value.message
    with pytest.raises(Forbidden):
        memory_upsert(user=alice, key=KEY, value="x", actor=thief, owner_agent=coder)
    with pytest.raises(Forbidden):
        memory_store(user=alice, actor=thief, kind="fact", text="x y", owner_agent=coder)
    note = Memory.objects.get(owner_agent=coder, key=KEY)
    assert note.value == "The build breaks on ARM runners"
    assert not note.pinned
    assert not MemoryProposal.objects.exists()


def test_another_users_agent_cannot_be_the_audience(alice, bob, coder):
    bob_agent = AgentFactory(user=bob, name="spy")
    with pytest.raises(NotFound):
        memory_update(
            user=alice, key=KEY, value="x", actor=Actor.for_user(alice), owner_agent=bob_agent
        )


def test_a_note_never_waits_for_review(alice, you, coder):
    profile_update(user=alice, review_agent_memories=True)
    memory_upsert(user=alice, key=KEY, value="What the user said", actor=you)
    agent = Actor.for_agent(coder)
    note = _note(alice, coder)
    assert note.source == Source.TP_EXTRACTED
    # Its own note changes and goes without review, while the user's memory under the
    # same key (user_stated) still waits for it.
    memory_update(
        user=alice, key=KEY, value="Fixed by pinning QEMU", actor=agent, owner_agent=coder
    )
    memory_delete(user=alice, key=KEY, actor=agent, owner_agent=coder)
    assert not MemoryProposal.objects.exists()
    with pytest.raises(ReviewRequired):
        memory_update(user=alice, key=KEY, value="Changed", actor=agent)
    assert Memory.objects.get(user=alice, owner_agent=None, key=KEY).value == "What the user said"


def test_memory_store_as_a_note_is_numbered_among_the_agents_notes(alice, coder, travel):
    agent = Actor.for_agent(coder)
    memory_store(user=alice, actor=Actor.for_agent(travel), kind="fact", text="Likes tea")
    first = memory_store(user=alice, actor=agent, kind="fact", text="Likes tea", owner_agent=coder)
    again = memory_store(user=alice, actor=agent, kind="fact", text="Likes tea", owner_agent=coder)
    other = memory_store(
        user=alice, actor=agent, kind="fact", text="Likes tea, green", owner_agent=coder
    )
    assert (first.status, first.key) == ("created", "fact:likes-tea")
    assert (again.status, again.key) == ("unchanged", "fact:likes-tea")
    assert other.status == "created"
    assert first.memory.owner_agent_id == coder.pk
    # The user's memory kept its one row (the travel agent's write, shared).
    assert Memory.objects.filter(user=alice, owner_agent=None).count() == 1


def test_the_unchanged_write_rule_holds_per_audience(alice, you, coder):
    _note(alice, coder)
    again = memory_upsert(
        user=alice,
        key=KEY,
        value="The build breaks on ARM runners",
        actor=Actor.for_agent(coder),
        owner_agent=coder,
    )
    assert again.status == "unchanged"
    assert MemoryHistory.objects.filter(owner_agent=coder).count() == 1


def test_history_and_activity_carry_the_audience(alice, coder):
    note = _note(alice, coder)
    created = MemoryHistory.objects.get(memory=note)
    assert created.owner_agent_id == coder.pk
    event = ActivityEvent.objects.get(event_type=EventType.MEMORY_WRITTEN)
    assert event.payload["note_of"] == "coder"
    memory_delete(user=alice, key=KEY, actor=Actor.for_agent(coder), owner_agent=coder)
    deleted = MemoryHistory.objects.get(action=HistoryAction.DELETE)
    assert deleted.owner_agent_id == coder.pk
    assert ActivityEvent.objects.get(event_type=EventType.MEMORY_DELETED).payload["note_of"] == (
        "coder"
    )


def test_restore_puts_a_note_back_as_that_agents_note(alice, you, coder):
    _note(alice, coder)
    deleted = memory_delete(user=alice, key=KEY, actor=you, owner_agent=coder)
    memory_upsert(user=alice, key=KEY, value="The user's own", actor=you)
    restored = memory_restore(user=alice, history_id=deleted.pk, actor=you)
    assert restored.memory.owner_agent_id == coder.pk
    assert restored.history.owner_agent_id == coder.pk
    assert Memory.objects.get(user=alice, owner_agent=None, key=KEY).value == "The user's own"


def test_the_as_of_view_never_shows_a_note_as_the_users_memory(alice, you, coder):
    _note(alice, coder, value="A note of the coder's")
    memory_upsert(user=alice, key="fact:tea", value="Likes tea", actor=you)
    states = memory_states_as_of(user=alice, as_of=MemoryHistory.objects.latest("pk").created_at)
    assert [state.key for state in states.states] == ["fact:tea"]


def test_reading_counts_a_use_of_the_row_asked_for(alice, you, coder):
    memory_upsert(user=alice, key=KEY, value="Mine", actor=you)
    _note(alice, coder)
    read = memory_record_access(user=alice, key=KEY, owner_agent=coder)
    assert (read.owner_agent_id, read.access_count) == (coder.pk, 1)
    assert memory_record_access(user=alice, key=KEY).value == "Mine"


# --- memory_share_note: "Move into my memory" --------------------------------------------


def test_moving_a_note_makes_it_the_users_memory_in_one_change(alice, you, coder):
    note = _note(alice, coder)
    memory_update(user=alice, key=KEY, tags=["ci"], actor=you, owner_agent=coder)
    moved = memory_share_note(user=alice, memory_id=note.pk, actor=you)
    memory = Memory.objects.get(user=alice, key=KEY)
    assert memory.pk == moved.memory.pk
    assert memory.owner_agent is None
    assert (memory.value, memory.tags) == ("The build breaks on ARM runners", ["ci"])
    assert (memory.source, memory.confidence) == (Source.USER_STATED, 1.0)
    gone = MemoryHistory.objects.get(action=HistoryAction.DELETE)
    assert gone.owner_agent_id == coder.pk
    assert gone.before["value"] == memory.value
    assert moved.history.owner_agent is None
    assert moved.history.action == HistoryAction.CREATE
    event = ActivityEvent.objects.filter(event_type=EventType.MEMORY_WRITTEN).latest("pk")
    assert event.payload["moved_from"] == "coder"
    assert event.payload["history_id"] == moved.history.pk


def test_moving_onto_a_taken_key_is_a_conflict_and_loses_nothing(alice, you, coder):
    note = _note(alice, coder)
    memory_upsert(user=alice, key=KEY, value="Mine", actor=you)
    with pytest.raises(Conflict):
        memory_share_note(user=alice, memory_id=note.pk, actor=you)
    assert Memory.objects.get(pk=note.pk).value == "The build breaks on ARM runners"
    assert Memory.objects.get(user=alice, owner_agent=None, key=KEY).value == "Mine"
    assert MemoryHistory.objects.filter(action=HistoryAction.DELETE).count() == 0


def test_only_the_user_moves_a_note_and_only_their_own(alice, bob, coder):
    note = _note(alice, coder)
    with pytest.raises(Forbidden):
        memory_share_note(user=alice, memory_id=note.pk, actor=Actor.for_agent(coder))
    with pytest.raises(NotFound):
        memory_share_note(user=bob, memory_id=note.pk, actor=Actor.for_user(bob))
    mine = memory_upsert(user=alice, key="fact:tea", value="Tea", actor=Actor.for_user(alice))
    with pytest.raises(NotFound):  # the user's memory is not a note
        memory_share_note(user=alice, memory_id=mine.memory.pk, actor=Actor.for_user(alice))
    assert Memory.objects.get(pk=note.pk).owner_agent_id == coder.pk


def test_without_an_agent_there_are_no_own_notes_to_list(alice, you, coder):
    from memory.scratchpad import build_scratchpad
    from memory.selectors import memory_list_recent

    _note(alice, coder)
    memory_upsert(user=alice, key="fact:tea", value="Likes tea", actor=you)

    assert list(memory_list_recent(user=alice, agent=None)) == []
    assert build_scratchpad(user=alice, agent=None).text == ""
    assert [m.key for m in memory_list_recent(user=alice, agent=coder)] == [KEY]
