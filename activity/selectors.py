"""Reads for the activity log; always filtered by the requesting user."""

from __future__ import annotations

from typing import TYPE_CHECKING

from activity.models import ActivityEvent

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

    from profiles.models import Agent


def activity_list(
    *, user: AbstractBaseUser, event_type: str = "", agent: Agent | None = None
) -> QuerySet[ActivityEvent]:
    """The user's events, newest first, optionally of one type or by one of their agents."""
    events = ActivityEvent.objects.filter(user=user).select_related("actor_user", "actor_agent")
    if event_type:
        events = events.filter(event_type=event_type)
    if agent is not None:
        events = events.filter(actor_agent=agent, actor_agent__user=user)
    return events.order_by("-created_at", "-id")


def activity_latest_by_id(
    *, user: AbstractBaseUser, event_type: str, id_field: str, ids: Iterable[int]
) -> dict[int, ActivityEvent]:
    """The user's latest event of `event_type` for each of `ids`, keyed by the id its payload
    names in `id_field` ("work_id": who deleted each work item, and when). One query."""
    wanted = [pk for pk in ids if isinstance(pk, int)]
    if not wanted:
        return {}
    events = (
        ActivityEvent.objects.filter(
            user=user, event_type=event_type, **{f"payload__{id_field}__in": wanted}
        )
        .select_related("actor_user", "actor_agent")
        .order_by("-created_at", "-id")
    )
    latest: dict[int, ActivityEvent] = {}
    for event in events:
        latest.setdefault(event.payload[id_field], event)
    return latest
