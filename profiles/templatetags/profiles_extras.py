"""Template helpers for account pages (login links to sign-up when it is open)."""

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def open_signup() -> bool:
    """True when anyone may create an account (settings.MNEMO_OPEN_SIGNUP)."""
    return bool(getattr(settings, "MNEMO_OPEN_SIGNUP", False))
