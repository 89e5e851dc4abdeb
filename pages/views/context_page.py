"""The Context page: its tabs (Profile, Styles, Entries) with the working-memory preview,
the page and preview views, and the token budget's save. The tabs' writes are in
pages/views/context_profile.py, context_styles.py, context_entries.py and context_bulk.py;
each memory's history and recently deleted in context_history.py; what they share in
context_shared.py. Its Documents tab is pages/views/documents.py, which shows the same tab
links (`context_tab_links`).

Every write goes through memory.services (or profiles.services for the budget). Each view
answers an htmx request with the one partial it changed (plus `HX-Trigger: memory-changed`
so the preview refreshes) and a plain request with a redirect, or the whole page with the
errors and status 400 (`render_context_page`). A refused save always comes back with the
text as it was typed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.contrib.auth.decorators import login_required
from django.forms import BoundField
from django.http import HttpResponse, HttpResponseRedirect, QueryDict
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.formats import get_format
from django.views.decorators.http import require_http_methods

from lib.errors import InvalidInput, ServiceError
from lib.pages import HtmxHttpRequest, done, render_page, target_partial
from lib.timezones import timezone_names
from memory.forms import (
    BudgetForm,
    EntryBulkForm,
    EntryForm,
    ProfileForm,
    StyleForm,
)
from memory.keys import PROFILE_KEYS, STYLE_ASPECTS
from memory.models import HistoryAction, Memory, MemoryHistory
from memory.selectors import memory_agent_names, memory_list, user_zone
from memory.working_memory import (
    DAMAGED,
    EMPTY,
    OVER_BUDGET,
    USER,
    Line,
    build_working_memory,
    check_as_of,
)
from pages.views.context_entry_list import entries_context
from pages.views.context_shared import (
    PAGE,
    TABS,
    annotate_memories,
    context_tab_links,
    joined_with_and,
    quoted,
    shown_text,
    tab_url,
)
from profiles.services import profile_for_user, profile_update

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.template.response import TemplateResponse


# The regions a GET of the page swaps, by the id htmx aims at: the entry list (filters, a
# refresh after a change) and the tabs with their panel (a tab link).
TARGETS = {"entry-list": "entry_list", "context-tabs": "tabs"}
OMITTED_SHOWN = 25
OMITTED_REASONS = {
    OVER_BUDGET: "did not fit in the token budget",
    EMPTY: "nothing left once control characters were removed",
    DAMAGED: "its history then is damaged (a malformed row), so it is left out",
}


@dataclass
class StyleRow:
    platform: str
    form: StyleForm
    memories: dict[str, Memory] = field(default_factory=dict)
    note: str = ""
    removed: bool = False
    kept: bool = False  # hx-preserve: the browser keeps the row being edited (kept_ids)


@dataclass
class ProfileRow:
    field: BoundField
    memory: Memory | None  # annotated: who set it


def profile_context(
    user: AbstractBaseUser,
    memories: dict[str, Memory],
    form: ProfileForm | None = None,
    note: str = "",
    warning: str = "",
) -> dict[str, Any]:
    """The profile form (bound, after a refused save, or showing what is saved now), with
    who set each field and a link to its history."""
    mine = {key: memories[key] for key in PROFILE_KEYS if key in memories}
    annotate_memories(user, list(mine.values()))
    if form is None:
        form = ProfileForm(user=user, initial={key: memory.value for key, memory in mine.items()})
    return {
        "profile_form": form,
        "profile_rows": [ProfileRow(field=form[key], memory=mine.get(key)) for key in PROFILE_KEYS],
        "profile_note": note,
        "profile_warning": warning,
    }


def style_row(user: AbstractBaseUser, platform: str, memories: dict[str, Memory]) -> StyleRow:
    mine = {
        aspect: memories[f"{aspect}_{platform}"]
        for aspect in STYLE_ASPECTS
        if f"{aspect}_{platform}" in memories
    }
    form = StyleForm(
        user=user,
        prefix=f"style-{platform}",
        initial={aspect: memory.value for aspect, memory in mine.items()},
    )
    return StyleRow(platform=platform, form=form, memories=mine)


def style_rows(
    user: AbstractBaseUser,
    memories: dict[str, Memory],
    overrides: dict[str, StyleForm],
    kept: set[str] | frozenset[str] = frozenset(),
) -> list[StyleRow]:
    platforms = sorted(
        {key.split("_", 1)[1] for key in memories if key.startswith(("tone_", "verbosity_"))}
    )
    rows = []
    for platform in platforms:
        row = style_row(user, platform, memories)
        if platform in overrides:
            row.form = overrides[platform]
        row.kept = f"style-{platform}" in kept
        rows.append(row)
    return rows


def stated_by_names(user: AbstractBaseUser, lines: list[Line]) -> list[tuple[Line, str]]:
    """Each line of the block with the names of the agents that stated it ("Асистент and
    cursor"), as pages name agents; "" for a line only the user stated, or one no agent
    of the user's wrote (an import's, say)."""
    keys = {key for line in lines if line.stated_by != USER for key in line.keys}
    names = memory_agent_names(user=user, keys=keys) if keys else {}
    shown = []
    for line in lines:
        agents = list(dict.fromkeys(names[key] for key in line.keys if key in names))
        shown.append((line, joined_with_and(agents) if agents else ""))
    return shown


def preview_context(
    user: AbstractBaseUser, budget_form: BudgetForm | None = None, *, as_of: str = ""
) -> dict:
    """The preview: the block now, or as it was at `as_of` (a datetime-local value, read
    in the user's timezone memory, else UTC). A time that cannot be shown is an error
    beside the form, and the block now."""
    profile = profile_for_user(user)
    zone = user_zone(user)
    moment, as_of_error = _read_as_of(as_of, zone)
    block = build_working_memory(user=user, as_of=moment)
    omitted = [
        {"key": item.key, "reason": OMITTED_REASONS.get(item.reason, item.reason)}
        for item in block.omitted
    ]
    return {
        "wm": block,
        "wm_who": stated_by_names(user, block.lines),
        "wm_percent": min(100, round(100 * block.tokens / block.budget)) if block.budget else 0,
        "omitted": omitted[:OMITTED_SHOWN],
        "omitted_more": max(0, len(omitted) - OMITTED_SHOWN),
        "budget_form": budget_form or BudgetForm(initial={"token_budget": profile.token_budget}),
        # As typed, for the refresh to keep showing that time and for a refused one.
        "as_of": as_of if moment or as_of_error else "",
        # As a datetime-local input takes it (no fraction of a second), and as people read it.
        "as_of_value": _local(moment, zone, "Y-m-d\\TH:i", ":s") if moment else as_of,
        # In the pages' one format (lib/when.py), with the seconds when it names them.
        "as_of_label": _local(moment, zone, get_format("DATETIME_FORMAT"), ":s") if moment else "",
        "as_of_max": _local(timezone.now(), zone, "Y-m-d\\TH:i"),
        "as_of_zone": zone.key,
        "as_of_error": as_of_error,
    }


def _local(moment: datetime, zone: ZoneInfo, minutes: str, seconds: str = "") -> str:
    """`moment` in `zone` formatted to the minute, or to the second if it has seconds."""
    local = moment.astimezone(zone)
    return dateformat.format(local, minutes + (seconds if local.second else ""))


def _read_as_of(value: str, zone: ZoneInfo) -> tuple[datetime | None, str]:
    """The time a datetime-local `value` names in `zone`, or None and why not."""
    if not value:
        return None, ""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None, "Enter a date and time."
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=zone)
    try:
        return check_as_of(moment.astimezone(UTC)), ""
    except InvalidInput as error:
        return None, error.message


def _page_context(
    request: HtmxHttpRequest,
    *,
    tab: str,
    profile_form: ProfileForm | None = None,
    profile_note: str = "",
    style_forms: dict[str, StyleForm] | None = None,
    style_add_form: StyleForm | None = None,
    entry_form: EntryForm | None = None,
    editing: Memory | None = None,
    budget_form: BudgetForm | None = None,
    bulk_form: EntryBulkForm | None = None,
    list_params: QueryDict | None = None,
) -> dict[str, Any]:
    user = request.user
    memories = {memory.key: memory for memory in memory_list(user=user)}
    context: dict[str, Any] = {
        "tab": tab,
        "tabs": context_tab_links(),
        "profile": profile_for_user(user),
        "empty": not memories,
        "undo": _undo_offer(request, memories),
        **preview_context(user, budget_form),
    }
    if tab == "profile":
        context.update(profile_context(user, memories, profile_form, profile_note))
        context["timezones"] = timezone_names()
    elif tab == "styles":
        context["style_rows"] = style_rows(user, memories, style_forms or {})
        context["style_add_form"] = style_add_form or StyleForm(
            user=user, adding=True, prefix="style"
        )
    else:
        context.update(entries_context(request, list_params, bulk_form=bulk_form))
        context["entry_form"] = entry_form or EntryForm(user=user)
        if editing is not None:
            for group in context["entry_groups"]:
                for memory in group.members:
                    if memory.pk == editing.pk:
                        memory.edit_form = editing.edit_form
    return context


def _undo_offer(request: HtmxHttpRequest, memories: dict[str, Memory]) -> MemoryHistory | None:
    """After a delete without JavaScript, the redirect carries ?undo=<history id>."""
    history_id = request.GET.get("undo", "")
    if not history_id.isdigit():
        return None
    row = MemoryHistory.objects.filter(
        user=request.user, pk=int(history_id), action=HistoryAction.DELETE
    ).first()
    if row is None:
        return None
    # Not while its key has a memory again, in the audience it was deleted from.
    if row.owner_agent_id is None:
        back = row.key in memories
    else:
        notes = Memory.objects.filter(user=request.user, owner_agent=row.owner_agent_id)
        back = notes.filter(key=row.key).exists()
    if back:
        return None
    before = row.before if isinstance(row.before, dict) else {}
    row.quoted = quoted(shown_text(before.get("value")) or "")
    return row


def render_context_page(
    request: HtmxHttpRequest, *, tab: str, status: int = 200, **overrides: Any
) -> TemplateResponse:
    return render_page(request, PAGE, _page_context(request, tab=tab, **overrides), status=status)


# ---------------------------------------------------------------- the page and its partials


@login_required
@require_http_methods(["GET", "HEAD"])
def context_page(request: HtmxHttpRequest) -> TemplateResponse:
    tab = request.GET.get("tab", "profile")
    tab = tab if tab in TABS else "profile"
    partial = target_partial(request, TARGETS)
    if partial == "entry_list":  # the list alone: no preview to build
        return render_page(request, PAGE, entries_context(request), partial=partial)
    return render_page(request, PAGE, _page_context(request, tab=tab), partial=partial)


@login_required
@require_http_methods(["GET", "HEAD"])
def context_preview(request: HtmxHttpRequest) -> HttpResponse:
    """The preview partial, now or `?as_of=` a past time; without htmx, the page with it."""
    as_of = request.GET.get("as_of", "").strip()
    if request.htmx:
        context = preview_context(request.user, as_of=as_of)
        return render_page(request, PAGE, context, partial="preview")
    if not as_of:
        return HttpResponseRedirect(reverse("pages:context"))
    tab = request.GET.get("tab", "profile")
    tab = tab if tab in TABS else "profile"
    context = _page_context(request, tab=tab)
    context.update(preview_context(request.user, as_of=as_of))
    return render_page(request, PAGE, context)


@login_required
@require_http_methods(["POST"])
def budget_save(request: HtmxHttpRequest) -> HttpResponse:
    form = BudgetForm(request.POST)
    if form.is_valid():
        try:
            profile_update(user=request.user, token_budget=form.cleaned_data["token_budget"])
        except ServiceError as error:
            form.add_error("token_budget", error.message)
    if form.errors:
        if request.htmx:
            context = preview_context(request.user, form)
            return render_page(request, PAGE, context, partial="preview")
        return render_context_page(request, tab=_tab_of(request), status=400, budget_form=form)
    if request.htmx:
        context = preview_context(request.user)
        context["budget_note"] = "Saved."
        return render_page(request, PAGE, context, partial="preview")
    return done(request, "Saved your token budget.", tab_url(_tab_of(request)))


def _tab_of(request: HtmxHttpRequest) -> str:
    tab = request.POST.get("tab", "profile")
    return tab if tab in TABS else "profile"
