"""Which addresses and host names are inside the network, and what the admin allows beyond
public addresses (MNEMO_OUTBOUND_ALLOW, `Allowlist`); lib/outbound.py checks every URL a
user or an import sets against them. No Django.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

type IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
type IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _networks(*pairs: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(cidr), kind) for cidr, kind in pairs)


# IANA's special-purpose registries, spelled out rather than left to ipaddress.is_global,
# whose answers differ between Python releases (3.12.1 calls 192.0.0.192 and 224.0.0.1
# global).
_V4_INSIDE = _networks(
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # with 255.255.255.255, broadcast
)
_V6_INSIDE = _networks(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/23", "IETF protocol assignments (Teredo, …)"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
_V6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: an IPv4 address inside
_6TO4 = ipaddress.ip_network("2002::/16")
# The clouds' instance metadata and credential services (AWS, GCP, Azure, DigitalOcean,
# OpenStack: 169.254.169.254; AWS ECS/EKS: 169.254.170.2 and .23; Alibaba: 100.100.100.200;
# Oracle's old one: 192.0.0.192; Tencent: 169.254.0.23; AWS over IPv6: fd00:ec2::254, ::23).
# All lie in ranges above; they are named so that a wider allowed range never admits them.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(text)
    for text in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "169.254.0.23",
        "100.100.100.200",
        "192.0.0.192",
        "fd00:ec2::254",
        "fd00:ec2::23",
    )
)
# Names that mean "this machine" or "inside" whatever DNS says (a lookup that fails when a
# URL is saved must not let them through): RFC 6761's localhost, mDNS's .local, ICANN's
# private-use .internal, RFC 8375's home.arpa, and suffixes that home and office networks
# use; and the metadata services' names. A name of one label (no dot) is resolved through
# the server's search domains, i.e. inside, and is refused too.
INSIDE_SUFFIXES = (
    "localhost",
    "local",
    "internal",
    "intranet",
    "lan",
    "localdomain",
    "home.arpa",
    "home",
    "corp",
    "private",
)
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "instance-data"})
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def canonical(address: IPAddress) -> IPAddress:
    """The address a connection really reaches: an IPv4-mapped IPv6 address is its IPv4."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def inside_kind(address: IPAddress) -> str | None:
    """None for a public address; else what it is ("loopback", "private", "metadata", …)."""
    address = canonical(address)
    if address in METADATA_ADDRESSES:
        return "metadata"
    if isinstance(address, ipaddress.IPv4Address):
        for network, kind in _V4_INSIDE:
            if address in network:
                return kind
        return None if address.is_global else "not global"
    if address.scope_id:
        return "scoped (zone id)"
    embedded = None
    if address in _NAT64:
        embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    elif address in _6TO4:
        embedded = address.sixtofour
    if embedded is not None:
        kind = inside_kind(embedded)
        return None if kind is None else f"{kind} (in IPv6)"
    for network, kind in _V6_INSIDE:
        if address in network:
            return kind
    if address not in _V6_GLOBAL_UNICAST:
        return "reserved"
    return None


def ascii_name(host: str) -> str | None:
    """The host name in lower-case ASCII (IDNA for other scripts), None when it is not a
    valid DNS name."""
    name = host.lower().removesuffix(".")
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii").lower()
        except UnicodeError:
            return None
    if len(name) > 253 or not all(_LABEL.match(label) for label in name.split(".")):
        return None
    return name


# What the admin allows.


@dataclass(frozen=True)
class _Entry:
    network: IPNetwork | None  # an address or a range …
    host: str  # … or a host name
    port: int | None  # None: any port

    @property
    def exact(self) -> bool:
        """One service: a single address or a name, with its port."""
        if self.port is None:
            return False
        return self.network is None or self.network.num_addresses == 1

    def admits_port(self, port: int) -> bool:
        return self.port is None or self.port == port


@dataclass(frozen=True)
class Allowlist:
    """MNEMO_OUTBOUND_ALLOW: comma-separated entries, each one of
    - an address or a CIDR range: `127.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`;
    - an address with a port: `127.0.0.1:9000`, `[::1]:9000`;
    - a host name, with or without a port: `hooks.corp`, `hooks.corp:8443`: that name is
      trusted, whatever addresses it resolves to (the admin's DNS).
    A metadata address is allowed only by an entry that is exactly that address."""

    entries: tuple[_Entry, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Allowlist:
        """ValueError naming the entry that is not one of the forms above."""
        return cls(tuple(_parse_entry(raw.strip()) for raw in text.split(",") if raw.strip()))

    def trusts_host(self, host: str, port: int) -> _Entry | None:
        for entry in self.entries:
            if entry.network is None and entry.host == host and entry.admits_port(port):
                return entry
        return None

    def admits(self, address: IPAddress, port: int) -> _Entry | None:
        address = canonical(address)
        metadata = address in METADATA_ADDRESSES
        for entry in self.entries:
            network = entry.network
            if network is None or not entry.admits_port(port):
                continue
            if address in network and (not metadata or network.num_addresses == 1):
                return entry
        return None


def _parse_entry(raw: str) -> _Entry:
    problem = ValueError(
        f"{raw!r} is not an address, a CIDR range, a host name, or one of these with :port."
    )
    try:
        return _Entry(ipaddress.ip_network(raw), "", None)
    except ValueError as error:
        if "/" in raw:
            raise ValueError(f"{raw!r} is not a CIDR range: {error}.") from None
    host, port = raw, None
    if raw.startswith("["):  # [v6]:port
        inner, bracket, rest = raw[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise problem
        host, port = inner, _port(rest[1:], problem)
    elif raw.count(":") == 1:
        host, _, digits = raw.partition(":")
        port = _port(digits, problem)
    try:
        return _Entry(ipaddress.ip_network(host), "", port)
    except ValueError:
        pass
    name = ascii_name(host)
    if name is None or NUMERIC_LABEL.match(name.rsplit(".", 1)[-1]):
        raise problem
    return _Entry(None, name, port)


def _port(digits: str, problem: ValueError) -> int:
    if not digits.isdigit() or not 0 < int(digits) < 65536:
        raise problem
    return int(digits)
