"""Answers for requests refused before they reach a view (see lib/asgi.py)."""

from __future__ import annotations

import json


def is_api_path(path: str) -> bool:
    return path.startswith(("/api/", "/mcp"))


def refusal(path: str, status: int, code: str, message: str) -> tuple[int, list, bytes]:
    """(status, ASGI headers, body) for a request refused at the door."""
    body = json.dumps({"error": {"code": code, "message": message, "field": None}}).encode()
    return status, [(b"content-type", b"application/json")], body
