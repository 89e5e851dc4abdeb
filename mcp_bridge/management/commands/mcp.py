"""`manage.py mcp`: the MCP server on stdin/stdout (mcp_bridge/stdio.py).

manage.py runs mcp_bridge/stdio.py's `main` before Django is set up, so that the server
answers `initialize` at once; this command is what `manage.py help mcp` and
`call_command("mcp")` find, and serves the same way once Django is loaded.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_bridge.stdio import HELP, NO_TOKEN, TOKEN_VARIABLE, serve


class Command(BaseCommand):
    help = HELP
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
            raise CommandError(NO_TOKEN)
        if serve(token) != 0:
            raise CommandError("The token was refused (above).")
