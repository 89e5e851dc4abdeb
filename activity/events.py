"""One function per activity event type. Services call these inside their transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from activity.actors import Actor
from activity.models import ActivityEvent, EventType

if TYPE_CHECKING:
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
) -> ActivityEvent:
    """The memory_written row, unsaved: memory/services.py inserts it in the same statement
    as the memory and its history row, which fills in history_id. A rename names the old
    key."""
    payload: dict[str, object] = {
        "key": key,
        "action": action,
        "source": source,
        "history_id": history_id,
    }
    if renamed_from is not None:
        payload["renamed_from"] = renamed_from
    return ActivityEvent(
        event_type=EventType.MEMORY_WRITTEN, user=user, payload=payload, **actor.as_fields()
    )


def memory_deleted(
    *, user: AbstractBaseUser, actor: Actor, key: str, history_id: int
) -> ActivityEvent:
    return _record(
        EventType.MEMORY_DELETED,
        user=user,
        actor=actor,
        payload={"key": key, "history_id": history_id},
    )


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
