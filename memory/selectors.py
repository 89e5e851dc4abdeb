"""Read queries for memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from activity.actors import ActorKind
from memory.keys import ENTRY_KINDS, PROFILE_KEYS, STYLE_ASPECTS
from memory.models import HistoryAction, Memory, MemoryHistory

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

KINDS = ("profile", "style", *ENTRY_KINDS)


def memory_list(
    *,
    user: AbstractBaseUser,
    kind: str | None = None,
    tag: str | None = None,
    source: str | None = None,
    updated_since: datetime | None = None,
    after_key: str | None = None,
) -> QuerySet[Memory]:
    """The user's memories in key order, optionally filtered; `after_key` pages on."""
    memories = Memory.objects.filter(user=user)
    if kind == "profile":
        memories = memories.filter(key__in=PROFILE_KEYS)
    elif kind == "style":
        memories = memories.filter(key__regex=rf"^({'|'.join(STYLE_ASPECTS)})_")
    elif kind is not None:
        memories = memories.filter(key__startswith=f"{kind}:")
    if tag is not None:
        memories = memories.filter(tags__contains=[tag])
    if source is not None:
        memories = memories.filter(source=source)
    if updated_since is not None:
        memories = memories.filter(updated_at__gte=updated_since)
    if after_key is not None:
        memories = memories.filter(key__gt=after_key)
    return memories.order_by("key")


def memory_history_for_key(*, user: AbstractBaseUser, key: str) -> QuerySet[MemoryHistory]:
    """Every change to one key of the user's, newest first, with who made it."""
    return (
        MemoryHistory.objects.filter(user=user, key=key)
        .select_related("actor_user", "actor_agent")
        .order_by("-created_at", "-id")
    )


def memory_agent_names(*, user: AbstractBaseUser, keys: Iterable[str]) -> dict[str, str]:
    """For each key, the name of the agent that last wrote it (keys no agent wrote are absent)."""
    rows = (
        MemoryHistory.objects.filter(
            user=user, key__in=list(keys), actor_type=ActorKind.AGENT, actor_agent__isnull=False
        )
        .order_by("key", "-created_at", "-id")
        .distinct("key")
        .values_list("key", "actor_agent__name")
    )
    return dict(rows)


def deleted_memory_list(
    *, user: AbstractBaseUser, since: datetime, limit: int = 200
) -> list[MemoryHistory]:
    """The latest deletion of each key that has no memory now, newest first."""
    rows = (
        MemoryHistory.objects.filter(user=user, action=HistoryAction.DELETE, created_at__gte=since)
        .exclude(key__in=Memory.objects.filter(user=user).values("key"))
        .select_related("actor_user", "actor_agent")
        .order_by("key", "-created_at", "-id")
        .distinct("key")
    )
    return sorted(rows, key=lambda row: (row.created_at, row.pk), reverse=True)[:limit]
