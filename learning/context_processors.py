"""Template context for every page: how many heartbeat findings the user has not opened."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from learning.heartbeat import unseen_findings_count

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.http import HttpRequest


def heartbeat_findings(request: HttpRequest) -> dict[str, Callable[[], int]]:
    """`heartbeat_findings_count` for the navigation's Work link, counted only when a
    template shows it (once per request); anonymous visitors cost nothing."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"heartbeat_findings_count": cache(lambda: unseen_findings_count(user=user))}
