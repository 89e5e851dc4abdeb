"""The Context page's Profile tab: saving the profile form (the five profile keys)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods

from lib.errors import ServiceError
from lib.pages import HtmxHttpRequest, render_page
from memory.forms import PROFILE_FIELDS, ProfileForm
from memory.keys import PROFILE_KEYS
from memory.outcomes import MemoryWrite
from memory.services import memory_set
from pages.views.context_page import profile_context, render_context_page
from pages.views.context_shared import (
    PAGE,
    actor_of,
    announce_change,
    credential_warning,
    done_with_warning,
    joined_with_and,
    memories_by_key,
    tab_url,
)


@login_required
@require_http_methods(["POST"])
def profile_save(request: HtmxHttpRequest) -> HttpResponse:
    """Save the whole profile form: each field that changed is one memory_set (one history
    row per changed key); an emptied field removes its key, one the POST leaves out is left
    alone. If any field would be refused, nothing is saved: the form comes back with every
    field as typed and the error on that field."""
    user = request.user
    form = ProfileForm(request.POST, user=user)
    statuses: dict[str, str] = {}
    writes: list[MemoryWrite] = []
    if form.is_valid():
        values = dict(form.cleaned_data)
        for key in PROFILE_KEYS:
            if form.add_prefix(key) not in request.POST:
                continue
            try:
                status, write = memory_set(
                    user=user, key=key, value=values[key], actor=actor_of(request)
                )
            except ServiceError as error:  # refused after the form's checks (a race)
                form.add_error(key, error.message)
            else:
                statuses[key] = status
                if isinstance(write, MemoryWrite):
                    writes.append(write)
    note = _profile_note(statuses)
    warning = credential_warning(*writes)
    changed = any(status != "unchanged" for status in statuses.values())
    if form.errors:
        # Nothing was written, unless a service refused a field the form let through: then
        # the note says what did save.
        note = note if changed else ""
        if request.htmx:
            memories = memories_by_key(user, kind="profile")
            context = profile_context(user, memories, form, note, warning)
            response = render_page(request, PAGE, context, partial="profile_form")
            return announce_change(response) if changed else response
        return render_context_page(
            request, tab="profile", status=400, profile_form=form, profile_note=note
        )
    if request.htmx:
        memories = memories_by_key(user, kind="profile")
        context = profile_context(user, memories, note=note, warning=warning)
        response = render_page(request, PAGE, context, partial="profile_form")
        return announce_change(response) if changed else response
    return done_with_warning(request, note, tab_url("profile"), warning)


def _profile_note(statuses: dict[str, str]) -> str:
    """What one Save did: "Saved name and role.", "Removed company.", "Saved name; removed
    company." or "No change."."""

    def fields(*wanted: str) -> list[str]:
        return [
            PROFILE_FIELDS[key][0].lower() for key, status in statuses.items() if status in wanted
        ]

    parts = []
    if saved := fields("created", "updated"):
        parts.append(f"saved {joined_with_and(saved)}")
    if removed := fields("deleted"):
        parts.append(f"removed {joined_with_and(removed)}")
    if not parts:
        return "No change."
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}."
