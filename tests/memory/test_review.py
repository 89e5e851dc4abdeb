"""The user stays in charge (issue 14): agents' changes to what the user stated wait in the
review inbox, the review rule for new memories, near-duplicates, and the write-path rules
the pages share (memory_set, entry_create, memory_rename)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from lib.errors import Conflict, Forbidden, InvalidInput, MemoryPaused
from memory import review
from memory.duplicates import is_near, near_threshold
from memory.entries import entry_create, memory_rename
from memory.models import Memory, MemoryHistory, MemoryProposal, ProposalStatus
from memory.outcomes import DuplicateMemory, ReviewRequired
from memory.services import memory_delete, memory_restore, memory_set, memory_update, memory_upsert
from profiles.services import profile_update
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def _stated(alice, you, key="name", value="Kevin", **extra):
    return memory_upsert(user=alice, key=key, value=value, actor=you, **extra).memory


def _events(alice, event_type):
    return list(ActivityEvent.objects.filter(user=alice, event_type=event_type).order_by("id"))


# ---------------------------------------------------------------- what waits for review


def test_an_agent_replacing_what_the_user_stated_makes_a_proposal(alice, you, agent):
    _stated(alice, you)

    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=alice, key="name", value="Kev", actor=agent, reason="Signs as Kev")

    proposal = waiting.value.proposal
    memory = Memory.objects.get(user=alice, key="name")
    assert (memory.value, memory.source) == ("Kevin", "user_stated")  # nothing applied
    assert (proposal.action, proposal.trigger, proposal.status) == (
        "update",
        "user_stated",
        "pending_review",
    )
    assert proposal.before["value"] == "Kevin"
    assert (proposal.after["value"], proposal.after["source"]) == ("Kev", "tp_extracted")
    assert proposal.reason == "Signs as Kev"
    assert proposal.actor_agent == agent.agent
    assert MemoryHistory.objects.filter(user=alice).count() == 1  # only the user's write
    (event,) = _events(alice, EventType.PROPOSAL_CREATED)
    assert event.payload["proposal_id"] == proposal.pk
    assert event.actor_agent == agent.agent


def test_pinning_or_deleting_a_user_stated_entry_waits_too(alice, you, agent):
    _stated(alice, you, key="instruction:tldr", value="Always include a TL;DR")

    with pytest.raises(ReviewRequired) as pinned:
        memory_update(user=alice, key="instruction:tldr", pinned=True, actor=agent)
    with pytest.raises(ReviewRequired) as deleted:
        memory_delete(user=alice, key="instruction:tldr", actor=agent)

    assert pinned.value.proposal.after["pinned"] is True
    assert (deleted.value.proposal.action, deleted.value.proposal.after) == ("delete", None)
    memory = Memory.objects.get(user=alice, key="instruction:tldr")
    assert memory.pinned is False


def test_an_agent_writing_what_the_user_already_said_changes_nothing(alice, you, agent):
    _stated(alice, you)

    write = memory_upsert(user=alice, key="name", value="Kevin", actor=agent)

    assert write.changed is False
    assert write.memory.source == "user_stated"
    assert not MemoryProposal.objects.exists()


def test_agents_still_replace_each_others_notes(alice, agent):
    memory_upsert(user=alice, key="fact:tea", value="black tea", actor=agent)

    write = memory_upsert(user=alice, key="fact:tea", value="green tea", actor=agent)

    assert write.changed
    assert write.memory.value == "green tea"
    assert not MemoryProposal.objects.exists()


def test_the_same_proposal_twice_is_one_and_a_new_one_replaces_it(alice, you, agent):
    _stated(alice, you)

    def propose(value):
        with pytest.raises(ReviewRequired) as waiting:
            memory_upsert(user=alice, key="name", value=value, actor=agent)
        return waiting.value.proposal

    first = propose("Kev")
    again = propose("Kev")
    newer = propose("K.")

    assert again.pk == first.pk
    first.refresh_from_db()
    assert first.status == ProposalStatus.SUPERSEDED
    assert newer.status == ProposalStatus.PENDING
    assert MemoryProposal.objects.filter(status=ProposalStatus.PENDING).count() == 1


def test_a_paused_memory_refuses_proposals_as_well(alice, you, agent):
    _stated(alice, you)
    profile_update(user=alice, memory_paused=True)

    with pytest.raises(MemoryPaused):
        memory_upsert(user=alice, key="name", value="Kev", actor=agent)

    assert not MemoryProposal.objects.exists()


def test_new_agent_memories_wait_when_the_user_reviews_them(alice, agent):
    profile_update(user=alice, review_agent_memories=True)

    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=alice, key="fact:tea", value="green tea", actor=agent)

    assert not Memory.objects.filter(user=alice).exists()
    assert (waiting.value.proposal.action, waiting.value.proposal.trigger) == (
        "create",
        "new_memory",
    )
    profile_update(user=alice, review_agent_memories=False)
    assert memory_upsert(user=alice, key="fact:tea", value="green tea", actor=agent).created


# ---------------------------------------------------------------- deciding


def _proposal(alice, you, agent, value="Kev"):
    _stated(alice, you)
    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=alice, key="name", value=value, actor=agent)
    return waiting.value.proposal


def test_accepting_applies_it_as_the_user_and_records_both(alice, you, agent):
    proposal = _proposal(alice, you, agent)

    decided = review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=you)

    memory = Memory.objects.get(user=alice, key="name")
    # It changed what the user stated, and the user agreed: it is their statement now.
    assert (memory.value, memory.source, memory.confidence) == ("Kev", "user_stated", 1.0)
    history = decided.history
    assert (history.action, history.actor_user, history.before["value"]) == (
        "update",
        alice,
        "Kevin",
    )
    assert history.proposal.actor_agent == agent.agent  # who proposed it
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by, proposal.applied) == ("accepted", alice, history)
    (event,) = _events(alice, EventType.PROPOSAL_ACCEPTED)
    assert (event.actor_user, event.payload["proposed_by"], event.payload["history_id"]) == (
        alice,
        "agent assistant",
        history.pk,
    )


def test_edit_then_accept_stores_the_users_text(alice, you, agent):
    proposal = _proposal(alice, you, agent)

    review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=you, value="Kevin K.")

    memory = Memory.objects.get(user=alice, key="name")
    assert (memory.value, memory.source) == ("Kevin K.", "user_stated")


def test_an_accepted_new_memory_stays_the_agents_note(alice, agent, you):
    profile_update(user=alice, review_agent_memories=True)
    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=alice, key="fact:tea", value="green tea", actor=agent, confidence=0.6)

    review.proposal_accept(user=alice, proposal_id=waiting.value.proposal.pk, actor=you)

    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert (memory.value, memory.source, memory.confidence) == ("green tea", "tp_extracted", 0.6)


def test_accepting_a_deletion_deletes_and_can_be_undone(alice, you, agent):
    _stated(alice, you, key="instruction:tldr", value="Always include a TL;DR")
    with pytest.raises(ReviewRequired) as waiting:
        memory_delete(user=alice, key="instruction:tldr", actor=agent)

    decided = review.proposal_accept(user=alice, proposal_id=waiting.value.proposal.pk, actor=you)

    assert not Memory.objects.filter(user=alice).exists()
    assert decided.history.action == "delete"
    assert decided.history.before["value"]


def test_rejecting_leaves_the_memory_and_is_recorded(alice, you, agent):
    proposal = _proposal(alice, you, agent)

    review.proposal_reject(user=alice, proposal_id=proposal.pk, actor=you)

    assert Memory.objects.get(user=alice, key="name").value == "Kevin"
    proposal.refresh_from_db()
    assert proposal.status == "rejected"
    assert proposal.applied is None
    assert len(_events(alice, EventType.PROPOSAL_REJECTED)) == 1


def test_a_decided_or_expired_proposal_cannot_be_decided_again(alice, you, agent):
    proposal = _proposal(alice, you, agent)
    review.proposal_reject(user=alice, proposal_id=proposal.pk, actor=you)

    with pytest.raises(Conflict, match="rejected already"):
        review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=you)

    other = _proposal(alice, you, agent, value="K.")
    MemoryProposal.objects.filter(pk=other.pk).update(expires_at=timezone.now())
    with pytest.raises(Conflict, match="expired"):
        review.proposal_accept(user=alice, proposal_id=other.pk, actor=you)
    assert Memory.objects.get(user=alice, key="name").value == "Kevin"


def test_only_the_user_decides(alice, you, agent):
    proposal = _proposal(alice, you, agent)

    with pytest.raises(Forbidden):
        review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=agent)


def test_bulk_decisions_skip_what_cannot_be_decided(alice, you, agent):
    first = _proposal(alice, you, agent)
    other_agent = Actor.for_agent(AgentFactory(user=alice, name="scout"))
    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=alice, key="name", value="Kevster", actor=other_agent)
    second = waiting.value.proposal
    review.proposal_reject(user=alice, proposal_id=first.pk, actor=you)

    result = review.proposals_decide(
        user=alice, proposal_ids=[first.pk, second.pk], accept=True, actor=you
    )

    assert [decided.proposal.pk for decided in result.done] == [second.pk]
    assert result.skipped == [(first.pk, f"Proposal {first.pk} was rejected already.")]
    assert Memory.objects.get(user=alice, key="name").value == "Kevster"


def test_proposals_expire_after_their_time_recorded_in_activity(alice, you, agent, settings):
    proposal = _proposal(alice, you, agent)
    lifetime = proposal.expires_at - proposal.created_at
    assert abs(lifetime - timedelta(days=settings.MNEMO_PROPOSAL_TTL_DAYS)) < timedelta(seconds=5)
    fresh = _proposal(alice, you, agent, value="K.")  # supersedes the first
    MemoryProposal.objects.filter(pk=proposal.pk).update(
        status=ProposalStatus.PENDING,
        expires_at=timezone.now() - timedelta(seconds=1),
        decided_at=None,
    )

    assert review.proposals_expire() == 1
    assert review.proposals_expire() == 0

    proposal.refresh_from_db()
    fresh.refresh_from_db()
    assert (proposal.status, fresh.status) == ("expired", "pending_review")
    (event,) = _events(alice, EventType.PROPOSAL_EXPIRED)
    assert (event.actor_type, event.payload["proposal_id"]) == ("system", proposal.pk)


# ---------------------------------------------------------------- near-duplicates


def test_the_same_text_in_other_words_case_is_a_duplicate(alice, agent):
    memory_upsert(user=alice, key="preference:bullets", value="Prefers bullet points", actor=agent)

    with pytest.raises(DuplicateMemory) as duplicate:
        memory_upsert(
            user=alice, key="preference:report-format", value="prefers  Bullet points.", actor=agent
        )

    assert duplicate.value.existing.key == "preference:bullets"
    assert not Memory.objects.filter(key="preference:report-format").exists()


def test_a_near_entry_that_adds_nothing_is_a_duplicate(alice, agent):
    memory_upsert(
        user=alice,
        key="preference:bullets",
        value="Prefers bullet points in written reports",
        actor=agent,
    )

    with pytest.raises(DuplicateMemory) as duplicate:
        memory_upsert(
            user=alice,
            key="preference:report-format",
            value="Prefers bullet points in reports",
            actor=agent,
        )

    assert duplicate.value.existing.key == "preference:bullets"
    assert near_threshold() <= duplicate.value.similarity < 1.0
    assert Memory.objects.filter(user=alice).count() == 1
    # Nothing is lost: the note is kept in the history of the memory that says it.
    merge = duplicate.value.history
    assert (merge.action, merge.key, merge.actor_agent) == (
        "merge",
        "preference:bullets",
        agent.agent,
    )
    assert merge.after["merged"] == {"value": "Prefers bullet points in reports"}


def test_a_near_entry_that_adds_to_what_the_user_stated_is_a_proposal_and_can_be_kept_apart(
    alice, you, agent
):
    memory_upsert(
        user=alice, key="preference:bullets", value="Prefers bullet points in reports", actor=you
    )

    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(
            user=alice,
            key="preference:report-format",
            value="Prefers short bullet points in reports",
            actor=agent,
        )

    proposal = waiting.value.proposal
    assert (proposal.key, proposal.trigger, proposal.requested_key) == (
        "preference:bullets",
        "near_duplicate",
        "preference:report-format",
    )
    assert proposal.after["value"] == "Prefers short bullet points in reports"
    review.proposal_accept(user=alice, proposal_id=proposal.pk, actor=you, keep_both=True)
    assert set(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        ("preference:bullets", "Prefers bullet points in reports"),
        ("preference:report-format", "Prefers short bullet points in reports"),
    }


def test_a_different_entry_of_the_kind_is_added(alice, agent):
    memory_upsert(
        user=alice, key="preference:bullets", value="Prefers bullet points in reports", actor=agent
    )

    write = memory_upsert(
        user=alice, key="preference:prose", value="Prefers prose paragraphs in reports", actor=agent
    )

    assert write.created


def test_near_in_meaning_is_not_enough_without_half_the_words():
    # Two facts about one subject ("Jon is rehearsing a show" / "Jon is opening a studio")
    # are close in meaning; a restatement also shares its words.
    assert is_near(0.95, new_words=1, words=4, threshold=0.9)
    assert is_near(0.95, new_words=2, words=4, threshold=0.9)
    assert not is_near(0.95, new_words=3, words=4, threshold=0.9)
    assert not is_near(0.89, new_words=0, words=4, threshold=0.9)


def test_merging_can_be_turned_off_for_ingestion(alice, agent, settings):
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False
    memory_upsert(user=alice, key="fact:tea", value="Likes green tea", actor=agent)

    assert memory_upsert(user=alice, key="fact:tea-2", value="Likes green tea", actor=agent).created


def test_other_kinds_and_the_users_own_writes_are_never_merged(alice, you, agent):
    memory_upsert(user=alice, key="preference:tea", value="Green tea", actor=agent)

    assert memory_upsert(user=alice, key="fact:tea", value="Green tea", actor=agent).created
    assert memory_upsert(user=alice, key="preference:tea-2", value="Green tea", actor=you).created


# ---------------------------------------------------------------- the pages' write rules


def test_memory_set_creates_updates_deletes_or_leaves_alone(alice, you):
    assert memory_set(user=alice, key="role", value="", actor=you) == ("unchanged", None)
    status, write = memory_set(user=alice, key="role", value=" Engineer ", actor=you)
    assert (status, write.memory.value) == ("created", "Engineer")
    assert memory_set(user=alice, key="role", value="Engineer", actor=you) == ("unchanged", None)
    assert memory_set(user=alice, key="role", value="Lead", actor=you)[0] == "updated"
    status, history = memory_set(user=alice, key="role", value="  ", actor=you)
    assert (status, history.action) == ("deleted", "delete")
    assert MemoryHistory.objects.filter(user=alice, key="role").count() == 3


def test_entry_create_derives_a_readable_key_and_never_replaces(alice, you):
    first = entry_create(user=alice, kind="preference", value="Oat milk flat whites", actor=you)
    second = entry_create(user=alice, kind="preference", value="Oat milk flat whites!", actor=you)

    assert first.memory.key == "preference:oat-milk-flat-whites"
    assert second.memory.key == "preference:oat-milk-flat-whites-2"
    with pytest.raises(Conflict, match="already have 'preference:oat-milk-flat-whites'"):
        entry_create(
            user=alice, kind="preference", value="x", slug="oat-milk-flat-whites", actor=you
        )
    assert Memory.objects.get(key="preference:oat-milk-flat-whites").value == (
        "Oat milk flat whites"
    )
    with pytest.raises(InvalidInput) as bad:
        entry_create(user=alice, kind="wish", value="x", actor=you)
    assert bad.value.field == "kind"


def test_rename_changes_the_kind_and_keeps_the_row_and_its_history(alice, you, agent):
    write = entry_create(user=alice, kind="fact", value="Always include a TL;DR", actor=you)
    old_key = write.memory.key

    renamed = memory_rename(
        user=alice, key=old_key, new_key="instruction:always-include-a-tldr", actor=you
    )

    assert renamed.memory.pk == write.memory.pk
    assert Memory.objects.get(user=alice).key == "instruction:always-include-a-tldr"
    assert (
        renamed.history.action,
        renamed.history.before["key"],
        renamed.history.after["key"],
    ) == (
        "rename",
        old_key,
        "instruction:always-include-a-tldr",
    )
    (event,) = ActivityEvent.objects.filter(user=alice, payload__action="rename")
    assert event.payload["renamed_from"] == old_key
    entry_create(user=alice, kind="fact", value="Other", slug="other", actor=you)
    with pytest.raises(Conflict):
        memory_rename(
            user=alice, key="fact:other", new_key="instruction:always-include-a-tldr", actor=you
        )
    with pytest.raises(Forbidden):
        memory_rename(user=alice, key="fact:other", new_key="task:other", actor=agent)


# ---------------------------------------------------------------- the agent API


def test_the_api_answers_202_with_the_proposal(call_tool, alice, you, alice_token):
    _stated(alice, you)

    response = call_tool(
        alice_token, "create_memory", {"key": "name", "value": "Kev", "reason": "Signs as Kev"}
    )

    assert response.status_code == 202
    body = response.json()
    proposal = MemoryProposal.objects.get()
    assert body["status"] == "pending_review"
    assert body["proposal"] | {"created_at": None, "expires_at": None} == {
        "id": proposal.pk,
        "key": "name",
        "action": "update",
        "status": "pending_review",
        "trigger": "user_stated",
        "before": proposal.before,
        "after": proposal.after,
        "requested_key": "",
        "reason": "Signs as Kev",
        "agent": "assistant",
        "created_at": None,
        "expires_at": None,
        "decided_at": None,
    }
    assert (body["proposal"]["before"]["value"], body["proposal"]["after"]["value"]) == (
        "Kevin",
        "Kev",
    )
    update = call_tool(alice_token, "update_memory", {"key": "name", "pinned": True})
    delete = call_tool(alice_token, "delete_memory", {"key": "name"})
    assert (update.status_code, update.json()["memory"]["value"]) == (202, "Kevin")
    assert (delete.status_code, delete.json()["deleted"]) == (202, False)
    assert Memory.objects.get(user=alice, key="name").value == "Kevin"


def test_the_api_names_the_duplicate_and_says_unchanged(call_tool, alice, you, alice_token):
    _stated(alice, you)
    call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "Likes green tea"})

    duplicate = call_tool(
        alice_token, "create_memory", {"key": "fact:green-tea", "value": "likes green tea"}
    )
    unchanged = call_tool(alice_token, "create_memory", {"key": "name", "value": "Kevin"})

    assert duplicate.status_code == 200
    assert (duplicate.json()["status"], duplicate.json()["memory"]["key"]) == (
        "duplicate",
        "fact:tea",
    )
    assert duplicate.json()["similarity"] == 1.0
    assert (unchanged.status_code, unchanged.json()["status"]) == (200, "unchanged")
    assert not MemoryProposal.objects.exists()


def test_list_proposals_shows_an_agent_its_own(call_tool, alice, you, alice_token):
    _stated(alice, you)
    call_tool(alice_token, "create_memory", {"key": "name", "value": "Kev"})
    scout = AgentFactory(user=alice, name="scout")
    with pytest.raises(ReviewRequired):
        memory_upsert(user=alice, key="name", value="Kevster", actor=Actor.for_agent(scout))
    mine = MemoryProposal.objects.get(actor_agent__name="assistant")
    review.proposal_reject(user=alice, proposal_id=mine.pk, actor=you)

    listed = call_tool(alice_token, "list_proposals", {})
    pending = call_tool(alice_token, "list_proposals", {"status": "pending_review"})

    assert [(p["id"], p["status"]) for p in listed.json()["results"]] == [(mine.pk, "rejected")]
    assert listed.json()["results"][0]["decided_at"] is not None
    assert pending.json()["results"] == []


def test_restoring_a_state_from_before_a_rename_restores_the_renamed_memory(alice, you):
    first = entry_create(user=alice, kind="fact", value="Tea at four", actor=you)
    memory_update(user=alice, key=first.memory.key, value="Tea at five", actor=you)
    memory_rename(user=alice, key=first.memory.key, new_key="task:tea", actor=you)

    write = memory_restore(user=alice, history_id=first.history.pk, actor=you)

    assert list(Memory.objects.filter(user=alice).values_list("key", "value")) == [
        ("task:tea", "Tea at four")
    ]
    assert write.memory.pk == first.memory.pk


def test_a_new_entry_sharing_few_words_with_its_kind_is_not_compared_by_meaning(
    alice, you, agent, monkeypatch
):
    from memory import duplicates

    embedded = []
    real = duplicates._similarities
    monkeypatch.setattr(
        duplicates,
        "_similarities",
        lambda text, others: embedded.append(text) or real(text, others),
    )
    memory_upsert(user=alice, key="fact:city", value="Lives in Lisbon near the river", actor=you)

    memory_upsert(
        user=alice, key="fact:pets", value="Has two cats called Miso and Tofu", actor=agent
    )
    assert embedded == []
    with pytest.raises(ReviewRequired) as waiting:  # near what alice said, and adds "Portugal"
        memory_upsert(user=alice, key="fact:home", value="Lives in Lisbon, Portugal", actor=agent)
    assert embedded == ["Lives in Lisbon, Portugal"]
    assert waiting.value.proposal.key == "fact:city"


def test_accepting_a_new_memory_never_replaces_one_added_meanwhile(alice, you, agent):
    profile_update(user=alice, review_agent_memories=True)
    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=alice, key="fact:tea", value="green tea", actor=agent)
    memory_upsert(user=alice, key="fact:tea", value="oolong", actor=you)

    with pytest.raises(Conflict, match="You have 'fact:tea' now"):
        review.proposal_accept(user=alice, proposal_id=waiting.value.proposal.pk, actor=you)

    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert (memory.value, memory.source) == ("oolong", "user_stated")
    assert MemoryProposal.objects.get().status == "pending_review"
