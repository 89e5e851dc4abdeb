"""Helpers for the HTMX pages, each once: the typed request, rendering a whole page or one of
its partials, the redirect after a plain POST, a service's error on a form, and who made a
change.

A page's template marks its swappable regions `{% partialdef name inline %}` (Django 6);
`render_page` answers an htmx request with `page.html#name` and anything else with the whole
page. Knows no model: the actor columns are read through `Acted`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

if TYPE_CHECKING:
    from django import forms
    from django_htmx.middleware import HtmxDetails

    from lib.errors import ServiceError


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware: `request.htmx` is always there
    (falsy for a plain request). For view signatures, so the type checker knows it."""

    htmx: HtmxDetails


def render_page(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> TemplateResponse:
    """`template#partial` for an htmx request; the whole page for a plain request and for
    htmx's history restore (Back to a page no longer in its cache wants the page, whatever
    region the view would swap)."""
    htmx = request.htmx
    wanted = partial and htmx and not htmx.history_restore_request
    name = f"{template}#{partial}" if wanted else template
    return TemplateResponse(request, name, context, status=status)


def target_partial(request: HtmxHttpRequest, partials: Mapping[str, str]) -> str | None:
    """The partial that answers an htmx request aimed at one of a page's regions: `partials`
    maps `HX-Target` ids to partial names. None (the whole page) for a plain request, a
    history restore, or a target the page does not list."""
    htmx = request.htmx
    if not htmx or htmx.history_restore_request:
        return None
    return partials.get(htmx.target or "")


def done(request: HttpRequest, message: str, url: str) -> HttpResponseRedirect:
    """After a plain (non-htmx) POST that worked: `message` as a flash, and go to `url`."""
    messages.success(request, message)
    return HttpResponseRedirect(url)


def no_store(response: HttpResponse) -> HttpResponse:
    """Mark an answer that shows a secret once (a new token): never stored anywhere."""
    response["Cache-Control"] = "no-store"
    return response


def add_service_error(
    form: forms.Form, error: ServiceError, fields: Mapping[str, str] | None = None
) -> None:
    """Show a service's error next to the form field it names, or above the form. `fields`
    maps the service's field names to the form's where they differ ({"slug": "key"})."""
    name = error.field or ""
    name = fields.get(name, name) if fields is not None else name
    form.add_error(name if name in form.fields else None, error.message)


# --- who made a change ------------------------------------------------------------------------


class Acted(Protocol):
    """A row with the actor columns (activity.actors.ActorMixin)."""

    actor_type: str
    actor_user_id: int | None

    @property
    def actor_agent(self) -> Any: ...

    @property
    def actor_label(self) -> str: ...

    @property
    def actor_name(self) -> str: ...


@dataclass(frozen=True)
class Who:
    """Who made a change, as a page shows it.

    `kind` is the actor's kind ("user", "agent" or "system"), the badge's class; `name` is
    "you", the agent's or the user's name; `label` says what the name is ("agent helper").
    Someone gone is "a deleted agent" or "a deleted user".
    """

    kind: str
    name: str
    label: str


def who(request: HttpRequest, row: Acted) -> Who:
    """Who made `row`, seen by the signed-in user: their own changes are "you"."""
    kind = str(row.actor_type)
    if kind == "user" and row.actor_user_id == request.user.pk:
        return Who(kind, "you", "you")
    label = row.actor_label
    if kind == "agent" and row.actor_agent is not None:
        return Who(kind, row.actor_name, label)
    return Who(kind, label, label)
