"""What each row of the Activity page is about, as a link: one rule per event type (LINKS),
so a new event type without one fails tests/pages/test_activity_links.py.

A rule reads the ids in the event's payload and answers a Target: the page to open (the
memory's history, the document version, the work item, the turn, the inbox, Settings' panel)
and whether the thing is still there. Deleted but restorable, the row also says where to
restore it from (Recently deleted); no longer there at all (purged, never the user's, or a
payload without the id), the row says it is gone and links nowhere.

The rows of one page are looked up together (`found_for`): one query per kind of target,
whatever the number of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.urls import reverse

from activity.models import EventType
from context.selectors import document_proposal_states, version_states
from llm.selectors import turns_existing
from memory.models import ProposalStatus
from memory.selectors import history_states, proposal_states
from work.selectors import work_deleted_states

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from activity.models import ActivityEvent

THERE, DELETED, GONE = "", "deleted", "gone"


@dataclass(frozen=True)
class Target:
    """Where a row links. `url` is "" when there is nothing to open (`state` GONE); a
    DELETED thing still opens (its history, its version, its page) and `recover_url` is the
    Recently deleted page that restores it."""

    url: str = ""
    state: str = THERE
    recover_url: str = ""


@dataclass
class Found:
    """The targets of a page of events, looked up at once: id → state."""

    histories: dict[int, bool] = field(default_factory=dict)  # memory there now?
    versions: dict[int, bool] = field(default_factory=dict)  # document there now?
    work: dict[int, bool] = field(default_factory=dict)  # deleted?
    turns: set[int] = field(default_factory=set)
    proposals: dict[int, str] = field(default_factory=dict)  # status
    document_proposals: dict[int, str] = field(default_factory=dict)  # status


def _id(payload: dict[str, Any], name: str) -> int | None:
    value = payload.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _payload(event: ActivityEvent) -> dict[str, Any]:
    return event.payload if isinstance(event.payload, dict) else {}


# ---------------------------------------------------------------- one rule per kind of target


def _memory(payload: dict[str, Any], found: Found) -> Target:
    history_id = _id(payload, "history_id")
    if history_id not in found.histories:
        return Target(state=GONE)
    url = reverse("pages:history_detail", args=[history_id])
    if found.histories[history_id]:
        return Target(url)
    return Target(url, DELETED, reverse("pages:deleted_memories"))


def _version(payload: dict[str, Any], found: Found) -> Target:
    version_id = _id(payload, "version_id")
    if version_id not in found.versions:
        return Target(state=GONE)
    url = reverse("pages:document_version", args=[version_id])
    if found.versions[version_id]:
        return Target(url)
    return Target(url, DELETED, reverse("pages:deleted_documents"))


def _work(payload: dict[str, Any], found: Found) -> Target:
    work_id = _id(payload, "work_id")
    if work_id not in found.work:
        return Target(state=GONE)
    url = reverse("work_detail", args=[work_id])
    if found.work[work_id]:
        return Target(url, DELETED, reverse("work_recently_deleted"))
    return Target(url)


def _turn(payload: dict[str, Any], found: Found) -> Target:
    turn_id = _id(payload, "turn_id")
    if turn_id not in found.turns:
        return Target(state=GONE)
    return Target(reverse("learning:turn", args=[turn_id]))


def _turn_or_version(payload: dict[str, Any], found: Found) -> Target:
    """The profile's rewrite: the turn it followed, or the version it wrote."""
    turn = _turn(payload, found)
    return turn if turn.url else _version(payload, found)


def _proposal(payload: dict[str, Any], found: Found) -> Target:
    """A memory's proposal, or (its payload names a document_proposal_id) an identity
    file's, in the inbox: its pending row, or its row among the recently decided."""
    proposals, name, anchors = found.proposals, "proposal_id", ("proposal", "decided")
    if "document_proposal_id" in payload:
        proposals, name = found.document_proposals, "document_proposal_id"
        anchors = ("document-proposal", "decided-document")
    proposal_id = _id(payload, name)
    status = proposals.get(proposal_id) if proposal_id is not None else None
    if status is None:
        return Target(state=GONE)
    anchor = anchors[0] if status == ProposalStatus.PENDING else anchors[1]
    return Target(f"{reverse('review_inbox')}#{anchor}-{proposal_id}")


def _settings(anchor: str) -> Callable[[dict[str, Any], Found], Target]:
    """A panel of the Settings page (the heartbeat's runs, the LLM's use): always there."""

    def rule(payload: dict[str, Any], found: Found) -> Target:
        return Target(f"{reverse('pages:settings')}#{anchor}")

    return rule


LINKS: dict[str, Callable[[dict[str, Any], Found], Target]] = {
    EventType.MEMORY_WRITTEN: _memory,
    EventType.MEMORY_DELETED: _memory,
    EventType.PROPOSAL_CREATED: _proposal,
    EventType.PROPOSAL_ACCEPTED: _proposal,
    EventType.PROPOSAL_REJECTED: _proposal,
    EventType.PROPOSAL_EXPIRED: _proposal,
    EventType.DOCUMENT_WRITTEN: _version,
    EventType.DOCUMENT_DELETED: _version,
    EventType.BOOTSTRAP_COMPLETED: _version,
    EventType.WORK_CREATED: _work,
    EventType.WORK_UPDATED: _work,
    EventType.WORK_DELETED: _work,
    EventType.WORK_RESTORED: _work,
    EventType.HEARTBEAT_FINDING: _work,
    EventType.HEARTBEAT_OK: _settings("heartbeat-status"),
    EventType.HEARTBEAT_FAILED: _settings("heartbeat-status"),
    EventType.LLM_BUDGET_REACHED: _settings("llm-panel"),
    EventType.TURN_REPORTED: _turn,
    EventType.TURN_PROCESSED: _turn,
    EventType.CONSOLIDATION_FAILED: _turn,
    EventType.CAPTURE_FAILED: _turn,
    EventType.CONSOLIDATION_APPLIED: _turn_or_version,
}


def found_for(*, user: AbstractBaseUser, events: Iterable[ActivityEvent]) -> Found:
    """Look up every target the events name, one query per kind (none for a kind no event
    names), each limited to the user's own rows."""
    wanted: dict[str, list[int]] = {}
    for event in events:
        payload = _payload(event)
        for name in (
            "history_id",
            "version_id",
            "work_id",
            "turn_id",
            "proposal_id",
            "document_proposal_id",
        ):
            if (value := _id(payload, name)) is not None:
                wanted.setdefault(name, []).append(value)
    return Found(
        histories=history_states(user=user, ids=wanted.get("history_id", [])),
        versions=version_states(user=user, ids=wanted.get("version_id", [])),
        work=work_deleted_states(user=user, ids=wanted.get("work_id", [])),
        turns=turns_existing(user=user, ids=wanted.get("turn_id", [])),
        proposals=proposal_states(user=user, ids=wanted.get("proposal_id", [])),
        document_proposals=document_proposal_states(
            user=user, ids=wanted.get("document_proposal_id", [])
        ),
    )


def target_of(event: ActivityEvent, found: Found) -> Target:
    """The row's link; an event type with no rule (an old row of a type since removed) is
    shown as gone."""
    rule = LINKS.get(event.event_type)
    return rule(_payload(event), found) if rule is not None else Target(state=GONE)
