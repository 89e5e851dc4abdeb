"""Outbound HTTP to URLs that users or imports choose (the heartbeat's webhook, and any later
one): only to public addresses, unless the admin allows more with MNEMO_OUTBOUND_ALLOW.

A signed-in user who could make the server POST anywhere could reach what only the server
can: cloud metadata (169.254.169.254), the database, the cache, the admin's LAN. So:

- `check_url` (when a URL is saved) and `post` (when it is used) refuse a URL that is not
  http(s), holds a user name or password, spells its host oddly (2130706433, 0177.0.0.1,
  127.1: no strict IP address and a numeric last label), names an inside host (localhost,
  a single label, .internal, .local, …, cloud metadata names), or whose host resolves to
  any address that is not public: loopback, private, link-local, CGNAT, unique-local,
  multicast, unspecified, reserved, documentation and benchmarking ranges, the IPv4-mapped
  and NAT64/6to4 forms of those, and the clouds' metadata addresses.
- `post` resolves the host once, checks every address, and connects to a checked address
  itself: http.client is handed the connected socket and never resolves the name again, so
  DNS cannot answer differently between the check and the connection (rebinding). For
  https the TLS handshake still sends and verifies the URL's host name (SNI, certificate).
  No redirect is followed (http.client follows none), no proxy is used (a proxy would
  resolve the name itself), the whole exchange (name lookup, connect, TLS, request,
  answer) ends by one deadline, and at most `max_response_bytes` of the answer are read.

What the admin lists in MNEMO_OUTBOUND_ALLOW (see `Allowlist`) is allowed as well; the
clouds' metadata addresses only when listed exactly, never through a wider range. Which
addresses and names are inside, and the allowlist, are in lib/outbound_addresses.py; the
sockets bounded in time and size in lib/outbound_sockets.py.

This module imports no Django (config/settings.py checks the setting with it at start).
URLs that the admin sets in the environment (the LLM, embeddings, email) do not come here.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import cast
from urllib.parse import quote, urlsplit

from lib.outbound_addresses import (
    INSIDE_SUFFIXES,
    METADATA_NAMES,
    NUMERIC_LABEL,
    Allowlist,
    IPAddress,
    ascii_name,
    canonical,
    inside_kind,
)
from lib.outbound_sockets import BoundedSocket, BoundedSSLSocket, TooLarge, tls_context

# A resolver maps (host, port) to the addresses to connect to, as strings; it raises OSError
# (socket.gaierror) when the name does not resolve. Tests pass their own.
type Resolver = Callable[[str, int], Sequence[str]]

SCHEMES = {"http": 80, "https": 443}
MAX_RESPONSE_BYTES = 64 * 1024  # the status line and headers are all a caller needs
SAVE_RESOLVE_SECONDS = 3.0  # check_url's name lookup, within a page's request

INSIDE_MESSAGE = (
    "The URL points inside the network: addresses inside the network are not allowed; an "
    "admin can allow them with MNEMO_OUTBOUND_ALLOW."
)
SCHEME_MESSAGE = "The URL must be an http:// or https:// address."
CREDENTIALS_MESSAGE = "The URL may not contain a user name or password."
CHARACTERS_MESSAGE = "The URL may not contain spaces, backslashes or control characters."
HOST_MESSAGE = (
    "The URL's host is not a valid domain name or IP address (write an IP address in the "
    "usual form, e.g. 203.0.113.7 or [2001:db8::7])."
)


@lru_cache(maxsize=8)
def allowlist(text: str) -> Allowlist:
    """The parsed setting, parsed once per distinct value."""
    return Allowlist.parse(text)


# --- URLs -------------------------------------------------------------------------------------


class Refused(Exception):
    """The URL may not be used. `message` is safe to show whoever set the URL; `detail` is
    for the server log (it may name the address a host resolved to)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail or message


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # lower-case ASCII (IDNA); an IPv6 address without brackets
    port: int
    path: str  # the request target: path and query
    address: IPAddress | None  # the host when it is an IP address


def parse_url(url: str) -> Target:
    """The URL's parts, or Refused: not http(s), credentials, a host that is neither a
    strict IP address nor a valid name (odd IP spellings included)."""
    if not isinstance(url, str):
        raise Refused(SCHEME_MESSAGE)
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            raise Refused(SCHEME_MESSAGE)
        if any(ord(c) <= 0x20 or c in "\x7f\\" for c in url):
            raise Refused(CHARACTERS_MESSAGE)
        if "@" in parts.netloc:
            raise Refused(CREDENTIALS_MESSAGE)
        port = parts.port or SCHEMES[scheme]
        host = parts.hostname or ""
    except ValueError:  # a bad port, brackets around something that is not IPv6, …
        raise Refused(HOST_MESSAGE) from None
    address: IPAddress | None = None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = ascii_name(host)
        if name is None:
            raise Refused(HOST_MESSAGE) from None
        try:  # e.g. full-width digits that IDNA turns into 127.0.0.1
            address = ipaddress.ip_address(name)
        except ValueError:
            if NUMERIC_LABEL.match(name.rsplit(".", 1)[-1]):
                # 2130706433, 0177.0.0.1, 127.1, 0x7f.1: C's inet_aton reads them as IPs.
                raise Refused(HOST_MESSAGE, f"odd IP spelling {host!r}") from None
        host = name
    if address is not None:
        host = str(address)
    path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    return Target(scheme, host, port, path, address)


def _where(target: Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{host}:{target.port}"


def _check_name(target: Target) -> None:
    host = target.host
    if target.address is not None:
        return
    inside = (
        "." not in host
        or host in METADATA_NAMES
        or any(host == suffix or host.endswith("." + suffix) for suffix in INSIDE_SUFFIXES)
    )
    if inside:
        raise Refused(INSIDE_MESSAGE, f"{host} is an inside name")


@dataclass(frozen=True)
class _Admitted:
    address: IPAddress
    shown: bool  # public, or allowed by an exact entry (see Answer.shown)


def _admit(target: Target, addresses: Sequence[IPAddress], allow: Allowlist) -> list[_Admitted]:
    """Every address checked; Refused when any one is inside and not allowed."""
    trusted = allow.trusts_host(target.host, target.port) if target.address is None else None
    admitted = []
    for address in addresses:
        kind = inside_kind(address)
        if kind is None:
            admitted.append(_Admitted(canonical(address), shown=True))
            continue
        entry = allow.admits(address, target.port)
        if entry is None and trusted is not None and kind != "metadata":
            entry = trusted
        if entry is None:
            detail = f"{_where(target)} is {address} ({kind})"
            raise Refused(INSIDE_MESSAGE, detail)
        admitted.append(_Admitted(canonical(address), shown=entry.exact))
    return admitted


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def _resolve(target: Target, resolver: Resolver, deadline: float) -> list[IPAddress] | None:
    """The host's addresses (the host itself when it is one); None when the name does not
    resolve by the deadline. The lookup runs in a thread because getaddrinfo has no
    timeout of its own; a lookup that overstays is left to finish on its own."""
    if target.address is not None:
        return [target.address]
    found: list[Sequence[str]] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            found.append(resolver(target.host, target.port))
        except (OSError, UnicodeError):
            pass
        finally:
            done.set()

    threading.Thread(target=lookup, name="outbound-dns", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())) or not found:
        return None
    addresses: list[IPAddress] = []
    for text in found[0]:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if address not in addresses:
            addresses.append(address)
    return addresses or None


def check_url(
    url: str,
    *,
    allow: Allowlist,
    resolver: Resolver | None = None,
    timeout: float = SAVE_RESOLVE_SECONDS,
) -> Target:
    """The check when a URL is saved: Refused unless `post` may use it. A name that does not
    resolve now is let through (it may be set up later; `post` checks it again anyway), but
    one that resolves to an address inside must be allowed."""
    target = parse_url(url)
    if allow.trusts_host(target.host, target.port) is None:
        _check_name(target)
    addresses = _resolve(target, resolver or system_resolver, time.monotonic() + timeout)
    if addresses:
        _admit(target, addresses, allow)
    return target


# --- one POST, pinned and bounded -------------------------------------------------------------


class Failed(Exception):
    """The request was allowed but did not get an answer. `message` says what happened in
    terms safe to show for a public receiver; `detail` is for the server log; `shown` as in
    Answer; `timeout` when the deadline ended it; `again` when another try may do better
    (not after a certificate that was refused or an answer that was too large)."""

    def __init__(
        self, message: str, detail: str, *, shown: bool, timeout: bool = False, again: bool = True
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.shown = shown
        self.timeout = timeout
        self.again = again


@dataclass(frozen=True)
class Answer:
    status: int
    address: IPAddress
    # Whether the answer may be shown to the user who set the URL: every address was public
    # or allowed by an exact entry (one service, with its port). An address allowed through a
    # range, or any port, could be one of many inside services: showing how each answers
    # would let a user map them.
    shown: bool


class _PinnedConnection(http.client.HTTPConnection):
    """http.client over a socket already connected to a checked address. It never opens
    one itself: that would resolve the host name again."""

    def __init__(self, target: Target, sock: socket.socket) -> None:
        super().__init__(target.host, target.port)
        self.default_port = SCHEMES[target.scheme]  # the Host header leaves it out
        self.sock = sock

    def connect(self) -> None:
        raise ConnectionError("the checked connection was closed")


def _connect(
    target: Target,
    admitted: Sequence[_Admitted],
    deadline: float,
    max_response_bytes: int,
    tls: ssl.SSLContext | None,
) -> tuple[socket.socket, IPAddress]:
    """A socket connected to the first of the checked addresses that answers (TLS set up
    for https); Failed when none does by the deadline."""
    shown = all(one.shown for one in admitted)
    problems = []
    for one in admitted:
        family = socket.AF_INET6 if one.address.version == 6 else socket.AF_INET
        sock = BoundedSocket(family, socket.SOCK_STREAM)
        sock.deadline = deadline
        sock.budget = max_response_bytes
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the deadline passed")
            sock.settimeout(left)
            sock.connect((str(one.address), target.port))
        except OSError as error:
            sock.close()
            problems.append(f"{one.address}: {error!r}")
            if isinstance(error, TimeoutError):
                break
            continue
        if target.scheme == "http":
            return sock, one.address
        context = tls or tls_context()
        context.sslsocket_class = BoundedSSLSocket
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))  # for the handshake
            # The URL's host name, not the address: SNI and the certificate check use it.
            wrapped = context.wrap_socket(sock, server_hostname=target.host)
        except ssl.SSLCertVerificationError as error:
            sock.close()
            raise Failed(
                "the receiver's TLS certificate was not accepted",
                f"{target.host} at {one.address}: {error!r}",
                shown=shown,
                again=False,
            ) from None
        except (OSError, ssl.SSLError) as error:
            sock.close()
            raise Failed(
                "the TLS handshake with the receiver failed",
                f"{target.host} at {one.address}: {error!r}",
                shown=shown,
                timeout=isinstance(error, TimeoutError),
            ) from None
        wrapped = cast(BoundedSSLSocket, wrapped)  # sslsocket_class above
        wrapped.deadline = deadline
        wrapped.budget = max_response_bytes
        return wrapped, one.address
    timed_out = time.monotonic() >= deadline
    raise Failed(
        "the receiver did not answer in time" if timed_out else "the receiver could not be reached",
        f"{_where(target)}: " + "; ".join(problems),
        shown=shown,
        timeout=timed_out,
    )


def post(
    url: str,
    *,
    body: bytes,
    headers: dict[str, str],
    allow: Allowlist,
    timeout: float,
    resolver: Resolver | None = None,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    tls: ssl.SSLContext | None = None,
) -> Answer:
    """POST `body` to `url`, checked again now and pinned (see the module's note), all within
    `timeout` seconds. Returns the answer's status (any: a redirect is not followed);
    Refused when the URL may not be used (nothing was sent); Failed when no answer came."""
    deadline = time.monotonic() + timeout
    target = parse_url(url)
    if allow.trusts_host(target.host, target.port) is None:
        _check_name(target)
    addresses = _resolve(target, resolver or system_resolver, deadline)
    if not addresses:
        timed_out = time.monotonic() >= deadline
        message = "the receiver's host name could not be resolved"
        raise Failed(message, f"{target.host}: no address", shown=True, timeout=timed_out)
    admitted = _admit(target, addresses, allow)
    shown = all(one.shown for one in admitted)
    sock, address = _connect(target, admitted, deadline, max_response_bytes, tls)
    connection = _PinnedConnection(target, sock)
    where = f"{_where(target)} at {address}"
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        return Answer(response.status, address, shown)
    except TimeoutError as error:
        raise Failed(
            "the receiver did not answer in time", f"{where}: {error!r}", shown=shown, timeout=True
        ) from None
    except TooLarge:
        raise Failed(
            "the receiver's answer was too large",
            f"{where}: more than {max_response_bytes} bytes",
            shown=shown,
            again=False,
        ) from None
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise Failed(
            "the receiver did not give a valid HTTP answer", f"{where}: {error!r}", shown=shown
        ) from None
    finally:
        connection.close()
