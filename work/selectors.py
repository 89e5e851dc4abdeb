"""Reads for work items; always filtered by the requesting user."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from activity.models import ActivityEvent, EventType
from activity.selectors import activity_latest_by_id
from lib.errors import NotFound
from work.models import WorkItem, WorkKind, WorkStatus

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

# The agent filter's value for items no agent wrote (the heartbeat's, the admin's).
NO_AGENT = "none"


def work_list(
    *,
    user: AbstractBaseUser,
    kind: str | None = None,
    agent_id: int | str | None = None,
) -> QuerySet[WorkItem]:
    """The user's work items, newest first (the body is left out; lists don't show it).

    `kind` keeps one kind; `agent_id` keeps one agent's items, or NO_AGENT those no agent
    wrote. Another user's agent id simply matches nothing."""
    rows = WorkItem.objects.live().filter(user=user)
    if kind is not None:
        rows = rows.filter(kind=kind)
    if agent_id == NO_AGENT:
        rows = rows.filter(agent__isnull=True)
    elif agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    return rows.select_related("agent").defer("body", "metadata").order_by("-created_at", "-id")


def work_get(*, user: AbstractBaseUser, pk: int, include_deleted: bool = False) -> WorkItem | None:
    """One of the user's work items; a deleted one only with include_deleted (its page)."""
    items = WorkItem.objects.all() if include_deleted else WorkItem.objects.live()
    return items.select_related("agent").filter(user=user, pk=pk).first()


def work_get_or_404(*, user: AbstractBaseUser, pk: int) -> WorkItem:
    """One of the user's work items; NotFound (404 in the API) for anyone else's id."""
    item = work_get(user=user, pk=pk)
    if item is None:
        raise NotFound(f"No work item with id {pk}.", field="id")
    return item


def heartbeat_finding_count(*, user: AbstractBaseUser) -> int:
    """The user's heartbeat findings not yet archived (the Work page's quick filter)."""
    return (
        WorkItem.objects.live()
        .filter(user=user, kind=WorkKind.HEARTBEAT)
        .exclude(status=WorkStatus.ARCHIVED)
        .count()
    )


@dataclass(frozen=True)
class DeletedWork:
    """A deleted work item as Recently deleted shows it: the item, and the `work_deleted`
    event that says who deleted it (None if the log has no such event, e.g. a purge)."""

    item: WorkItem
    event: ActivityEvent | None


def deleted_work_list(
    *, user: AbstractBaseUser, since: datetime, limit: int = 200
) -> list[DeletedWork]:
    """The user's work items deleted since `since`, most recently deleted first, each with
    the event of its deletion (two queries)."""
    items = list(
        WorkItem.objects.deleted()
        .filter(user=user, deleted_at__gte=since)
        .select_related("agent")
        .defer("body", "metadata")
        .order_by("-deleted_at", "-id")[:limit]
    )
    deletions = activity_latest_by_id(
        user=user, event_type=EventType.WORK_DELETED, id_field="work_id", ids=[i.pk for i in items]
    )
    return [DeletedWork(item=item, event=deletions.get(item.pk)) for item in items]


def work_deletion(*, user: AbstractBaseUser, item: WorkItem) -> ActivityEvent | None:
    """The event of the item's deletion while it is deleted (who deleted it, and when);
    None for an item not deleted, or deleted with no event to say so."""
    if item.deleted_at is None:
        return None
    found = activity_latest_by_id(
        user=user, event_type=EventType.WORK_DELETED, id_field="work_id", ids=[item.pk]
    )
    return found.get(item.pk)


def work_deleted_states(*, user: AbstractBaseUser, ids: Iterable[int]) -> dict[int, bool]:
    """For each of these ids that is one of the user's work items: whether it is deleted
    (True) or not (False). An id missing from the answer is no item of theirs (never was, or
    purged). One query."""
    wanted = {pk for pk in ids if isinstance(pk, int) and not isinstance(pk, bool)}
    if not wanted:
        return {}
    rows = WorkItem.objects.filter(user=user, pk__in=wanted).values_list("pk", "deleted_at")
    return {pk: deleted_at is not None for pk, deleted_at in rows}
