"""`manage.py mcp`: the MCP server on stdin/stdout, for desktop clients that start it.

It acts for one agent token, from --token or MNEMO_MCP_TOKEN (the environment keeps it
out of the process list).

A client starts this process and waits for its answer to `initialize`, which needs nothing
of Django. Loading Django (settings, the apps, the admin, the tool manifest built from the
OpenAPI schema) takes several seconds, so manage.py hands `mcp` to `main` before Django is
set up: the server answers `initialize` at once while one thread loads Django and checks
the token; every request that needs Django waits for that thread. A refused token is said
on stderr as soon as it is known, answers every such request with the reason, and makes the
process exit with status 1; so does a Django that cannot start (e.g. no database).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_bridge.server import DjangoBridge, build_server

TOKEN_VARIABLE = "MNEMO_MCP_TOKEN"  # noqa: S105 - the variable's name, not a secret
NO_TOKEN = f"No agent token: pass --token or set {TOKEN_VARIABLE}."


class TokenRefused(Exception):
    """The token cannot act: its reason is the API's message."""


def main(argv: list[str]) -> int:
    """`manage.py mcp [--token T]` without Django loaded yet; the exit status."""
    parser = argparse.ArgumentParser(prog="manage.py mcp", description=HELP)
    parser.add_argument("--token", default=None, help=f"default: ${TOKEN_VARIABLE}")
    parser.add_argument("--settings", default=None, help="the settings module")
    arguments = parser.parse_args(argv)
    if arguments.settings:
        os.environ["DJANGO_SETTINGS_MODULE"] = arguments.settings
    token = (arguments.token or os.environ.get(TOKEN_VARIABLE, "")).strip()
    if not token:
        print(f"CommandError: {NO_TOKEN}", file=sys.stderr)
        return 1
    return serve(token)


HELP = (
    "Serve Mnemo's agent tools over MCP on stdin/stdout (Claude Desktop, Claude Code, "
    f"Cursor). The agent token comes from --token or {TOKEN_VARIABLE}."
)


def serve(token: str) -> int:
    """Serve until the client closes stdin; 1 when the token was refused."""
    import anyio

    # One thread runs Django: it loads it, then answers every call (keeping its database
    # connection between them).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="django") as executor:
        started = executor.submit(_start_django, token)
        started.add_done_callback(_say_refusal)
        bridge = StartingBridge(started, executor)
        anyio.run(_serve, build_server(bridge))
        if started.exception() is not None:
            return 1
    return 0


def _start_django(token: str) -> tuple[Any, Any]:
    """On the Django thread: set Django up, check the token, build the tool manifest.
    (The outer scope of every call, Django's WSGI handler.)"""
    import django

    django.setup()
    from django.core.handlers.wsgi import WSGIHandler

    from lib.tool_manifest import tool_manifest
    from mcp_bridge.http import door_refusal
    from mcp_bridge.server import inner_scope, stdio_scope

    scope = stdio_scope(token)
    refusal = door_refusal(inner_scope(scope, "POST", "/mcp"))
    if refusal is not None:
        import json

        raise TokenRefused(json.loads(refusal[2])["error"]["message"])
    tool_manifest()  # built once, before the first tools/list
    return scope, WSGIHandler()


def _say_refusal(started: Future) -> None:
    error = started.exception()
    if error is not None:
        print(f"CommandError: {_why(error)}", file=sys.stderr, flush=True)


def _why(error: BaseException) -> str:
    if isinstance(error, TokenRefused):
        return f"The token was refused: {error}"
    return f"Mnemo could not start: {type(error).__name__}: {error}".strip()


class StartingBridge(DjangoBridge):
    """A DjangoBridge whose Django is still loading on its one thread."""

    def __init__(self, started: Future, executor: ThreadPoolExecutor) -> None:
        super().__init__(None, executor)  # type: ignore[arg-type] - set once started
        self.started = started

    async def ready(self) -> None:
        if self.default_scope is not None:
            return
        try:
            self.default_scope, self.wsgi_app = await asyncio.wrap_future(self.started)
        except TokenRefused as error:
            raise MCPError(types.INVALID_REQUEST, _why(error), {"status": 401}) from None
        except Exception as error:  # said to the client here, and on stderr by _say_refusal
            raise MCPError(types.INTERNAL_ERROR, _why(error)) from None


async def _serve(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
