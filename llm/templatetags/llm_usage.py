"""The Settings page's LLM panel, as a tag: `{% load llm_usage %}{% llm_usage_panel %}`.

The panel is llm/'s own, context and template; the Settings page (pages/views/settings.py)
shows it where its template loads the tag."""

from __future__ import annotations

from typing import Any

from django import template
from django.conf import settings

from llm.client import llm_configured, llm_description
from llm.selectors import llm_usage_summary

register = template.Library()


@register.inclusion_tag("llm/usage_panel.html", takes_context=True)
def llm_usage_panel(context: template.Context) -> dict[str, Any]:
    """How the LLM is set up, and the signed-in user's use of it today and this month."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    configured = llm_configured()
    summary = None
    if configured and user is not None and user.is_authenticated:
        summary = llm_usage_summary(user=user)
    return {
        "configured": configured,
        "description": llm_description(),
        "base_url_set": bool(settings.MNEMO_LLM_BASE_URL),
        "usage": summary,
    }
