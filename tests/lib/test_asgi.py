"""The web server's front door (lib/asgi.py) with a fake server: what reaches the WSGI
application (here a recorder in place of Django) and what the client is sent.

A request is whole or refused: a body cut short by a disconnect, or shorter than its
declared Content-Length, never reaches the application or a mounted one. The real
server's side (gunicorn, a raw socket that hangs up) is in tests/test_embedded_run.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIRequest
from gunicorn.config import Config

import lib.asgi as asgi_module
from lib.asgi import BufferedWSGI, disconnect_seen, wsgi_environ
from lib.http_errors import refusal
from lib.web_worker import AccessLog

LIMIT = 1000


class Recorder:
    """A WSGI application that notes each environ and the body it read."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], bytes]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        body = environ["wsgi.input"].read()
        self.calls.append((environ, body))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"done"]


class MountRecorder:
    """A mounted ASGI application that reads its body as an app would."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, scope, receive, send) -> None:
        message = await receive()
        self.messages.append(message)
        self.bodies.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"mounted"})

    async def aclose(self) -> None:
        pass


def scope_for(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
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


class Run:
    """One request through the door: the messages the fake server gives, what was sent."""

    def __init__(
        self,
        path: str,
        messages: list[dict[str, Any]],
        *,
        headers: list[tuple[bytes, bytes]] | None = None,
        send_fails: bool = False,
    ) -> None:
        self.app = Recorder()
        self.mounted = MountRecorder()
        door = BufferedWSGI(self.app, max_body_bytes=LIMIT, refuse=refusal, threads=1)
        door.allow_body("/upload/", 10 * LIMIT)
        door.mount("/mcp", self.mounted)
        self.sent: list[dict[str, Any]] = []
        self.received = 0
        pending = list(messages)

        async def receive() -> dict[str, Any]:
            self.received += 1
            if pending:
                return pending.pop(0)
            await asyncio.sleep(3600)  # nothing more ever comes
            raise AssertionError("not reached")

        async def send(message: dict[str, Any]) -> None:
            if send_fails:
                raise OSError("the client has gone")  # ASGI 2.4 on a closed connection
            self.sent.append(message)

        try:
            asyncio.run(asyncio.wait_for(door(scope_for(path, headers or []), receive, send), 5))
        finally:
            door.executor.shutdown()

    @property
    def status(self) -> int | None:
        return self.sent[0]["status"] if self.sent else None

    def json(self) -> dict[str, Any]:
        return json.loads(b"".join(message.get("body", b"") for message in self.sent[1:]))


def chunk(body: bytes, *, more: bool) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


DISCONNECT = {"type": "http.disconnect"}
WHOLE = b'{"key": "fact:tea", "value": "green"}'
LENGTH = [(b"content-length", str(len(WHOLE)).encode())]


def test_a_body_in_chunks_reaches_the_app_whole():
    run = Run(
        "/api/v1/tools/create_memory",
        [chunk(WHOLE[:10], more=True), chunk(WHOLE[10:], more=True), chunk(b"", more=False)],
        headers=LENGTH,
    )

    assert run.status == 200
    [(environ, body)] = run.app.calls
    assert body == WHOLE
    assert environ["CONTENT_LENGTH"] == str(len(WHOLE))


def test_a_disconnect_before_the_last_chunk_reaches_no_view():
    # What arrived is JSON that parses: a shorter value than the one sent.
    padded = WHOLE + b" " * 50
    run = Run(
        "/api/v1/tools/create_memory",
        [chunk(WHOLE, more=True), DISCONNECT],
        headers=[(b"content-length", str(len(padded)).encode())],
    )

    assert run.app.calls == []
    assert run.status == 400
    assert run.json()["error"]["code"] == "incomplete_body"


def test_a_chunked_body_cut_short_reaches_no_view():
    run = Run("/api/v1/tools/create_memory", [chunk(WHOLE, more=True), DISCONNECT])

    assert run.app.calls == []
    assert run.status == 400


def test_a_page_form_cut_short_is_a_styled_400():
    form = b"entry-kind=fact&entry-value=Likes+green+tea+but+never+before+noon"
    run = Run(
        "/entries/add/",
        [chunk(form[:40], more=True), DISCONNECT],
        headers=[(b"content-length", str(len(form)).encode())],
    )

    assert run.app.calls == []
    assert run.status == 400
    assert dict(run.sent[0]["headers"])[b"content-type"] == b"text/html; charset=utf-8"
    assert b"The request body ended before it was complete" in run.sent[1]["body"]


def test_fewer_bytes_than_the_declared_length_reach_no_view():
    # A server that ended the body early without saying so: the length still tells.
    run = Run(
        "/api/v1/tools/create_memory",
        [chunk(WHOLE, more=False)],
        headers=[(b"content-length", str(len(WHOLE) + 5).encode())],
    )

    assert run.app.calls == []
    assert run.status == 400


def test_more_bytes_than_the_declared_length_reach_no_view():
    run = Run(
        "/api/v1/tools/create_memory",
        [chunk(WHOLE, more=False)],
        headers=[(b"content-length", str(len(WHOLE) - 1).encode())],
    )

    assert run.app.calls == []
    assert run.status == 400


def test_a_client_that_is_gone_gets_nothing_and_nothing_is_raised():
    run = Run("/api/v1/tools/create_memory", [DISCONNECT], headers=LENGTH, send_fails=True)

    assert run.app.calls == []
    assert run.sent == []


def test_a_body_over_the_limit_is_413_while_reading():
    # No Content-Length (chunked): refused as soon as the bytes read pass the limit, and
    # nothing more is read.
    run = Run(
        "/api/v1/tools/create_memory",
        [chunk(b"x" * 600, more=True), chunk(b"x" * 600, more=True), chunk(b"x", more=False)],
    )

    assert run.app.calls == []
    assert run.status == 413
    assert run.json()["error"]["code"] == "too_large"
    assert run.received == 2


def test_a_declared_length_over_the_limit_is_413_before_reading():
    run = Run(
        "/api/v1/tools/create_memory",
        [chunk(b"x", more=False)],
        headers=[(b"content-length", str(LIMIT + 1).encode())],
    )

    assert (run.status, run.received, run.app.calls) == (413, 0, [])


def test_a_path_allowed_a_larger_body_gets_it_whole():
    body = b"x" * (5 * LIMIT)
    run = Run(
        "/upload/",
        [chunk(body[:LIMIT], more=True), chunk(body[LIMIT:], more=False)],
        headers=[(b"content-length", str(len(body)).encode())],
    )

    assert run.status == 200
    assert run.app.calls[0][1] == body


def test_a_mounted_app_gets_the_body_whole_in_one_message():
    run = Run(
        "/mcp",
        [chunk(WHOLE[:5], more=True), chunk(WHOLE[5:], more=False)],
        headers=LENGTH,
    )

    assert run.status == 200
    assert run.mounted.messages == [chunk(WHOLE, more=False)]
    assert run.app.calls == []


def test_a_mounted_app_never_sees_a_body_cut_short():
    run = Run("/mcp", [chunk(WHOLE[:5], more=True), DISCONNECT], headers=LENGTH)

    assert run.mounted.bodies == []
    assert run.status == 400
    assert run.json()["error"]["code"] == "incomplete_body"


def test_a_mounted_app_is_held_to_the_body_limit_while_reading():
    run = Run("/mcp", [chunk(b"x" * 600, more=True), chunk(b"x" * 600, more=False)])

    assert run.mounted.bodies == []
    assert run.status == 413


# --- headers ------------------------------------------------------------------------------


def test_two_cookie_headers_are_joined_so_django_sees_both_cookies():
    scope = scope_for(
        "/",
        [
            (b"host", b"localhost"),
            (b"cookie", b"sessionid=abc123"),
            (b"cookie", b"csrftoken=xyz; theme=dark"),
        ],
    )

    environ = wsgi_environ(scope, b"")

    assert environ["HTTP_COOKIE"] == "sessionid=abc123; csrftoken=xyz; theme=dark"
    assert WSGIRequest(environ).COOKIES == {
        "sessionid": "abc123",
        "csrftoken": "xyz",
        "theme": "dark",
    }


@pytest.mark.parametrize(
    ("name", "values", "joined"),
    [
        (b"accept", [b"text/html", b"application/json"], "text/html, application/json"),
        (b"x-forwarded-for", [b"203.0.113.7", b"10.0.0.1"], "203.0.113.7, 10.0.0.1"),
        (b"cache-control", [b"no-cache"], "no-cache"),
    ],
)
def test_other_repeated_headers_are_one_comma_separated_list(name, values, joined):
    environ = wsgi_environ(scope_for("/", [(name, value) for value in values]), b"")

    assert environ["HTTP_" + name.decode().upper().replace("-", "_")] == joined


def test_the_body_read_decides_content_length_not_the_header():
    environ = wsgi_environ(
        scope_for("/", [(b"content-length", b"999"), (b"transfer-encoding", b"chunked")]), b"ab"
    )

    assert environ["CONTENT_LENGTH"] == "2"
    assert "HTTP_TRANSFER_ENCODING" not in environ
    assert environ["wsgi.input"].read() == b"ab"


# A client that leaves before its answer (issue 30) -------------------------------------------


class Leaving:
    """One request through the door whose client leaves while Django works on it: the WSGI
    app holds its answer until the server has said `http.disconnect`."""

    def __init__(self, app: Callable[[threading.Event], Any]) -> None:
        self.gone = threading.Event()
        self.sent: list[dict[str, Any]] = []
        door = BufferedWSGI(app(self.gone), max_body_bytes=LIMIT, refuse=refusal, threads=1)
        messages = [chunk(b"", more=False)]

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop(0)
            # The body is read: the next message is the disconnect, once the app has begun.
            await asyncio.sleep(0.05)
            self.gone.set()
            return DISCONNECT

        async def send(message: dict[str, Any]) -> None:
            self.sent.append(message)

        async def request() -> bool:
            await door(scope_for("/slow/", []), receive, send)
            return disconnect_seen()  # as the access log reads it, in the request's task

        try:
            self.seen = asyncio.run(asyncio.wait_for(request(), 5))
        finally:
            door.executor.shutdown()


def test_a_client_gone_while_django_works_gets_no_answer_and_the_log_is_told():
    def app(gone: threading.Event):
        def slow(environ, start_response):
            assert gone.wait(5)  # Django still works when the client leaves
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"too late"]

        return slow

    run = Leaving(app)

    assert run.sent == []
    assert run.seen is True


def test_a_download_stops_streaming_when_its_client_leaves():
    made: list[int] = []
    closed = threading.Event()

    def app(gone: threading.Event):
        def chunks():
            try:
                for number in range(1000):
                    made.append(number)
                    if number == 1:
                        assert gone.wait(5)
                    yield b"x" * 100
            finally:
                closed.set()

        def download(environ, start_response):
            start_response("200 OK", [("Content-Type", "application/zip")])
            response = chunks()
            return StreamingBody(response)

        return download

    run = Leaving(app)

    assert run.seen is True
    assert run.sent[0]["status"] == 200
    assert len(run.sent) <= 4  # the start and the chunks made before the client left
    assert len(made) <= 3, "the download went on after its client left"
    assert closed.is_set()


class StreamingBody:
    """What Django's StreamingHttpResponse looks like to the door: iterable, `streaming`."""

    streaming = True

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks

    def close(self) -> None:
        self.chunks.close()  # type: ignore[attr-defined]


def test_an_answered_request_is_not_noted_as_abandoned():
    async def request() -> tuple[list[dict[str, Any]], bool]:
        sent: list[dict[str, Any]] = []
        door = BufferedWSGI(Recorder(), max_body_bytes=LIMIT, refuse=refusal, threads=1)
        messages = [chunk(WHOLE, more=False)]

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop(0)
            await asyncio.sleep(3600)  # the client stays
            raise AssertionError("not reached")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        try:
            await door(scope_for("/", LENGTH), receive, send)
        finally:
            door.executor.shutdown()
        return sent, disconnect_seen()

    sent, seen = asyncio.run(asyncio.wait_for(request(), 5))

    assert sent[0]["status"] == 200
    assert seen is False


def test_a_body_cut_short_by_a_disconnect_is_noted():
    async def request() -> bool:
        messages = [chunk(WHOLE[:5], more=True), DISCONNECT]
        door = BufferedWSGI(Recorder(), max_body_bytes=LIMIT, refuse=refusal, threads=1)

        async def receive() -> dict[str, Any]:
            return messages.pop(0)

        async def send(message: dict[str, Any]) -> None:
            pass

        try:
            await door(scope_for("/", LENGTH), receive, send)
        finally:
            door.executor.shutdown()
        return disconnect_seen()

    assert asyncio.run(request()) is True


@dataclass
class Response:
    """What gunicorn's ASGI protocol hands its access log (gunicorn/asgi/protocol.py)."""

    status: int
    sent: int
    headers: list[tuple[str, str]] = field(default_factory=list)


def access_line(tmp_path: Path, response: Response, *, disconnect: bool) -> str:
    log_file = tmp_path / "access.log"
    config = Config()
    config.set("accesslog", str(log_file))
    log = AccessLog(config)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": "/context/?tab=entries",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
    }

    def write() -> None:
        if disconnect:
            asgi_module._disconnect_seen.set(True)
        log.access(response, SimpleNamespace(headers=[]), environ, timedelta(milliseconds=3))

    contextvars.copy_context().run(write)
    for handler in log.access_log.handlers:
        handler.flush()
    return log_file.read_text()


def test_the_access_log_says_client_closed_for_an_abandoned_request(tmp_path):
    line = access_line(tmp_path, Response(status=500, sent=0), disconnect=True)

    assert '"GET /context/?tab=entries HTTP/1.1" 499 0 ' in line
    assert line.rstrip().endswith("client closed")


def test_the_access_log_keeps_real_answers_as_they_were(tmp_path):
    # A 500 with no disconnect is the server's failure; an answer that went out (a 400 to a
    # client that stopped sending but still listens) is what the client got.
    for response, disconnect, status in [
        (Response(status=500, sent=0), False, "500 0"),
        (Response(status=400, sent=120), True, "400 120"),
        (Response(status=200, sent=4), False, "200 4"),
    ]:
        line = access_line(tmp_path, response, disconnect=disconnect)
        assert f'HTTP/1.1" {status} ' in line, line
        assert "client closed" not in line, line
        (tmp_path / "access.log").unlink()
