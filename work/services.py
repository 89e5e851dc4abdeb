"""Writes for work items: each creation is recorded in the activity log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from activity import events
from activity.actors import Actor
from lib.errors import InvalidInput
from profiles.services import agent_check_owner
from work.models import WorkItem, WorkKind, WorkStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent


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
) -> WorkItem:
    title = title.strip()
    if not title:
        raise InvalidInput("Title is empty.", field="title")
    if kind not in WorkKind.values:
        raise InvalidInput(f"Unknown kind '{kind}'.", field="kind")
    if status not in WorkStatus.values:
        raise InvalidInput(f"Unknown status '{status}'.", field="status")
    agent_check_owner(agent=agent, user=user)
    with transaction.atomic():
        item = WorkItem.objects.create(
            user=user,
            agent=agent if agent is not None else actor.agent,
            title=title,
            body=body,
            kind=kind,
            status=status,
            metadata=metadata or {},
        )
        events.work_created(user=user, actor=actor, work_id=item.pk, title=title, kind=kind)
    return item
