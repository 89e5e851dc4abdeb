"""Reads for work items; always filtered by the requesting user."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.errors import NotFound
from work.models import WorkItem, WorkKind, WorkStatus

if TYPE_CHECKING:
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
    rows = WorkItem.objects.filter(user=user)
    if kind is not None:
        rows = rows.filter(kind=kind)
    if agent_id == NO_AGENT:
        rows = rows.filter(agent__isnull=True)
    elif agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    return rows.select_related("agent").defer("body", "metadata").order_by("-created_at", "-id")


def work_get(*, user: AbstractBaseUser, pk: int) -> WorkItem | None:
    return WorkItem.objects.select_related("agent").filter(user=user, pk=pk).first()


def work_get_or_404(*, user: AbstractBaseUser, pk: int) -> WorkItem:
    """One of the user's work items; NotFound (404 in the API) for anyone else's id."""
    item = work_get(user=user, pk=pk)
    if item is None:
        raise NotFound(f"No work item with id {pk}.", field="id")
    return item


def heartbeat_finding_count(*, user: AbstractBaseUser) -> int:
    """The user's heartbeat findings not yet archived (the Work page's quick filter)."""
    return (
        WorkItem.objects.filter(user=user, kind=WorkKind.HEARTBEAT)
        .exclude(status=WorkStatus.ARCHIVED)
        .count()
    )
