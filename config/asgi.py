"""The ASGI entry point the web server runs (gunicorn's asgi worker; see lib/asgi.py)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.conf import settings

from config.wsgi import application as wsgi_application
from lib.asgi import BufferedWSGI
from lib.http_errors import refusal
from mcp_bridge.http import McpEndpoint
from mcp_bridge.server import DjangoBridge


def build_application() -> BufferedWSGI:
    """Django behind lib/asgi.py's door, and the MCP server at /mcp, whose tool calls run
    through the same Django on the same thread pool. (One per server: the MCP session
    manager runs once.)"""
    app = BufferedWSGI(
        wsgi_application, max_body_bytes=settings.MNEMO_API_MAX_BODY_BYTES, refuse=refusal
    )
    # An account's archive is uploaded whole to the import page (portability/import_views.py).
    app.allow_body("/settings/import/", settings.MNEMO_IMPORT_MAX_BYTES)
    bridge = DjangoBridge(wsgi_application, app.executor)
    app.mount("/mcp", McpEndpoint(bridge, max_body_bytes=settings.MNEMO_API_MAX_BODY_BYTES))
    return app


application = build_application()
