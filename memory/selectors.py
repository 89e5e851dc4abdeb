"""Read queries for memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.models import Memory

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet


def memory_list(*, user: AbstractBaseUser) -> QuerySet[Memory]:
    return Memory.objects.filter(user=user).order_by("key")
