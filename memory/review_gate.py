"""The review gate: what an agent's (or the system's) write becomes instead of applying.

A change of what the user stated, and a new memory while the user reviews agents' new
memories, become a proposal in the user's review inbox (deciding it is memory/review.py's);
a new entry near one of its kind (memory/duplicates.py) is merged into that one's history
or proposed as an update of it. Run by memory/services.py's write, under its row lock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone

from activity import events
from activity.actors import Actor, ActorKind
from memory.duplicates import find_near_duplicate
from memory.models import (
    HistoryAction,
    Memory,
    MemoryHistory,
    MemoryProposal,
    ProposalAction,
    ProposalStatus,
    ProposalTrigger,
    Source,
)
from memory.outcomes import MemoryWrite
from memory.snapshots import _snapshot_fields
from memory.write_sql import _locked

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from llm.models import Turn


def _review_gate(
    user: AbstractBaseUser,
    key: str,
    fields: dict[str, Any],
    actor: Actor,
    memory: Memory | None,
    review_new: bool,
    create: bool,
    reason: str,
) -> MemoryWrite | MemoryProposal | None:
    """What an agent's write becomes instead of applying, if anything: the proposal it
    must wait as, or (a user-stated row it would leave as it is) an unchanged write."""
    if memory is not None and memory.source == Source.USER_STATED:
        before = memory.snapshot()
        after = {**before, **_snapshot_fields(fields)}
        # A new time or session changes what the user said as much as a new text does.
        if all(after[name] == before[name] for name in GATED_FIELDS):
            return MemoryWrite(memory=memory, created=False, history=None)
        return _propose(
            user,
            key,
            actor,
            ProposalAction.UPDATE,
            ProposalTrigger.USER_STATED,
            before=before,
            after=after,
            reason=reason,
            turn=fields.get("turn"),
        )
    if memory is None and create and review_new:
        return _propose_new(user, key, fields, actor, reason)
    return None


def _propose_new(
    user: AbstractBaseUser, key: str, fields: dict[str, Any], actor: Actor, reason: str
) -> MemoryProposal:
    """Propose adding a memory with these fields."""
    return _propose(
        user,
        key,
        actor,
        ProposalAction.CREATE,
        ProposalTrigger.NEW_MEMORY,
        before=None,
        after=_new_snapshot(fields),
        reason=reason,
        turn=fields.get("turn"),
    )


# What an agent's write to a user-stated memory may not change without the user's review
# (source and confidence follow who wrote it; the value says the rest).
GATED_FIELDS = ("value", "tags", "pinned", "occurred_at", "session")


@dataclass(frozen=True)
class _Merged:
    """An agent's new note merged into `memory`, which says it already: raised as
    DuplicateMemory once committed. `history`: the merge row (None: kept there already)."""

    memory: Memory
    similarity: float
    history: MemoryHistory | None


def _near_entry(
    user: AbstractBaseUser,
    key: str,
    fields: dict[str, Any],
    actor: Actor,
    reason: str,
    review_new: bool,
) -> _Merged | MemoryProposal | None:
    """What an agent's new entry becomes when one of its kind is near (memory/duplicates.py),
    if not its own row (None).

    Run under the lock _locked took on the user's new entries of the kind, until the
    transaction ends: two agents writing the same note at once cannot both find nothing
    near and both add it. A note that adds nothing is merged into the near one (its history
    keeps the text). One that adds something is a proposal to update the near one only when
    that would change what the user stated, or the user reviews agents' new memories;
    beside an agent's note it is stored as its own row (an Inbox of agents' notes about
    each other is a queue the user never asked for: issue 26), and the Inbox suggests
    tidying such look-alikes later (memory/look_alike.py).
    """
    agent = actor.agent if actor.kind == ActorKind.AGENT else None
    match = find_near_duplicate(user=user, key=key, value=fields["value"], agent=agent)
    if match is None:
        return None
    if match.adds_something and match.source != Source.USER_STATED and not review_new:
        # Stored as its own row beside an agent's note, whatever that note is now: nothing
        # to lock or read again (the check's copy decides, as it does a moment later).
        return None
    near, _ = _locked(user, match.key, actor)
    if near is None or near.value != match.value:
        return None  # deleted or changed since the check: nothing to merge into now
    if not match.adds_something:
        return _merge_note(user, near, fields, actor, match.similarity)
    if near.source != Source.USER_STATED and not review_new:
        return None
    before = near.snapshot()
    return _propose(
        user,
        near.key,
        actor,
        ProposalAction.UPDATE,
        ProposalTrigger.NEAR_DUPLICATE,
        before=before,
        after={**before, **_snapshot_fields(fields)},
        reason=reason,
        requested_key=key,
        turn=fields.get("turn"),
    )


def _merge_note(
    user: AbstractBaseUser, memory: Memory, fields: dict[str, Any], actor: Actor, similarity: float
) -> _Merged:
    """Keep an agent's note that adds nothing to the locked `memory` in its history: a
    `merge` row (memory/models.py HistoryAction) and its memory_written event.

    The memory itself is left as it was, updated_at included: its text did not change, and
    updated_at is what an import's "newer change wins" and search's freshness read. The note
    keeps when it was said and in which conversation when the agent gave them (the memory
    keeps its own). The same note from the same actor again (a retry) is kept once."""
    said = {name: fields[name] for name in ("occurred_at", "session") if fields.get(name)}
    note = {"value": fields["value"], **_snapshot_fields(said)}
    kept = MemoryHistory.objects.filter(
        memory=memory, action=HistoryAction.MERGE, after__merged=note, **actor.as_fields()
    )
    if kept.exists():
        return _Merged(memory, similarity, None)
    state = memory.snapshot()
    history = MemoryHistory.objects.create(
        user=user,
        key=memory.key,
        memory=memory,
        action=HistoryAction.MERGE,
        source=memory.source,
        before=state,
        after={**state, "merged": note},
        **actor.as_fields(),
    )
    events.memory_written_event(
        user=user,
        actor=actor,
        key=memory.key,
        action=HistoryAction.MERGE,
        source=memory.source,
        history_id=history.pk,
    ).save()
    return _Merged(memory, similarity, history)


def _new_snapshot(fields: dict[str, Any]) -> dict[str, Any]:
    """The snapshot a new row with these fields would have. Without a time of its own,
    a proposed memory takes the proposal's when accepted (memory/review.py), so that an
    agent's retry proposes the same state."""
    return {"tags": [], "pinned": False, "session": "", **_snapshot_fields(fields)}


def _propose(
    user: AbstractBaseUser,
    key: str,
    actor: Actor,
    action: ProposalAction,
    trigger: ProposalTrigger,
    *,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    reason: str,
    requested_key: str = "",
    turn: Turn | None = None,
) -> MemoryProposal:
    """Put the write in the user's review inbox, inside the caller's transaction.

    The same proposal again (an agent retrying) is the pending one; a different one from
    the same proposer for the same key replaces it (the older is marked superseded).
    """
    now = timezone.now()
    pending = MemoryProposal.objects.filter(
        user=user,
        key=key,
        status=ProposalStatus.PENDING,
        actor_type=actor.kind,
        actor_agent=actor.agent,
    ).select_for_update()
    for proposal in pending:
        if (proposal.action, proposal.after, proposal.requested_key) == (
            action,
            after,
            requested_key,
        ):
            return proposal
    pending.update(status=ProposalStatus.SUPERSEDED, decided_at=now)
    proposal = MemoryProposal.objects.create(
        user=user,
        key=key,
        action=action,
        trigger=trigger,
        before=before,
        after=after,
        requested_key=requested_key,
        reason=reason,
        turn=turn,
        expires_at=now + timedelta(days=settings.MNEMO_PROPOSAL_TTL_DAYS),
        **actor.as_fields(),
    )
    events.proposal_created(
        user=user,
        actor=actor,
        proposal_id=proposal.pk,
        key=key,
        action=action,
        trigger=trigger,
    )
    return proposal
