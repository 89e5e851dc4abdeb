"""The review inbox's documents section: `{% load document_inbox %}{% document_proposals %}`.

Agents' proposed changes to the user's identity files are context/'s own rows; the inbox page
(memory/review_views.py) shows them where its template loads the tag, so memory/ never
imports context/ (the Settings page composes the layers' panels the same way)."""

from __future__ import annotations

from typing import Any

from django import template

from context.review_views import TEMPLATE, inbox_context

register = template.Library()


@register.inclusion_tag(TEMPLATE, takes_context=True)
def document_proposals(context: template.Context) -> dict[str, Any]:
    """The signed-in user's pending document proposals, and those decided lately."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    found = inbox_context(user) if user is not None and user.is_authenticated else {}
    return {**found, "request": request, "csrf_token": context.get("csrf_token")}
