"""The rate limit and the request for vectors on a real Valkey, through the process's kept
client (lib/kept_redis.py): counted exactly, in windows that expire, readable by the cache,
and with no Redis client built per request."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import redis
from django.core.cache import cache

from lib.kept_redis import shared_redis
from profiles.models import AgentToken
from profiles.throttling import AgentTokenThrottle
from search.indexing import PENDING_KEY, PENDING_SECONDS, _raise_pending_flag
from tests.profiles.test_throttling import burst
from tests.test_cache_down import Server

pytestmark = pytest.mark.django_db


@pytest.fixture
def valkey(tmp_path, settings) -> Iterator[Server]:
    server = Server(tmp_path)
    server.start()
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{server.port}/1",
        }
    }
    yield server
    server.process.kill()
    server.process.wait(timeout=10)


def raw(server: Server) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, db=1)


def test_one_client_per_process_and_none_without_redis(valkey, settings):
    client = shared_redis()
    assert client is not None
    assert client is shared_redis()
    assert client.ping()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert shared_redis() is None


def test_a_counted_request_builds_no_redis_client(valkey, alice_token, monkeypatch):
    request = SimpleNamespace(auth=AgentToken.objects.get())
    assert AgentTokenThrottle().allow_request(request, None)  # the kept client is made
    built = []
    original = redis.Redis.__init__

    def counting_init(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)
    for _ in range(5):
        assert AgentTokenThrottle().allow_request(request, None)
    assert built == []


def test_concurrent_requests_are_all_counted_on_valkey(settings, valkey, alice_token):
    settings.MNEMO_API_RATE = "50/min"
    allowed = burst(SimpleNamespace(auth=AgentToken.objects.get()))

    assert (len(allowed), allowed.count(True)) == (160, 50)


def test_the_window_expires_and_the_wait_is_what_is_left(settings, valkey, alice_token):
    settings.MNEMO_API_RATE = "2/hour"
    token = AgentToken.objects.get()
    request = SimpleNamespace(auth=token)
    throttle = AgentTokenThrottle()

    assert [throttle.allow_request(request, None) for _ in range(3)] == [True, True, False]
    assert 3590 <= throttle.wait() <= 3600
    counter = cache.make_key(f"mnemo:throttle:agent-{token.pk}:count")
    assert 3590 <= raw(valkey).ttl(counter) <= 3600  # the counter dies with its window
    assert cache.get(f"mnemo:throttle:agent-{token.pk}:count") == 3  # the cache's own key

    raw(valkey).delete(counter)  # as the window's end does
    assert throttle.allow_request(request, None)


def test_the_pending_flag_is_set_once_and_read_by_the_cache(valkey):
    assert _raise_pending_flag() is True
    assert _raise_pending_flag() is False
    assert cache.get(PENDING_KEY) == 1
    assert 0 < raw(valkey).ttl(cache.make_key(PENDING_KEY)) <= PENDING_SECONDS
    cache.delete(PENDING_KEY)
    assert _raise_pending_flag() is True
