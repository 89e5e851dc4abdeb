"""Read queries for memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.keys import ENTRY_KINDS, PROFILE_KEYS, STYLE_ASPECTS
from memory.models import Memory

if TYPE_CHECKING:
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
