"""The web server's front door: read each request whole, then hand it to Django.

gunicorn's ASGI worker parses HTTP on an event loop, so a client that trickles its
headers or body holds a coroutine, never a worker. Only once a request is complete
(its body read, chunked bodies decoded, bounded by MNEMO_API_MAX_BODY_BYTES) does it
go to Django's WSGI handler on a small thread pool: one thread hop per request, and
each thread keeps its own persistent database connection. Django's own ASGI handler
would instead hop threads for every middleware and open a connection per request,
which measured two to three times slower here (bench/README.md).

A request is whole or refused: a body that ends before its last chunk (the client went
away, or stopped sending for gunicorn's `timeout`) or before its declared Content-Length
never reaches a view. It is answered 400 `incomplete_body` if the connection still
takes an answer, and dropped otherwise. (a2wsgi, the usual ASGI-to-WSGI bridge, was
considered: its WSGI input reads the body from the pool's thread as Django asks for it,
so a trickling client would hold a thread, it has no body limit, and it ends a cut body
silently, as this module did before.)

Requests that can be refused without Django are refused here, in the same shapes
Django would use: `{"error": …}` JSON under /api/ and /mcp, a styled page elsewhere.

A path can be mounted on another ASGI application (`mount`): /mcp is the MCP server
(mcp_bridge/http.py), which runs each tool call through the same Django handler on this
same thread pool. It gets the same checks and the body whole, read here first, as one
message; `aclose()` is awaited at lifespan shutdown.

A client that goes away before its answer (a browser tab closed, a request abandoned) gets
none, and its access log line says so: the door notes the disconnect it saw
(`disconnect_seen`), and the access log (lib/web_worker.py AccessLog) writes 499 "client
closed" where gunicorn would write "500 0". While Django works on a request, a watcher
waits for the disconnect, as Django's own ASGI handler does; a download stops streaming.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import io
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class MountedApp(Protocol):
    """An ASGI application served at one path, closed when the server shuts down."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    async def aclose(self) -> None: ...


MAX_URL_BYTES = 8192
WSGI_THREADS = int(os.environ.get("MNEMO_WEB_THREADS", "4"))
# RFC 9110 section 5.3: repeated fields are one list joined by commas, except Cookie,
# whose pairs are joined by "; " (RFC 6265 section 5.4; RFC 9113 section 8.2.3 for
# HTTP/2, which may send every cookie as a field of its own).
_HEADER_SEPARATORS = {"HTTP_COOKIE": "; "}


# Set by the door, in the request's own task, when the server said the client is gone
# (`http.disconnect`): the access log reads it in that task once the app has returned.
_disconnect_seen: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "disconnect_seen", default=False
)


def disconnect_seen() -> bool:
    """Whether this request's client went away (or, while its body was read, stopped sending
    for the server's `timeout`) before the door answered."""
    return _disconnect_seen.get()


class BodyRefused(Exception):
    """The body cannot be handed on: 413 (over the limit) or 400 (it ended early)."""

    def __init__(self, status: int, *, disconnected: bool = False) -> None:
        super().__init__(status)
        self.status = status
        self.disconnected = disconnected  # the server said `http.disconnect`


class BufferedWSGI:
    """An ASGI application that runs a WSGI application once each request is complete."""

    def __init__(
        self,
        wsgi_app: WSGIApp,
        *,
        max_body_bytes: int,
        # (path, status) -> (status, headers, body): the answer to a refused request.
        refuse: Callable[[str, int], tuple[int, list[tuple[bytes, bytes]], bytes]],
        threads: int = WSGI_THREADS,
    ) -> None:
        self.wsgi_app = wsgi_app
        self.max_body_bytes = max_body_bytes
        self.refuse = refuse
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="django")
        self.mounts: dict[str, MountedApp] = {}
        self.body_limits: dict[str, int] = {}

    def allow_body(self, path: str, max_bytes: int) -> None:
        """A larger (or smaller) body limit for one path, exactly (e.g. an upload page)."""
        self.body_limits[path.rstrip("/")] = max_bytes

    def body_limit(self, path: str) -> int:
        return self.body_limits.get(path.rstrip("/"), self.max_body_bytes)

    def mount(self, path: str, app: MountedApp) -> None:
        """Serve `path` (exactly, with or without a trailing slash) with another ASGI app."""
        self.mounts[path.rstrip("/")] = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, on_shutdown=self._close_mounts)
            return
        if scope["type"] != "http":
            return
        path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        if len(path) + len(query) > MAX_URL_BYTES:
            await self._refuse(send, scope, 414)
            return
        declared = _declared_length(scope)
        limit = self.body_limit(scope["path"])
        if declared is not None and declared > limit:
            await self._refuse(send, scope, 413)
            return
        try:
            body = await read_body(receive, limit=limit, declared=declared)
        except BodyRefused as refused:
            if refused.disconnected:
                _disconnect_seen.set(True)
            await self._refuse(send, scope, refused.status)
            return
        mounted = self.mounts.get(scope["path"].rstrip("/")) if self.mounts else None
        if mounted is not None:
            await mounted(scope, _replay(body, receive), send)
            return
        environ = wsgi_environ(scope, body)
        loop = asyncio.get_running_loop()
        # The body is read: the next message is the client's disconnect, whenever it comes.
        watcher = asyncio.ensure_future(receive())
        watcher.add_done_callback(_retrieve)
        try:
            await self._answer(loop, environ, send, watcher)
        except asyncio.CancelledError:
            # The server cancels a request whose client left a while ago (gunicorn's
            # asgi_disconnect_grace_period), or any request when it stops.
            if _gone(watcher):
                _disconnect_seen.set(True)
            raise
        finally:
            watcher.cancel()

    async def _answer(
        self,
        loop: asyncio.AbstractEventLoop,
        environ: dict[str, Any],
        send: Send,
        watcher: asyncio.Future[dict[str, Any]],
    ) -> None:
        status, headers, result = await loop.run_in_executor(
            self.executor, call_wsgi, self.wsgi_app, environ
        )
        if _gone(watcher):  # nobody is left to answer
            _disconnect_seen.set(True)
            if not isinstance(result, bytes):
                await loop.run_in_executor(self.executor, _close, result)
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if isinstance(result, bytes):
            await send({"type": "http.response.body", "body": result})
            return
        # A streaming response (a download): each chunk is made on the pool, sent here, until
        # the last one or until the client is gone.
        try:
            while (
                chunk := await loop.run_in_executor(self.executor, next, result, None)
            ) is not None:
                if _gone(watcher):
                    _disconnect_seen.set(True)
                    return
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            await loop.run_in_executor(self.executor, _close, result)
        await send({"type": "http.response.body", "body": b""})

    async def _close_mounts(self) -> None:
        for app in self.mounts.values():
            await app.aclose()

    async def _refuse(self, send: Send, scope: Scope, status: int) -> None:
        status, headers, body = self.refuse(scope["path"], status)
        # A client that went away takes no answer: gunicorn drops it, and a server that
        # keeps to ASGI 2.4 raises an OSError, which is the end of this request too.
        with contextlib.suppress(OSError):
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})


async def read_body(receive: Receive, *, limit: int, declared: int | None) -> bytes:
    """The whole body, read on the event loop; BodyRefused(413) once it passes `limit`,
    BodyRefused(400) when it ends before its last chunk or its declared length.

    gunicorn sends `http.disconnect` both when the client is gone and when no byte came
    for its `timeout`; either way what arrived is not the request the client meant."""
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            raise BodyRefused(400, disconnected=True)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyRefused(413)
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    if declared is not None and size != declared:
        raise BodyRefused(400)
    return b"".join(parts)


def _gone(watcher: asyncio.Future[dict[str, Any]]) -> bool:
    """Whether the watcher of a request whose body was read has seen its client leave."""
    if not watcher.done() or watcher.cancelled() or watcher.exception() is not None:
        return False
    return watcher.result().get("type") == "http.disconnect"


def _retrieve(watcher: asyncio.Future[dict[str, Any]]) -> None:
    """A watcher's own failure (a server's receive that raised) is nobody's answer: taken,
    so asyncio does not log it as never retrieved."""
    if not watcher.cancelled():
        watcher.exception()


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body read already as one message, then the connection's
    own messages (a disconnect, for an app that listens for one)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def wsgi_environ(scope: Scope, body: bytes) -> dict[str, Any]:
    """A PEP 3333 environ for a complete request (CONTENT_LENGTH is the body read)."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    path = scope["path"]
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", ""),
        # PEP 3333: the path's bytes as latin-1 text (ASGI gives it decoded from UTF-8).
        "PATH_INFO": path.encode("utf-8", "surrogateescape").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": client[0],
        "REMOTE_PORT": str(client[1]),
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name == "CONTENT_TYPE":
            environ["CONTENT_TYPE"] = value
            continue
        if name in ("CONTENT_LENGTH", "TRANSFER_ENCODING"):
            continue  # the body is whole: CONTENT_LENGTH above says how long
        key = f"HTTP_{name}"
        if key in environ:
            value = f"{environ[key]}{_HEADER_SEPARATORS.get(key, ', ')}{value}"
        environ[key] = value
    return environ


def call_wsgi(
    app: WSGIApp, environ: dict[str, Any]
) -> tuple[int, list[tuple[bytes, bytes]], bytes | Iterator[bytes]]:
    """Call the app; a whole response comes back as bytes, a streaming one as an iterator."""
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
        started["status"] = int(status.split(" ", 1)[0])
        started["headers"] = [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers
        ]
        return lambda data: None  # Django never uses write()

    result = app(environ, start_response)
    if getattr(result, "streaming", False):
        return started["status"], started["headers"], _Chunks(result)
    try:
        body = b"".join(result)
    finally:
        _close(result)
    return started["status"], started["headers"], body


class _Chunks:
    """A streaming response's chunks, pulled one by one with next()."""

    def __init__(self, result: Iterable[bytes]) -> None:
        self.result = result
        self.iterator = iter(result)

    def __next__(self) -> bytes:
        return next(self.iterator)

    def close(self) -> None:
        _close(self.result)


def _close(result: Any) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()


async def _lifespan(
    receive: Receive, send: Send, *, on_shutdown: Callable[[], Awaitable[None]]
) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await on_shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
