"""The Context page's Profile tab: saving the profile form (the five profile keys)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods

from lib.errors import ServiceError
from lib.pages import HtmxHttpRequest, add_service_error, render_page
from memory.forms import PROFILE_FIELDS, ProfileForm
from memory.keys import PROFILE_KEYS
from memory.outcomes import MemoryWrite
from memory.services import memory_set_many
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
    """Save the whole profile form in one transaction (memory_set_many): every field that
    changed, each with its own history row, or none of them. An emptied field removes its
    key, one the POST leaves out is left alone. If any field would be refused, nothing is
    saved: the form comes back with every field as typed and the error on that field."""
    user = request.user
    form = ProfileForm(request.POST, user=user)
    statuses: dict[str, str] = {}
    writes: list[MemoryWrite] = []
    if form.is_valid():
        values = {
            key: form.cleaned_data[key]
            for key in PROFILE_KEYS
            if form.add_prefix(key) in request.POST
        }
        try:
            results = memory_set_many(user=user, values=values, actor=actor_of(request))
        except ServiceError as error:  # refused after the form's checks (a race): none saved
            add_service_error(form, error)
        else:
            for key, (status, write) in results.items():
                statuses[key] = status
                if isinstance(write, MemoryWrite):
                    writes.append(write)
    if form.errors:
        if request.htmx:
            memories = memories_by_key(user, kind="profile")
            context = profile_context(user, memories, form)
            return render_page(request, PAGE, context, partial="profile_form")
        return render_context_page(request, tab="profile", status=400, profile_form=form)
    note = _profile_note(statuses)
    warning = credential_warning(*writes)
    changed = any(status != "unchanged" for status in statuses.values())
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
