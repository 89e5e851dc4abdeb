"""Helpers for the HTMX pages: one function renders a whole page or just one partial."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.template.response import TemplateResponse


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> TemplateResponse:
    """The full page for a normal request; `template#partial` for an htmx request.

    Partials are the `{% partialdef name inline %}` blocks of the page's template.
    """
    name = f"{template}#{partial}" if partial and getattr(request, "htmx", False) else template
    return TemplateResponse(request, name, context, status=status)
