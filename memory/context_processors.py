"""Template context for every page: how many proposals wait in the review inbox."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from memory.selectors import pending_proposal_count

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.http import HttpRequest


def inbox(request: HttpRequest) -> dict[str, Callable[[], int]]:
    """`inbox_count` for the navigation: a signed-in user's pending proposals.

    The count is one query, run only when a template shows it (a callable that templates
    call, at most once per request); anonymous visitors get nothing and cost nothing.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"inbox_count": cache(lambda: pending_proposal_count(user=user))}
