"""Agents' notes are stored, not held (issue 26): an agent's new note near another agent's
note is its own row when it adds something, merged into that note's history when it adds
nothing; only what would change what the user stated waits in the Inbox, and everything
when the user reviews agents' new memories."""

from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from lib.errors import InvalidInput, MemoryPaused
from memory.entries import memory_store
from memory.models import HistoryAction, Memory, MemoryHistory, MemoryProposal, ProposalTrigger
from memory.outcomes import DuplicateMemory, ReviewRequired
from memory.replay import PastChange, past_change_problem
from memory.selectors import memory_agent_names, memory_states_as_of
from memory.services import memory_restore, memory_upsert
from profiles.services import profile_update
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

NOTE = "Prefers bullet points in reports"
MORE = "Prefers short bullet points in reports"  # near NOTE, and adds "short"
SAME = "Prefers bullet points in written reports"  # near NOTE, adds "written"


@pytest.fixture
def scout(alice):
    return Actor.for_agent(AgentFactory(user=alice, name="scout"))


def _note(alice, actor, key="preference:bullets", value=NOTE):
    return memory_upsert(user=alice, key=key, value=value, actor=actor).memory


# ---------------------------------------------------------------- stored, never a proposal


def test_a_note_that_adds_to_an_agents_note_is_stored_as_its_own_row(
    call_tool, alice, agent, alice_token
):
    _note(alice, agent)

    response = call_tool(
        alice_token, "create_memory", {"key": "preference:report-format", "value": MORE}
    )

    assert response.status_code == 201, response.content
    assert (response.json()["status"], response.json()["memory"]["value"]) == ("created", MORE)
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        "preference:bullets": NOTE,
        "preference:report-format": MORE,
    }
    assert not MemoryProposal.objects.exists()


def test_memory_store_beside_another_agents_note_is_stored(call_tool, alice, scout, alice_token):
    _note(alice, scout)  # another agent of alice's wrote it

    response = call_tool(
        alice_token, "memory_store", {"content": MORE, "category": "preference", "share": True}
    )

    assert response.status_code == 201, response.content
    assert response.json()["key"] == "preference:prefers-short-bullet-points-in-reports"
    assert Memory.objects.filter(user=alice).count() == 2
    assert not MemoryProposal.objects.exists()


def test_a_document_note_counts_as_an_agents_note(alice, agent):
    memory_upsert(user=alice, key="preference:bullets", value=NOTE, actor=agent, source="document")

    write = memory_upsert(user=alice, key="preference:report-format", value=MORE, actor=agent)

    assert write.created
    assert not MemoryProposal.objects.exists()


# ---------------------------------------------------------------- merged, nothing lost


def test_a_note_that_adds_nothing_is_merged_into_the_notes_history(
    call_tool, alice, agent, alice_token
):
    existing = _note(alice, agent, value=SAME)
    updated_at = existing.updated_at

    response = call_tool(
        alice_token, "create_memory", {"key": "preference:report-format", "value": NOTE}
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["created"], body["memory"]["key"]) == (
        "duplicate",
        False,
        "preference:bullets",
    )
    assert 0.66 <= body["similarity"] < 1.0
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == [
        "preference:bullets"
    ]
    memory = Memory.objects.get(user=alice)
    # The memory is as it was: its text, and when it last changed.
    assert (memory.value, memory.updated_at) == (SAME, updated_at)
    merge = MemoryHistory.objects.get(user=alice, action=HistoryAction.MERGE)
    assert (merge.memory_id, merge.key, merge.source, merge.actor_agent) == (
        memory.pk,
        "preference:bullets",
        "tp_extracted",
        agent.agent,
    )
    assert merge.before == memory.snapshot()
    assert merge.after == {**memory.snapshot(), "merged": {"value": NOTE}}
    event = ActivityEvent.objects.get(user=alice, payload__action="merge")
    assert (event.event_type, event.payload["key"], event.payload["history_id"]) == (
        EventType.MEMORY_WRITTEN,
        "preference:bullets",
        merge.pk,
    )
    assert not MemoryProposal.objects.exists()


def test_memory_store_of_what_a_note_says_merges_it(call_tool, alice, scout, alice_token):
    existing = _note(alice, scout, value=SAME)

    response = call_tool(
        alice_token, "memory_store", {"content": NOTE, "category": "preference", "share": True}
    )

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["key"]) == ("duplicate", existing.key)
    merge = MemoryHistory.objects.get(user=alice, action="merge")
    assert (merge.after["merged"], merge.actor_agent.name) == ({"value": NOTE}, "assistant")


def test_the_same_note_merged_again_by_the_same_agent_is_kept_once(alice, agent, scout):
    _note(alice, agent, value=SAME)

    for actor in (agent, agent, scout):
        with pytest.raises(DuplicateMemory):
            memory_upsert(user=alice, key="preference:report-format", value=NOTE, actor=actor)

    merges = MemoryHistory.objects.filter(user=alice, action="merge").order_by("id")
    assert [row.actor_agent.name for row in merges] == ["assistant", "scout"]
    assert ActivityEvent.objects.filter(user=alice, payload__action="merge").count() == 2


def test_a_restatement_of_what_the_user_said_is_merged_and_changes_nothing(alice, you, agent):
    stated = _note(alice, you, value=SAME)

    with pytest.raises(DuplicateMemory) as duplicate:
        memory_upsert(user=alice, key="preference:report-format", value=NOTE, actor=agent)

    assert duplicate.value.existing.pk == stated.pk
    memory = Memory.objects.get(user=alice)
    assert (memory.value, memory.source, memory.confidence) == (SAME, "user_stated", 1.0)
    merge = duplicate.value.history
    assert (merge.action, merge.source, merge.after["merged"]) == (
        "merge",
        "user_stated",
        {"value": NOTE},
    )
    # Who wrote it is still the user; the agent only said it again.
    assert memory_agent_names(user=alice, keys=[memory.key]) == {}


def test_a_paused_memory_merges_nothing(alice, agent):
    _note(alice, agent, value=SAME)
    profile_update(user=alice, memory_paused=True)

    with pytest.raises(MemoryPaused):
        memory_upsert(user=alice, key="preference:report-format", value=NOTE, actor=agent)

    assert not MemoryHistory.objects.filter(action="merge").exists()


def test_merging_off_stores_every_note(alice, agent, settings):
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False
    _note(alice, agent, value=SAME)

    write = memory_upsert(user=alice, key="preference:report-format", value=NOTE, actor=agent)

    assert write.created
    assert not MemoryHistory.objects.filter(action="merge").exists()


# ---------------------------------------------------------------- what waits in the Inbox


def test_a_note_that_adds_to_what_the_user_stated_is_a_proposal(call_tool, alice, you, alice_token):
    _note(alice, you)

    response = call_tool(
        alice_token, "create_memory", {"key": "preference:report-format", "value": MORE}
    )

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "pending_review"
    proposal = MemoryProposal.objects.get(pk=body["proposal"]["id"])
    assert (proposal.key, proposal.action, proposal.trigger, proposal.requested_key) == (
        "preference:bullets",
        "update",
        ProposalTrigger.NEAR_DUPLICATE,
        "preference:report-format",
    )
    assert Memory.objects.get(user=alice).value == NOTE


def test_while_the_user_reviews_new_memories_a_near_note_is_a_proposal(alice, agent):
    _note(alice, agent)
    profile_update(user=alice, review_agent_memories=True)

    with pytest.raises(ReviewRequired) as near:
        memory_upsert(user=alice, key="preference:report-format", value=MORE, actor=agent)
    with pytest.raises(ReviewRequired) as new:
        memory_upsert(user=alice, key="fact:tea", value="Drinks green tea", actor=agent)

    assert (near.value.proposal.trigger, near.value.proposal.key) == (
        ProposalTrigger.NEAR_DUPLICATE,
        "preference:bullets",
    )
    assert (new.value.proposal.trigger, new.value.proposal.action) == (
        ProposalTrigger.NEW_MEMORY,
        "create",
    )
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == [
        "preference:bullets"
    ]


def test_memory_store_while_the_user_reviews_new_memories_waits(alice, agent):
    _note(alice, agent)
    profile_update(user=alice, review_agent_memories=True)

    result = memory_store(user=alice, actor=agent, kind="preference", text=MORE)

    assert (result.status, result.key) == ("pending_review", "preference:bullets")
    assert result.proposal.trigger == ProposalTrigger.NEAR_DUPLICATE


# ---------------------------------------------------------------- the readers of history


def test_a_merge_is_no_change_to_restore_or_undo(alice, you, agent):
    first = _note(alice, agent, value=SAME)
    with pytest.raises(DuplicateMemory) as duplicate:
        memory_upsert(user=alice, key="preference:report-format", value=NOTE, actor=agent)
    merge = duplicate.value.history
    memory_upsert(user=alice, key=first.key, value="Prefers prose", actor=you)

    with pytest.raises(InvalidInput, match="cannot be undone"):
        memory_restore(user=alice, history_id=merge.pk, actor=you, undo=True)
    # Restoring it brings back the memory as it was then, not the merged note.
    write = memory_restore(user=alice, history_id=merge.pk, actor=you)
    assert write.memory.value == SAME


def test_the_state_as_of_a_time_is_the_change_before_the_merge(alice, agent):
    _note(alice, agent, value=SAME)
    created = MemoryHistory.objects.get(user=alice)
    with pytest.raises(DuplicateMemory):
        memory_upsert(user=alice, key="preference:report-format", value=NOTE, actor=agent)

    states = memory_states_as_of(user=alice, as_of=timezone.now() + timedelta(seconds=1))

    [state] = states.states
    assert (state.key, state.value, state.changed_at) == (
        "preference:bullets",
        SAME,
        created.created_at,
    )


def _past(action, before, after, source="tp_extracted"):
    return PastChange(
        key="preference:bullets",
        action=action,
        source=source,
        before=before,
        after=after,
        actor=Actor.system(),
        created_at=timezone.now() - timedelta(days=1),
    )


# An agent's note as an archive's history keeps it.
NOTE_STATE = {
    "value": SAME,
    "source": "tp_extracted",
    "confidence": 0.8,
    "tags": [],
    "pinned": False,
}


def test_an_import_keeps_a_merge_with_a_readable_note():
    state = NOTE_STATE

    assert past_change_problem(_past("merge", state, {**state, "merged": {"value": NOTE}})) == ""
    assert "merged" in past_change_problem(_past("merge", state, {**state, "merged": NOTE}))
    assert "merged" in past_change_problem(
        _past("merge", state, {**state, "merged": {"value": ""}})
    )
    assert "cannot have happened" in past_change_problem(
        _past("merge", None, {**state, "merged": {"value": NOTE}})
    )


def test_an_import_checks_a_merged_notes_time_and_conversation():
    state = NOTE_STATE

    def merged(**note):
        return past_change_problem(_past("merge", state, {**state, "merged": note}))

    assert merged(value=NOTE, occurred_at="2023-05-08T00:00:00+00:00", session="chat-7") == ""
    assert "occurred_at" in merged(value=NOTE, occurred_at="last spring")
    assert "session" in merged(value=NOTE, session="two\nlines")


# ---------------------------------------------------------------- shown on the pages


def test_a_merged_note_keeps_when_and_in_which_conversation_it_was_said(client, alice, agent):
    existing = _note(alice, agent, value=SAME)
    with pytest.raises(DuplicateMemory) as duplicate:
        memory_upsert(
            user=alice,
            key="preference:report-format",
            value=NOTE,
            actor=agent,
            occurred_at="2023-05-08",
            session="chat-7 <b>",
        )
    merge = duplicate.value.history

    assert merge.after["merged"] == {
        "value": NOTE,
        "occurred_at": "2023-05-08T00:00:00+00:00",
        "session": "chat-7 <b>",
    }
    memory = Memory.objects.get(pk=existing.pk)  # the memory keeps its own
    assert (memory.occurred_at, memory.session) == (existing.occurred_at, existing.session)
    client.force_login(alice)
    html = client.get(f"/memories/{existing.pk}/history/").content.decode()
    item = html[html.index(f'<li id="history-{merge.pk}"') :]
    item = item[: item.index("</li>")]
    assert 'said <time datetime="2023-05-08T00:00:00+00:00"' in item
    assert (
        'May 8, 2023</time> · in conversation <span class="session">chat-7 &lt;b&gt;</span>'
    ) in item


def test_the_history_page_shows_the_merged_note_escaped_and_offers_no_restore(client, alice, agent):
    existing = _note(alice, agent, value="Prefers bullet points in written reports <b>")
    with pytest.raises(DuplicateMemory) as duplicate:
        memory_upsert(
            user=alice, key="preference:format", value="Prefers bullet points <b>", actor=agent
        )
    merge = duplicate.value.history
    client.force_login(alice)

    html = client.get(f"/memories/{existing.pk}/history/").content.decode()

    item = html[html.index(f'<li id="history-{merge.pk}"') :]
    item = item[: item.index("</li>")]
    assert "<strong>Merged a note</strong>" in item
    said = 'Said it again: <span class="new" dir="auto">Prefers bullet points &lt;b&gt;</span>'
    assert said in item
    assert "Restore" not in item


def test_the_activity_page_says_a_note_was_merged(client, alice, agent):
    _note(alice, agent, value=SAME)
    with pytest.raises(DuplicateMemory):
        memory_upsert(user=alice, key="preference:report-format", value=NOTE, actor=agent)
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    assert "Merged a note into" in html
    assert "it said nothing new; kept in the history" in html
