"""One function per activity event type. Services call these inside their transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from activity.actors import Actor
from activity.models import ActivityEvent, EventType

if TYPE_CHECKING:
    from uuid import UUID

    from django.contrib.auth.models import AbstractBaseUser


def _record(
    event_type: EventType, *, user: AbstractBaseUser | None, actor: Actor, payload: dict
) -> ActivityEvent:
    return ActivityEvent.objects.create(
        event_type=event_type, user=user, payload=payload, **actor.as_fields()
    )


def memory_written_event(
    *,
    user: AbstractBaseUser,
    actor: Actor,
    key: str,
    action: str,
    source: str,
    history_id: int | None,
    renamed_from: str | None = None,
    batch: UUID | None = None,
    note_of: str | None = None,
    moved_from: str | None = None,
) -> ActivityEvent:
    """The memory_written row, unsaved: memory/write_sql.py saves it after the memory and its
    history row, filling in history_id. A rename names the old key; a change made by a bulk
    action names its batch (memory/bulk.py). `note_of`: the agent whose own note was
    written (absent for the user's memory); `moved_from`: the agent whose note the user
    moved into their memory (memory_share_note)."""
    payload: dict[str, object] = {
        "key": key,
        "action": action,
        "source": source,
        "history_id": history_id,
    }
    if renamed_from is not None:
        payload["renamed_from"] = renamed_from
    if batch is not None:
        payload["batch"] = str(batch)
    if note_of is not None:
        payload["note_of"] = note_of
    if moved_from is not None:
        payload["moved_from"] = moved_from
    return ActivityEvent(
        event_type=EventType.MEMORY_WRITTEN, user=user, payload=payload, **actor.as_fields()
    )


def memory_deleted(
    *,
    user: AbstractBaseUser,
    actor: Actor,
    key: str,
    history_id: int,
    batch: UUID | None = None,
    note_of: str | None = None,
) -> ActivityEvent:
    """A deletion; one made by a bulk action names its batch (memory/bulk.py), one of an
    agent's own note names the agent (`note_of`)."""
    payload: dict[str, object] = {"key": key, "history_id": history_id}
    if batch is not None:
        payload["batch"] = str(batch)
    if note_of is not None:
        payload["note_of"] = note_of
    return _record(EventType.MEMORY_DELETED, user=user, actor=actor, payload=payload)


def work_created(
    *, user: AbstractBaseUser, actor: Actor, work_id: int, title: str, kind: str
) -> ActivityEvent:
    return _record(
        EventType.WORK_CREATED,
        user=user,
        actor=actor,
        payload={"work_id": work_id, "title": title, "kind": kind},
    )


def document_written(
    *,
    user: AbstractBaseUser | None,
    actor: Actor,
    path: str,
    scope: str,
    action: str,
    version_id: int,
    agent_id: int | None = None,
) -> ActivityEvent:
    return _record(
        EventType.DOCUMENT_WRITTEN,
        user=user,
        actor=actor,
        payload={
            "path": path,
            "scope": scope,
            "agent_id": agent_id,
            "action": action,
            "version_id": version_id,
        },
    )


def document_deleted(
    *,
    user: AbstractBaseUser | None,
    actor: Actor,
    path: str,
    scope: str,
    version_id: int,
    agent_id: int | None = None,
) -> ActivityEvent:
    return _record(
        EventType.DOCUMENT_DELETED,
        user=user,
        actor=actor,
        payload={
            "path": path,
            "scope": scope,
            "agent_id": agent_id,
            "action": "delete",
            "version_id": version_id,
        },
    )


def proposal_created(
    *,
    user: AbstractBaseUser,
    actor: Actor,
    proposal_id: int,
    key: str,
    action: str,
    trigger: str,
) -> ActivityEvent:
    """An agent's write went to the user's review inbox instead of applying."""
    return _record(
        EventType.PROPOSAL_CREATED,
        user=user,
        actor=actor,
        payload={"proposal_id": proposal_id, "key": key, "action": action, "trigger": trigger},
    )


def proposal_decided(
    *,
    user: AbstractBaseUser,
    actor: Actor,
    event_type: EventType,
    proposal_id: int,
    key: str,
    proposed_by: str,
    history_id: int | None = None,
) -> ActivityEvent:
    """A proposal was accepted, rejected (by the user) or expired (by the system)."""
    return _record(
        event_type,
        user=user,
        actor=actor,
        payload={
            "proposal_id": proposal_id,
            "key": key,
            "proposed_by": proposed_by,
            "history_id": history_id,
        },
    )


def document_proposal_created(
    *, user: AbstractBaseUser, actor: Actor, proposal_id: int, path: str, action: str
) -> ActivityEvent:
    """An agent's change to an identity file every agent reads went to the user's review
    inbox instead of applying (context/services.py). The same event type as a memory's
    proposal; the payload names a document proposal and its path instead of a key."""
    return _record(
        EventType.PROPOSAL_CREATED,
        user=user,
        actor=actor,
        payload={
            "document_proposal_id": proposal_id,
            "path": path,
            "action": action,
            "trigger": "identity_file",
        },
    )


def document_proposal_decided(
    *,
    user: AbstractBaseUser,
    actor: Actor,
    event_type: EventType,
    proposal_id: int,
    path: str,
    proposed_by: str,
    version_id: int | None = None,
) -> ActivityEvent:
    """A document proposal was accepted, rejected (by the user) or expired (by the system);
    version_id is the version accepting wrote."""
    return _record(
        event_type,
        user=user,
        actor=actor,
        payload={
            "document_proposal_id": proposal_id,
            "path": path,
            "proposed_by": proposed_by,
            "version_id": version_id,
        },
    )


# --- the assistant loop (learning/, llm/) -------------------------------------------------


def turn_reported(
    *, user: AbstractBaseUser, actor: Actor, turn_id: int, learning: bool, reason: str = ""
) -> ActivityEvent:
    """An agent reported a turn; `learning` says whether Mnemo will learn from it."""
    payload: dict[str, object] = {"turn_id": turn_id, "learning": learning}
    if reason:
        payload["reason"] = reason
    return _record(EventType.TURN_REPORTED, user=user, actor=actor, payload=payload)


def turn_processed(*, user: AbstractBaseUser, turn_id: int, outcome: dict) -> ActivityEvent:
    """What came of a turn: the profile's fate, observations, tokens (learning/pipeline.py)."""
    return _record(
        EventType.TURN_PROCESSED,
        user=user,
        actor=Actor.system(),
        payload={"turn_id": turn_id, **outcome},
    )


def consolidation_applied(
    *,
    user: AbstractBaseUser,
    turn_id: int | None,
    version_id: int,
    profile_tokens: int,
    prompt_tokens: int,
    completion_tokens: int,
    left_out_lines: int = 0,
    left_out_version_id: int | None = None,
) -> ActivityEvent:
    """The profile rewritten. When the stored profile was over the budget, the rewrite
    started from its capped text: left_out_version_id is the version that keeps the
    left_out_lines the rewrite never saw."""
    payload: dict[str, object] = {
        "turn_id": turn_id,
        "version_id": version_id,
        "profile_tokens": profile_tokens,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
    }
    if left_out_lines:
        payload["left_out_lines"] = left_out_lines
        payload["left_out_version_id"] = left_out_version_id
    return _record(
        EventType.CONSOLIDATION_APPLIED, user=user, actor=Actor.system(), payload=payload
    )


def learning_failed(
    *, user: AbstractBaseUser, event_type: EventType, turn_id: int | None, reason: str, attempt: int
) -> ActivityEvent:
    """consolidation_failed or capture_failed: nothing was changed, and why."""
    return _record(
        event_type,
        user=user,
        actor=Actor.system(),
        payload={"turn_id": turn_id, "reason": reason, "attempt": attempt},
    )


def llm_budget_reached(*, user: AbstractBaseUser, used: int, budget: int) -> ActivityEvent:
    return _record(
        EventType.LLM_BUDGET_REACHED,
        user=user,
        actor=Actor.system(),
        payload={"used": used, "budget": budget},
    )


# --- the workspace: heartbeat, work, bootstrap ------------------------------------------------


def heartbeat_ok(*, user: AbstractBaseUser, run_id: int) -> ActivityEvent:
    """The heartbeat checklist ran and the model answered exactly HEARTBEAT_OK."""
    return _record(
        EventType.HEARTBEAT_OK, user=user, actor=Actor.system(), payload={"run_id": run_id}
    )


def heartbeat_finding(
    *, user: AbstractBaseUser, run_id: int, work_id: int, title: str, seen_again: bool = False
) -> ActivityEvent:
    """The heartbeat found something: a Work item of kind heartbeat holds the answer; with
    `seen_again`, it is an open finding the heartbeat reported once more."""
    payload: dict[str, object] = {"run_id": run_id, "work_id": work_id, "title": title}
    if seen_again:
        payload["seen_again"] = True
    return _record(EventType.HEARTBEAT_FINDING, user=user, actor=Actor.system(), payload=payload)


def heartbeat_failed(*, user: AbstractBaseUser, run_id: int, reason: str) -> ActivityEvent:
    """A heartbeat run could not finish (the model failed, the budget is spent…)."""
    return _record(
        EventType.HEARTBEAT_FAILED,
        user=user,
        actor=Actor.system(),
        payload={"run_id": run_id, "reason": reason},
    )


def work_updated(
    *, user: AbstractBaseUser, actor: Actor, work_id: int, title: str, fields: list[str]
) -> ActivityEvent:
    """A work item changed; `fields` names what changed (title, body, status, kind, tags)."""
    return _record(
        EventType.WORK_UPDATED,
        user=user,
        actor=actor,
        payload={"work_id": work_id, "title": title, "fields": fields},
    )


def work_deleted(
    *, user: AbstractBaseUser, actor: Actor, work_id: int, title: str
) -> ActivityEvent:
    """A work item was deleted (from its page, or by an import in replace mode); it waits in
    Recently deleted until it is restored."""
    return _record(
        EventType.WORK_DELETED,
        user=user,
        actor=actor,
        payload={"work_id": work_id, "title": title},
    )


def work_restored(
    *, user: AbstractBaseUser, actor: Actor, work_id: int, title: str
) -> ActivityEvent:
    """A deleted work item came back as it was."""
    return _record(
        EventType.WORK_RESTORED,
        user=user,
        actor=actor,
        payload={"work_id": work_id, "title": title},
    )


def bootstrap_completed(
    *, user: AbstractBaseUser, actor: Actor, version_id: int | None
) -> ActivityEvent:
    """An agent finished the first-run ritual: BOOTSTRAP.md was deleted (its last version
    is `version_id`, so it can be restored)."""
    return _record(
        EventType.BOOTSTRAP_COMPLETED,
        user=user,
        actor=actor,
        payload={"version_id": version_id},
    )
