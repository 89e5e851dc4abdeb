"""Forwarded headers count only from a trusted proxy (lib/forwarded.py, issue 25).

With no proxy actually in front, a client's own X-Forwarded-For used to pick the address its
failed sign-ins were counted under (tests/profiles/test_accounts.py checks that end to end);
here: the rule itself, HTTPS and the host name, and the MCP door, which reads the host before
Django's middleware runs.
"""

import ipaddress
import json
import runpy
from pathlib import Path

import pytest
from gunicorn.config import Config

from lib.forwarded import forwarded_client, honour_forwarded_headers, parse_address
from mcp_bridge.http import door_refusal

ROOT = Path(__file__).resolve().parent.parent.parent
LOOPBACK = ["127.0.0.0/8", "::1/128"]
FORWARDED = {
    "HTTP_X_FORWARDED_FOR": "198.51.100.1",
    "HTTP_X_FORWARDED_PROTO": "https",
    "HTTP_X_FORWARDED_HOST": "mnemo.example.com",
    "HTTP_X_FORWARDED_PORT": "443",
    "HTTP_X_REAL_IP": "198.51.100.1",
    "HTTP_FORWARDED": "for=198.51.100.1;proto=https",
}


@pytest.fixture
def behind_proxy(settings):
    """MNEMO_BEHIND_PROXY=true as config/accounts.py sets it up, trusting loopback."""
    settings.MNEMO_BEHIND_PROXY = True
    settings.MNEMO_TRUSTED_PROXIES = LOOPBACK
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.USE_X_FORWARDED_HOST = True
    settings.ALLOWED_HOSTS = ["testserver", "mnemo.example.com"]
    return settings


def networks(*cidrs):
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


# The rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("192.0.2.1", "192.0.2.1"),
        (" 192.0.2.1 ", "192.0.2.1"),
        ("192.0.2.1:4711", "192.0.2.1"),
        ("2001:DB8::1", "2001:db8::1"),
        ("[2001:db8::1]:443", "2001:db8::1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("unknown", None),
        ("", None),
        ("192.0.2.300", None),
    ],
)
def test_parse_address(text, expected):
    address = parse_address(text)

    assert (str(address) if address else None) == expected


@pytest.mark.parametrize(
    ("forwarded_for", "trusted", "expected"),
    [
        # One proxy: it appended the address it saw; the client wrote the rest.
        ("203.0.113.7", ("127.0.0.0/8",), "203.0.113.7"),
        ("127.0.0.1, 10.0.0.1, 203.0.113.7", ("127.0.0.0/8",), "203.0.113.7"),
        # Two proxies, both trusted: the first address from the right that is neither.
        ("198.51.100.1, 203.0.113.9, 10.0.0.3", ("10.0.0.0/8",), "203.0.113.9"),
        # Every entry a trusted proxy: the left-most, the first one's client.
        ("10.0.0.4, 10.0.0.3", ("10.0.0.0/8",), "10.0.0.4"),
        # Not an address: the walk stops; what is left of it is nobody's word.
        ("203.0.113.9, garbage, 10.0.0.3", ("10.0.0.0/8",), "10.0.0.3"),
        ("198.51.100.1, garbage", ("10.0.0.0/8",), None),
        ("", ("10.0.0.0/8",), None),
    ],
)
def test_forwarded_client(forwarded_for, trusted, expected):
    client = forwarded_client(forwarded_for, networks(*trusted))

    assert (str(client) if client else None) == expected


def test_an_untrusted_peers_forwarded_headers_are_removed(behind_proxy):
    environ = {"REMOTE_ADDR": "203.0.113.5", "HTTP_USER_AGENT": "probe", **FORWARDED}

    honour_forwarded_headers(environ)

    assert {k: v for k, v in environ.items() if k.startswith(("HTTP_", "REMOTE_"))} == {
        "REMOTE_ADDR": "203.0.113.5",
        "HTTP_USER_AGENT": "probe",
    }


def test_with_no_proxy_in_front_every_peer_is_untrusted(settings):
    settings.MNEMO_BEHIND_PROXY = False
    settings.MNEMO_TRUSTED_PROXIES = []
    environ = {"REMOTE_ADDR": "127.0.0.1", **FORWARDED}

    honour_forwarded_headers(environ)

    assert not set(FORWARDED) & set(environ)
    assert environ["REMOTE_ADDR"] == "127.0.0.1"


def test_a_trusted_proxys_headers_are_kept_and_the_client_address_taken(behind_proxy):
    environ = {"REMOTE_ADDR": "::1", **FORWARDED}
    environ["HTTP_X_FORWARDED_FOR"] = "10.1.1.1, 203.0.113.7"

    honour_forwarded_headers(environ)
    honour_forwarded_headers(environ)  # once only: 203.0.113.7 is not a proxy

    assert environ["REMOTE_ADDR"] == "203.0.113.7"
    assert {k: environ[k] for k in FORWARDED} == FORWARDED | {
        "HTTP_X_FORWARDED_FOR": "10.1.1.1, 203.0.113.7"
    }


def test_a_listed_proxy_is_trusted_and_loopback_then_is_not(behind_proxy):
    behind_proxy.MNEMO_TRUSTED_PROXIES = ["172.16.0.0/12"]
    from_proxy = {"REMOTE_ADDR": "172.18.0.5", "HTTP_X_FORWARDED_FOR": "203.0.113.7"}
    from_loopback = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.7"}

    honour_forwarded_headers(from_proxy)
    honour_forwarded_headers(from_loopback)

    assert from_proxy["REMOTE_ADDR"] == "203.0.113.7"
    assert from_loopback["REMOTE_ADDR"] == "127.0.0.1"
    assert "HTTP_X_FORWARDED_FOR" not in from_loopback


def test_an_untrusted_peer_behind_a_proxy_setting_is_named_in_the_log(behind_proxy, caplog):
    honour_forwarded_headers({"REMOTE_ADDR": "192.0.2.200", **FORWARDED})

    assert (
        "Ignored X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host, X-Forwarded-Port, "
        "X-Real-Ip, Forwarded from 192.0.2.200: it is not in MNEMO_TRUSTED_PROXIES."
    ) in caplog.text


# HTTPS and the host name, through Django -------------------------------------------------


def test_an_untrusted_peer_cannot_make_a_request_https(client, behind_proxy, db):
    behind_proxy.SECURE_SSL_REDIRECT = True

    response = client.get(
        "/login/",
        REMOTE_ADDR="203.0.113.5",
        HTTP_X_FORWARDED_PROTO="https",
        HTTP_X_FORWARDED_HOST="mnemo.example.com",
    )

    # Still plain HTTP, for the host it connected to: redirected to HTTPS there.
    assert response.status_code == 301
    assert response["Location"] == "https://testserver/login/"


def test_a_trusted_proxy_makes_a_request_https_for_its_host(client, behind_proxy, db):
    behind_proxy.SECURE_SSL_REDIRECT = True

    secure = client.get("/login/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_PROTO="https")
    plain = client.get(
        "/login/",
        REMOTE_ADDR="127.0.0.1",
        HTTP_X_FORWARDED_PROTO="http",
        HTTP_X_FORWARDED_HOST="mnemo.example.com",
    )

    assert secure.status_code == 200
    assert plain.status_code == 301
    assert plain["Location"] == "https://mnemo.example.com/login/"


def test_the_middleware_runs_first(settings):
    assert settings.MIDDLEWARE[0] == "lib.forwarded.ForwardedHeadersMiddleware"


# The MCP door ----------------------------------------------------------------------------


def mcp_scope(client_address: str, host: bytes, forwarded_host: bytes) -> dict:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": (client_address, 50000),
        "headers": [(b"host", host), (b"x-forwarded-host", forwarded_host)],
    }


# door_refusal closes stale connections, as Django does around a request: no test transaction.
@pytest.mark.django_db(transaction=True)
def test_the_mcp_door_takes_no_host_from_an_untrusted_peer(behind_proxy):
    status, _, body = door_refusal(mcp_scope("203.0.113.5", b"evil.example", b"testserver"))

    assert status == 400
    assert json.loads(body)["error"]["data"]["code"] == "bad_request"


@pytest.mark.django_db(transaction=True)
def test_the_mcp_door_takes_the_host_from_a_trusted_proxy(behind_proxy):
    status, _, body = door_refusal(mcp_scope("127.0.0.1", b"evil.example", b"testserver"))

    assert status == 401  # past the host check; no token sent
    assert json.loads(body)["error"]["data"]["code"] == "not_authenticated"


# gunicorn --------------------------------------------------------------------------------


def test_gunicorn_trusts_no_peers_forwarded_scheme():
    """Its default trusts loopback's X-Forwarded-Proto whatever MNEMO_TRUSTED_PROXIES says."""
    config = Config()
    values = runpy.run_path(str(ROOT / "config" / "gunicorn.conf.py"))
    config.set("forwarded_allow_ips", values["forwarded_allow_ips"])

    assert config.forwarded_allow_ips == []
