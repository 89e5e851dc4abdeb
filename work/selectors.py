"""Reads for work items; always filtered by the requesting user."""

from __future__ import annotations

from typing import TYPE_CHECKING

from work.models import WorkItem

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet


def work_list(*, user: AbstractBaseUser) -> QuerySet[WorkItem]:
    """The user's work items, newest first (the body is left out; lists don't show it)."""
    return (
        WorkItem.objects.filter(user=user)
        .select_related("agent")
        .defer("body", "metadata")
        .order_by("-created_at", "-id")
    )


def work_get(*, user: AbstractBaseUser, pk: int) -> WorkItem | None:
    return WorkItem.objects.select_related("agent").filter(user=user, pk=pk).first()
