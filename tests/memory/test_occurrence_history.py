"""A memory's time and session through history, the review inbox and undo (issue 26):
history keeps them, a proposal applies them, a restore and an undo put them back, and
states stored before memories had them still read (memory/snapshots.py)."""

from datetime import UTC, datetime

import pytest

from memory import review
from memory.bulk import memory_batch_undo, memory_bulk_delete, memory_bulk_tag
from memory.entries import memory_store
from memory.models import HistoryAction, Memory, MemoryHistory, ProposalStatus
from memory.outcomes import ReviewRequired
from memory.selectors import memory_states_as_of
from memory.services import memory_restore, memory_update, memory_upsert
from memory.snapshots import same_state, state_problem
from profiles.services import profile_update

pytestmark = pytest.mark.django_db

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
JUNE_1 = datetime(2023, 6, 1, tzinfo=UTC)


def _said(alice, you, key="fact:moved", **extra):
    fields = {"occurred_at": MAY_8, "session": "chat-1", **extra}
    return memory_upsert(user=alice, key=key, value="moved to Lisbon", actor=you, **fields)


def _when(alice, key="fact:moved"):
    memory = Memory.objects.get(user=alice, key=key)
    return memory.occurred_at, memory.session


# --- the review gate --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "after"),
    [
        ({"occurred_at": "2023-06-01T00:00:00Z"}, ("2023-06-01T00:00:00+00:00", "chat-1")),
        ({"session": "chat-2"}, ("2023-05-08T13:56:00+00:00", "chat-2")),
    ],
)
def test_an_agent_redating_what_the_user_said_waits_for_review(alice, you, agent, change, after):
    _said(alice, you)

    with pytest.raises(ReviewRequired) as waiting:
        memory_update(user=alice, key="fact:moved", actor=agent, **change)

    proposal = waiting.value.proposal
    assert _when(alice) == (MAY_8, "chat-1")  # nothing applied
    assert (proposal.action, proposal.trigger) == ("update", "user_stated")
    assert (proposal.before["occurred_at"], proposal.before["session"]) == (
        "2023-05-08T13:56:00+00:00",
        "chat-1",
    )
    assert (proposal.after["occurred_at"], proposal.after["session"]) == after

    review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=you)

    memory = Memory.objects.get(user=alice, key="fact:moved")
    assert (memory.occurred_at.isoformat(), memory.session) == after
    history = MemoryHistory.objects.filter(user=alice, key="fact:moved").first()
    assert (history.after["occurred_at"], history.after["session"]) == after


def test_an_agent_repeating_the_users_time_and_session_changes_nothing(alice, you, agent):
    _said(alice, you)

    write = memory_upsert(
        user=alice,
        key="fact:moved",
        value="moved to Lisbon",
        actor=agent,
        occurred_at="2023-05-08T15:56:00+02:00",  # the same instant
        session="chat-1",
    )

    assert write.status == "unchanged"
    assert not alice.memory_proposals.exists()


def test_an_agent_may_redate_its_own_note(alice, agent):
    memory_upsert(user=alice, key="fact:moved", value="moved", actor=agent, session="a")

    write = memory_update(
        user=alice, key="fact:moved", actor=agent, occurred_at="2023-06-01", session="b"
    )

    assert write.status == "updated"
    assert _when(alice) == (JUNE_1, "b")


def test_a_proposed_new_memory_applies_its_time_and_session(alice, you, agent):
    profile_update(user=alice, review_agent_memories=True)

    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(
            user=alice,
            key="fact:moved",
            value="moved",
            actor=agent,
            occurred_at="2023-06-01",
            session="chat-9",
        )
    review.proposal_accept(user=alice, proposal_id=waiting.value.proposal.pk, actor=you)

    assert _when(alice) == (JUNE_1, "chat-9")


def test_a_proposed_new_memory_without_a_time_was_said_when_proposed(alice, you, agent):
    profile_update(user=alice, review_agent_memories=True)
    result = memory_store(user=alice, actor=agent, kind="fact", text="likes green tea")
    assert result.status == "pending_review"
    proposal = result.proposal
    assert "occurred_at" not in proposal.after  # a retry proposes the same state
    again = memory_store(user=alice, actor=agent, kind="fact", text="likes green tea")
    assert again.proposal.pk == proposal.pk

    review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=you)

    assert _when(alice, result.key) == (proposal.created_at, "")


def test_a_proposal_from_before_times_leaves_the_memorys_own(alice, you, agent):
    _said(alice, you)
    with pytest.raises(ReviewRequired) as waiting:
        memory_update(user=alice, key="fact:moved", actor=agent, value="moved to Porto")
    proposal = waiting.value.proposal
    for state in (proposal.before, proposal.after):
        del state["occurred_at"], state["session"]
    proposal.save(update_fields=["before", "after"])

    review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=you)

    memory = Memory.objects.get(user=alice, key="fact:moved")
    assert (memory.value, memory.occurred_at, memory.session) == ("moved to Porto", MAY_8, "chat-1")


# --- history, restore and undo ----------------------------------------------------------


def test_restoring_a_history_row_puts_its_time_and_session_back(alice, you):
    first = _said(alice, you).history
    memory_update(user=alice, key="fact:moved", actor=you, occurred_at="2023-06-01", session="")
    assert _when(alice) == (JUNE_1, "")

    restored = memory_restore(user=alice, history_id=first.pk, actor=you)

    assert _when(alice) == (MAY_8, "chat-1")
    assert restored.history.before["session"] == ""
    assert restored.history.after["session"] == "chat-1"


def test_a_deleted_memory_comes_back_with_its_time_and_session(alice, you):
    memory = _said(alice, you).memory
    deleted = memory_bulk_delete(user=alice, memory_ids=[memory.pk], actor=you)

    memory_batch_undo(user=alice, batch=deleted.batch, actor=you)

    assert _when(alice) == (MAY_8, "chat-1")


def test_an_old_history_row_without_them_still_restores_and_undoes(alice, you):
    memory = _said(alice, you).memory
    retagged = memory_bulk_tag(user=alice, memory_ids=[memory.pk], actor=you, add=["travel"])
    # As a history row written before issue 26 holds its states.
    change = MemoryHistory.objects.get(user=alice, batch=retagged.batch)
    for state in (change.before, change.after):
        del state["occurred_at"], state["session"]
    MemoryHistory.objects.filter(pk=change.pk).update(before=change.before, after=change.after)
    assert state_problem(change.before) == ""

    undone = memory_batch_undo(user=alice, batch=retagged.batch, actor=you)

    assert (undone.done, undone.refused) == (["fact:moved"], [])
    memory = Memory.objects.get(user=alice, key="fact:moved")
    assert (memory.tags, memory.occurred_at, memory.session) == ([], MAY_8, "chat-1")
    restored = memory_restore(user=alice, history_id=change.pk, actor=you)
    assert restored.memory.tags == ["travel"]
    assert _when(alice) == (MAY_8, "chat-1")
    states = memory_states_as_of(user=alice, as_of=restored.history.created_at)
    assert ([state.key for state in states.states], states.damaged) == (["fact:moved"], [])


def test_same_state_ignores_only_what_an_old_state_does_not_hold():
    current = {
        "value": "v",
        "source": "user_stated",
        "confidence": 1.0,
        "tags": [],
        "pinned": False,
        "occurred_at": "2023-05-08T13:56:00+00:00",
        "session": "chat-1",
    }
    old = {name: current[name] for name in ("value", "source", "confidence", "tags", "pinned")}

    assert same_state(current, old)
    assert same_state(current, {**current, "occurred_at": "2023-05-08T13:56:00Z"})
    assert not same_state(current, {**current, "session": "chat-2"})
    assert not same_state(current, {**old, "occurred_at": "2023-05-09T13:56:00+00:00"})
    assert not same_state(current, {**old, "value": "w"})
    assert same_state(None, None)
    assert not same_state(current, None)


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"occurred_at": "yesterday"}, "its occurred_at is not an ISO 8601 date-time"),
        ({"occurred_at": "2023-05-08T13:56:00"}, "its occurred_at has no time zone"),
        ({"occurred_at": "2023-02-30T00:00:00Z"}, "its occurred_at is not a real date and time"),
        ({"occurred_at": "1066-10-14T09:00:00Z"}, "its occurred_at is not between the years"),
        ({"occurred_at": None}, "its occurred_at is not an ISO 8601 date-time"),
        ({"session": "a\nb"}, "its session must be one line, without control characters"),
        ({"session": 7}, "its session is not text"),
        ({"session": "x" * 101}, "its session is 101 characters long"),
    ],
)
def test_a_stored_state_with_a_bad_time_or_session_is_damaged(extra, problem):
    state = {"value": "v", "source": "user_stated", "confidence": 1.0, "tags": [], "pinned": False}

    assert problem in state_problem({**state, **extra})


def test_history_records_both_states_of_a_redating(alice, you):
    _said(alice, you)
    memory_update(user=alice, key="fact:moved", actor=you, occurred_at="2023-06-01T00:00:00Z")

    change = MemoryHistory.objects.filter(user=alice, key="fact:moved").first()
    assert change.action == HistoryAction.UPDATE
    assert (change.before["occurred_at"], change.after["occurred_at"]) == (
        "2023-05-08T13:56:00+00:00",
        "2023-06-01T00:00:00+00:00",
    )
    assert change.before["session"] == change.after["session"] == "chat-1"
    assert ProposalStatus.PENDING not in alice.memory_proposals.values_list("status", flat=True)


def test_the_inbox_says_what_a_proposal_does_to_the_time_and_conversation(
    client, alice, you, agent
):
    _said(alice, you)
    profile_update(user=alice, review_agent_memories=True)
    with pytest.raises(ReviewRequired):
        memory_update(
            user=alice,
            key="fact:moved",
            actor=agent,
            occurred_at="2023-06-01T00:00:00Z",
            session="<b>chat</b>",
        )
    with pytest.raises(ReviewRequired):
        memory_upsert(
            user=alice, key="fact:new", value="new", actor=agent, occurred_at="2023-05-08T13:56Z"
        )
    client.force_login(alice)

    body = client.get("/context/inbox/").content.decode()

    assert "<li>Says it was said Jun 1, 2023, 00:00 (was May 8, 2023, 13:56)</li>" in body
    assert "<li>Puts it in conversation &lt;b&gt;chat&lt;/b&gt;</li>" in body
    assert "<li>Says it was said May 8, 2023, 13:56</li>" in body
    assert "<b>chat</b>" not in body
