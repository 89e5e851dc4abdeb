"""The per-token rate limit counts every request, however many arrive at once."""

import threading
import time
from types import SimpleNamespace

import pytest
from django.core.cache.backends.locmem import LocMemCache

from profiles.models import AgentToken
from profiles.throttling import AgentTokenThrottle, parse_rate

pytestmark = pytest.mark.django_db


def test_rates_read_as_requests_per_period():
    assert parse_rate("600/min") == (600, 60)
    assert parse_rate("20/s") == (20, 1)
    assert parse_rate("5/hour") == (5, 3600)
    assert parse_rate("100/day") == (100, 86400)


@pytest.fixture
def networked_cache(monkeypatch):
    """The local cache with a round trip's pause on each read, as Valkey/Redis has: other
    threads run between a read and the write that follows it."""
    read = LocMemCache.get

    def get_over_the_network(self, *args, **kwargs):
        value = read(self, *args, **kwargs)
        time.sleep(0.001)  # the round trip, not a wait for work
        return value

    monkeypatch.setattr(LocMemCache, "get", get_over_the_network)


def test_concurrent_requests_are_all_counted(settings, alice_token, networked_cache):
    """DRF's list-of-times throttle loses the updates of requests that overlap, letting
    most of a burst through; an atomic counter lets exactly the rate through."""
    settings.MNEMO_API_RATE = "50/min"
    allowed = burst(SimpleNamespace(auth=AgentToken.objects.get()))

    assert len(allowed) == 160
    assert allowed.count(True) == 50


def burst(request: SimpleNamespace, clients: int = 8, each: int = 20) -> list[bool]:
    """`clients` threads, started together, each asking the throttle `each` times."""
    allowed, lock, start = [], threading.Lock(), threading.Barrier(clients)

    def client():
        start.wait()
        for _ in range(each):
            ok = AgentTokenThrottle().allow_request(request, None)
            with lock:
                allowed.append(ok)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return allowed


def test_the_wait_is_what_is_left_of_the_window(settings, alice_token):
    settings.MNEMO_API_RATE = "2/hour"
    request = SimpleNamespace(auth=AgentToken.objects.get())
    throttle = AgentTokenThrottle()

    assert [throttle.allow_request(request, None) for _ in range(3)] == [True, True, False]
    assert 3590 <= throttle.wait() <= 3600


def test_each_token_has_its_own_count(settings, alice_token, bob_token):
    settings.MNEMO_API_RATE = "1/min"
    alice, bob = (SimpleNamespace(auth=token) for token in AgentToken.objects.order_by("pk"))

    assert AgentTokenThrottle().allow_request(alice, None)
    assert AgentTokenThrottle().allow_request(bob, None)
    assert not AgentTokenThrottle().allow_request(alice, None)
