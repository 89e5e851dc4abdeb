"""The Settings page's heartbeat status, as a tag: `{% load heartbeat %}{% heartbeat_panel %}`.

The panel is briefing/'s own: the Settings page (pages/views/settings.py) shows it where its
template loads the tag, and the Run now view (briefing/views.py) renders the same template."""

from __future__ import annotations

from typing import Any

from django import template

from briefing.heartbeat import heartbeat_status

register = template.Library()

PANEL_TEMPLATE = "briefing/heartbeat_panel.html"


@register.inclusion_tag(PANEL_TEMPLATE, takes_context=True)
def heartbeat_panel(context: template.Context) -> dict[str, Any]:
    """The signed-in user's last run, its outcome, the next run, Run now and the webhook's
    recent failures."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    status = None
    if user is not None and user.is_authenticated:
        status = heartbeat_status(user=user)
    return {"status": status, "request": request, "csrf_token": context.get("csrf_token")}
