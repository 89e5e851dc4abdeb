"""The review inbox's write path: accepting, rejecting and expiring proposals.

Proposals are made by memory/review_gate.py, inside the agent's write that could not apply
(it would change or delete what the user stated, it adds to an entry the user stated, or
the user reviews agents' new memories). Accepting one applies it through
memory/services.py with the user as the actor, so the memory's history row says who
accepted it and links the proposal, which says who proposed it; both are in the activity
log. Pages, the API and tasks call these
functions alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.utils import timezone

from activity import events
from activity.actors import Actor, ActorKind
from activity.models import ActivityEvent, EventType
from lib.errors import Conflict, Forbidden, NotFound, ServiceError
from memory.entries import entry_create
from memory.models import (
    Memory,
    MemoryHistory,
    MemoryProposal,
    ProposalAction,
    ProposalStatus,
    ProposalTrigger,
    Source,
)
from memory.services import memory_delete, memory_upsert
from memory.validation import UNSET

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from django.contrib.auth.models import AbstractBaseUser

MAX_BULK = 200


@dataclass(frozen=True)
class Decided:
    proposal: MemoryProposal
    history: MemoryHistory | None  # the write that applied it (None: rejected, or no-op)


@dataclass
class BulkDecision:
    done: list[Decided] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (id, why)


def proposal_accept(
    *,
    user: AbstractBaseUser,
    proposal_id: int,
    actor: Actor,
    value: str = UNSET,
    keep_both: bool = False,
) -> Decided:
    """Apply a pending proposal as the user, optionally with the text edited first.

    What it leaves is the user's statement when they edited it or when it changes what
    they had stated; otherwise (an agent's new memory, or a change to an agent's note) it
    stays the agent's note. `keep_both`, for a near-duplicate, adds the agent's text under
    the key it asked for and leaves the near entry as it is.
    """
    check_decider(actor)
    with transaction.atomic():
        proposal = lock_pending(MemoryProposal, user=user, proposal_id=proposal_id)
        history = _apply(user, proposal, actor, value, keep_both)
        _decide(proposal, ProposalStatus.ACCEPTED, actor, history)
    return Decided(proposal, history)


def proposal_reject(*, user: AbstractBaseUser, proposal_id: int, actor: Actor) -> Decided:
    """Turn a pending proposal down; the memory stays as it is."""
    check_decider(actor)
    with transaction.atomic():
        proposal = lock_pending(MemoryProposal, user=user, proposal_id=proposal_id)
        _decide(proposal, ProposalStatus.REJECTED, actor, None)
    return Decided(proposal, None)


def proposals_decide(
    *, user: AbstractBaseUser, proposal_ids: Iterable[int], accept: bool, actor: Actor
) -> BulkDecision:
    """Accept or reject several proposals, each on its own: one that cannot be decided
    (decided meanwhile, expired) is skipped with the reason, the others go through."""
    ids = list(dict.fromkeys(proposal_ids))
    if len(ids) > MAX_BULK:
        raise Conflict(f"At most {MAX_BULK} proposals at a time.", field="ids")
    result = BulkDecision()
    for proposal_id in ids:
        try:
            if accept:
                decided = proposal_accept(user=user, proposal_id=proposal_id, actor=actor)
            else:
                decided = proposal_reject(user=user, proposal_id=proposal_id, actor=actor)
        except ServiceError as error:
            result.skipped.append((proposal_id, error.message))
        else:
            result.done.append(decided)
    return result


def proposals_expire(*, now: datetime | None = None) -> int:
    """Mark every pending proposal past its time as expired, each with an activity event
    (by the system). Returns how many. Beat runs it hourly (memory/tasks.py)."""
    now = now or timezone.now()
    with transaction.atomic():
        due = list(
            MemoryProposal.objects.filter(status=ProposalStatus.PENDING, expires_at__lte=now)
            .select_for_update(skip_locked=True, of=("self",))
            .select_related("actor_agent", "actor_user")
        )
        if not due:
            return 0
        MemoryProposal.objects.filter(pk__in=[p.pk for p in due]).update(
            status=ProposalStatus.EXPIRED, decided_at=now
        )
        system = Actor.system()
        ActivityEvent.objects.bulk_create(
            ActivityEvent(
                event_type=EventType.PROPOSAL_EXPIRED,
                user_id=proposal.user_id,
                payload=_event_payload(proposal, None),
                **system.as_fields(),
            )
            for proposal in due
        )
    return len(due)


def check_decider(actor: Actor) -> None:
    """Only the user decides on a proposal (of a memory here, of a document in
    context/review.py)."""
    if actor.kind != ActorKind.USER:
        raise Forbidden("Only the user decides on proposals.")


def lock_pending[P: models.Model](model: type[P], *, user: AbstractBaseUser, proposal_id: int) -> P:
    """The user's proposal of `model` (MemoryProposal, DocumentProposal), locked, while it
    can still be decided: NotFound for anyone else's, Conflict once decided or expired."""
    proposal = (
        model.objects.select_for_update(of=("self",))
        .select_related("actor_agent")
        .filter(user=user, pk=proposal_id)
        .first()
    )
    if proposal is None:
        raise NotFound(f"No proposal {proposal_id}.", field="id")
    if proposal.status != ProposalStatus.PENDING:
        raise Conflict(
            f"Proposal {proposal_id} was {proposal.get_status_display().lower()} already.",
            field="id",
        )
    if proposal.expires_at <= timezone.now():
        raise Conflict(f"Proposal {proposal_id} has expired.", field="id")
    return proposal


def _apply(
    user: AbstractBaseUser, proposal: MemoryProposal, actor: Actor, value: str, keep_both: bool
) -> MemoryHistory | None:
    if proposal.action == ProposalAction.DELETE:
        try:
            return memory_delete(user=user, key=proposal.key, actor=actor)
        except NotFound:
            return None  # gone already: what it asked for is done
    if (
        proposal.action == ProposalAction.CREATE
        and Memory.objects.filter(user=user, owner_agent=None, key=proposal.key).exists()
    ):
        # Added meanwhile (by the user, say): accepting must not replace it unseen.
        raise Conflict(
            f"You have '{proposal.key}' now; edit it instead, or reject this proposal.",
            field="id",
        )
    after: dict[str, Any] = proposal.after
    edited = value is not UNSET and value.strip() != after["value"]
    text = value if value is not UNSET else after["value"]
    if keep_both:
        if proposal.trigger != ProposalTrigger.NEAR_DUPLICATE or not proposal.requested_key:
            raise Conflict("Only a near-duplicate can be kept beside the entry.", field="id")
        kind, _, slug = proposal.requested_key.partition(":")
        write = entry_create(
            user=user,
            kind=kind,
            slug=slug,
            value=text,
            actor=actor,
            tags=after["tags"],
            turn=proposal.turn,
            **_when_and_where(proposal, beside=True),
        )
        return write.history
    users_now = edited or (proposal.before or {}).get("source") == Source.USER_STATED
    agent_note = {"source": after["source"], "confidence": after["confidence"]}
    write = memory_upsert(
        user=user,
        key=proposal.key,
        value=text,
        actor=actor,
        tags=after["tags"],
        pinned=after["pinned"],
        turn=proposal.turn,  # a captured observation keeps its link to the turn
        **({} if users_now else agent_note),
        **_when_and_where(proposal),
    )
    return write.history


def _when_and_where(proposal: MemoryProposal, *, beside: bool = False) -> dict[str, Any]:
    """The time and session the proposal applies (memory/occurrence.py).

    A proposal made before memories had them holds neither: the memory keeps its own. A
    new memory proposed without a time was said when it was proposed, not when accepted.
    Kept `beside` the near entry it overlaps, the new entry takes from the merged state
    only what differs from that entry's (what the agent gave); the rest is its own."""
    after, before = proposal.after, proposal.before or {}
    given = {name: after[name] for name in ("occurred_at", "session") if name in after}
    if beside:
        given = {name: value for name, value in given.items() if before.get(name) != value}
    if proposal.action == ProposalAction.CREATE or beside:
        given.setdefault("occurred_at", proposal.created_at)
    return given


def _decide(
    proposal: MemoryProposal,
    status: ProposalStatus,
    actor: Actor,
    history: MemoryHistory | None,
) -> None:
    proposal.status = status
    proposal.decided_at = timezone.now()
    proposal.decided_by = actor.user
    proposal.applied = history
    proposal.save(update_fields=["status", "decided_at", "decided_by", "applied"])
    event_type = (
        EventType.PROPOSAL_ACCEPTED
        if status == ProposalStatus.ACCEPTED
        else EventType.PROPOSAL_REJECTED
    )
    events.proposal_decided(
        user=proposal.user,
        actor=actor,
        event_type=event_type,
        **_event_payload(proposal, history),
    )


def _event_payload(proposal: MemoryProposal, history: MemoryHistory | None) -> dict[str, Any]:
    return {
        "proposal_id": proposal.pk,
        "key": proposal.key,
        "proposed_by": proposal.actor_label,
        "history_id": history.pk if history is not None else None,
    }
