"""The review inbox's write path for documents: accepting, rejecting and expiring the
proposals agents' changes to the user's identity files became (context/services.py).

Accepting applies the change through context/services.py with the user as the actor: a
version with its `document_written` (or `document_deleted`) event, which the proposal links
as `applied`, so the version says who accepted it and the proposal who proposed it.
Rejecting and expiring change only the proposal. Each writes its event. The review inbox's
page (context/review_views.py) and beat's task (context/tasks.py) call these alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from activity import events
from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from context import services
from context.models import DocumentProposal, DocumentVersion, VersionAction
from lib.errors import Conflict, NotFound, VersionConflict
from memory.models import ProposalStatus
from memory.review import check_decider, lock_pending

if TYPE_CHECKING:
    from datetime import datetime

    from django.contrib.auth.models import AbstractBaseUser


@dataclass(frozen=True)
class DocumentDecided:
    proposal: DocumentProposal
    version: DocumentVersion | None  # the version accepting wrote (None: rejected, or no-op)


def document_proposal_accept(
    *, user: AbstractBaseUser, proposal_id: int, actor: Actor
) -> DocumentDecided:
    """Apply a pending proposal as the user. A write or delete made from a version that is
    no longer the document's newest (the user changed it since) is a Conflict, and nothing
    changes: accepting never overwrites a change the proposal did not see."""
    check_decider(actor)
    with transaction.atomic():
        proposal = lock_pending(DocumentProposal, user=user, proposal_id=proposal_id)
        version = _apply(user, proposal, actor)
        _decide(proposal, ProposalStatus.ACCEPTED, actor, version)
    return DocumentDecided(proposal, version)


def document_proposal_reject(
    *, user: AbstractBaseUser, proposal_id: int, actor: Actor
) -> DocumentDecided:
    """Turn a pending proposal down; the document stays as it is."""
    check_decider(actor)
    with transaction.atomic():
        proposal = lock_pending(DocumentProposal, user=user, proposal_id=proposal_id)
        _decide(proposal, ProposalStatus.REJECTED, actor, None)
    return DocumentDecided(proposal, None)


def document_proposals_expire(*, now: datetime | None = None) -> int:
    """Mark every pending document proposal past its time as expired, each with an activity
    event (by the system). Returns how many. Beat runs it hourly (context/tasks.py)."""
    now = now or timezone.now()
    with transaction.atomic():
        due = list(
            DocumentProposal.objects.filter(status=ProposalStatus.PENDING, expires_at__lte=now)
            .select_for_update(skip_locked=True, of=("self",))
            .select_related("actor_agent", "actor_user")
        )
        if not due:
            return 0
        DocumentProposal.objects.filter(pk__in=[p.pk for p in due]).update(
            status=ProposalStatus.EXPIRED, decided_at=now
        )
        system = Actor.system()
        ActivityEvent.objects.bulk_create(
            ActivityEvent(
                event_type=EventType.PROPOSAL_EXPIRED,
                user_id=proposal.user_id,
                payload={
                    "document_proposal_id": proposal.pk,
                    "path": proposal.path,
                    "proposed_by": proposal.actor_label,
                    "version_id": None,
                },
                **system.as_fields(),
            )
            for proposal in due
        )
    return len(due)


def _apply(
    user: AbstractBaseUser, proposal: DocumentProposal, actor: Actor
) -> DocumentVersion | None:
    path = proposal.path
    try:
        if proposal.action == VersionAction.APPEND:  # adds to whatever is there now
            document = services.document_append(
                user=user, path=path, content=proposal.content, actor=actor
            )
            return document.written_version
        if proposal.action == VersionAction.WRITE:
            document = services.document_write(
                user=user,
                path=path,
                content=proposal.content,
                actor=actor,
                base_version=proposal.base_version,
                create_only=proposal.before is None,
            )
            return document.written_version
        try:
            return services.document_delete(
                user=user, path=path, actor=actor, base_version=proposal.base_version
            )
        except NotFound:
            return None  # gone already: what it asked for is done
    except VersionConflict:
        raise Conflict(
            f"{path} changed since {_proposer(proposal)} proposed this, and accepting would "
            f"undo that change. Reject it, or open {path} and make the change yourself.",
            field="id",
        ) from None


def _proposer(proposal: DocumentProposal) -> str:
    return proposal.actor_label  # "agent <its name>" (activity/actors.py)


def _decide(
    proposal: DocumentProposal,
    status: ProposalStatus,
    actor: Actor,
    version: DocumentVersion | None,
) -> None:
    proposal.status = status
    proposal.decided_at = timezone.now()
    proposal.decided_by = actor.user
    proposal.applied = version
    proposal.save(update_fields=["status", "decided_at", "decided_by", "applied"])
    event_type = (
        EventType.PROPOSAL_ACCEPTED
        if status == ProposalStatus.ACCEPTED
        else EventType.PROPOSAL_REJECTED
    )
    events.document_proposal_decided(
        user=proposal.user,
        actor=actor,
        event_type=event_type,
        proposal_id=proposal.pk,
        path=proposal.path,
        proposed_by=proposal.actor_label,
        version_id=version.pk if version is not None else None,
    )
