"""Writes for work items: each creation and each change is recorded in the activity log,
in the same transaction as the row. Deleting keeps the row, marked deleted, so it can be
restored as it was (work_delete, work_restore).

Any of a user's agents may change any of that user's work items, not only the ones it
wrote: the work is the user's, and agents hand work on to each other (one drafts, another
finishes; an agent marks a heartbeat finding, which no agent wrote, done). The event names
the agent that made each change. Heartbeat findings (what the user's heartbeat checklist
turned up) keep their kind, and no other item becomes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from activity import events
from activity.actors import Actor
from lib.errors import InvalidInput, NotFound
from lib.tags import clean_tags
from profiles.services import agent_check_owner
from work.models import (
    MAX_BODY_LENGTH,
    MAX_TAGS,
    MAX_TITLE_LENGTH,
    WorkItem,
    WorkKind,
    WorkStatus,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

# What a work item may become by an update, in the order events name the fields.
UPDATABLE_FIELDS = ("title", "body", "kind", "status", "tags")


def work_create(
    *,
    user: AbstractBaseUser,
    title: str,
    body: str,
    actor: Actor,
    kind: str = WorkKind.REPORT,
    status: str = WorkStatus.DONE,
    agent: Agent | None = None,
    metadata: dict | None = None,
    tags: list[str] | None = None,
) -> WorkItem:
    title = _clean_title(title)
    _check_body(body)
    _check_kind(kind)
    _check_status(status)
    cleaned_tags = _clean_tags(tags or [])
    agent_check_owner(agent=agent, user=user)
    with transaction.atomic():
        item = WorkItem.objects.create(
            user=user,
            agent=agent if agent is not None else actor.agent,
            title=title,
            body=body,
            kind=kind,
            status=status,
            tags=cleaned_tags,
            metadata=metadata or {},
        )
        events.work_created(user=user, actor=actor, work_id=item.pk, title=title, kind=kind)
    return item


@dataclass(frozen=True)
class WorkUpdate:
    item: WorkItem
    changed: list[str]  # the fields that changed, in UPDATABLE_FIELDS order; empty: none


def work_update(
    *,
    user: AbstractBaseUser,
    pk: int,
    actor: Actor,
    title: str | None = None,
    body: str | None = None,
    kind: str | None = None,
    status: str | None = None,
    tags: list[str] | None = None,
) -> WorkUpdate:
    """Change the given fields of one of the user's work items (None: leave as is).

    NotFound for an id that is not the user's, or is deleted. A change writes the row and one
    `work_updated` event naming the changed fields; the same values again change nothing
    and record nothing."""
    wanted: dict[str, object] = {}
    if title is not None:
        wanted["title"] = _clean_title(title)
    if body is not None:
        _check_body(body)
        wanted["body"] = body
    if kind is not None:
        _check_kind(kind)
        wanted["kind"] = kind
    if status is not None:
        _check_status(status)
        wanted["status"] = status
    if tags is not None:
        wanted["tags"] = _clean_tags(tags)
    with transaction.atomic():
        item = WorkItem.objects.live().select_for_update().filter(user=user, pk=pk).first()
        if item is None:
            raise NotFound(f"No work item with id {pk}.", field="id")
        if (
            "kind" in wanted
            and wanted["kind"] != item.kind
            and WorkKind.HEARTBEAT
            in (
                item.kind,
                wanted["kind"],
            )
        ):
            raise InvalidInput(
                "Heartbeat findings keep their kind, and no other item becomes one.",
                field="kind",
            )
        changed = [
            name
            for name in UPDATABLE_FIELDS
            if name in wanted and getattr(item, name) != wanted[name]
        ]
        if not changed:
            return WorkUpdate(item=item, changed=[])
        for name in changed:
            setattr(item, name, wanted[name])
        item.save(update_fields=[*changed, "updated_at"])
        events.work_updated(
            user=user, actor=actor, work_id=item.pk, title=item.title, fields=changed
        )
    return WorkUpdate(item=item, changed=changed)


def work_seen_again(
    *, user: AbstractBaseUser, pk: int, actor: Actor, run_id: int
) -> WorkItem | None:
    """Note on one of the user's open heartbeat findings that the heartbeat reported it
    again (briefing/heartbeat.py): its `seen_again` count and `last_seen_run` in the
    metadata, its updated time, and a `work_updated` event naming `seen_again`. None when
    the item is no longer an open finding (done, archived or deleted meanwhile): then the
    heartbeat makes a new one."""
    with transaction.atomic():
        item = (
            WorkItem.objects.live()
            .select_for_update()
            .filter(user=user, pk=pk, kind=WorkKind.HEARTBEAT, status=WorkStatus.IN_PROGRESS)
            .first()
        )
        if item is None:
            return None
        # An imported item's metadata is any JSON object: a count that is not one restarts.
        count = item.metadata.get("seen_again")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            count = 0
        item.metadata = {**item.metadata, "seen_again": count + 1, "last_seen_run": run_id}
        item.save(update_fields=["metadata", "updated_at"])
        events.work_updated(
            user=user, actor=actor, work_id=item.pk, title=item.title, fields=["seen_again"]
        )
    return item


def work_delete(*, user: AbstractBaseUser, pk: int, actor: Actor) -> WorkItem:
    """Delete one of the user's work items: it leaves the Work pages and the tools, and waits
    in Recently deleted, as it was, until work_restore brings it back. The row stays (its
    `deleted_at` set), so what links to it (its events, the heartbeat run that found it)
    still does. Writes the `work_deleted` event; NotFound for an id that is not one of the
    user's items, or is deleted already."""
    with transaction.atomic():
        item = WorkItem.objects.live().select_for_update().filter(user=user, pk=pk).first()
        if item is None:
            raise NotFound(f"No work item with id {pk}.", field="id")
        item.deleted_at = timezone.now()
        # updated_at stays: it is when the item's content last changed.
        WorkItem.objects.filter(pk=item.pk).update(deleted_at=item.deleted_at)
        events.work_deleted(user=user, actor=actor, work_id=item.pk, title=item.title)
    return item


def work_restore(*, user: AbstractBaseUser, pk: int, actor: Actor) -> WorkItem:
    """Bring back one of the user's deleted work items as it was, with its `work_restored`
    event; NotFound for an id that is not one of the user's deleted items."""
    with transaction.atomic():
        item = WorkItem.objects.deleted().select_for_update().filter(user=user, pk=pk).first()
        if item is None:
            raise NotFound(f"No deleted work item with id {pk}.", field="id")
        item.deleted_at = None
        WorkItem.objects.filter(pk=item.pk).update(deleted_at=None)
        events.work_restored(user=user, actor=actor, work_id=item.pk, title=item.title)
    return item


def _clean_title(title: str) -> str:
    title = title.strip()
    if not title:
        raise InvalidInput("Title is empty.", field="title")
    if "\x00" in title:
        raise InvalidInput("Title contains a NUL character (U+0000).", field="title")
    if len(title) > MAX_TITLE_LENGTH:
        raise InvalidInput(f"Title is longer than {MAX_TITLE_LENGTH} characters.", field="title")
    return title


def _check_body(body: str) -> None:
    if len(body) > MAX_BODY_LENGTH:
        raise InvalidInput(
            f"Body is {len(body):,} characters long; at most {MAX_BODY_LENGTH:,}.", field="body"
        )
    if "\x00" in body:
        raise InvalidInput("Body contains a NUL character (U+0000).", field="body")


def _check_kind(kind: str) -> None:
    if kind not in WorkKind.values:
        raise InvalidInput(f"Unknown kind '{kind}'.", field="kind")


def _check_status(status: str) -> None:
    if status not in WorkStatus.values:
        raise InvalidInput(f"Unknown status '{status}'.", field="status")


def _clean_tags(tags: object) -> list[str]:
    return clean_tags(tags, limit=MAX_TAGS)
