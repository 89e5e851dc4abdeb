"""Forwarded headers, honoured only on a connection from a proxy the admin trusts.

A proxy in front of Mnemo tells it who the client is (X-Forwarded-For), whether the client
used HTTPS (X-Forwarded-Proto) and which host it asked for (X-Forwarded-Host). Any client
can send the same headers, so they mean something only when the connecting address
(REMOTE_ADDR) is such a proxy: settings.MNEMO_TRUSTED_PROXIES (config/accounts.py; empty
unless MNEMO_BEHIND_PROXY is on). `honour_forwarded_headers` is the one rule:

- from any other peer the forwarded headers are removed, so nothing that reads them later
  (Django's SECURE_PROXY_SSL_HEADER and USE_X_FORWARDED_HOST, sign-in throttling) can be
  fooled by them;
- from a trusted proxy, REMOTE_ADDR becomes the client's address: the right-most
  X-Forwarded-For entry that is not itself a trusted proxy. Each proxy appends the address
  it saw, so whatever a client wrote is further left and is never reached.

`ForwardedHeadersMiddleware`, first in MIDDLEWARE, applies it to every request; the MCP
door (mcp_bridge/http.py), which checks the host before Django's middleware runs, applies
it too.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterable, MutableMapping
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# What a proxy may tell Mnemo, as WSGI environ keys. Django reads -Proto and -Host (when
# MNEMO_BEHIND_PROXY sets it up), sign-in throttling -For; the rest are read by nothing here
# but are removed as well, so that no code added later trusts them from anyone.
FORWARDED_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_FORWARDED_PROTOCOL",
    "HTTP_X_FORWARDED_SSL",
    "HTTP_X_REAL_IP",
    "HTTP_FORWARDED",
)
# Set once the rule has been applied to an environ: applying it twice would judge the
# client's address (now in REMOTE_ADDR) as if it were the peer's.
APPLIED = "mnemo.forwarded_headers_checked"

logger = logging.getLogger(__name__)
_warned: set[str] = set()  # untrusted peers already named in the log, at most a few


def parse_address(text: str) -> IPAddress | None:
    """An address as a proxy writes it in X-Forwarded-For (also `[v6]:port` and `v4:port`),
    an IPv4-mapped IPv6 address as IPv4; None when it is not an address."""
    text = text.strip()
    if text.startswith("["):  # [2001:db8::1]:443
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # 192.0.2.1:443
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@lru_cache(maxsize=8)
def _networks(proxies: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(proxy) for proxy in proxies)


def trusted_proxies() -> tuple[IPNetwork, ...]:
    return _networks(tuple(settings.MNEMO_TRUSTED_PROXIES))


def is_trusted(address: IPAddress | None, proxies: Iterable[IPNetwork]) -> bool:
    return address is not None and any(address in network for network in proxies)


def forwarded_client(forwarded_for: str, proxies: Iterable[IPNetwork]) -> IPAddress | None:
    """The client's address in a trusted proxy's X-Forwarded-For: walking from the right,
    the first entry that is not a trusted proxy. If every entry is one, the left-most; an
    entry that is not an address stops the walk (what is left of it is not the proxies').
    None when the right-most entry is not an address."""
    proxies = tuple(proxies)
    client = None
    for entry in reversed(forwarded_for.split(",")):
        address = parse_address(entry)
        if address is None:
            break
        client = address
        if not is_trusted(address, proxies):
            break
    return client


def honour_forwarded_headers(environ: MutableMapping[str, Any]) -> None:
    """Apply the rule above to a WSGI environ (a request's META), in place, once."""
    if environ.get(APPLIED):
        return
    environ[APPLIED] = True
    proxies = trusted_proxies()
    peer = parse_address(str(environ.get("REMOTE_ADDR", "")))
    if not is_trusted(peer, proxies):
        removed = [name for name in FORWARDED_HEADERS if environ.pop(name, None) is not None]
        if removed and proxies:
            _warn_untrusted(str(peer), removed)
        return
    client = forwarded_client(str(environ.get("HTTP_X_FORWARDED_FOR", "")), proxies)
    if client is not None:
        environ["REMOTE_ADDR"] = str(client)


def _warn_untrusted(peer: str, removed: list[str]) -> None:
    """Behind a proxy, say (a few times per process) that one is not trusted: an unlisted
    proxy makes every client one address and every request plain HTTP."""
    if peer in _warned or len(_warned) >= 8:
        return
    _warned.add(peer)
    headers = ", ".join(name.removeprefix("HTTP_").replace("_", "-").title() for name in removed)
    logger.warning(
        "Ignored %s from %s: it is not in MNEMO_TRUSTED_PROXIES. If it is your proxy, list it.",
        headers,
        peer,
    )


class ForwardedHeadersMiddleware:
    """First in MIDDLEWARE: forwarded headers count only from a trusted proxy (above)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        honour_forwarded_headers(request.META)
        return self.get_response(request)
