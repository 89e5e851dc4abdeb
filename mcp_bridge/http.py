"""/mcp: the MCP server over streamable HTTP, behind the agent API's bearer tokens.

lib/asgi.py mounts `McpEndpoint` at /mcp (config/asgi.py). Each request is checked first,
on the Django thread pool, with no MCP processing: a Host Django refuses is a 400, a missing
or unknown token a 401 with `WWW-Authenticate: Bearer` (naming the error and its reason, as
RFC 6750 says, for a token that was sent). The body is a JSON-RPC error whose message is
the API's message and whose `data` is the API's error object with the status: MCP clients
read a JSON-RPC error in a refused answer (the official SDK raises it with that message), so
the caller learns why, not only that the server refused. Only then does the SDK's
transport see the request. The transport is stateless (no session to keep between
requests, so any gunicorn worker can answer any request) and answers with plain JSON, not
an event stream: every call here completes with one answer.

The SDK's session manager needs a running task group. gunicorn's ASGI worker may or may
not send lifespan events, so it is started with the first /mcp request and stopped by
`aclose()` (lib/asgi.py calls it at lifespan shutdown).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.db import close_old_connections
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework import exceptions
from rest_framework.request import Request

from lib.asgi import Receive, Scope, Send, wsgi_environ
from lib.forwarded import honour_forwarded_headers
from lib.http_errors import error_body
from lib.tool_manifest import tool_manifest
from mcp_bridge.server import DjangoBridge, build_server
from profiles.authentication import AgentTokenAuthentication

# The codes and message the API answers with (lib/api.py; tests/test_mcp.py compares them).
NOT_AUTHENTICATED = "Send an API token as 'Authorization: Bearer <token>'."
# The JSON-RPC error codes of a refusal at the door (-32000 to -32099 are the server's own).
UNAUTHORIZED = -32001
BAD_REQUEST = -32600  # JSON-RPC's Invalid Request
# (status, headers, body) of a request refused at the door
Refusal = tuple[int, list[tuple[bytes, bytes]], bytes]


class McpEndpoint:
    """The ASGI application served at /mcp."""

    def __init__(self, bridge: DjangoBridge, *, max_body_bytes: int) -> None:
        self.bridge = bridge
        self.manager = StreamableHTTPSessionManager(
            app=build_server(bridge),
            stateless=True,
            json_response=True,
            # Host is checked against ALLOWED_HOSTS at the door, as Django checks it; a
            # bearer token is never sent by a browser on its own, so a rebound DNS name
            # gains nothing.
            security_settings=None,
            max_request_body_size=max_body_bytes,
        )
        self._ready: asyncio.Event | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = await self.bridge.run(door_refusal, scope)
        if refusal is not None:
            status, headers, body = refusal
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self._running()
        await self.manager.handle_request(scope, receive, send)

    async def _running(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
            await self.bridge.run(tool_manifest)  # built once per process, off the loop
            self._task = asyncio.create_task(self._serve(self._ready))
        await self._ready.wait()
        if self._task is not None and self._task.done():
            self._task.result()  # raises why the session manager stopped
            raise RuntimeError("The MCP session manager has stopped.")

    async def _serve(self, ready: asyncio.Event) -> None:
        try:
            async with self.manager.run():
                ready.set()
                await self._stop.wait()
        finally:
            ready.set()

    async def aclose(self) -> None:
        if self._task is not None:
            self._stop.set()
            await self._task


def door_refusal(scope: Scope) -> Refusal | None:
    """Why this /mcp request is refused before MCP sees it (bad host, no valid token),
    or None. Runs on a Django thread: the token is looked up in the database."""
    close_old_connections()  # as Django does around each request (CONN_MAX_AGE)
    try:
        environ = wsgi_environ(scope, b"")
        # Django's middleware has not run: the Host must not come from an untrusted peer's
        # X-Forwarded-Host (USE_X_FORWARDED_HOST behind a proxy).
        honour_forwarded_headers(environ)
        request = WSGIRequest(environ)
        try:
            request.get_host()
        except DisallowedHost:
            return _refusal(400, "bad_request", "The Host header is not one this server serves.")
        try:
            user_auth = AgentTokenAuthentication().authenticate(Request(request))
        except exceptions.AuthenticationFailed as error:
            return _refusal(401, "invalid_token", str(error.detail))
        if user_auth is None:
            return _refusal(401, "not_authenticated", NOT_AUTHENTICATED)
        return None
    finally:
        close_old_connections()


def _refusal(status: int, code: str, message: str) -> Refusal:
    headers = [
        (b"content-type", b"application/json"),
        (b"cache-control", b"no-store"),
    ]
    if status == 401:
        challenge = 'Bearer realm="mnemo"'
        if code == "invalid_token":  # a token was sent (RFC 6750 section 3)
            reason = message.replace("\\", "'").replace('"', "'")
            challenge += f', error="invalid_token", error_description="{reason}"'
        headers.append((b"www-authenticate", challenge.encode("latin-1", "replace")))
    api_error: dict[str, Any] = error_body(code, message)["error"]
    body = {
        "jsonrpc": "2.0",
        "id": None,  # the request's body is not read at the door; clients match on the POST
        "error": {
            "code": UNAUTHORIZED if status == 401 else BAD_REQUEST,
            "message": message,
            "data": {**api_error, "status": status},
        },
    }
    return status, headers, json.dumps(body).encode()
