"""Bad requests get a clear 4xx, server errors never leak HTML to the API, and an unreachable
database is a 503 with Retry-After that ends by itself (lib/http_errors.py, lib/api.py).

Under /api/ every answer is `{"error": {"code", "message", "field"}}`; a page gets a styled
error page (templates/errors/) made without the database, the session or request.user.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.wsgi import WSGIHandler
from django.db import IntegrityError, InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from django.urls import path

from config import urls as site_urls
from lib import http_errors
from lib.api import MAX_JSON_DEPTH, json_nesting_exceeds
from lib.tool_manifest import tool_manifest
from memory.models import Memory

STYLESHEET = re.compile(r'<link rel="stylesheet" href="/static/css/mnemo\.css">')
JSON_BODY = {"content_type": "application/json"}


def error(response: HttpResponse) -> dict[str, Any]:
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    body = json.loads(response.content)
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "field"}
    return body["error"]


def assert_error_page(response: HttpResponse, status: int, title: str) -> str:
    """A styled error page: the site's stylesheet, the title, a way home, nothing leaked."""
    assert response.status_code == status
    assert response["Content-Type"] == "text/html; charset=utf-8"
    html = response.content.decode()
    assert STYLESHEET.search(html), html
    assert f'<h1 id="error-title">{title}</h1>' in html
    assert '<a href="/">Back to Mnemo</a>' in html
    assert f"Error {status}" in html
    assert "Traceback" not in html
    return html


@pytest.fixture
def quiet_client() -> Client:
    """A test client that answers with the error page instead of re-raising the error."""
    return Client(raise_request_exception=False)


# --- JSON nested too deep ----------------------------------------------------------------


def nested(depth: int) -> str:
    return '{"key": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.django_db
def test_deep_json_is_a_400_naming_the_limit_on_every_tool(call_tool, alice, alice_token):
    body = nested(5000)  # about 10 KB
    assert 9_000 < len(body) < 11_000
    names = [tool["function"]["name"] for tool in tool_manifest()]
    assert len(names) >= 15
    for name in names:
        response = call_tool(alice_token, name, raw=body)
        assert response.status_code == 400, (name, response.status_code)
        assert error(response) == {
            "code": "bad_json",
            "message": "The JSON body nests arrays and objects more than 100 levels deep; "
            "the limit is 100 levels.",
            "field": None,
        }, name
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_the_depth_limit_is_exactly_one_hundred_and_strings_do_not_count(
    call_tool, alice, alice_token
):
    at_limit = call_tool(alice_token, "create_memory", raw=nested(MAX_JSON_DEPTH))
    over = call_tool(alice_token, "create_memory", raw=nested(MAX_JSON_DEPTH + 1))

    assert MAX_JSON_DEPTH == 100
    assert at_limit.status_code == 400
    assert error(at_limit)["code"] == "invalid"  # parsed; the key is just not text
    assert error(at_limit)["field"] == "key"
    assert over.status_code == 400
    assert error(over)["code"] == "bad_json"

    value = '[{\\"' * 300  # escaped quotes must not end the string early
    raw = '{"key": "fact:brackets", "value": "' + value + '"}'

    response = call_tool(alice_token, "create_memory", raw=raw)

    assert response.status_code == 201, response.content
    assert Memory.objects.get(user=alice, key="fact:brackets").value == '[{"' * 300


@pytest.mark.parametrize(
    ("text", "too_deep"),
    [
        (b"[" * 101 + b"]" * 101, True),
        (b"[" * 100 + b"]" * 100, False),
        (b"[" * 5000, True),  # unterminated, still refused before parsing
        (b'{"a":' * 101 + b"1" + b"}" * 101, True),
        (b"[" + b"[1]," * 10_000 + b"1]", False),  # wide, not deep
        (b'["' + b"[" * 500 + b'"]', False),
        (b'["\\\\", ' + b"[" * 101 + b"]" * 101 + b"]", True),  # "\\" ends its string
        (b'["\\"' + b"[" * 500 + b'"]', False),  # \" does not
        ((b"[" * 100 + b"]" * 99) * 50, True),  # climbs in steps no run reveals
    ],
)
def test_json_nesting_exceeds(text, too_deep):
    assert json_nesting_exceeds(text, 100) is too_deep


# --- 500: JSON on the API, a page elsewhere ---------------------------------------------


@pytest.mark.django_db
def test_a_crash_in_a_tool_is_a_json_500(quiet_client, alice, alice_token, monkeypatch):
    def crash(**kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("memory.services.memory_upsert", crash)

    response = quiet_client.post(
        "/api/v1/tools/create_memory",
        data=json.dumps({"key": "fact:tea", "value": "green"}),
        headers={"Authorization": f"Bearer {alice_token}"},
        **JSON_BODY,
    )

    assert response.status_code == 500
    assert error(response) == {
        "code": "server_error",
        "message": "Something went wrong on our side; it has been logged.",
        "field": None,
    }
    assert "Retry-After" not in response


@pytest.mark.django_db
def test_a_crash_in_a_page_is_a_styled_500(quiet_client, alice, monkeypatch):
    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("pages.views.settings._settings_context", crash)
    quiet_client.force_login(alice)

    response = quiet_client.get("/settings/")

    html = assert_error_page(response, 500, "Something went wrong")
    assert "boom" not in html


def test_the_site_sets_every_error_handler():
    assert site_urls.handler400 == "lib.http_errors.bad_request"
    assert site_urls.handler403 == "lib.http_errors.permission_denied"
    assert site_urls.handler404 == "lib.http_errors.page_not_found"
    assert site_urls.handler500 == "lib.http_errors.server_error"


@pytest.mark.django_db
def test_an_unknown_page_is_a_styled_404(client):
    assert_error_page(client.get("/no-such-page/"), 404, "Page not found")


def test_not_found_under_mcp_is_json():
    request = RequestFactory().get("/mcp/nothing")
    response = http_errors.page_not_found(request, None)
    assert response.status_code == 404
    assert error(response)["code"] == "not_found"


@pytest.mark.django_db
def test_a_bad_host_is_a_styled_400_and_json_on_the_api(client):
    page = client.get("/login/", headers={"Host": "evil.example"})
    api = client.post("/api/v1/tools/get_memory", headers={"Host": "evil.example"})

    assert_error_page(page, 400, "Bad request")
    assert api.status_code == 400
    assert error(api)["code"] == "bad_request"


@pytest.mark.django_db
def test_a_csrf_failure_is_a_styled_403(alice):
    client = Client(enforce_csrf_checks=True)

    response = client.post("/login/", {"username": "alice", "password": "nope"})

    html = assert_error_page(response, 403, "Not allowed")
    assert "This form expired or was sent from another site." in html


# --- the database going away ------------------------------------------------------------


@contextmanager
def database_unreachable(nowhere: str) -> Iterator[None]:
    """New connections go to a socket directory where no server listens (a closed port)."""
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST=nowhere, PORT="5432")
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def assert_database_down_json(response: HttpResponse) -> None:
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert error(response) == {
        "code": "unavailable",
        "message": "The database is unreachable right now; retry in 5 seconds.",
        "field": None,
    }


def assert_database_down_page(response: HttpResponse) -> None:
    html = assert_error_page(response, 503, "Mnemo is unavailable")
    assert response["Retry-After"] == "5"
    assert "The database is unreachable right now; retry in 5 seconds." in html
    assert response["Cache-Control"] == "no-store"
    assert "script-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.django_db(transaction=True)
def test_pages_answer_503_while_the_database_is_down(quiet_client, alice, tmp_path):
    quiet_client.force_login(alice)

    with database_unreachable(str(tmp_path)):
        for path in ("/", "/documents/", "/settings/"):
            assert_database_down_page(quiet_client.get(path))

    assert quiet_client.get("/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_tools_answer_503_json_while_the_database_is_down(
    quiet_client, alice, alice_token, tmp_path
):
    def call(name: str, body: dict[str, object]) -> HttpResponse:
        return quiet_client.post(
            f"/api/v1/tools/{name}",
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {alice_token}"},
            **JSON_BODY,
        )

    with database_unreachable(str(tmp_path)):
        assert_database_down_json(call("create_memory", {"key": "fact:tea", "value": "green"}))
        assert_database_down_json(call("list_memories", {}))
        working_memory = quiet_client.get(
            "/api/v1/working-memory", headers={"Authorization": f"Bearer {alice_token}"}
        )
        assert_database_down_json(working_memory)

    assert call("create_memory", {"key": "fact:tea", "value": "green"}).status_code == 201
    assert Memory.objects.get(user=alice, key="fact:tea").value == "green"


@pytest.mark.django_db(transaction=True)
def test_sign_in_answers_503_while_the_database_is_down(quiet_client, alice, tmp_path):
    form = {"username": "alice", "password": "correct-horse-battery"}

    with database_unreachable(str(tmp_path)):
        assert_database_down_page(quiet_client.post("/login/", form))

    signed_in = quiet_client.post("/login/", form)
    assert signed_in.status_code == 302
    assert quiet_client.get("/").status_code == 200


def remember_visit(request: HttpRequest) -> HttpResponse:
    """Touches no database itself; the session middleware saves the session afterwards."""
    request.session["visited"] = True
    return HttpResponse("ok")


urlpatterns = [path("remember/", remember_visit), *site_urls.urlpatterns]
handler400 = site_urls.handler400
handler403 = site_urls.handler403
handler404 = site_urls.handler404
handler500 = site_urls.handler500


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.test_errors")
def test_a_failure_inside_the_middleware_is_a_503_too(quiet_client, tmp_path):
    with database_unreachable(str(tmp_path)):
        assert_database_down_page(quiet_client.get("/remember/"))

    assert quiet_client.get("/remember/").status_code == 200


def wsgi_call(
    app: WSGIHandler, method: str, path: str, body: bytes = b"", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request through Django's WSGI handler, as the web server makes it (lib/asgi.py):
    it opens and closes database connections at the start and end of each request."""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SCRIPT_NAME": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        **{f"HTTP_{name.upper()}": value for name, value in headers.items()},
    }
    started: dict[str, Any] = {}

    def start_response(status: str, response_headers: list, exc_info: object = None) -> None:
        started["status"] = int(status.split(" ", 1)[0])
        started["headers"] = dict(response_headers)

    result = app(environ, start_response)
    try:
        content = b"".join(result)
    finally:
        result.close()  # request_finished: Django closes unusable or expired connections
    return started["status"], started["headers"], content


def terminate_the_connection() -> None:
    """End the server side of the web's database connection, as a restart would."""
    connection = connections["default"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
def test_requests_succeed_again_as_soon_as_the_database_is_back(alice, alice_token, tmp_path):
    """With persistent connections and health checks, as in production: a connection the
    server dropped is replaced, and the first request after an outage is answered."""
    app = WSGIHandler()
    auth = {"authorization": f"Bearer {alice_token}"}
    connection = connections["default"]
    saved_max_age = connection.settings_dict["CONN_MAX_AGE"]
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = 60
    try:
        status, _, _ = wsgi_call(app, "POST", "/api/v1/tools/list_memories", b"{}", **auth)
        assert status == 200
        assert connection.connection is not None  # kept for the next request

        terminate_the_connection()  # the database restarted between two requests
        status, _, _ = wsgi_call(app, "POST", "/api/v1/tools/list_memories", b"{}", **auth)
        assert status == 200

        with database_unreachable(str(tmp_path)):  # the database is down for a while
            status, headers, content = wsgi_call(
                app, "POST", "/api/v1/tools/list_memories", b"{}", **auth
            )
            assert status == 503
            assert headers["Retry-After"] == "5"
            assert json.loads(content)["error"]["code"] == "unavailable"
        # It is back: the next request is answered, with nothing done in between.
        body = json.dumps({"key": "fact:back", "value": "up"}).encode()
        status, _, _ = wsgi_call(app, "POST", "/api/v1/tools/create_memory", body, **auth)
        assert status == 201
        assert Memory.objects.filter(user=alice, key="fact:back").exists()
    finally:
        connection.close()
        connection.settings_dict["CONN_MAX_AGE"] = saved_max_age


@pytest.mark.parametrize(
    ("error_value", "unavailable"),
    [
        (OperationalError("connection refused"), True),
        (InterfaceError("connection already closed"), True),
        (psycopg.OperationalError("server closed the connection"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (IntegrityError("duplicate key"), False),
        (RuntimeError("boom"), False),
        (None, False),
    ],
)
def test_database_unavailable(error_value, unavailable):
    assert http_errors.database_unavailable(error_value) is unavailable


def test_an_error_raised_from_a_database_error_counts_as_unavailable():
    cause = OperationalError("connection refused")
    wrapped = RuntimeError("could not load the session")
    wrapped.__cause__ = cause
    context = ValueError("while handling it")
    context.__context__ = wrapped

    assert http_errors.database_unavailable(wrapped)
    assert http_errors.database_unavailable(context)


# --- bodies over the limit --------------------------------------------------------------

TOO_BIG = "note=" + "x" * (4 * 1024 * 1024)


@pytest.mark.django_db
def test_an_oversized_form_on_a_page_is_a_styled_413(client, alice):
    client.force_login(alice)

    response = client.post(
        "/entries/add/", data=TOO_BIG, content_type="application/x-www-form-urlencoded"
    )

    html = assert_error_page(response, 413, "Too much at once")
    assert "The request body is larger than 4096 KiB." in html
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_an_oversized_sign_in_form_is_a_413_even_with_csrf_checks(alice):
    client = Client(enforce_csrf_checks=True)
    client.get("/login/")  # the CSRF cookie: with it, the CSRF middleware reads the body

    response = client.post(
        "/login/", data=TOO_BIG, content_type="application/x-www-form-urlencoded"
    )

    assert_error_page(response, 413, "Too much at once")


def test_bad_request_with_request_data_too_big_is_json_413_on_the_api():
    request = RequestFactory().post("/api/v1/tools/memory_write")
    response = http_errors.bad_request(request, RequestDataTooBig("too big"))
    assert response.status_code == 413
    assert error(response) == {
        "code": "too_large",
        "message": "The request body is larger than 4096 KiB.",
        "field": None,
    }


# --- refused at the door (lib/asgi.py) ---------------------------------------------------


def test_refusal_is_a_styled_page_off_the_api_and_json_on_it_without_the_database():
    # No django_db mark: any database query here would fail the test.
    status, headers, body = http_errors.refusal("/documents/", 414)
    html = body.decode()

    assert status == 414
    assert dict(headers)[b"content-type"] == b"text/html; charset=utf-8"
    assert b"script-src 'self'" in dict(headers)[b"content-security-policy"]
    assert STYLESHEET.search(html)
    assert '<h1 id="error-title">Address too long</h1>' in html
    assert "The URL is longer than 8192 bytes." in html

    for where in ("/api/v1/tools/memory_write", "/mcp"):
        status, headers, body = http_errors.refusal(where, 413)
        assert status == 413
        assert headers == [(b"content-type", b"application/json")]
        assert json.loads(body) == {
            "error": {
                "code": "too_large",
                "message": "The request body is larger than 4096 KiB.",
                "field": None,
            }
        }


def asgi_call(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict, bytes]:
    from config.asgi import application

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("localhost", 80),
        "client": ("127.0.0.1", 5000),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def test_the_web_server_refuses_a_long_url_with_a_page_and_a_large_body_with_json():
    status, headers, body = asgi_call("/documents/" + "a" * 9000, [])
    assert status == 414
    assert headers[b"content-type"] == b"text/html; charset=utf-8"
    assert b"Address too long" in body

    status, headers, body = asgi_call(
        "/api/v1/tools/memory_write", [(b"content-length", str(5 * 1024 * 1024).encode())]
    )
    assert status == 413
    assert json.loads(body)["error"]["code"] == "too_large"


# --- the pages themselves ----------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 403, 404, 413, 414, 500, 503])
def test_every_error_page_renders_alone(status):
    html = http_errors.render_error_page(status, "What happened.")

    assert STYLESHEET.search(html)
    assert f'<h1 id="error-title">{http_errors.PAGES[status]}</h1>' in html
    assert "<p>What happened.</p>" in html
    assert '<a href="/">Back to Mnemo</a>' in html
    assert "{{" not in html
    assert "{%" not in html


def test_error_pages_escape_the_message():
    html = http_errors.render_error_page(400, "<script>alert(1)</script>")
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize("status", [403, 404, 500, 503])
def test_error_pages_have_the_navigation_the_theme_switch_and_the_icon(status):
    # No django_db mark: the links are reversed URLs and nothing here may query the database.
    html = http_errors.render_error_page(status, "What happened.")

    assert '<nav aria-label="Main">' in html
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', html.split('<nav aria-label="Main">')[1])
    assert links[:7] == [
        ("/", "Context"),
        ("/context/inbox/", "Inbox"),
        ("/activity/", "Activity"),
        ("/turns/", "Turns"),
        ("/work/", "Work"),
        ("/agents/", "Agents"),
        ("/settings/", "Settings"),
    ]
    assert '<a class="skip" href="#main">Skip to content</a>' in html
    assert '<select id="theme-choice" data-theme-switch>' in html
    assert '<script src="/static/js/theme.js"></script>' in html
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
