#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if sys.argv[1:2] == ["mcp"] and not {"-h", "--help"} & set(sys.argv[2:]):
        # The stdio MCP server answers `initialize` before Django is loaded, and loads it
        # while the client waits for nothing (mcp_bridge/stdio.py).
        from mcp_bridge.stdio import main as serve_mcp

        sys.exit(serve_mcp(sys.argv[2:]))
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
