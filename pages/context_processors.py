"""Template context for every page: the counts the navigation shows (templates/pages/_nav.html).

Each count is one query (the Inbox's two), run only when a template shows it (a callable that
templates call, at most once per request); anonymous visitors get nothing and cost nothing.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from briefing.heartbeat import unseen_findings_count
from context.selectors import pending_document_proposal_count
from memory.selectors import pending_proposal_count

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.http import HttpRequest


def nav_counts(request: HttpRequest) -> dict[str, Callable[[], int]]:
    """`inbox_count`, a signed-in user's proposals waiting in the review inbox (memories'
    and identity files'), and `heartbeat_findings_count`, the heartbeat findings they have
    not opened (the Work link)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "inbox_count": cache(
            lambda: pending_proposal_count(user=user) + pending_document_proposal_count(user=user)
        ),
        "heartbeat_findings_count": cache(lambda: unseen_findings_count(user=user)),
    }
