"""The Context page: profile, styles and entries, with the working-memory preview and history.

Every write goes through memory.services (or profiles.services for the budget). Each view
answers an htmx request with the one partial it changed (plus `HX-Trigger: memory-changed`
so the preview refreshes) and a plain request with a redirect, or the whole page with the
errors and status 400.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from activity.actors import Actor, ActorKind
from lib.errors import NotFound, ServiceError
from lib.pages import render_page
from memory.forms import (
    PROFILE_FIELDS,
    BudgetForm,
    EntryFilterForm,
    EntryForm,
    ProfileFieldForm,
    StyleForm,
    timezone_names,
)
from memory.keys import ENTRY_KINDS, PLATFORM_PATTERN, PROFILE_KEYS, STYLE_ASPECTS
from memory.models import HistoryAction, Memory, MemoryHistory, Source
from memory.selectors import (
    deleted_memory_list,
    memory_agent_names,
    memory_history_for_key,
    memory_list,
)
from memory.services import memory_delete, memory_restore, memory_update, memory_upsert
from memory.working_memory import EMPTY, OVER_BUDGET, build_working_memory
from profiles.services import profile_for_user, profile_update

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.template.response import TemplateResponse

PAGE = "memory/context.html"
HISTORY_PAGE = "memory/history.html"
DELETED_PAGE = "memory/deleted.html"
TABS = {"profile": "Profile", "styles": "Styles", "entries": "Entries"}
MEMORY_CHANGED = "memory-changed"
DELETED_DAYS = 30
OMITTED_SHOWN = 25
OMITTED_REASONS = {
    OVER_BUDGET: "did not fit in the token budget",
    EMPTY: "nothing left once control characters were removed",
}


# ---------------------------------------------------------------- lookups


def _get_memory_for_user(user: AbstractBaseUser, pk: int) -> Memory:
    return get_object_or_404(Memory, user=user, pk=pk)


def _get_entry_for_user(user: AbstractBaseUser, pk: int) -> Memory:
    memory = _get_memory_for_user(user, pk)
    if memory.kind not in ENTRY_KINDS:
        raise Http404("Not an entry.")
    return memory


def _get_history_for_user(user: AbstractBaseUser, history_id: int) -> MemoryHistory:
    return get_object_or_404(
        MemoryHistory.objects.select_related("actor_user", "actor_agent"),
        user=user,
        pk=history_id,
    )


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)


def _tab_url(tab: str, anchor: str = "") -> str:
    return f"{reverse('context')}?tab={tab}{anchor}"


def context_tab_links() -> list[dict[str, Any]]:
    """The Context page's tab nav. Profile, Styles and Entries swap in place with htmx;
    Documents is its own page (context/views.py) that shows the same nav."""
    tabs: list[dict[str, Any]] = [
        {"name": name, "label": label, "url": _tab_url(name), "htmx": True}
        for name, label in TABS.items()
    ]
    tabs.append(
        {"name": "documents", "label": "Documents", "url": reverse("documents"), "htmx": False}
    )
    return tabs


def _changed(response: HttpResponse, *events: str) -> HttpResponse:
    """Tell the page (the preview, the entry list) that memory changed."""
    response.headers["HX-Trigger"] = ", ".join((MEMORY_CHANGED, *events))
    return response


def _done(request: HttpRequest, message: str, url: str) -> HttpResponseRedirect:
    messages.success(request, message)
    return HttpResponseRedirect(url)


# ---------------------------------------------------------------- context builders


@dataclass
class StyleRow:
    platform: str
    form: StyleForm
    memories: dict[str, Memory] = field(default_factory=dict)
    note: str = ""
    removed: bool = False


def _annotate(user: AbstractBaseUser, memories: list[Memory]) -> list[Memory]:
    """Attach where each memory came from: stated by the user, or noted by which agent."""
    noted = [memory.key for memory in memories if memory.source != Source.USER_STATED]
    agents = memory_agent_names(user=user, keys=noted) if noted else {}
    for memory in memories:
        if memory.source == Source.USER_STATED:
            memory.origin_kind, memory.origin_label = "user", "stated by you"
        elif memory.key in agents:
            memory.origin_kind, memory.origin_label = (
                "agent",
                f"noted by agent {agents[memory.key]}",
            )
        elif memory.source == Source.DOCUMENT:
            memory.origin_kind, memory.origin_label = "agent", "promoted from a document"
        else:
            memory.origin_kind, memory.origin_label = "agent", "noted by an agent"
    return memories


def _profile_forms(
    user: AbstractBaseUser, memories: dict[str, Memory], overrides: dict[str, ProfileFieldForm]
) -> list[ProfileFieldForm]:
    forms = []
    for key in PROFILE_KEYS:
        form = overrides.get(key) or _profile_form(user, key, memories.get(key))
        form.memory = memories.get(key)
        forms.append(form)
    return forms


def _profile_form(user: AbstractBaseUser, key: str, memory: Memory | None) -> ProfileFieldForm:
    form = ProfileFieldForm(key=key, user=user, initial={key: memory.value if memory else ""})
    form.memory = memory
    form.note = ""
    return form


def _style_row(user: AbstractBaseUser, platform: str, memories: dict[str, Memory]) -> StyleRow:
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


def _style_rows(
    user: AbstractBaseUser, memories: dict[str, Memory], overrides: dict[str, StyleForm]
) -> list[StyleRow]:
    platforms = sorted(
        {key.split("_", 1)[1] for key in memories if key.startswith(("tone_", "verbosity_"))}
    )
    rows = []
    for platform in platforms:
        row = _style_row(user, platform, memories)
        if platform in overrides:
            row.form = overrides[platform]
        rows.append(row)
    return rows


def _entries_context(request: HttpRequest) -> dict[str, Any]:
    user = request.user
    filter_form = EntryFilterForm(request.GET)
    filters = filter_form.filters()
    entries = memory_list(user=user, kind=filters["kind"] or None, tag=filters["tag"] or None)
    entries = entries.filter(key__contains=":")
    if filters["q"]:
        entries = entries.filter(Q(value__icontains=filters["q"]) | Q(key__icontains=filters["q"]))
    rows = _annotate(user, list(entries.order_by("-pinned", "-updated_at", "key")))
    groups = [(kind, [m for m in rows if m.kind == kind]) for kind in ENTRY_KINDS]
    return {
        "filter_form": filter_form,
        "filters": filters,
        "filtered": any(filters.values()),
        "entry_groups": [(kind, members) for kind, members in groups if members],
        "entry_shown": len(rows),
        "entry_total": Memory.objects.filter(user=user, key__contains=":").count(),
    }


def _preview_context(user: AbstractBaseUser, budget_form: BudgetForm | None = None) -> dict:
    profile = profile_for_user(user)
    block = build_working_memory(user=user)
    omitted = [
        {"key": item.key, "reason": OMITTED_REASONS.get(item.reason, item.reason)}
        for item in block.omitted
    ]
    return {
        "wm": block,
        "wm_percent": min(100, round(100 * block.tokens / block.budget)) if block.budget else 0,
        "omitted": omitted[:OMITTED_SHOWN],
        "omitted_more": max(0, len(omitted) - OMITTED_SHOWN),
        "budget_form": budget_form or BudgetForm(initial={"token_budget": profile.token_budget}),
    }


def _page_context(
    request: HttpRequest,
    *,
    tab: str,
    profile_forms: dict[str, ProfileFieldForm] | None = None,
    style_forms: dict[str, StyleForm] | None = None,
    style_add_form: StyleForm | None = None,
    entry_form: EntryForm | None = None,
    editing: Memory | None = None,
    budget_form: BudgetForm | None = None,
) -> dict[str, Any]:
    user = request.user
    memories = {memory.key: memory for memory in memory_list(user=user)}
    context: dict[str, Any] = {
        "tab": tab,
        "tabs": context_tab_links(),
        "profile": profile_for_user(user),
        "empty": not memories,
        "undo": _undo_offer(request, memories),
        **_preview_context(user, budget_form),
    }
    if tab == "profile":
        context["profile_forms"] = _profile_forms(user, memories, profile_forms or {})
        context["timezones"] = timezone_names()
    elif tab == "styles":
        context["style_rows"] = _style_rows(user, memories, style_forms or {})
        context["style_add_form"] = style_add_form or StyleForm(
            user=user, adding=True, prefix="style"
        )
    else:
        context.update(_entries_context(request))
        context["entry_form"] = entry_form or EntryForm(user=user)
        if editing is not None:
            for _, members in context["entry_groups"]:
                for memory in members:
                    if memory.pk == editing.pk:
                        memory.edit_form = editing.edit_form
    return context


def _undo_offer(request: HttpRequest, memories: dict[str, Memory]) -> MemoryHistory | None:
    """After a delete without JavaScript, the redirect carries ?undo=<history id>."""
    history_id = request.GET.get("undo", "")
    if not history_id.isdigit():
        return None
    row = MemoryHistory.objects.filter(
        user=request.user, pk=int(history_id), action=HistoryAction.DELETE
    ).first()
    return row if row is not None and row.key not in memories else None


def _page(request: HttpRequest, *, tab: str, status: int = 200, **overrides: Any):
    return render_page(request, PAGE, _page_context(request, tab=tab, **overrides), status=status)


# ---------------------------------------------------------------- the page and its partials


@login_required
@require_http_methods(["GET", "HEAD"])
def context_page(request: HttpRequest) -> TemplateResponse:
    tab = request.GET.get("tab", "profile")
    tab = tab if tab in TABS else "profile"
    if request.htmx and request.htmx.target == "entry-list":
        return render_page(request, PAGE, _entries_context(request), partial="entry_list")
    if request.htmx and request.htmx.target == "context-tabs":
        context = _page_context(request, tab=tab)
        return render_page(request, PAGE, context, partial="tabs")
    return _page(request, tab=tab)


@login_required
@require_http_methods(["GET", "HEAD"])
def context_preview(request: HttpRequest) -> HttpResponse:
    if not request.htmx:
        return HttpResponseRedirect(reverse("context"))
    return render_page(request, PAGE, _preview_context(request.user), partial="preview")


@login_required
@require_http_methods(["POST"])
def budget_save(request: HttpRequest) -> HttpResponse:
    form = BudgetForm(request.POST)
    if form.is_valid():
        try:
            profile_update(user=request.user, token_budget=form.cleaned_data["token_budget"])
        except ServiceError as error:
            form.add_error("token_budget", error.message)
    if form.errors:
        if request.htmx:
            context = _preview_context(request.user, form)
            return render_page(request, PAGE, context, partial="preview")
        return _page(request, tab=_tab_of(request), status=400, budget_form=form)
    if request.htmx:
        context = _preview_context(request.user)
        context["budget_note"] = "Saved."
        return render_page(request, PAGE, context, partial="preview")
    return _done(request, "Saved your token budget.", _tab_url(_tab_of(request)))


def _tab_of(request: HttpRequest) -> str:
    tab = request.POST.get("tab", "profile")
    return tab if tab in TABS else "profile"


# ---------------------------------------------------------------- profile


@login_required
@require_http_methods(["POST"])
def profile_save(request: HttpRequest, key: str) -> HttpResponse:
    if key not in PROFILE_FIELDS:
        raise Http404("Unknown profile field.")
    user = request.user
    form = ProfileFieldForm(request.POST, key=key, user=user)
    note = ""
    if form.is_valid():
        value = form.cleaned_data[key]
        current = Memory.objects.filter(user=user, key=key).first()
        label = PROFILE_FIELDS[key][0].lower()
        try:
            if value and (current is None or current.value != value):
                memory_upsert(user=user, key=key, value=value, actor=_actor(request))
                note = f"Saved your {label}."
            elif not value and current is not None:
                memory_delete(user=user, key=key, actor=_actor(request))
                note = f"Removed your {label}."
            else:
                note = "No change."
        except NotFound:
            note = f"Removed your {label}."
        except ServiceError as error:
            form.add_error(key, error.message)
    if form.errors:
        if request.htmx:
            form.memory = Memory.objects.filter(user=user, key=key).first()
            return render_page(request, PAGE, {"pf": form}, partial="profile_field")
        return _page(request, tab="profile", status=400, profile_forms={key: form})
    if request.htmx:
        fresh = _profile_form(user, key, Memory.objects.filter(user=user, key=key).first())
        fresh.note = note
        return _changed(render_page(request, PAGE, {"pf": fresh}, partial="profile_field"))
    return _done(request, note, _tab_url("profile"))


# ---------------------------------------------------------------- styles


def _check_platform(platform: str) -> str:
    if not re.fullmatch(PLATFORM_PATTERN, platform):
        raise Http404("Unknown platform.")
    return platform


def _memories_by_key(user: AbstractBaseUser) -> dict[str, Memory]:
    return {memory.key: memory for memory in memory_list(user=user, kind="style")}


@login_required
@require_http_methods(["POST"])
def style_add(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = StyleForm(request.POST, user=user, adding=True, prefix="style")
    if form.is_valid():
        platform = form.cleaned_data["platform"]
        try:
            for aspect in STYLE_ASPECTS:
                if form.cleaned_data[aspect]:
                    memory_upsert(
                        user=user,
                        key=f"{aspect}_{platform}",
                        value=form.cleaned_data[aspect],
                        actor=_actor(request),
                    )
        except ServiceError as error:
            form.add_error("platform", error.message)
    if form.errors:
        if request.htmx:
            context = _styles_panel(user, add_form=form)
            return render_page(request, PAGE, context, partial="styles_panel")
        return _page(request, tab="styles", status=400, style_add_form=form)
    note = f"Added {platform}."
    if request.htmx:
        context = _styles_panel(user, note=note)
        return _changed(render_page(request, PAGE, context, partial="styles_panel"))
    return _done(request, note, _tab_url("styles"))


def _styles_panel(
    user: AbstractBaseUser, add_form: StyleForm | None = None, note: str = ""
) -> dict[str, Any]:
    return {
        "style_rows": _style_rows(user, _memories_by_key(user), {}),
        "style_add_form": add_form or StyleForm(user=user, adding=True, prefix="style"),
        "style_note": note,
    }


@login_required
@require_http_methods(["POST"])
def style_save(request: HttpRequest, platform: str) -> HttpResponse:
    user = request.user
    platform = _check_platform(platform)
    memories = _memories_by_key(user)
    row = _style_row(user, platform, memories)
    if not row.memories:
        raise Http404("No styles for that platform.")
    data = request.POST.copy()
    data[f"style-{platform}-platform"] = platform
    form = StyleForm(data, user=user, prefix=f"style-{platform}")
    if form.is_valid():
        try:
            for aspect in STYLE_ASPECTS:
                key, value = f"{aspect}_{platform}", form.cleaned_data[aspect]
                current = row.memories.get(aspect)
                if value and (current is None or current.value != value):
                    memory_upsert(user=user, key=key, value=value, actor=_actor(request))
                elif not value and current is not None:
                    memory_delete(user=user, key=key, actor=_actor(request))
        except ServiceError as error:
            form.add_error(error.field if error.field in STYLE_ASPECTS else None, error.message)
    if form.errors:
        if request.htmx:
            row.form = form
            return render_page(request, PAGE, {"row": row}, partial="style_row")
        return _page(request, tab="styles", status=400, style_forms={platform: form})
    row = _style_row(user, platform, _memories_by_key(user))
    row.removed = not row.memories
    note = f"Removed {platform}." if row.removed else f"Saved {platform}."
    if request.htmx:
        row.note = note
        return _changed(render_page(request, PAGE, {"row": row}, partial="style_row"))
    return _done(request, note, _tab_url("styles"))


@login_required
@require_http_methods(["POST"])
def style_remove(request: HttpRequest, platform: str) -> HttpResponse:
    user = request.user
    platform = _check_platform(platform)
    row = _style_row(user, platform, _memories_by_key(user))
    if not row.memories:
        raise Http404("No styles for that platform.")
    for memory in row.memories.values():
        with contextlib.suppress(NotFound):  # removed meanwhile
            memory_delete(user=user, key=memory.key, actor=_actor(request))
    note = f"Removed {platform}."
    if request.htmx:
        row.removed, row.note = True, note
        return _changed(render_page(request, PAGE, {"row": row}, partial="style_row"))
    return _done(request, note, _tab_url("styles"))


# ---------------------------------------------------------------- entries


def _row(request: HttpRequest, memory: Memory, note: str = "") -> HttpResponse:
    _annotate(request.user, [memory])
    memory.note = note
    return render_page(request, PAGE, {"memory": memory}, partial="entry_row")


@login_required
@require_http_methods(["POST"])
def entry_add(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = EntryForm(request.POST, user=user)
    if form.is_valid():
        try:
            write = memory_upsert(
                user=user,
                key=form.key,
                value=form.cleaned_data["value"],
                actor=_actor(request),
                tags=form.cleaned_data["tag_list"],
            )
        except ServiceError as error:
            fields = {"value": "value", "tags": "tags", "key": "slug"}
            form.add_error(fields.get(error.field or ""), error.message)
    if form.errors:
        if request.htmx:
            return render_page(request, PAGE, {"entry_form": form}, partial="entry_add")
        return _page(request, tab="entries", status=400, entry_form=form)
    note = f"Added {write.memory.key}."
    if request.htmx:
        context = {"entry_form": EntryForm(user=user), "entry_note": note}
        response = render_page(request, PAGE, context, partial="entry_add")
        return _changed(response, "entries-changed")
    return _done(request, note, _tab_url("entries", f"#memory-{write.memory.pk}"))


@login_required
@require_http_methods(["GET", "HEAD"])
def entry_row(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _get_entry_for_user(request.user, pk)
    if not request.htmx:
        return HttpResponseRedirect(_tab_url("entries", f"#memory-{memory.pk}"))
    return _row(request, memory)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def entry_edit(request: HttpRequest, pk: int) -> HttpResponse:
    user = request.user
    memory = _get_entry_for_user(user, pk)
    if request.method != "POST":
        memory.edit_form = EntryForm(user=user, memory=memory)
        if request.htmx:
            return render_page(request, PAGE, {"memory": memory}, partial="entry_edit")
        return _page(request, tab="entries", editing=memory)
    form = EntryForm(request.POST, user=user, memory=memory)
    note = "No change."
    if form.is_valid():
        value, tags = form.cleaned_data["value"], form.cleaned_data["tag_list"]
        changes: dict[str, Any] = {}
        if value != memory.value:
            changes["value"] = value
        if sorted({tag.lower() for tag in tags}) != list(memory.tags):
            changes["tags"] = tags
        try:
            if changes:
                memory = memory_update(user=user, key=memory.key, actor=_actor(request), **changes)
                memory = memory.memory
                note = "Saved."
        except ServiceError as error:
            form.add_error(error.field if error.field in ("value", "tags") else None, error.message)
    if form.errors:
        memory.edit_form = form
        if request.htmx:
            return render_page(request, PAGE, {"memory": memory}, partial="entry_edit")
        return _page(request, tab="entries", status=400, editing=memory)
    if request.htmx:
        return _changed(_row(request, memory, note))
    return _done(request, f"{note[:-1]}: {memory.key}.", _tab_url("entries", f"#memory-{pk}"))


@login_required
@require_http_methods(["POST"])
def entry_pin(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _get_entry_for_user(request.user, pk)
    pinned = request.POST.get("pinned", "1") == "1"
    memory = memory_update(
        user=request.user, key=memory.key, actor=_actor(request), pinned=pinned
    ).memory
    note = "Pinned." if pinned else "Unpinned."
    if request.htmx:
        return _changed(_row(request, memory, note))
    return _done(request, f"{note[:-1]} {memory.key}.", _tab_url("entries", f"#memory-{pk}"))


@login_required
@require_http_methods(["POST"])
def entry_delete(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _get_entry_for_user(request.user, pk)
    history = memory_delete(user=request.user, key=memory.key, actor=_actor(request))
    if request.htmx:
        context = {"deleted": history, "row_id": pk}
        return _changed(render_page(request, PAGE, context, partial="entry_deleted"))
    messages.success(request, f"Deleted {memory.key}.")
    return HttpResponseRedirect(f"{reverse('context')}?tab=entries&undo={history.pk}")


# ---------------------------------------------------------------- history and undo


def _who(request: HttpRequest, row: MemoryHistory) -> tuple[str, str]:
    if row.actor_type == ActorKind.USER and row.actor_user_id == request.user.pk:
        return "user", "you"
    if row.actor_type == ActorKind.AGENT:
        return "agent", row.actor_label
    return "system", row.actor_label


def _history_context(request: HttpRequest, key: str) -> dict[str, Any]:
    memory = Memory.objects.filter(user=request.user, key=key).first()
    current = memory.snapshot() if memory else None
    rows = list(memory_history_for_key(user=request.user, key=key))
    for row in rows:
        row.who_kind, row.who = _who(request, row)
        row.old_value = (row.before or {}).get("value")
        row.new_value = (row.after or {}).get("value")
        state = row.after if row.after is not None else row.before
        row.restorable = state != current
    kind = memory.kind if memory else Memory(key=key).kind
    tab = "profile" if kind == "profile" else "styles" if kind == "style" else "entries"
    return {"key": key, "memory": memory, "rows": rows, "back_url": _tab_url(tab)}


@login_required
@require_http_methods(["GET", "HEAD"])
def memory_history(request: HttpRequest, pk: int) -> TemplateResponse:
    memory = _get_memory_for_user(request.user, pk)
    context = _history_context(request, memory.key)
    return render_page(request, HISTORY_PAGE, context, partial="timeline")


@login_required
@require_http_methods(["GET", "HEAD"])
def history_detail(request: HttpRequest, history_id: int) -> TemplateResponse:
    row = _get_history_for_user(request.user, history_id)
    context = _history_context(request, row.key)
    return render_page(request, HISTORY_PAGE, context, partial="timeline")


@login_required
@require_http_methods(["POST"])
def history_restore(request: HttpRequest, history_id: int) -> HttpResponse:
    row = _get_history_for_user(request.user, history_id)
    then = request.POST.get("then", "timeline")
    try:
        write = memory_restore(user=request.user, history_id=row.pk, actor=_actor(request))
    except ServiceError as error:
        messages.error(request, error.message)
        return HttpResponseRedirect(reverse("history_detail", args=[row.pk]))
    memory = write.memory
    note = f"Restored {memory.key}."
    if request.htmx:
        if then == "row" and memory.kind in ENTRY_KINDS:
            response = _row(request, memory, "Restored.")
            return _changed(response, "entries-changed")
        if then == "trash":
            context = {"row": row, "restored": memory}
            return _changed(render_page(request, DELETED_PAGE, context, partial="deleted_row"))
        context = {**_history_context(request, memory.key), "note": note}
        return _changed(render_page(request, HISTORY_PAGE, context, partial="timeline"))
    messages.success(request, note)
    if then == "row":
        return HttpResponseRedirect(_tab_url("entries", f"#memory-{memory.pk}"))
    if then == "trash":
        return HttpResponseRedirect(reverse("deleted_memories"))
    return HttpResponseRedirect(reverse("memory_history", args=[memory.pk]))


@login_required
@require_http_methods(["GET", "HEAD"])
def deleted_memories(request: HttpRequest) -> TemplateResponse:
    since = timezone.now() - timedelta(days=DELETED_DAYS)
    rows = deleted_memory_list(user=request.user, since=since)
    for row in rows:
        row.who_kind, row.who = _who(request, row)
    return render_page(request, DELETED_PAGE, {"rows": rows, "days": DELETED_DAYS})
