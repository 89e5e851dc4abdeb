"""One kept Redis client per process for the calls every request makes to the shared cache.

Django's RedisCache keeps its connection pool but builds a new `redis.Redis` for each call
(django/core/cache/backends/redis.py `get_client`), and each build registers ~340 response
callbacks: about a third of a millisecond of CPU, two or three times an agent's write
(bench/README.md, issue 29). The API's rate limit (profiles/throttling.py) and the write
path's request for vectors (search/indexing.py) talk to the same server through this
client instead, one round trip each. Keys are made by the cache's own `make_key`, so they
sit beside the cache's (same prefix and version) and `cache.get` reads what is set here.

With any other cache backend (the local-memory cache of a single process, the tests')
`shared_redis()` is None and callers use `django.core.cache` as before.

redis-py's pool notices a fork and opens new connections in the child, and one client is
safe to share between threads, so a web process's threads and a forked worker both use it.
"""

from __future__ import annotations

import functools
from typing import Any

import redis
from django.conf import settings

REDIS_CACHE_BACKEND = "django.core.cache.backends.redis.RedisCache"
# Options of Django's RedisCache that name its own classes, not the connection's.
_DJANGO_ONLY_OPTIONS = frozenset({"pool_class", "parser_class", "serializer"})


def shared_redis() -> redis.Redis | None:
    """The process's client of the default cache's server, or None when the default cache
    is not Django's RedisCache. With several servers, the first: the one Django writes to."""
    config = settings.CACHES["default"]
    if config["BACKEND"] != REDIS_CACHE_BACKEND:
        return None
    location = config["LOCATION"]
    if not isinstance(location, str):
        location = location[0]
    elif "," in location:
        location = location.split(",")[0]
    options = tuple(
        sorted(
            (name, value)
            for name, value in config.get("OPTIONS", {}).items()
            if name not in _DJANGO_ONLY_OPTIONS
        )
    )
    return _client(location, options)


@functools.lru_cache(maxsize=8)  # one per location: tests move the cache between servers
def _client(location: str, options: tuple[tuple[str, Any], ...]) -> redis.Redis:
    return redis.Redis.from_url(location, **dict(options))
