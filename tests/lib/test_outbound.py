"""lib/outbound.py: URLs that users and imports set reach public addresses only, unless the
admin allows more; one lookup, a pinned connection, no redirects, bounded time and size.

Every server here is a real one that the test starts on a loopback address. Host names are
looked up through resolvers the tests pass in (the socket module is never patched)."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from lib import outbound, outbound_addresses
from lib.outbound import Failed, Refused, check_url, post
from lib.outbound_addresses import Allowlist
from tests.fake_webhook import FakeWebhook

NOBODY = Allowlist()  # the default: MNEMO_OUTBOUND_ALLOW empty
PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"

# The list first, then the rest of what "inside" means; each refused by default when
# saved and when used. `ssrf_urls` in other test files import this list.
SSRF_URLS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://10.0.0.1/",
    "http://192.168.0.1/",
    "http://[::1]/",
    "http://127.0.0.1:5432/",
    "http://user:pass@127.0.0.1/",
    # loopback, private, CGNAT, link-local, metadata
    "http://127.0.0.1/",
    "http://127.255.255.254:6379/",
    "http://localhost:8000/",
    "http://localhost./",
    "http://api.localhost/",
    "http://172.16.0.1/",
    "http://172.31.255.254/",
    "http://100.64.0.1/",
    "http://100.100.100.200/latest/meta-data/",
    "http://169.254.170.2/v2/credentials",
    "http://169.254.0.1/",
    "http://192.0.0.192/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",
    "http://[fc00::1]/",
    "http://[fd12:3456:789a::1]/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fec0::1]/",
    # multicast, unspecified, broadcast, reserved, documentation, benchmarking
    "http://224.0.0.1/",
    "http://239.255.255.250:1900/",
    "http://[ff02::1]/",
    "http://0.0.0.0/",
    "http://0.0.0.0:8000/",
    "http://[::]/",
    "http://255.255.255.255/",
    "http://240.0.0.1/",
    "http://192.0.2.1/",
    "http://198.51.100.7/",
    "http://203.0.113.9/",
    "http://198.18.0.1/",
    "http://[2001:db8::1]/",
    "http://[100::1]/",
    # IPv4 inside IPv6: mapped, translated, compatible, NAT64, 6to4, Teredo
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[::ffff:0:7f00:1]/",
    "http://[::7f00:1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b:1::a00:1]/",
    "http://[2002:7f00:1::1]/",
    "http://[2002:a9fe:a9fe::1]/",
    "http://[2001::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    # odd spellings of 127.0.0.1 and 169.254.169.254
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://127.0.1/",
    "http://0x7f.0.0.1/",
    "http://0x7f000001/",
    "http://017700000001/",
    "http://127.000.000.001/",
    "http://169.254.43518/",
    "http://0251.0376.0251.0376/",
    "http://2852039166/",
    "http://①②⑦.0.0.1/",
    "http://127。0。0。1/",
    # inside names
    "http://metadata/",
    "http://metadata.goog/",
    "http://instance-data/latest/meta-data/",
    "http://db:5432/",
    "http://printer.local/",
    "http://hooks.internal/",
    "http://router.home.arpa/",
    "http://nas.lan/",
    "http://wiki.intranet/",
    "http://mail.corp/",
    # credentials, other schemes
    "http://user:pass@hooks.example.com/",
    "https://user@hooks.example.com/",
    "https://:secret@hooks.example.com/",
    "http://hooks.example.com@127.0.0.1/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "dict://127.0.0.1:11211/stats",
    "ftp://hooks.example.com/",
]
# Addresses a public-looking name may resolve to; each refused by default.
INSIDE_ADDRESSES = [
    "127.0.0.1",
    "10.1.2.3",
    "172.20.0.5",
    "192.168.1.1",
    "100.64.0.7",
    "169.254.169.254",
    "169.254.170.2",
    "0.0.0.0",  # noqa: S104 - an address to refuse, not one to bind
    "224.0.0.251",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fd00::1",
    "fd00:ec2::254",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "64:ff9b::a00:1",
    "64:ff9b::7f00:1",
    "2002:c0a8:101::1",
    "2001:db8::5",
]


def resolving_to(*answers: list[str]) -> Callable[[str, int], list[str]]:
    """A resolver whose n-th lookup answers answers[n] (the last one after that), and which
    records the names asked for in `.asked`."""
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[min(len(asked) - 1, len(answers) - 1)]

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


def never_resolves(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.fixture
def receiver() -> Iterator[FakeWebhook]:
    with FakeWebhook() as fake:
        yield fake


@pytest.fixture
def canary() -> Iterator[FakeWebhook]:
    """A receiver that must get nothing."""
    with FakeWebhook() as fake:
        yield fake


def send(url: str, allow: Allowlist = NOBODY, **kwargs) -> outbound.Answer:
    kwargs.setdefault("timeout", 5.0)
    return post(url, body=b'{"a": 1}', headers={"X-Test": "yes"}, allow=allow, **kwargs)


# --- the default refuses every address inside ----------------------------------------------------


@pytest.mark.parametrize("url", SSRF_URLS)
def test_every_inside_url_is_refused_when_saved(url):
    with pytest.raises(Refused):
        check_url(url, allow=NOBODY, resolver=resolving_to(["127.0.0.1"]))


@pytest.mark.parametrize("url", SSRF_URLS)
def test_every_inside_url_is_refused_when_used_and_nothing_is_sent(url, canary):
    # Any name is looked up to the canary, so a request that got out would show there.
    resolver = resolving_to([canary.host])
    with pytest.raises(Refused):
        send(url, resolver=resolver)
    assert canary.received == []


def test_the_whole_list_none_accepted_by_default():
    accepted = []
    for url in SSRF_URLS:
        for check in (
            lambda u: check_url(u, allow=NOBODY, resolver=resolving_to(["10.0.0.1"])),
            lambda u: send(u, resolver=resolving_to(["10.0.0.1"]), timeout=1.0),
        ):
            try:
                check(url)
            except Refused:
                continue
            accepted.append(url)
    assert len(SSRF_URLS) == 83
    assert accepted == []


@pytest.mark.parametrize("address", INSIDE_ADDRESSES)
def test_a_public_name_that_resolves_inside_is_refused(address):
    with pytest.raises(Refused) as refused:
        check_url("https://hooks.example.com/x", allow=NOBODY, resolver=resolving_to([address]))
    assert refused.value.message == outbound.INSIDE_MESSAGE
    assert "addresses inside the network are not allowed" in refused.value.message
    assert "MNEMO_OUTBOUND_ALLOW" in refused.value.message
    with pytest.raises(Refused):
        send("https://hooks.example.com/x", resolver=resolving_to([address]))


def test_one_inside_address_among_public_ones_refuses_the_name():
    resolver = resolving_to([PUBLIC_V4, "10.0.0.8", PUBLIC_V6])
    with pytest.raises(Refused) as refused:
        check_url("https://hooks.example.com/", allow=NOBODY, resolver=resolver)
    assert refused.value.detail == "hooks.example.com:443 is 10.0.0.8 (private)"


@pytest.mark.parametrize(
    ("url", "answer"),
    [
        ("https://hooks.example.com/x?a=1", [PUBLIC_V4]),
        ("https://hooks.example.com/x", [PUBLIC_V4, PUBLIC_V6]),
        ("http://8.8.8.8:8080/hook", []),
        ("http://[2606:4700:4700::1111]/", []),
        ("http://[64:ff9b::808:808]/", []),  # NAT64 of a public address
        ("https://bücher.example/", [PUBLIC_V4]),
    ],
)
def test_public_addresses_are_accepted(url, answer):
    target = check_url(url, allow=NOBODY, resolver=resolving_to(answer))
    assert target.scheme in ("http", "https")


def test_a_name_that_does_not_resolve_when_saved_is_accepted_then_fails_when_used():
    target = check_url("https://not-yet.example/x", allow=NOBODY, resolver=never_resolves)
    assert (target.host, target.port, target.path) == ("not-yet.example", 443, "/x")
    with pytest.raises(Failed) as failed:
        send("https://not-yet.example/x", resolver=never_resolves)
    assert failed.value.message == "the receiver's host name could not be resolved"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://user:pass@hooks.example.com/", outbound.CREDENTIALS_MESSAGE),
        ("http://2130706433/", outbound.HOST_MESSAGE),
        ("ftp://hooks.example.com/", outbound.SCHEME_MESSAGE),
        ("http://hooks.example.com:99999/", outbound.HOST_MESSAGE),
        ("http://[hooks.example.com]/", outbound.HOST_MESSAGE),
        ("http://hooks.example.com\\@127.0.0.1/", outbound.CHARACTERS_MESSAGE),
        ("http://hooks.example.com /", outbound.CHARACTERS_MESSAGE),
        ("http://10.0.0.1/", outbound.INSIDE_MESSAGE),
    ],
)
def test_refusals_say_why(url, message):
    with pytest.raises(Refused) as refused:
        check_url(url, allow=NOBODY, resolver=never_resolves)
    assert refused.value.message == message


# --- what the admin allows ----------------------------------------------------------------------


def test_the_allowlist_forms_parse():
    entries = Allowlist.parse(
        " 127.0.0.1, 10.0.0.0/8,fd00::/8, 127.0.0.1:9000, [::1]:9000, hooks.corp, hooks.corp:8443,"
    ).entries
    assert [(str(e.network) if e.network else e.host, e.port, e.exact) for e in entries] == [
        ("127.0.0.1/32", None, False),
        ("10.0.0.0/8", None, False),
        ("fd00::/8", None, False),
        ("127.0.0.1/32", 9000, True),
        ("::1/128", 9000, True),
        ("hooks.corp", None, False),
        ("hooks.corp", 8443, True),
    ]
    assert Allowlist.parse("").entries == ()


@pytest.mark.parametrize(
    "text",
    [
        "10.0.0.1/8",
        "hooks.corp:http",
        "127.0.0.1:0",
        "127.0.0.1:70000",
        "2130706433",
        "*.corp",
        "[::1]",
        "a b",
        "http://127.0.0.1/",
    ],
)
def test_a_bad_allowlist_entry_is_an_error_naming_it(text):
    with pytest.raises(ValueError, match="is not"):
        Allowlist.parse(text)


@pytest.mark.parametrize(
    ("allow", "url", "shown"),
    [
        ("127.0.0.1", "http://127.0.0.1:{port}/hooks/mnemo", False),
        ("127.0.0.0/8", "http://127.0.0.1:{port}/hooks/mnemo", False),
        ("127.0.0.1:{port}", "http://127.0.0.1:{port}/hooks/mnemo", True),
        ("hooks.corp", "http://hooks.corp:{port}/hooks/mnemo", False),
        ("hooks.corp:{port}", "http://hooks.corp:{port}/hooks/mnemo", True),
        ("127.0.0.1", "http://[::ffff:127.0.0.1]:{port}/hooks/mnemo", False),
    ],
)
def test_each_allowed_exception_reaches_a_real_server(receiver, allow, url, shown):
    allowed = Allowlist.parse(allow.format(port=receiver.port))
    resolver = resolving_to(["127.0.0.1"])
    url = url.format(port=receiver.port)

    assert check_url(url, allow=allowed, resolver=resolver)
    answer = send(url, allowed, resolver=resolver)

    assert (answer.status, str(answer.address), answer.shown) == (200, "127.0.0.1", shown)
    (got,) = receiver.received
    assert (got.path, got.body, got.headers["x-test"]) == ("/hooks/mnemo", b'{"a": 1}', "yes")
    host = outbound.parse_url(url).host  # IP addresses in their usual spelling
    host = f"[{host}]" if ":" in host else host
    assert got.headers["host"] == f"{host}:{receiver.port}"
    with pytest.raises(Refused):  # and nothing of it without the entry
        send(url, NOBODY, resolver=resolver)
    assert len(receiver.received) == 1


@pytest.mark.parametrize("allow", ["::1", "[::1]:{port}", "::/0"])
def test_ipv6_loopback_when_allowed(allow):
    with FakeWebhook(host="::1") as receiver:
        allowed = Allowlist.parse(allow.format(port=receiver.port))
        answer = send(receiver.url, allowed)
        assert (answer.status, str(answer.address)) == (200, "::1")
        assert len(receiver.received) == 1
        assert receiver.received[0].headers["host"] == f"[::1]:{receiver.port}"


def test_an_entry_for_another_port_allows_nothing_here(receiver):
    allowed = Allowlist.parse(f"127.0.0.1:{receiver.port + 1}, hooks.corp:{receiver.port + 1}")
    for url in (receiver.url, f"http://hooks.corp:{receiver.port}/"):
        with pytest.raises(Refused):
            send(url, allowed, resolver=resolving_to(["127.0.0.1"]))
    assert receiver.received == []


def test_metadata_addresses_need_an_exact_entry():
    metadata_v4 = "http://169.254.169.254/latest/meta-data/"
    metadata_v6 = "http://[fd00:ec2::254]/latest/meta-data/"
    for allow, url in [
        ("169.254.0.0/16", metadata_v4),
        ("0.0.0.0/0", metadata_v4),
        ("fd00::/8", metadata_v6),
        ("hooks.corp", "http://hooks.corp/"),  # a trusted name that resolves to metadata
    ]:
        with pytest.raises(Refused):
            check_url(url, allow=Allowlist.parse(allow), resolver=resolving_to(["169.254.169.254"]))
    assert check_url(metadata_v4, allow=Allowlist.parse("169.254.169.254"))
    assert check_url(metadata_v6, allow=Allowlist.parse("fd00:ec2::254"))
    # The wider range still allows its other addresses.
    assert check_url("http://169.254.10.10/", allow=Allowlist.parse("169.254.0.0/16"))


# --- DNS rebinding ------------------------------------------------------------------------------


def test_rebinding_public_when_saved_private_when_used_reaches_nothing(canary):
    """The resolver answers a public address first, then the canary's loopback address."""
    url = f"http://rebind.example:{canary.port}/hooks/mnemo"
    resolver = resolving_to([PUBLIC_V4], [canary.host])

    assert check_url(url, allow=NOBODY, resolver=resolver)  # saved: it looked public
    with pytest.raises(Refused) as refused:
        send(url, resolver=resolver)  # used: checked again, and refused

    assert refused.value.detail == f"rebind.example:{canary.port} is 127.0.0.1 (loopback)"
    assert resolver.asked == ["rebind.example", "rebind.example"]
    assert canary.received == []


def test_the_connection_goes_to_the_address_checked_not_a_second_answer(canary):
    """A name is looked up once per POST and the socket connects to that answer: a resolver
    that would answer the not-allowed 127.0.0.1 on a second lookup is never asked again."""
    port = canary.port
    with FakeWebhook(host="127.0.0.2", port=port) as checked:
        allowed = Allowlist.parse(f"127.0.0.2:{port}")  # only 127.0.0.2 is allowed
        resolver = resolving_to(["127.0.0.2"], [canary.host])

        answer = send(f"http://rebind.example:{port}/hooks/mnemo", allowed, resolver=resolver)

        assert (answer.status, str(answer.address)) == (200, "127.0.0.2")
        assert resolver.asked == ["rebind.example"]
        assert len(checked.received) == 1
        assert checked.received[0].headers["host"] == f"rebind.example:{port}"
    assert canary.received == []


# --- no redirects, bounded size and time --------------------------------------------------------


def test_a_redirect_is_not_followed(receiver, canary):
    allowed = Allowlist.parse(f"127.0.0.1:{receiver.port}, 127.0.0.1:{canary.port}")
    for status in (301, 302, 303, 307, 308):
        receiver.script(status)
        receiver.redirect_to = canary.url
        answer = send(receiver.url, allowed)
        assert answer.status == status
    assert len(receiver.received) == 5
    assert canary.received == []


class RawServer:
    """A TCP server on 127.0.0.1 that hands each connection to `handle(connection, stop)`,
    which writes whatever the test wants."""

    def __init__(self, handle: Callable[[socket.socket, threading.Event], None]) -> None:
        self._handle = handle
        self.stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection: socket.socket) -> None:
        # OSError: the client hung up, which is what the bounds are for.
        with connection, contextlib.suppress(OSError):
            self._handle(connection, self.stop)

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self._thread.join(5)
        self._listener.close()

    @property
    def allow(self) -> Allowlist:
        return Allowlist.parse(f"127.0.0.1:{self.port}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


def read_request(connection: socket.socket) -> bytes:
    """The whole request: its head, then Content-Length bytes of body (read before
    answering, so that closing does not reset the connection under the answer)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536) or b"\r\n\r\n"
    head = data.split(b"\r\n\r\n", 1)[0].lower()
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.startswith(b"content-length:")
        ),
        0,
    )
    while len(data.split(b"\r\n\r\n", 1)[1]) < length:
        data += connection.recv(65536) or b" " * length
    return data


def drip(connection: socket.socket, stop: threading.Event) -> None:
    """A status line, then one header byte every 50 ms for as long as the client listens:
    every single read is quick, only the whole never ends."""
    read_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while not stop.wait(0.05):
        connection.sendall(b"a")


def silent(connection: socket.socket, stop: threading.Event) -> None:
    read_request(connection)
    stop.wait(30)


def flood(connection: socket.socket, stop: threading.Event) -> None:
    """A status line, then headers without end, as fast as the client reads."""
    read_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\n")
    line = b"X-Flood: " + b"f" * 1000 + b"\r\n"
    while not stop.is_set():
        connection.sendall(line)


def test_a_slow_drip_answer_is_cut_at_the_total_deadline():
    with RawServer(drip) as server:
        started = time.monotonic()
        with pytest.raises(Failed) as failed:
            send(server.url, server.allow, timeout=0.6)
        elapsed = time.monotonic() - started
    assert failed.value.timeout is True
    assert failed.value.message == "the receiver did not answer in time"
    assert 0.6 <= elapsed < 1.6  # the deadline, not 0.6 s per read


def test_a_receiver_that_never_answers_is_cut_at_the_deadline():
    with RawServer(silent) as server:
        started = time.monotonic()
        with pytest.raises(Failed) as failed:
            send(server.url, server.allow, timeout=0.5)
        assert time.monotonic() - started < 1.5
    assert failed.value.timeout is True


def test_a_slow_name_lookup_counts_against_the_deadline():
    release = threading.Event()

    def hangs(host: str, port: int) -> list[str]:
        release.wait(30)
        return [PUBLIC_V4]

    try:
        started = time.monotonic()
        with pytest.raises(Failed) as failed:
            send("https://slow-dns.example/", resolver=hangs, timeout=0.4)
        assert time.monotonic() - started < 1.4
        assert failed.value.timeout is True
        # At save time, a lookup that does not end in time lets the URL through (it is
        # checked again at every use), within the time given.
        started = time.monotonic()
        check_url("https://slow-dns.example/", allow=NOBODY, resolver=hangs, timeout=0.4)
        assert time.monotonic() - started < 1.4
    finally:
        release.set()


def test_an_answer_larger_than_the_bound_is_not_read_past_it():
    with RawServer(flood) as server:
        started = time.monotonic()
        with pytest.raises(Failed) as failed:
            send(server.url, server.allow, timeout=5.0, max_response_bytes=8 * 1024)
        assert time.monotonic() - started < 3
    assert failed.value.message == "the receiver's answer was too large"
    assert failed.value.again is False


def test_an_answer_within_the_bound_is_read(receiver):
    allowed = Allowlist.parse(f"127.0.0.1:{receiver.port}")
    assert send(receiver.url, allowed, max_response_bytes=1024).status == 200


def test_the_default_bound_is_64_kib():
    assert outbound.MAX_RESPONSE_BYTES == 65536


# --- https: SNI and the certificate check use the host name -------------------------------------


def _certificates(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A test CA and a certificate it signs for hooks.test: (CA file, cert file, key file)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Mnemo test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.test")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.test")]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = (tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem"))
    ca_file.write_bytes(ca.public_bytes(pem))
    cert_file.write_bytes(leaf.public_bytes(pem))
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, cert_file, key_file


class TLSReceiver(RawServer):
    """An https server on 127.0.0.1 with the hooks.test certificate; records the SNI name
    and the request head of each connection, and answers 204."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        super().__init__(self._serve)
        self.server_names: list[str | None] = []
        self.requests: list[bytes] = []
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert_file, key_file)
        self._context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)

    def _serve(self, connection: socket.socket, stop: threading.Event) -> None:
        connection.settimeout(5)
        with self._context.wrap_socket(connection, server_side=True) as tls:
            self.requests.append(read_request(tls))
            tls.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")


def test_https_sends_the_host_name_and_checks_the_certificate_against_it(tmp_path):
    ca_file, cert_file, key_file = _certificates(tmp_path)
    with TLSReceiver(cert_file, key_file) as server:
        port = server.port
        allowed = Allowlist.parse(f"127.0.0.1:{port}")
        tls = ssl.create_default_context(cafile=str(ca_file))
        resolver = resolving_to(["127.0.0.1"])

        answer = send(f"https://hooks.test:{port}/in", allowed, resolver=resolver, tls=tls)

        assert (answer.status, str(answer.address)) == (204, "127.0.0.1")
        assert server.server_names == ["hooks.test"]
        assert server.requests[0].startswith(b"POST /in HTTP/1.1\r\n")
        assert server.requests[0].endswith(b'\r\n\r\n{"a": 1}')
        assert f"Host: hooks.test:{port}\r\n".encode() in server.requests[0]

        # The same address under another name: the certificate does not match, refused.
        other = ssl.create_default_context(cafile=str(ca_file))
        with pytest.raises(Failed) as failed:
            send(f"https://other.test:{port}/in", allowed, resolver=resolver, tls=other)
        assert failed.value.message == "the receiver's TLS certificate was not accepted"
        assert failed.value.again is False
        assert len(server.requests) == 1


def test_the_addresses_are_classified_by_iana_not_by_python_release():
    # Python 3.12.1's is_global calls these global; the guard does not.
    for text in ("192.0.0.192", "224.0.0.1", "64:ff9b::7f00:1", "::7f00:1"):
        assert outbound_addresses.inside_kind(ipaddress.ip_address(text)) is not None
    assert outbound_addresses.inside_kind(ipaddress.ip_address(PUBLIC_V4)) is None
    assert outbound_addresses.inside_kind(ipaddress.ip_address(PUBLIC_V6)) is None
