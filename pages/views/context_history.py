"""Each memory's history (its timeline, one row, a restore) and Recently deleted, the pages
the Context page links to. A restore is offered where memory_restore would write back under
the timeline's key and change it (`_restore_changes`, by memory/services.py `restore_target`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from lib.errors import ServiceError
from lib.pages import HtmxHttpRequest, render_page, who
from memory.keys import ENTRY_KINDS
from memory.models import HistoryAction, Memory, MemoryHistory
from memory.occurrence import from_stored, said_worth_showing, stored_problem
from memory.selectors import deleted_batch_list, deleted_memory_list, memory_history_for_key
from memory.services import memory_restore, restore_target
from memory.snapshots import merged_problem, same_state, state_problem
from pages.views.context_shared import (
    BulkBox,
    actor_of,
    announce_change,
    get_history_for_user,
    get_memory_for_user,
    render_entry_row,
    shown_text,
    tab_url,
)
from profiles.models import Agent

if TYPE_CHECKING:
    from django.template.response import TemplateResponse


HISTORY_PAGE = "pages/memory_history.html"
DELETED_PAGE = "pages/memory_deleted.html"


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


def _history_context(
    request: HtmxHttpRequest,
    key: str,
    memory: Memory | None = None,
    owner_agent_id: int | None = None,
    memory_id: int | None = None,
) -> dict[str, Any]:
    """The timeline of `memory` (or, when it has none now, of `key` in the audience
    `owner_agent_id` names: the user's memory, or that agent's notes, with the changes of
    the deleted memory `memory_id`, whose rows keep its id): its changes under every key it
    had (a rename keeps the row), a rename shown as one."""
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
            memory_id=memory.pk if memory else memory_id,
            owner_agent_id=owner_agent_id,
        ).select_related("memory")  # for restore_target
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
        row.old_value = shown_text(before.get("value"))
        row.new_value = shown_text(after.get("value"))
        row.said_change, row.session_change = _when_changed(before, after)
        note = after.get("merged")
        row.merged_value = shown_text(note.get("value")) if isinstance(note, dict) else None
        row.merged_said = _merged_said(note, row.created_at) if merged and not row.damaged else None
        if renamed:
            row.old_key = shown_text(before.get("key")) or ""
            row.new_key = shown_text(after.get("key")) or row.key
        # A merge changed nothing: the state it shows is the one the change before it left.
        row.restorable = not row.damaged and not merged and _restore_changes(row, key, current)
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
        "back_url": tab_url(tab),
        "notes_of": notes_of,
    }


def _restore_changes(row: MemoryHistory, key: str, current: dict[str, Any] | None) -> bool:
    """Whether restoring `row` (memory_restore) writes back under this timeline's `key` and
    changes what is there now (`current`, the memory's snapshot; None when it has none).
    Where and what it writes is the service's rule (memory/services.py restore_target): a
    row of a memory that has another key now comes back under that key, so it is not
    offered here."""
    target_key, state = restore_target(row)
    if target_key != key or not isinstance(state, dict):
        return False
    return not same_state(current, {name: value for name, value in state.items() if name != "key"})


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


@login_required
@require_http_methods(["GET", "HEAD"])
def memory_history(request: HtmxHttpRequest, pk: int) -> TemplateResponse:
    memory = get_memory_for_user(request.user, pk)
    context = _history_context(request, memory.key, memory)
    return render_page(request, HISTORY_PAGE, context, partial="timeline")


@login_required
@require_http_methods(["GET", "HEAD"])
def history_detail(request: HtmxHttpRequest, history_id: int) -> TemplateResponse:
    row = get_history_for_user(request.user, history_id)
    memory = None
    if row.memory_id is not None:  # the memory it belongs to, under whatever key it has now
        memory = Memory.objects.filter(user=request.user, pk=row.memory_id).first()
    context = _history_context(request, row.key, memory, row.owner_agent_id, row.memory_id)
    return render_page(request, HISTORY_PAGE, context, partial="timeline")


@login_required
@require_http_methods(["POST"])
def history_restore(request: HtmxHttpRequest, history_id: int) -> HttpResponse:
    row = get_history_for_user(request.user, history_id)
    then = request.POST.get("then", "timeline")
    try:
        write = memory_restore(user=request.user, history_id=row.pk, actor=actor_of(request))
    except ServiceError as error:
        messages.error(request, error.message)
        return HttpResponseRedirect(reverse("pages:history_detail", args=[row.pk]))
    memory = write.memory
    note = f"Restored {memory.key}."
    if request.htmx:
        if then == "row" and memory.kind in ENTRY_KINDS:
            response = render_entry_row(request, memory, "Restored.")
            return announce_change(response, "entries-changed")
        if then == "trash":
            context = {"row": row, "restored": memory}
            return announce_change(
                render_page(request, DELETED_PAGE, context, partial="deleted_row")
            )
        context = {**_history_context(request, memory.key, memory), "note": note}
        return announce_change(render_page(request, HISTORY_PAGE, context, partial="timeline"))
    messages.success(request, note)
    if then == "row":
        return HttpResponseRedirect(tab_url("entries", f"#memory-{memory.pk}"))
    if then == "trash":
        return HttpResponseRedirect(reverse("pages:deleted_memories"))
    return HttpResponseRedirect(reverse("pages:memory_history", args=[memory.pk]))


def deleted_context(request: HtmxHttpRequest, bulk: BulkBox | None = None) -> dict[str, Any]:
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
    return render_page(request, DELETED_PAGE, deleted_context(request))
