"""`manage.py mcp`: the MCP server on stdin/stdout, for desktop clients that start it.

It acts for one agent token, from --token or MNEMO_MCP_TOKEN (the environment keeps it
out of the process list). The token is checked before serving, so a bad one fails at once
with the reason on stderr instead of at the first tool call.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
from django.core.handlers.wsgi import WSGIHandler
from django.core.management.base import BaseCommand, CommandError, CommandParser
from mcp.server.stdio import stdio_server

from lib.tool_manifest import tool_manifest
from mcp_bridge.http import door_refusal
from mcp_bridge.server import DjangoBridge, build_server, inner_scope, stdio_scope

TOKEN_VARIABLE = "MNEMO_MCP_TOKEN"  # noqa: S105 - the variable's name, not a secret


class Command(BaseCommand):
    help = (
        "Serve Mnemo's agent tools over MCP on stdin/stdout (Claude Desktop, Claude Code, "
        f"Cursor). The agent token comes from --token or {TOKEN_VARIABLE}."
    )
    requires_system_checks: list[str] = []  # a client starts it often; `check` runs elsewhere

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--token",
            default=None,
            help=f"The agent token to act with (default: ${TOKEN_VARIABLE}).",
        )

    def handle(self, *args: Any, token: str | None, **options: Any) -> None:
        token = (token or os.environ.get(TOKEN_VARIABLE, "")).strip()
        if not token:
            raise CommandError(f"No agent token: pass --token or set {TOKEN_VARIABLE}.")
        scope = stdio_scope(token)
        refusal = door_refusal(inner_scope(scope, "POST", "/mcp"))
        if refusal is not None:
            raise CommandError(f"The token was refused: {refusal[2].decode()}")
        tool_manifest()  # built once, before the first tools/list
        # One thread runs Django (it keeps its database connection between calls).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="django") as executor:
            server = build_server(DjangoBridge(WSGIHandler(), executor), default_scope=scope)
            anyio.run(_serve, server)


async def _serve(server: Any) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
