"""Mnemo's agent API as an MCP server: the same tools, answered by the same Django views.

Nothing here knows a tool. `tools/list` is `tool_manifest()` (names, descriptions and
input schemas cut from the OpenAPI schema), and `tools/call` becomes the request an agent
would send over HTTP, `POST /api/v1/tools/<name>` with the caller's bearer token and the
arguments as the JSON body, run through Django's own handler (middleware, URL resolver,
DRF view). Authentication, isolation between users, throttling, pause and review rules,
validation and error codes are therefore the HTTP API's, not a copy of them.

- A 2xx answer is a tool result: the JSON body as text content and, when it is an object,
  as structured content. An error answer is a tool result with `isError` set and the API's
  error body `{"error": {"code", "message", "field"}}` as text and structured content, so
  the model reads what went wrong, as MCP asks for errors a caller can act on. Its HTTP
  status (and Retry-After, when throttled) ride in `_meta` under `mnemo/status` and
  `mnemo/retry_after`. Only a name that is no tool is a JSON-RPC error (INVALID_PARAMS).
- Resources: `mnemo://working-memory`, `mnemo://profile-memory` and
  `mnemo://system-prompt`, read as Markdown through their GET endpoints. An error answer is
  a JSON-RPC error whose `data` is the API's error body plus `status`.
- Prompt: `system_prompt`, the same system prompt as a user message to start a chat with.

Who is calling comes from the ASGI scope of the request: over HTTP the /mcp request itself
(mcp_bridge/http.py), over stdio one the command builds for its token (`stdio_scope`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from lib.asgi import Scope, WSGIApp, call_wsgi, wsgi_environ
from lib.version import mnemo_version

# lib/tool_manifest.py (the OpenAPI schema, DRF, every view) is imported where a tool is
# listed or called, not here: `manage.py mcp` answers `initialize` before Django has loaded
# (mcp_bridge/stdio.py).

SERVER_NAME = "mnemo"
INSTRUCTIONS = (
    "Mnemo is the user's long-term memory. Read mnemo://working-memory (or the system_prompt "
    "prompt) at the start of a conversation; search_memory before answering from memory; "
    "create_memory (or memory_store with share: true) when you learn something durable about "
    "the user; memory_store alone keeps your own note, which only you read."
)
# Headers of the outer request that do not describe the inner one (the body, the MCP
# session) or must not authenticate it (a browser's session cookie: agents use tokens).
_DROPPED_HEADERS = frozenset(
    {
        b"content-type",
        b"content-length",
        b"transfer-encoding",
        b"accept",
        b"cookie",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"last-event-id",
    }
)
_JSON_HEADERS = [(b"content-type", b"application/json"), (b"accept", b"application/json")]

T = TypeVar("T")


@dataclass(frozen=True)
class McpResource:
    uri: str
    path: str  # the GET endpoint, read with ?format=markdown
    name: str
    title: str
    description: str


RESOURCES = (
    McpResource(
        uri="mnemo://working-memory",
        path="/api/v1/working-memory",
        name="working-memory",
        title="Working memory",
        description="What the assistant should know about the user right now: the profile, "
        "instructions, preferences and recent facts, as Markdown (GET /api/v1/working-memory).",
    ),
    McpResource(
        uri="mnemo://profile-memory",
        path="/api/v1/profile-memory",
        name="profile-memory",
        title="Consolidated profile",
        description="The user's profile consolidated from every memory, as Markdown "
        "(GET /api/v1/profile-memory).",
    ),
    McpResource(
        uri="mnemo://system-prompt",
        path="/api/v1/system-prompt",
        name="system-prompt",
        title="System prompt",
        description="The system prompt Mnemo assembles for this agent, as Markdown "
        "(GET /api/v1/system-prompt).",
    ),
)
_RESOURCES_BY_URI = {resource.uri: resource for resource in RESOURCES}
SYSTEM_PROMPT = "system_prompt"


@dataclass(frozen=True)
class Answer:
    """Django's answer to one inner request."""

    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    def error_data(self) -> dict[str, Any]:
        """The API's error object (code, message, field) with the HTTP status."""
        data = self.json()
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):
            error = {"code": "error", "message": self.body.decode(errors="replace")[:500]}
        return {**error, "status": self.status}


class DjangoBridge:
    """Runs inner requests through Django's WSGI handler on a thread pool.

    Over HTTP the pool is lib/asgi.py's own (each thread keeps its database connection);
    over stdio a pool of one thread.
    """

    def __init__(self, wsgi_app: WSGIApp, executor: ThreadPoolExecutor) -> None:
        self.wsgi_app = wsgi_app
        self.executor = executor
        # The credentials of a request that came without its own (stdio): none over HTTP.
        self.default_scope: Scope | None = None

    async def ready(self) -> None:
        """Return once Django can answer; raise MCPError if it never will. Over HTTP it
        always can (the web server loaded it first); mcp_bridge/stdio.py loads it later."""

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def request(
        self, outer: Scope, method: str, path: str, *, query: str = "", body: bytes = b""
    ) -> Answer:
        await self.ready()
        environ = wsgi_environ(inner_scope(outer, method, path, query), body)
        return await self.run(_answer, self.wsgi_app, environ)


def _answer(wsgi_app: WSGIApp, environ: dict[str, Any]) -> Answer:
    status, headers, result = call_wsgi(wsgi_app, environ)
    if isinstance(result, bytes):
        body = result
    else:  # a streaming answer (no tool or resource sends one): read it whole
        chunks = []
        try:
            while (chunk := next(result, None)) is not None:
                chunks.append(chunk)
        finally:
            result.close()
        body = b"".join(chunks)
    names = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}
    return Answer(status=status, headers=names, body=body)


def inner_scope(outer: Scope, method: str, path: str, query: str = "") -> Scope:
    """The scope of a request to `path` made with the outer request's client, host and
    credentials (Authorization, X-Forwarded-*), carrying a JSON body."""
    headers = [
        (name, value) for name, value in outer.get("headers", []) if name not in _DROPPED_HEADERS
    ]
    return {
        **outer,
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": headers + _JSON_HEADERS,
    }


def stdio_scope(token: str) -> Scope:
    """The outer scope of a local client on stdio: its token, a host Django accepts."""
    host = next((name for name in settings.ALLOWED_HOSTS if name != "*"), "localhost")
    host = host.lstrip(".") or "localhost"
    return {
        "type": "http",
        "http_version": "1.1",
        "scheme": "https",  # in-process; https so SECURE_SSL_REDIRECT has nothing to redirect
        "server": (host, 443),
        "client": ("127.0.0.1", 0),
        "headers": [(b"host", host.encode()), (b"authorization", f"Bearer {token}".encode())],
    }


def build_server(bridge: DjangoBridge) -> Server[Any]:
    """The MCP server; each request acts with the credentials of its HTTP request, or
    (stdio) of the bridge's `default_scope`."""

    def outer_scope(ctx: ServerRequestContext[Any, Any]) -> Scope:
        request = ctx.request
        scope = getattr(request, "scope", None) if request is not None else bridge.default_scope
        if scope is None:
            raise MCPError(types.INVALID_REQUEST, "No credentials came with this request.")
        return scope

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await bridge.ready()
        return types.ListToolsResult(tools=mcp_tools())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        await bridge.ready()  # before any import that needs Django's apps (stdio loads them late)
        from lib.tool_manifest import TOOLS_PATH, tool_names

        if params.name not in tool_names():
            raise MCPError(
                types.INVALID_PARAMS,
                f"Unknown tool '{params.name}'; the tools are {', '.join(tool_names())}.",
            )
        body = json.dumps(params.arguments or {}).encode()
        answer = await bridge.request(
            outer_scope(ctx), "POST", f"{TOOLS_PATH}{params.name}", body=body
        )
        return tool_result(answer)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=resource.uri,
                    name=resource.name,
                    title=resource.title,
                    description=resource.description,
                    mime_type="text/markdown",
                )
                for resource in RESOURCES
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        resource = _RESOURCES_BY_URI.get(str(params.uri))
        if resource is None:
            known = ", ".join(_RESOURCES_BY_URI)
            raise MCPError(
                types.INVALID_PARAMS, f"Unknown resource '{params.uri}'; the resources are {known}."
            )
        text = await _markdown(ctx, resource.path)
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=resource.uri, mime_type="text/markdown", text=text)
            ]
        )

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=SYSTEM_PROMPT,
                    title="Mnemo system prompt",
                    description="The system prompt Mnemo assembles for this agent: who the user "
                    "is, their instructions and preferences, and how to use the memory tools.",
                )
            ]
        )

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != SYSTEM_PROMPT:
            raise MCPError(
                types.INVALID_PARAMS,
                f"Unknown prompt '{params.name}'; the prompts are {SYSTEM_PROMPT}.",
            )
        text = await _markdown(ctx, "/api/v1/system-prompt")
        return types.GetPromptResult(
            description="Mnemo's system prompt for this agent.",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    async def _markdown(ctx: ServerRequestContext[Any, Any], path: str) -> str:
        await bridge.ready()  # stdio's credentials (default_scope) are set once Django is
        answer = await bridge.request(outer_scope(ctx), "GET", path, query="format=markdown")
        if not answer.ok:
            data = answer.error_data()
            code = types.INTERNAL_ERROR if answer.status >= 500 else types.INVALID_REQUEST
            raise MCPError(code, data["message"], data)
        return answer.body.decode()

    server: Server[Any] = Server(
        SERVER_NAME,
        version=mnemo_version(),
        title="Mnemo",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    # The SDK puts an OpenTelemetry span around every message; Mnemo exports no traces.
    server.middleware = []
    return server


def mcp_tools() -> list[types.Tool]:
    """The tool manifest as MCP tools: the same names, descriptions and input schemas."""
    from lib.tool_manifest import tool_manifest

    return [
        types.Tool(
            name=tool["function"]["name"],
            description=tool["function"]["description"],
            input_schema=tool["function"]["parameters"],
        )
        for tool in tool_manifest()
    ]


def tool_input_schema(name: str) -> dict[str, Any] | None:
    from lib.tool_manifest import tool_manifest

    for tool in tool_manifest():
        if tool["function"]["name"] == name:
            return tool["function"]["parameters"]
    return None


def tool_result(answer: Answer) -> types.CallToolResult:
    """An HTTP answer as a tool result: its JSON body, flagged as an error when it is one."""
    data = answer.json()
    text = answer.body.decode(errors="replace") if answer.body else "{}"
    meta: dict[str, Any] = {"mnemo/status": answer.status}
    if "retry-after" in answer.headers:
        meta["mnemo/retry_after"] = answer.headers["retry-after"]
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=data if isinstance(data, dict) else None,
        is_error=not answer.ok,
        meta=meta,
    )
