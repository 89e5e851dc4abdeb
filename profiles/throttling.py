"""The agent API's per-token rate limit, counted atomically in the shared cache.

DRF's SimpleRateThrottle keeps a list of request times and writes it back after each
request: concurrent requests read the same list and each writes its own copy, so under
load most requests go uncounted (400 concurrent requests at 300/min all passed). Here
each window is a counter the cache increments atomically (Valkey/Redis INCR, a lock in
the local-memory cache): every web process and thread counts into the same number.

The window starts at a token's first request and lasts the rate's period; Retry-After
is the time left in it. On Valkey/Redis a request is counted in one round trip through the
process's kept client (lib/kept_redis.py): SET the window's counter if it is missing, with
the period as its expiry, INCR it, and read its time to live, in one MULTI/EXEC, so the
counter never outlives its window. Any other cache (the local-memory one of a single
process) counts with add and incr, the window's start kept beside the counter.

While the cache cannot be reached (Valkey restarting, Redis down) nothing can be counted.
MNEMO_API_RATE_FAIL_OPEN says which requests then pass uncounted: `reads` (the default:
GET requests and the read-only tools in READ_TOOLS; everything else is refused), `all`,
or `none`. A refused request is a 503 `unavailable` with Retry-After, before its view
runs, so nothing of it is written.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import BaseThrottle

from lib.http_errors import CACHE_DOWN_MESSAGE, CACHE_RETRY_AFTER_SECONDS, cache_unavailable
from lib.kept_redis import shared_redis
from profiles.models import AgentToken, SystemToken

if TYPE_CHECKING:
    from rest_framework.request import Request

logger = logging.getLogger(__name__)

PERIOD_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# The tools (POST /api/v1/tools/<name>) that write nothing a user would call content: they
# read, or count a read (get_memory's access counter, the search log). A tool not listed
# counts as a write, so a new one is refused, not let through, while the cache is down.
# ask_memory is not listed: it reads, but spends the user's model budget, which is what a
# runaway agent's requests would use up.
READ_TOOLS = frozenset(
    {
        "get_memory",
        "list_memories",
        "search_memory",
        "list_proposals",
        "memory_list_recent",
        "memory_read",
        "memory_tree",
        "memory_search",
        "agent_memory_get",
        "list_work",
        "get_work",
    }
)


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
        try:
            count, left = self._count_and_wait(key, period, allowed)
        except Exception as error:
            if not cache_unavailable(error):
                raise
            return self._uncounted(request, error)
        if count <= allowed:
            return True
        self._wait = max(1.0, left)
        return False

    def _count_and_wait(self, key: str, period: int, allowed: int) -> tuple[int, float]:
        """This request's number in its window, and the seconds left in the window (read
        from the local cache only when the request is over the rate)."""
        client = shared_redis()
        if client is None:
            now = time.time()
            count = self._count(key, now, period)
            if count <= allowed:
                return count, 0.0
            return count, (cache.get(f"{key}:start") or now) + period - now
        counter = cache.make_key(f"{key}:count")
        with client.pipeline(transaction=True) as pipe:
            pipe.set(counter, 0, ex=period, nx=True)
            pipe.incr(counter)
            pipe.pttl(counter)
            _, count, left_ms = pipe.execute()
        return count, left_ms / 1000

    @staticmethod
    def _uncounted(request: Request, error: Exception) -> bool:
        """The cache cannot count this request: let it pass, or refuse it (503; Django's
        request log records it)."""
        fail_open = settings.MNEMO_API_RATE_FAIL_OPEN
        if fail_open == "all" or (fail_open == "reads" and is_read(request)):
            logger.warning(
                "%s passed uncounted: the cache is unreachable (%r)", request.path, error
            )
            return True
        # Imported here: DRF loads this module while lib.api is still being imported (its
        # settings name both).
        from lib.api import Unavailable

        raise Unavailable(CACHE_DOWN_MESSAGE, retry_after=CACHE_RETRY_AFTER_SECONDS)

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


def is_read(request: Request) -> bool:
    """A GET (or HEAD, OPTIONS) or a call of a read-only tool."""
    if request.method in SAFE_METHODS:
        return True
    match = request.resolver_match
    return match is not None and match.url_name in READ_TOOLS
