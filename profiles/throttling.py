"""The agent API's per-token rate limit, counted atomically in the shared cache.

DRF's SimpleRateThrottle keeps a list of request times and writes it back after each
request: concurrent requests read the same list and each writes its own copy, so under
load most requests go uncounted (400 concurrent requests at 300/min all passed). Here
each window is a counter the cache increments atomically (Valkey/Redis INCR, a lock in
the local-memory cache): every web process and thread counts into the same number.

The window starts at a token's first request and lasts the rate's period; Retry-After
is the time left in it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

from profiles.models import AgentToken, SystemToken

if TYPE_CHECKING:
    from rest_framework.request import Request

PERIOD_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'600/min' -> (600, 60)."""
    number, _, period = rate.partition("/")
    return int(number), PERIOD_SECONDS[period[0]]


class AgentTokenThrottle(BaseThrottle):
    """MNEMO_API_RATE requests per token; over it, 429 with Retry-After."""

    def allow_request(self, request: Request, view: Any) -> bool:
        ident = self._ident(request)
        if ident is None:
            return True
        allowed, period = parse_rate(settings.MNEMO_API_RATE)
        key = f"mnemo:throttle:{ident}"
        now = time.time()
        count = self._count(key, now, period)
        if count <= allowed:
            return True
        started = cache.get(f"{key}:start") or now
        self._wait = max(1.0, started + period - now)
        return False

    @staticmethod
    def _count(key: str, now: float, period: int) -> int:
        """This request's number in its window: two cache calls (add, incr), three when it
        starts the window. add() only creates a missing key, so the window's first request
        starts it and concurrent ones all count into it."""
        for _ in range(2):
            if cache.add(f"{key}:count", 0, period):
                cache.set(f"{key}:start", now, period)
            try:
                return cache.incr(f"{key}:count")
            except ValueError:  # the window ended between add and incr: start the next
                continue
        return 1

    def wait(self) -> float | None:
        return getattr(self, "_wait", None)

    @staticmethod
    def _ident(request: Request) -> str | None:
        if isinstance(request.auth, AgentToken):
            return f"agent-{request.auth.pk}"
        if isinstance(request.auth, SystemToken):
            return f"system-{request.auth.pk}"
        return None
