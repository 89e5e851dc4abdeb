"""The Context page's Styles tab: add a platform's styles, save or remove them."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_http_methods

from lib.errors import NotFound, ServiceError
from lib.pages import HtmxHttpRequest, done, render_page
from memory.forms import StyleForm
from memory.keys import PLATFORM_PATTERN, STYLE_ASPECTS
from memory.services import memory_delete, memory_set
from pages.views.context_page import render_context_page, style_row, style_rows
from pages.views.context_shared import (
    PAGE,
    actor_of,
    announce_change,
    kept_ids,
    memories_by_key,
    tab_url,
)


def _check_platform(platform: str) -> str:
    if not re.fullmatch(PLATFORM_PATTERN, platform):
        raise Http404("Unknown platform.")
    return platform


@login_required
@require_http_methods(["POST"])
def style_add(request: HtmxHttpRequest) -> HttpResponse:
    user = request.user
    form = StyleForm(request.POST, user=user, adding=True, prefix="style")
    if form.is_valid():
        platform = form.cleaned_data["platform"]
        try:
            for aspect in STYLE_ASPECTS:
                key, value = f"{aspect}_{platform}", form.cleaned_data[aspect]
                memory_set(user=user, key=key, value=value, actor=actor_of(request))
        except ServiceError as error:
            form.add_error("platform", error.message)
    if form.errors:
        if request.htmx:
            context = _styles_panel(request, add_form=form)
            return render_page(request, PAGE, context, partial="styles_panel")
        return render_context_page(request, tab="styles", status=400, style_add_form=form)
    note = f"Added {platform}."
    typed = form.data.get(form.add_prefix("platform"), "").strip()
    if typed != platform:  # "Microsoft Teams" is kept as microsoft_teams (lib/tags.py)
        note = f"Added {typed} (saved as {platform})."
    if request.htmx:
        context = _styles_panel(request, note=note)
        return announce_change(render_page(request, PAGE, context, partial="styles_panel"))
    return done(request, note, tab_url("styles"))


def _styles_panel(
    request: HtmxHttpRequest, add_form: StyleForm | None = None, note: str = ""
) -> dict[str, Any]:
    """The platforms and the add form; rows being edited in the page are kept (kept_ids)."""
    user = request.user
    return {
        "style_rows": style_rows(user, memories_by_key(user), {}, kept_ids(request)),
        "style_add_form": add_form or StyleForm(user=user, adding=True, prefix="style"),
        "style_note": note,
    }


@login_required
@require_http_methods(["POST"])
def style_save(request: HtmxHttpRequest, platform: str) -> HttpResponse:
    user = request.user
    platform = _check_platform(platform)
    memories = memories_by_key(user)
    row = style_row(user, platform, memories)
    if not row.memories:
        raise Http404("No styles for that platform.")
    data = request.POST.copy()
    data[f"style-{platform}-platform"] = platform
    form = StyleForm(data, user=user, prefix=f"style-{platform}")
    changed = False
    if form.is_valid():
        for aspect in STYLE_ASPECTS:
            key, value = f"{aspect}_{platform}", form.cleaned_data[aspect]
            try:
                status, _ = memory_set(user=user, key=key, value=value, actor=actor_of(request))
            except ServiceError as error:  # refused after the form's checks (a race)
                form.add_error(aspect, error.message)
            else:
                changed = changed or status != "unchanged"
    if form.errors:
        if request.htmx:
            row.form = form
            response = render_page(request, PAGE, {"row": row}, partial="style_row")
            return announce_change(response) if changed else response
        return render_context_page(request, tab="styles", status=400, style_forms={platform: form})
    row = style_row(user, platform, memories_by_key(user))
    row.removed = not row.memories
    if row.removed:
        note = f"Removed {platform}."
    else:
        note = f"Saved {platform}." if changed else "No change."
    if request.htmx:
        row.note = note
        response = render_page(request, PAGE, {"row": row}, partial="style_row")
        return announce_change(response) if changed else response
    return done(request, note, tab_url("styles"))


@login_required
@require_http_methods(["POST"])
def style_remove(request: HtmxHttpRequest, platform: str) -> HttpResponse:
    user = request.user
    platform = _check_platform(platform)
    row = style_row(user, platform, memories_by_key(user))
    if not row.memories:
        raise Http404("No styles for that platform.")
    for memory in row.memories.values():
        with contextlib.suppress(NotFound):  # removed meanwhile
            memory_delete(user=user, key=memory.key, actor=actor_of(request))
    note = f"Removed {platform}."
    if request.htmx:
        row.removed, row.note = True, note
        return announce_change(render_page(request, PAGE, {"row": row}, partial="style_row"))
    return done(request, note, tab_url("styles"))
