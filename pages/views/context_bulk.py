"""The Context page's entry list, many entries at once: the bulk form's delete, re-tag,
pin and unpin (memory/bulk.py), undoing a bulk action, and "Delete all my memories"."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from lib.errors import NotFound, ServiceError
from lib.pages import HtmxHttpRequest, add_service_error, done, render_page
from lib.tags import tags_note
from memory.bulk import (
    BulkAction,
    BulkResult,
    memory_batch_undo,
    memory_bulk_delete,
    memory_bulk_pin,
    memory_bulk_tag,
    memory_delete_all,
)
from memory.forms import DELETE_ALL_PHRASE, DeleteAllForm, EntryBulkForm
from memory.selectors import memory_counts
from pages.views.context_entry_list import entries_context
from pages.views.context_history import DELETED_PAGE, deleted_context
from pages.views.context_page import render_context_page
from pages.views.context_shared import (
    PAGE,
    BulkBox,
    actor_of,
    announce_change,
    entries_url,
    list_params_from,
)

DELETE_ALL_PAGE = "pages/memory_delete_all.html"


REFUSALS_SHOWN = 5


@login_required
@require_http_methods(["POST"])
def entries_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """The entry list's bulk form: delete, re-tag, pin or unpin the selected entries
    (memory/bulk.py, a history row and an event per entry, one batch to undo). The list
    comes back as it was shown (filters and page, from the form's hidden copies) with what
    happened above it; without htmx, the redirect to it does."""
    params = list_params_from(request.POST)
    form = EntryBulkForm(request.POST)
    result = None
    if form.is_valid():
        try:
            result = _bulk_apply(request, form.cleaned_data)
        except ServiceError as error:  # refused as a whole: nothing was written
            add_service_error(form, error)
    if result is None:
        if request.htmx:
            context = entries_context(request, params, bulk_form=form)
            return render_page(request, PAGE, context, partial="entry_list")
        return render_context_page(
            request, tab="entries", status=400, bulk_form=form, list_params=params
        )
    note = _bulk_note(result)
    if form.cleaned_data["action"] == "tag_add":  # "'Morning Routine' saved as #morning-routine"
        note = " ".join(filter(None, [note, tags_note(form.cleaned_data["tag_list"])]))
    if request.htmx:
        box = BulkBox(note=note, error=not result.done and bool(result.refused), batch=result.batch)
        response = render_page(
            request, PAGE, entries_context(request, params, bulk=box), partial="entry_list"
        )
        return announce_change(response) if result.done else response
    extra = {"batch": result.batch} if result.batch else {}
    return done(request, note, entries_url(params, **extra))


def _bulk_apply(request: HtmxHttpRequest, cleaned: dict[str, Any]) -> BulkResult:
    user, actor, ids = request.user, actor_of(request), cleaned["selected"]
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
    params = list_params_from(request.POST)
    try:
        result = memory_batch_undo(user=request.user, batch=batch, actor=actor_of(request))
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
                request, DELETED_PAGE, deleted_context(request, box), partial="trash"
            )
        else:
            context = entries_context(request, params, bulk=box)
            response = render_page(request, PAGE, context, partial="entry_list")
        return announce_change(response) if changed else response
    if error_note:
        messages.error(request, note)
    else:
        messages.success(request, note)
    if then == "trash":
        return HttpResponseRedirect(reverse("pages:deleted_memories"))
    return HttpResponseRedirect(entries_url(params))


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def delete_all(request: HtmxHttpRequest) -> HttpResponse:
    """Delete all my memories: profile, styles and entries (memory_delete_all), behind a
    typed confirmation; one Undo brings them all back for MNEMO_UNDO_DAYS days.

    What was deleted is said once, beside its Undo: in the entry list's box (the batch's
    offer), which the page opens at. Its Undo replaces the box with what was put back."""
    form = DeleteAllForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        result = memory_delete_all(user=request.user, actor=actor_of(request))
        if not result.batch:  # nothing was deleted: nothing to undo
            return done(request, _bulk_note(result), entries_url({}))
        return HttpResponseRedirect(f"{entries_url({}, batch=result.batch)}#bulk-result")
    context = {
        "form": form,
        "counts": memory_counts(user=request.user),
        "phrase": DELETE_ALL_PHRASE,
        "days": settings.MNEMO_UNDO_DAYS,
    }
    return render_page(request, DELETE_ALL_PAGE, context, status=400 if form.errors else 200)
