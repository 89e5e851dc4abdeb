"""The Context page: profile, styles and entries, with the working-memory preview, and each
memory's history and the recently deleted. Its Documents tab is pages/views/documents.py,
which shows the same tab links (`context_tab_links`).

Every write goes through memory.services (or profiles.services for the budget). Each view
answers an htmx request with the one partial it changed (plus `HX-Trigger: memory-changed`
so the preview refreshes) and a plain request with a redirect, or the whole page with the
errors and status 400. A refused save always comes back with the text as it was typed.

Nothing typed is lost when a region is swapped: static/js/unsaved.js asks before a tab
switch or leaving the page with unsaved edits, and sends the ids of open entry editors and
of edited style rows inside a region it refreshes in the `Mnemo-Keep` header; the region is
rendered with `hx-preserve` on those ids, so htmx keeps the live elements, typing included
(`_kept`).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.forms import BoundField
from django.http import Http404, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.text import Truncator
from django.views.decorators.http import require_http_methods

from activity.actors import Actor
from lib.credentials import saved_warning
from lib.errors import Conflict, InvalidInput, NotFound, ServiceError
from lib.pages import HtmxHttpRequest, add_service_error, done, render_page, target_partial, who
from memory.bulk import (
    BulkAction,
    BulkResult,
    memory_batch_undo,
    memory_bulk_delete,
    memory_bulk_pin,
    memory_bulk_tag,
    memory_delete_all,
)
from memory.entries import entry_create, memory_rename
from memory.forms import (
    DELETE_ALL_PHRASE,
    KIND_LABELS,
    PROFILE_FIELDS,
    BudgetForm,
    DeleteAllForm,
    EntryBulkForm,
    EntryFilterForm,
    EntryForm,
    ProfileForm,
    StyleForm,
    local_day,
    timezone_names,
)
from memory.keys import ENTRY_KINDS, PLATFORM_PATTERN, PROFILE_KEYS, STYLE_ASPECTS
from memory.models import MAX_VALUE_LENGTH, HistoryAction, Memory, MemoryHistory, Source
from memory.notes import memory_share_note
from memory.occurrence import from_stored, said_worth_showing, stored_problem
from memory.outcomes import MemoryWrite
from memory.selectors import (
    MemoryBatch,
    agents_with_notes,
    deleted_batch_list,
    deleted_memory_list,
    entry_counts_by_kind,
    entry_list,
    memory_agent_names,
    memory_batch,
    memory_counts,
    memory_history_for_key,
    memory_list,
)
from memory.services import memory_delete, memory_restore, memory_set, memory_update
from memory.snapshots import merged_problem, same_state, state_problem
from memory.working_memory import (
    DAMAGED,
    EMPTY,
    OVER_BUDGET,
    build_working_memory,
    check_as_of,
)
from profiles.models import Agent
from profiles.services import profile_for_user, profile_update

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.template.response import TemplateResponse

PAGE = "pages/context.html"
HISTORY_PAGE = "pages/memory_history.html"
DELETED_PAGE = "pages/memory_deleted.html"
DELETE_ALL_PAGE = "pages/memory_delete_all.html"
TABS = {"profile": "Profile", "styles": "Styles", "entries": "Entries"}
# The regions a GET of the page swaps, by the id htmx aims at: the entry list (filters, a
# refresh after a change) and the tabs with their panel (a tab link).
TARGETS = {"entry-list": "entry_list", "context-tabs": "tabs"}
MEMORY_CHANGED = "memory-changed"
ENTRIES_CHANGED = "entries-changed"
KEEP_HEADER = "Mnemo-Keep"
QUOTE_CHARS = 60
ENTRIES_PER_PAGE = 50
LIST_PARAMS = (
    "agent",
    "kind",
    "tag",
    "q",
    "page",
)  # what the entry list shows, kept across changes
REFUSALS_SHOWN = 5
OMITTED_SHOWN = 25
OMITTED_REASONS = {
    OVER_BUDGET: "did not fit in the token budget",
    EMPTY: "nothing left once control characters were removed",
    DAMAGED: "its history then is damaged (a malformed row), so it is left out",
}


# ---------------------------------------------------------------- lookups


def _get_memory_for_user(user: AbstractBaseUser, pk: int) -> Memory:
    return get_object_or_404(Memory.objects.select_related("owner_agent"), user=user, pk=pk)


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


def _actor(request: HtmxHttpRequest) -> Actor:
    return Actor.for_user(request.user)


def _tab_url(tab: str, anchor: str = "") -> str:
    return f"{reverse('pages:context')}?tab={tab}{anchor}"


def context_tab_links() -> list[dict[str, Any]]:
    """The Context page's tab nav. Profile, Styles and Entries swap in place with htmx;
    Documents is its own page (pages/views/documents.py) that shows the same nav."""
    tabs: list[dict[str, Any]] = [
        {"name": name, "label": label, "url": _tab_url(name), "htmx": True}
        for name, label in TABS.items()
    ]
    tabs.append(
        {
            "name": "documents",
            "label": "Documents",
            "url": reverse("pages:documents"),
            "htmx": False,
        }
    )
    return tabs


def _changed(response: HttpResponse, *events: str) -> HttpResponse:
    """Tell the page (the preview, the entry list) that memory changed."""
    response.headers["HX-Trigger"] = ", ".join((MEMORY_CHANGED, *events))
    return response


def _kept(request: HtmxHttpRequest) -> set[str]:
    """The ids of elements with unsaved typing inside the region an htmx request refreshes
    (open entry editors, edited style rows), sent by static/js/unsaved.js. The region marks
    them `hx-preserve`, so htmx keeps the live elements instead of the fresh ones."""
    if not request.htmx:
        return set()
    return {part for part in request.headers.get(KEEP_HEADER, "").split() if len(part) <= 100}


def _quoted(text: str) -> str:
    """An entry's text as a short quote for notes and accessible names."""
    return f"“{Truncator(' '.join(text.split())).chars(QUOTE_CHARS)}”"


def _and(words: list[str]) -> str:
    """name, role and timezone."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


# ---------------------------------------------------------------- context builders


@dataclass
class StyleRow:
    platform: str
    form: StyleForm
    memories: dict[str, Memory] = field(default_factory=dict)
    note: str = ""
    removed: bool = False
    kept: bool = False  # hx-preserve: the browser keeps the row being edited (_kept)


@dataclass(frozen=True)
class MergedSaid:
    """When and in which conversation a merged note was said, as pages/_said.html shows it."""

    occurred_at: datetime | None
    session: str
    said_shown: bool


def _merged_said(note: dict[str, Any], merged_at: datetime) -> MergedSaid | None:
    """The time and conversation a merged note (read by merged_problem) came with, if any."""
    occurred_at = from_stored(note["occurred_at"]) if "occurred_at" in note else None
    session = note.get("session", "")
    shown = occurred_at is not None and said_worth_showing(occurred_at, merged_at)
    if not shown and not session:
        return None
    return MergedSaid(occurred_at=occurred_at, session=session, said_shown=shown)


def _annotate(user: AbstractBaseUser, memories: list[Memory]) -> list[Memory]:
    """Attach where each memory came from (stated by the user, or noted by which agent), its
    kind as a word, its text as a short quote, and whether the day it was said is worth
    showing."""
    noted = [
        memory.key
        for memory in memories
        if memory.source != Source.USER_STATED and memory.owner_agent_id is None
    ]
    agents = memory_agent_names(user=user, keys=noted) if noted else {}
    for memory in memories:
        memory.kind_label = KIND_LABELS.get(memory.kind, "")
        memory.quoted = _quoted(memory.value)
        # The day it was said, when that is not the day it was written (which says nothing
        # the row's time does not): an agent's dated note, an import, a past event.
        memory.said_shown = said_worth_showing(memory.occurred_at, memory.created_at)
        if memory.owner_agent_id is not None:  # an agent's own note, whoever wrote it last
            memory.origin_kind = "agent"
            memory.origin_label = f"{memory.owner_agent.label}'s note"
        elif memory.source == Source.USER_STATED:
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


@dataclass
class ProfileRow:
    field: BoundField
    memory: Memory | None  # annotated: who set it


def _profile_context(
    user: AbstractBaseUser,
    memories: dict[str, Memory],
    form: ProfileForm | None = None,
    note: str = "",
    warning: str = "",
) -> dict[str, Any]:
    """The profile form (bound, after a refused save, or showing what is saved now), with
    who set each field and a link to its history."""
    mine = {key: memories[key] for key in PROFILE_KEYS if key in memories}
    _annotate(user, list(mine.values()))
    if form is None:
        form = ProfileForm(user=user, initial={key: memory.value for key, memory in mine.items()})
    return {
        "profile_form": form,
        "profile_rows": [ProfileRow(field=form[key], memory=mine.get(key)) for key in PROFILE_KEYS],
        "profile_note": note,
        "profile_warning": warning,
    }


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
        row = _style_row(user, platform, memories)
        if platform in overrides:
            row.form = overrides[platform]
        row.kept = f"style-{platform}" in kept
        rows.append(row)
    return rows


@dataclass
class EntryGroup:
    kind: str
    label: str
    members: list[Memory]
    count: int  # of this kind among the entries listed, on every page
    continued: bool  # some of them are on the pages before this one


@dataclass
class BulkBox:
    """What the entry list says above it after a bulk action: the note, and the batch an
    Undo button undoes (or, after a plain POST's redirect, the batch alone: the flash has
    the note)."""

    note: str = ""
    error: bool = False
    batch: uuid.UUID | None = None
    offer: MemoryBatch | None = None


def _entries_url(params: QueryDict | dict[str, str], **extra: object) -> str:
    """The Context page's entry list with these filters and page (and `extra`)."""
    query = QueryDict(mutable=True)
    query["tab"] = "entries"
    for name in LIST_PARAMS:
        value = params.get(name) or ""
        if value and not (name == "page" and value == "1"):
            query[name] = value
    for name, value in extra.items():
        query[name] = str(value)
    return f"{reverse('pages:context')}?{query.urlencode()}"


def _list_params(data: QueryDict) -> QueryDict:
    """The entry list's filters and page from a form's hidden copies of them."""
    params = QueryDict(mutable=True)
    for name in LIST_PARAMS:
        if data.get(name):
            params[name] = data[name]
    return params


def _page_links(page: Page, params: dict[str, str]) -> list[dict[str, Any]]:
    """Links to the other pages of the list (a gap is a link without a url)."""
    links = []
    for number in page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1):
        if number == page.paginator.ELLIPSIS:
            links.append({"label": number, "url": ""})
        else:
            url = _entries_url({**params, "page": str(number)})
            links.append({"label": number, "url": url, "current": number == page.number})
    return links


def _entries_context(
    request: HtmxHttpRequest,
    params: QueryDict | None = None,
    *,
    bulk_form: EntryBulkForm | None = None,
    bulk: BulkBox | None = None,
) -> dict[str, Any]:
    """The entry list, filtered, ENTRIES_PER_PAGE at a time, grouped by kind, with the bulk
    form. `params` holds the filters and the page (the GET's, or a POST's hidden copies of
    them). Entries whose editor is open in the page (`_kept`) stay listed whatever the
    filters and the page say, marked `kept`: the browser keeps their editors, with what was
    typed in them, across this refresh."""
    user = request.user
    params = request.GET if params is None else params
    agents = agents_with_notes(user=user)
    filter_form = EntryFilterForm(params, agents=agents)
    filters = filter_form.filters()
    # The user's memory, or (the "Whose" filter) one agent's own notes.
    notes_of = next((agent for agent, _ in agents if agent.name == filters["agent"]), None)
    entries = entry_list(
        user=user, kind=filters["kind"], tag=filters["tag"], q=filters["q"], owner_agent=notes_of
    )
    page = Paginator(entries, ENTRIES_PER_PAGE).get_page(params.get("page"))
    on_page = list(page.object_list)
    rows = list(on_page)
    kept = {
        int(element[len("memory-") :])
        for element in _kept(request)
        if element.startswith("memory-") and element[len("memory-") :].isdigit()
    }
    if extra := kept - {memory.pk for memory in rows}:
        rows += list(
            Memory.objects.filter(user=user, key__contains=":", pk__in=extra).select_related(
                "owner_agent"
            )
        )
    _annotate(user, rows)
    for memory in rows:
        memory.kept = memory.pk in kept
    counts = entry_counts_by_kind(entries)
    start = page.start_index() - 1 if page.paginator.count else 0
    groups, before = [], 0
    for kind in ENTRY_KINDS:
        if members := [memory for memory in rows if memory.kind == kind]:
            count = max(counts.get(kind, 0), len(members))
            groups.append(EntryGroup(kind, KIND_LABELS[kind], members, count, start > before))
        before += counts.get(kind, 0)
    shown = {**filters, "page": str(page.number)}
    return {
        "filter_form": filter_form,
        "filters": filters,
        "filtered": any(filters.values()),
        "entry_groups": groups,
        "entry_shown": len(rows),
        "entry_total": Memory.objects.filter(
            user=user, owner_agent=notes_of, key__contains=":"
        ).count(),
        "notes_of": notes_of,
        "entry_matching": page.paginator.count,
        "entry_page": page,
        "entry_range": f"{page.start_index()}–{page.end_index()}",
        "page_links": _page_links(page, filters) if page.paginator.num_pages > 1 else [],
        "previous_url": _entries_url({**filters, "page": str(page.number - 1)}),
        "next_url": _entries_url({**filters, "page": str(page.number + 1)}),
        "list_url": _entries_url(shown),
        "list_hidden": [(name, value) for name, value in shown.items() if value],
        "page_ids": [memory.pk for memory in on_page],
        "bulk_form": bulk_form or EntryBulkForm(),
        "bulk": bulk or _bulk_offer(request),
    }


def _bulk_offer(request: HtmxHttpRequest) -> BulkBox | None:
    """After a bulk action without JavaScript, the redirect carries ?batch=<id>: offer its
    Undo (the flash says what it did)."""
    try:
        batch = uuid.UUID(request.GET.get("batch", ""))
    except ValueError:
        return None
    offer = memory_batch(user=request.user, batch=batch)
    if offer is None:
        return None
    return BulkBox(batch=batch, offer=offer)


def _preview_context(
    user: AbstractBaseUser, budget_form: BudgetForm | None = None, *, as_of: str = ""
) -> dict:
    """The preview: the block now, or as it was at `as_of` (a datetime-local value, read
    in the user's timezone memory, else UTC). A time that cannot be shown is an error
    beside the form, and the block now."""
    profile = profile_for_user(user)
    zone = _user_zone(user)
    moment, as_of_error = _read_as_of(as_of, zone)
    block = build_working_memory(user=user, as_of=moment)
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
        # As typed, for the refresh to keep showing that time and for a refused one.
        "as_of": as_of if moment or as_of_error else "",
        # As a datetime-local input takes it (no fraction of a second), and as people read it.
        "as_of_value": _local(moment, zone, "Y-m-d\\TH:i", ":s") if moment else as_of,
        "as_of_label": _local(moment, zone, "j M Y, H:i", ":s") if moment else "",
        "as_of_max": _local(timezone.now(), zone, "Y-m-d\\TH:i"),
        "as_of_zone": zone.key,
        "as_of_error": as_of_error,
    }


def _local(moment: datetime, zone: ZoneInfo, minutes: str, seconds: str = "") -> str:
    """`moment` in `zone` formatted to the minute, or to the second if it has seconds."""
    local = moment.astimezone(zone)
    return dateformat.format(local, minutes + (seconds if local.second else ""))


def _user_zone(user: AbstractBaseUser) -> ZoneInfo:
    """The zone of the user's `timezone` memory, or UTC."""
    name = (
        memory_list(user=user, kind="profile")
        .filter(key="timezone")
        .values_list("value", flat=True)
        .first()
    )
    with contextlib.suppress(ZoneInfoNotFoundError, ValueError, TypeError):
        return ZoneInfo(name or "UTC")
    return ZoneInfo("UTC")


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
        **_preview_context(user, budget_form),
    }
    if tab == "profile":
        context.update(_profile_context(user, memories, profile_form, profile_note))
        context["timezones"] = timezone_names()
    elif tab == "styles":
        context["style_rows"] = _style_rows(user, memories, style_forms or {})
        context["style_add_form"] = style_add_form or StyleForm(
            user=user, adding=True, prefix="style"
        )
    else:
        context.update(_entries_context(request, list_params, bulk_form=bulk_form))
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
    row.quoted = _quoted(_shown(before.get("value")) or "")
    return row


def _page(
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
        return render_page(request, PAGE, _entries_context(request), partial=partial)
    return render_page(request, PAGE, _page_context(request, tab=tab), partial=partial)


@login_required
@require_http_methods(["GET", "HEAD"])
def context_preview(request: HtmxHttpRequest) -> HttpResponse:
    """The preview partial, now or `?as_of=` a past time; without htmx, the page with it."""
    as_of = request.GET.get("as_of", "").strip()
    if request.htmx:
        context = _preview_context(request.user, as_of=as_of)
        return render_page(request, PAGE, context, partial="preview")
    if not as_of:
        return HttpResponseRedirect(reverse("pages:context"))
    tab = request.GET.get("tab", "profile")
    tab = tab if tab in TABS else "profile"
    context = _page_context(request, tab=tab)
    context.update(_preview_context(request.user, as_of=as_of))
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
            context = _preview_context(request.user, form)
            return render_page(request, PAGE, context, partial="preview")
        return _page(request, tab=_tab_of(request), status=400, budget_form=form)
    if request.htmx:
        context = _preview_context(request.user)
        context["budget_note"] = "Saved."
        return render_page(request, PAGE, context, partial="preview")
    return done(request, "Saved your token budget.", _tab_url(_tab_of(request)))


def _tab_of(request: HtmxHttpRequest) -> str:
    tab = request.POST.get("tab", "profile")
    return tab if tab in TABS else "profile"


# ---------------------------------------------------------------- profile


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
                    user=user, key=key, value=values[key], actor=_actor(request)
                )
            except ServiceError as error:  # refused after the form's checks (a race)
                form.add_error(key, error.message)
            else:
                statuses[key] = status
                if isinstance(write, MemoryWrite):
                    writes.append(write)
    note = _profile_note(statuses)
    warning = _credential_warning(*writes)
    changed = any(status != "unchanged" for status in statuses.values())
    if form.errors:
        # Nothing was written, unless a service refused a field the form let through: then
        # the note says what did save.
        note = note if changed else ""
        if request.htmx:
            memories = _memories_by_key(user, kind="profile")
            context = _profile_context(user, memories, form, note, warning)
            response = render_page(request, PAGE, context, partial="profile_form")
            return _changed(response) if changed else response
        return _page(request, tab="profile", status=400, profile_form=form, profile_note=note)
    if request.htmx:
        memories = _memories_by_key(user, kind="profile")
        context = _profile_context(user, memories, note=note, warning=warning)
        response = render_page(request, PAGE, context, partial="profile_form")
        return _changed(response) if changed else response
    return _done_warning(request, note, _tab_url("profile"), warning)


def _profile_note(statuses: dict[str, str]) -> str:
    """What one Save did: "Saved name and role.", "Removed company.", "Saved name; removed
    company." or "No change."."""

    def fields(*wanted: str) -> list[str]:
        return [
            PROFILE_FIELDS[key][0].lower() for key, status in statuses.items() if status in wanted
        ]

    parts = []
    if saved := fields("created", "updated"):
        parts.append(f"saved {_and(saved)}")
    if removed := fields("deleted"):
        parts.append(f"removed {_and(removed)}")
    if not parts:
        return "No change."
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}."


# ---------------------------------------------------------------- styles


def _check_platform(platform: str) -> str:
    if not re.fullmatch(PLATFORM_PATTERN, platform):
        raise Http404("Unknown platform.")
    return platform


def _memories_by_key(user: AbstractBaseUser, kind: str = "style") -> dict[str, Memory]:
    return {memory.key: memory for memory in memory_list(user=user, kind=kind)}


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
                memory_set(user=user, key=key, value=value, actor=_actor(request))
        except ServiceError as error:
            form.add_error("platform", error.message)
    if form.errors:
        if request.htmx:
            context = _styles_panel(request, add_form=form)
            return render_page(request, PAGE, context, partial="styles_panel")
        return _page(request, tab="styles", status=400, style_add_form=form)
    note = f"Added {platform}."
    if request.htmx:
        context = _styles_panel(request, note=note)
        return _changed(render_page(request, PAGE, context, partial="styles_panel"))
    return done(request, note, _tab_url("styles"))


def _styles_panel(
    request: HtmxHttpRequest, add_form: StyleForm | None = None, note: str = ""
) -> dict[str, Any]:
    """The platforms and the add form; rows being edited in the page are kept (_kept)."""
    user = request.user
    return {
        "style_rows": _style_rows(user, _memories_by_key(user), {}, _kept(request)),
        "style_add_form": add_form or StyleForm(user=user, adding=True, prefix="style"),
        "style_note": note,
    }


@login_required
@require_http_methods(["POST"])
def style_save(request: HtmxHttpRequest, platform: str) -> HttpResponse:
    user = request.user
    platform = _check_platform(platform)
    memories = _memories_by_key(user)
    row = _style_row(user, platform, memories)
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
                status, _ = memory_set(user=user, key=key, value=value, actor=_actor(request))
            except ServiceError as error:  # refused after the form's checks (a race)
                form.add_error(aspect, error.message)
            else:
                changed = changed or status != "unchanged"
    if form.errors:
        if request.htmx:
            row.form = form
            response = render_page(request, PAGE, {"row": row}, partial="style_row")
            return _changed(response) if changed else response
        return _page(request, tab="styles", status=400, style_forms={platform: form})
    row = _style_row(user, platform, _memories_by_key(user))
    row.removed = not row.memories
    if row.removed:
        note = f"Removed {platform}."
    else:
        note = f"Saved {platform}." if changed else "No change."
    if request.htmx:
        row.note = note
        response = render_page(request, PAGE, {"row": row}, partial="style_row")
        return _changed(response) if changed else response
    return done(request, note, _tab_url("styles"))


@login_required
@require_http_methods(["POST"])
def style_remove(request: HtmxHttpRequest, platform: str) -> HttpResponse:
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
    return done(request, note, _tab_url("styles"))


# ---------------------------------------------------------------- entries


def _row(
    request: HtmxHttpRequest, memory: Memory, note: str = "", warning: str = ""
) -> HttpResponse:
    _annotate(request.user, [memory])
    memory.note, memory.warning = note, warning
    return render_page(request, PAGE, {"memory": memory}, partial="entry_row")


def _credential_warning(*writes: MemoryWrite) -> str:
    """What the page says when the user saved what looks like a credential: agents may
    not store one (memory/services.py refuses them), the user may, and should know their
    agents will read it."""
    credential = next(filter(None, (write.credential for write in writes)), None)
    return saved_warning(credential) if credential is not None else ""


def _done_warning(request: HtmxHttpRequest, message: str, url: str, warning: str) -> HttpResponse:
    """done(), with the credential warning as a second flash."""
    response = done(request, message, url)
    if warning:
        messages.warning(request, warning)
    return response


@login_required
@require_http_methods(["POST"])
def entry_add(request: HtmxHttpRequest) -> HttpResponse:
    user = request.user
    form = EntryForm(request.POST, user=user)
    if form.is_valid():
        try:
            write = entry_create(
                user=user,
                kind=form.cleaned_data["kind"],
                value=form.cleaned_data["value"],
                actor=_actor(request),
                slug=form.cleaned_data["key"],
                tags=form.cleaned_data["tag_list"],
                occurred_at=form.cleaned_data["occurred_at"],
                session=form.cleaned_data["session"],
            )
        except ServiceError as error:  # a bad or taken key, a refused text or tag
            add_service_error(form, error, EntryForm.SERVICE_FIELDS)
    if form.errors:
        if request.htmx:
            return render_page(request, PAGE, {"entry_form": form}, partial="entry_add")
        return _page(request, tab="entries", status=400, entry_form=form)
    memory = write.memory
    note = f"Added {_quoted(memory.value)} as {_a(KIND_LABELS[memory.kind].lower())}."
    warning = _credential_warning(write)
    if request.htmx:
        context = {"entry_form": EntryForm(user=user), "entry_note": note, "entry_warning": warning}
        response = render_page(request, PAGE, context, partial="entry_add")
        return _changed(response, ENTRIES_CHANGED)
    return _done_warning(request, note, _tab_url("entries", f"#memory-{memory.pk}"), warning)


@login_required
@require_http_methods(["GET", "HEAD"])
def entry_row(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    memory = _get_entry_for_user(request.user, pk)
    if not request.htmx:
        return HttpResponseRedirect(_tab_url("entries", f"#memory-{memory.pk}"))
    return _row(request, memory)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def entry_edit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    user = request.user
    memory = _get_entry_for_user(user, pk)
    _annotate(user, [memory])
    if request.method != "POST":
        memory.edit_form = EntryForm(user=user, memory=memory)
        if request.htmx:
            return render_page(request, PAGE, {"memory": memory}, partial="entry_edit")
        return _page(request, tab="entries", editing=memory)
    form = EntryForm(request.POST, user=user, memory=memory)
    renamed = saved = False
    warning = ""
    if form.is_valid():
        kind = form.cleaned_data["kind"] or memory.kind
        if kind != memory.kind and memory.owner_agent_id is not None:
            form.add_error("kind", "A note keeps its kind; move it into your memory first.")
        elif kind != memory.kind:
            # Another kind is another key: the same slug under the new kind. The rename keeps
            # the row and its history; a key that is taken leaves everything as it was.
            slug = memory.key.split(":", 1)[1]
            try:
                memory = memory_rename(
                    user=user, key=memory.key, new_key=f"{kind}:{slug}", actor=_actor(request)
                ).memory
                renamed = True
            except ServiceError as error:
                form.add_error("kind", error.message)
        changes = _entry_changes(memory, form.cleaned_data) if not form.errors else {}
        if changes:
            try:
                write = memory_update(
                    user=user,
                    key=memory.key,
                    actor=_actor(request),
                    owner_agent=memory.owner_agent,
                    **changes,
                )
                memory, saved = write.memory, True
                warning = _credential_warning(write)
            except ServiceError as error:
                add_service_error(form, error, EntryForm.SERVICE_FIELDS)
    events = (ENTRIES_CHANGED,) if renamed else ()  # the list regroups it under its kind
    if form.errors:
        _annotate(user, [memory])
        memory.edit_form = form
        if request.htmx:
            response = render_page(request, PAGE, {"memory": memory}, partial="entry_edit")
            return _changed(response, *events) if renamed else response
        return _page(request, tab="entries", status=400, editing=memory)
    now = f"now {_a(KIND_LABELS[memory.kind].lower())}"
    if renamed:
        note = f"Saved; {now}." if saved else f"{now.capitalize()}."
    else:
        note = "Saved." if saved else "No change."
    if request.htmx:
        response = _row(request, memory, note, warning)
        return _changed(response, *events) if saved or renamed else response
    flash = f"{note[:-1]}: {_quoted(memory.value)}."
    return _done_warning(request, flash, _tab_url("entries", f"#memory-{pk}"), warning)


def _entry_changes(memory: Memory, cleaned: dict[str, Any]) -> dict[str, Any]:
    """What an edit changes of an entry's text, tags, day and conversation, for
    memory_update. The form shows the day only: the same day keeps the time an agent gave,
    and an emptied one keeps the day it had."""
    changes: dict[str, Any] = {}
    if cleaned["value"] != memory.value:
        changes["value"] = cleaned["value"]
    if sorted({tag.lower() for tag in cleaned["tag_list"]}) != list(memory.tags):
        changes["tags"] = cleaned["tag_list"]
    if cleaned["occurred_at"] is not None and cleaned["occurred_at"] != local_day(memory):
        changes["occurred_at"] = cleaned["occurred_at"]
    if cleaned["session"] != memory.session:
        changes["session"] = cleaned["session"]
    return changes


@login_required
@require_http_methods(["POST"])
def entry_pin(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    memory = _get_entry_for_user(request.user, pk)
    pinned = request.POST.get("pinned", "1") == "1"
    memory = memory_update(
        user=request.user,
        key=memory.key,
        actor=_actor(request),
        pinned=pinned,
        owner_agent=memory.owner_agent,
    ).memory
    note = "Pinned." if pinned else "Unpinned."
    if request.htmx:
        return _changed(_row(request, memory, note))
    flash = f"{note[:-1]} {_quoted(memory.value)}."
    return done(request, flash, _tab_url("entries", f"#memory-{pk}"))


@login_required
@require_http_methods(["POST"])
def entry_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    memory = _get_entry_for_user(request.user, pk)
    history = memory_delete(
        user=request.user, key=memory.key, actor=_actor(request), owner_agent=memory.owner_agent
    )
    if request.htmx:
        context = {"deleted": history, "row_id": pk, "quoted": _quoted(memory.value)}
        return _changed(render_page(request, PAGE, context, partial="entry_deleted"))
    messages.success(request, f"Deleted {_quoted(memory.value)}.")
    return HttpResponseRedirect(f"{reverse('pages:context')}?tab=entries&undo={history.pk}")


@login_required
@require_http_methods(["POST"])
def note_share(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """An agent's own note, "Move into my memory" (memory_share_note): it becomes the
    user's memory under its key. A key the user's memory has already leaves the note as it
    is, and says so in its row."""
    note = _get_entry_for_user(request.user, pk)
    if note.owner_agent_id is None:
        raise Http404("Not an agent's note.")
    try:
        memory = memory_share_note(user=request.user, memory_id=pk, actor=_actor(request)).memory
    except Conflict as error:
        if request.htmx:
            return _row(request, note, "Not moved.", error.message)
        messages.error(request, error.message)
        return HttpResponseRedirect(_entries_url({"agent": note.owner_agent.name}))
    moved = f"Moved {_quoted(memory.value)} into your memory."
    if request.htmx:
        # The row says where it went, in place: refreshing the list would take that away.
        context = {"row_id": pk, "moved": moved, "memory": memory}
        return _changed(render_page(request, PAGE, context, partial="note_moved"))
    return done(request, moved, _tab_url("entries", f"#memory-{memory.pk}"))


# ---------------------------------------------------------------- many entries at once


@login_required
@require_http_methods(["POST"])
def entries_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """The entry list's bulk form: delete, re-tag, pin or unpin the selected entries
    (memory/bulk.py, a history row and an event per entry, one batch to undo). The list
    comes back as it was shown (filters and page, from the form's hidden copies) with what
    happened above it; without htmx, the redirect to it does."""
    params = _list_params(request.POST)
    form = EntryBulkForm(request.POST)
    result = None
    if form.is_valid():
        try:
            result = _bulk_apply(request, form.cleaned_data)
        except ServiceError as error:  # refused as a whole: nothing was written
            add_service_error(form, error)
    if result is None:
        if request.htmx:
            context = _entries_context(request, params, bulk_form=form)
            return render_page(request, PAGE, context, partial="entry_list")
        return _page(request, tab="entries", status=400, bulk_form=form, list_params=params)
    note = _bulk_note(result)
    if request.htmx:
        box = BulkBox(note=note, error=not result.done and bool(result.refused), batch=result.batch)
        response = render_page(
            request, PAGE, _entries_context(request, params, bulk=box), partial="entry_list"
        )
        return _changed(response) if result.done else response
    extra = {"batch": result.batch} if result.batch else {}
    return done(request, note, _entries_url(params, **extra))


def _bulk_apply(request: HtmxHttpRequest, cleaned: dict[str, Any]) -> BulkResult:
    user, actor, ids = request.user, _actor(request), cleaned["selected"]
    action = cleaned["action"]
    if action == "delete":
        return memory_bulk_delete(user=user, memory_ids=ids, actor=actor)
    if action in ("pin", "unpin"):
        return memory_bulk_pin(user=user, memory_ids=ids, actor=actor, pinned=action == "pin")
    tags = cleaned["tag_list"]
    if action == "tag_add":
        return memory_bulk_tag(user=user, memory_ids=ids, actor=actor, add=tags)
    return memory_bulk_tag(user=user, memory_ids=ids, actor=actor, remove=tags)


# How a bulk action's rows are told: what was done to them, and what "unchanged" means.
BULK_DONE = {
    BulkAction.DELETE: "deleted",
    BulkAction.DELETE_ALL: "deleted",
    BulkAction.TAG: "re-tagged",
    BulkAction.PIN: "pinned",
    BulkAction.UNPIN: "unpinned",
    BulkAction.UNDO: "put back",
}
BULK_UNCHANGED = {
    BulkAction.TAG: "had those tags already",
    BulkAction.PIN: "pinned already",
    BulkAction.UNPIN: "not pinned",
    BulkAction.UNDO: "back already",
}


def _bulk_note(result: BulkResult) -> str:
    """ "12 deleted, 1 refused: 'fact:x' was changed since; it is left as it is." """
    done_count, unchanged = len(result.done), len(result.unchanged)
    refused = result.refused
    parts = []
    if done_count or not (unchanged or refused or result.missing):
        parts.append(f"{done_count} {BULK_DONE[result.action]}")
    if unchanged:
        parts.append(f"{unchanged} {BULK_UNCHANGED.get(result.action, 'unchanged')}")
    if result.missing:
        parts.append(f"{result.missing} gone already")
    if refused:
        reasons = [
            row.message if row.key in row.message else f"{row.key}: {row.message}"
            for row in refused[:REFUSALS_SHOWN]
        ]
        if len(refused) > REFUSALS_SHOWN:
            reasons.append(f"and {len(refused) - REFUSALS_SHOWN} more")
        parts.append(f"{len(refused)} refused: {' '.join(reasons)}")
    text = ", ".join(parts)
    if result.action == BulkAction.DELETE_ALL:
        text = f"Deleted all your memories: {text}"
    text = text[0].upper() + text[1:]
    return text if text.endswith(".") else f"{text}."


@login_required
@require_http_methods(["POST"])
def batch_undo(request: HtmxHttpRequest, batch: uuid.UUID) -> HttpResponse:
    """Undo a bulk action (memory_batch_undo): from the entry list (`then=entries`, the list
    comes back as it was shown) or from Recently deleted (`then=trash`)."""
    then = request.POST.get("then", "entries")
    params = _list_params(request.POST)
    try:
        result = memory_batch_undo(user=request.user, batch=batch, actor=_actor(request))
    except NotFound as error:
        raise Http404(error.message) from error
    except ServiceError as error:  # too old to undo as one
        note, error_note, changed = error.message, True, False
    else:
        note, error_note, changed = _bulk_note(result), not result.done, bool(result.done)
    if request.htmx:
        box = BulkBox(note=note, error=error_note)
        if then == "trash":
            response = render_page(
                request, DELETED_PAGE, _deleted_context(request, box), partial="trash"
            )
        else:
            context = _entries_context(request, params, bulk=box)
            response = render_page(request, PAGE, context, partial="entry_list")
        return _changed(response) if changed else response
    if error_note:
        messages.error(request, note)
    else:
        messages.success(request, note)
    if then == "trash":
        return HttpResponseRedirect(reverse("pages:deleted_memories"))
    return HttpResponseRedirect(_entries_url(params))


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def delete_all(request: HtmxHttpRequest) -> HttpResponse:
    """Delete all my memories: profile, styles and entries (memory_delete_all), behind a
    typed confirmation; one Undo brings them all back for MNEMO_UNDO_DAYS days."""
    form = DeleteAllForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        result = memory_delete_all(user=request.user, actor=_actor(request))
        extra = {"batch": result.batch} if result.batch else {}
        return done(request, _bulk_note(result), _entries_url({}, **extra))
    context = {
        "form": form,
        "counts": memory_counts(user=request.user),
        "phrase": DELETE_ALL_PHRASE,
        "days": settings.MNEMO_UNDO_DAYS,
    }
    return render_page(request, DELETE_ALL_PAGE, context, status=400 if form.errors else 200)


# ---------------------------------------------------------------- history and undo


def _history_context(
    request: HtmxHttpRequest,
    key: str,
    memory: Memory | None = None,
    owner_agent_id: int | None = None,
) -> dict[str, Any]:
    """The timeline of `memory` (or, when it has none now, of `key` in the audience
    `owner_agent_id` names: the user's memory, or that agent's notes): its changes under
    every key it had (a rename keeps the row), a rename shown as one."""
    if memory is None:
        memory = Memory.objects.filter(
            user=request.user, key=key, owner_agent_id=owner_agent_id
        ).first()
    if memory is not None:
        key, owner_agent_id = memory.key, memory.owner_agent_id
    current = memory.snapshot() if memory else None
    rows = list(
        memory_history_for_key(
            user=request.user,
            key=key,
            memory_id=memory.pk if memory else None,
            owner_agent_id=owner_agent_id,
        )
    )
    for row in rows:
        row.who = who(request, row)
        # A stored state is not trusted (memory/snapshots.py): an older import kept any
        # shape. A damaged one is shown as far as it reads, says so, and is not offered.
        renamed = row.action == HistoryAction.RENAME
        merged = row.action == HistoryAction.MERGE
        row.damaged = next(
            (
                f"The state {name} this change is damaged: {problem}."
                for name, state in (("before", row.before), ("after", row.after))
                if state is not None and (problem := state_problem(state, renamed=renamed))
            ),
            "",
        )
        if merged and not row.damaged and (problem := merged_problem(row.after)):
            row.damaged = f"The note this merge kept is damaged: {problem}."
        before = row.before if isinstance(row.before, dict) else {}
        after = row.after if isinstance(row.after, dict) else {}
        row.old_value = _shown(before.get("value"))
        row.new_value = _shown(after.get("value"))
        row.said_change, row.session_change = _when_changed(before, after)
        note = after.get("merged")
        row.merged_value = _shown(note.get("value")) if isinstance(note, dict) else None
        row.merged_said = _merged_said(note, row.created_at) if merged and not row.damaged else None
        if renamed:
            row.old_key = _shown(before.get("key")) or ""
            row.new_key = _shown(after.get("key")) or row.key
        state = after if row.after is not None else before
        state = {name: value for name, value in state.items() if name != "key"}
        # memory_restore writes a state back under the memory's key now when the row is of
        # this memory (from before a rename too); a row of another memory that once had
        # this key (deleted since) would come back under the old key, so it is not offered.
        same_memory = memory is not None and row.memory_id == memory.pk
        # A merge changed nothing: the state it shows is the one the change before it left.
        row.restorable = (
            not row.damaged
            and not merged
            and not same_state(current, state)
            and (row.key == key or same_memory)
        )
    kind = memory.kind if memory else Memory(key=key).kind
    tab = "profile" if kind == "profile" else "styles" if kind == "style" else "entries"
    # An agent's own note: the page says whose (the block is outside the timeline partial).
    notes_of = None
    if owner_agent_id is not None:
        notes_of = Agent.objects.filter(user=request.user, pk=owner_agent_id).first()
    return {
        "key": key,
        "memory": memory,
        "rows": rows,
        "back_url": _tab_url(tab),
        "notes_of": notes_of,
    }


def _when_changed(
    before: dict[str, Any], after: dict[str, Any]
) -> tuple[tuple[datetime, datetime] | None, tuple[str, str] | None]:
    """What a change did to when the memory was said and to its conversation, each (old,
    new) when both states hold it (a state from before issue 26 does not) and it changed."""
    said = None
    old, new = before.get("occurred_at"), after.get("occurred_at")
    if not stored_problem(old) and not stored_problem(new) and old != new:
        said = (from_stored(old), from_stored(new))
    session = None
    old, new = before.get("session"), after.get("session")
    if isinstance(old, str) and isinstance(new, str) and old != new:
        session = (old, new)
    return said, session


def _shown(value: object) -> str | None:
    """A stored state's text as the history page shows it: text only, and no longer than a
    value may be (a damaged row may hold anything)."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_VALUE_LENGTH else value[:MAX_VALUE_LENGTH] + "…"


@login_required
@require_http_methods(["GET", "HEAD"])
def memory_history(request: HtmxHttpRequest, pk: int) -> TemplateResponse:
    memory = _get_memory_for_user(request.user, pk)
    context = _history_context(request, memory.key, memory)
    return render_page(request, HISTORY_PAGE, context, partial="timeline")


@login_required
@require_http_methods(["GET", "HEAD"])
def history_detail(request: HtmxHttpRequest, history_id: int) -> TemplateResponse:
    row = _get_history_for_user(request.user, history_id)
    memory = None
    if row.memory_id is not None:  # the memory it belongs to, under whatever key it has now
        memory = Memory.objects.filter(user=request.user, pk=row.memory_id).first()
    context = _history_context(request, row.key, memory, row.owner_agent_id)
    return render_page(request, HISTORY_PAGE, context, partial="timeline")


@login_required
@require_http_methods(["POST"])
def history_restore(request: HtmxHttpRequest, history_id: int) -> HttpResponse:
    row = _get_history_for_user(request.user, history_id)
    then = request.POST.get("then", "timeline")
    try:
        write = memory_restore(user=request.user, history_id=row.pk, actor=_actor(request))
    except ServiceError as error:
        messages.error(request, error.message)
        return HttpResponseRedirect(reverse("pages:history_detail", args=[row.pk]))
    memory = write.memory
    note = f"Restored {memory.key}."
    if request.htmx:
        if then == "row" and memory.kind in ENTRY_KINDS:
            response = _row(request, memory, "Restored.")
            return _changed(response, "entries-changed")
        if then == "trash":
            context = {"row": row, "restored": memory}
            return _changed(render_page(request, DELETED_PAGE, context, partial="deleted_row"))
        context = {**_history_context(request, memory.key, memory), "note": note}
        return _changed(render_page(request, HISTORY_PAGE, context, partial="timeline"))
    messages.success(request, note)
    if then == "row":
        return HttpResponseRedirect(_tab_url("entries", f"#memory-{memory.pk}"))
    if then == "trash":
        return HttpResponseRedirect(reverse("pages:deleted_memories"))
    return HttpResponseRedirect(reverse("pages:memory_history", args=[memory.pk]))


def _deleted_context(request: HtmxHttpRequest, bulk: BulkBox | None = None) -> dict[str, Any]:
    """Recently deleted: the bulk deletions that can be undone as one, then each memory."""
    days = settings.MNEMO_UNDO_DAYS
    since = timezone.now() - timedelta(days=days)
    rows = deleted_memory_list(user=request.user, since=since)
    for row in rows:
        row.who = who(request, row)
    batches = deleted_batch_list(user=request.user, since=since)
    return {"rows": rows, "batches": batches, "days": days, "bulk": bulk}


@login_required
@require_http_methods(["GET", "HEAD"])
def deleted_memories(request: HtmxHttpRequest) -> TemplateResponse:
    return render_page(request, DELETED_PAGE, _deleted_context(request))
