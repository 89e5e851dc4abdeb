"""Template helpers for account pages (login links to sign-up when it is open) and the
agent_name filter every page names an agent with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django import template
from django.conf import settings

from profiles.naming import agent_name

if TYPE_CHECKING:
    from profiles.models import Agent

register = template.Library()


@register.simple_tag
def open_signup() -> bool:
    """True when anyone may create an account (settings.MNEMO_OPEN_SIGNUP)."""
    return bool(getattr(settings, "MNEMO_OPEN_SIGNUP", False))


@register.filter(name="agent_name")
def agent_name_filter(agent: Agent | None) -> str:
    """`{{ agent|agent_name }}`: the agent as every page names it (profiles/naming.py)."""
    return agent_name(agent)
