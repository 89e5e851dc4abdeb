"""The Context page's Entries tab, one entry at a time: add, show, edit, pin, delete, and
move an agent's own note into the user's memory. The list itself is
pages/views/context_entry_list.py; many entries at once, pages/views/context_bulk.py."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from lib.errors import Conflict, ServiceError
from lib.pages import HtmxHttpRequest, add_service_error, done, render_page
from lib.tags import tags_note
from memory.entries import entry_create, memory_rename
from memory.forms import KIND_LABELS, EntryForm, local_day
from memory.models import Memory
from memory.notes import memory_share_note
from memory.outcomes import DuplicateMemory
from memory.services import memory_delete, memory_update
from pages.views.context_page import render_context_page
from pages.views.context_shared import (
    ENTRIES_CHANGED,
    PAGE,
    actor_of,
    annotate_memories,
    announce_change,
    credential_warning,
    done_with_warning,
    entries_url,
    get_entry_for_user,
    quoted,
    render_entry_row,
    tab_url,
    with_article,
)


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
                actor=actor_of(request),
                slug=form.cleaned_data["key"],
                tags=form.cleaned_data["tag_list"],
                occurred_at=form.cleaned_data["occurred_at"],
                session=form.cleaned_data["session"],
            )
        except DuplicateMemory as duplicate:  # this text is there already: nothing added
            return _entry_exists(request, duplicate.existing)
        except ServiceError as error:  # a bad or taken key, a refused text or tag
            add_service_error(form, error, EntryForm.SERVICE_FIELDS)
    if form.errors:
        if request.htmx:
            return render_page(request, PAGE, {"entry_form": form}, partial="entry_add")
        return render_context_page(request, tab="entries", status=400, entry_form=form)
    memory = write.memory
    note = f"Added {quoted(memory.value)} as {with_article(KIND_LABELS[memory.kind].lower())}."
    note = " ".join(filter(None, [note, tags_note(form.cleaned_data["tag_list"])]))
    warning = credential_warning(write)
    if request.htmx:
        context = {"entry_form": EntryForm(user=user), "entry_note": note, "entry_warning": warning}
        response = render_page(request, PAGE, context, partial="entry_add")
        return announce_change(response, ENTRIES_CHANGED)
    return done_with_warning(request, note, tab_url("entries", f"#memory-{memory.pk}"), warning)


def _entry_exists(request: HtmxHttpRequest, existing: Memory) -> HttpResponse:
    """The answer to adding an entry the user has already: nothing was added, and where the
    one that says it is (the Entries tab filtered to its key, which lists it whichever page
    of 50 it is on)."""
    url = f"{entries_url({'q': existing.key})}#memory-{existing.pk}"
    if request.htmx:
        context = {
            "entry_form": EntryForm(user=request.user),
            "entry_existing": existing,
            "entry_existing_url": url,
        }
        return render_page(request, PAGE, context, partial="entry_add")
    return done(request, f"You have {quoted(existing.value)} already; nothing was added.", url)


@login_required
@require_http_methods(["GET", "HEAD"])
def entry_row(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    memory = get_entry_for_user(request.user, pk)
    if not request.htmx:
        return HttpResponseRedirect(tab_url("entries", f"#memory-{memory.pk}"))
    return render_entry_row(request, memory)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def entry_edit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    user = request.user
    memory = get_entry_for_user(user, pk)
    annotate_memories(user, [memory])
    if request.method != "POST":
        memory.edit_form = EntryForm(user=user, memory=memory)
        if request.htmx:
            return render_page(request, PAGE, {"memory": memory}, partial="entry_edit")
        return render_context_page(request, tab="entries", editing=memory)
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
                    user=user, key=memory.key, new_key=f"{kind}:{slug}", actor=actor_of(request)
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
                    actor=actor_of(request),
                    owner_agent=memory.owner_agent,
                    **changes,
                )
                memory, saved = write.memory, True
                warning = credential_warning(write)
            except ServiceError as error:
                add_service_error(form, error, EntryForm.SERVICE_FIELDS)
    events = (ENTRIES_CHANGED,) if renamed else ()  # the list regroups it under its kind
    if form.errors:
        annotate_memories(user, [memory])
        memory.edit_form = form
        if request.htmx:
            response = render_page(request, PAGE, {"memory": memory}, partial="entry_edit")
            return announce_change(response, *events) if renamed else response
        return render_context_page(request, tab="entries", status=400, editing=memory)
    now = f"now {with_article(KIND_LABELS[memory.kind].lower())}"
    if renamed:
        note = f"Saved; {now}." if saved else f"{now.capitalize()}."
    else:
        note = "Saved." if saved else "No change."
    # What became of typed tags ("saved as #morning-routine"), once something was saved.
    tagged = tags_note(form.cleaned_data["tag_list"]) if saved else ""
    if request.htmx:
        response = render_entry_row(
            request, memory, " ".join(filter(None, [note, tagged])), warning
        )
        return announce_change(response, *events) if saved or renamed else response
    flash = " ".join(filter(None, [f"{note[:-1]}: {quoted(memory.value)}.", tagged]))
    return done_with_warning(request, flash, tab_url("entries", f"#memory-{pk}"), warning)


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
    memory = get_entry_for_user(request.user, pk)
    pinned = request.POST.get("pinned", "1") == "1"
    memory = memory_update(
        user=request.user,
        key=memory.key,
        actor=actor_of(request),
        pinned=pinned,
        owner_agent=memory.owner_agent,
    ).memory
    note = "Pinned." if pinned else "Unpinned."
    if request.htmx:
        return announce_change(render_entry_row(request, memory, note))
    flash = f"{note[:-1]} {quoted(memory.value)}."
    return done(request, flash, tab_url("entries", f"#memory-{pk}"))


@login_required
@require_http_methods(["POST"])
def entry_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    memory = get_entry_for_user(request.user, pk)
    history = memory_delete(
        user=request.user, key=memory.key, actor=actor_of(request), owner_agent=memory.owner_agent
    )
    if request.htmx:
        context = {"deleted": history, "row_id": pk, "quoted": quoted(memory.value)}
        return announce_change(render_page(request, PAGE, context, partial="entry_deleted"))
    messages.success(request, f"Deleted {quoted(memory.value)}.")
    return HttpResponseRedirect(f"{reverse('pages:context')}?tab=entries&undo={history.pk}")


@login_required
@require_http_methods(["POST"])
def note_share(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """An agent's own note, "Move into my memory" (memory_share_note): it becomes the
    user's memory under its key. A key the user's memory has already leaves the note as it
    is, and says so in its row."""
    note = get_entry_for_user(request.user, pk)
    if note.owner_agent_id is None:
        raise Http404("Not an agent's note.")
    try:
        memory = memory_share_note(user=request.user, memory_id=pk, actor=actor_of(request)).memory
    except Conflict as error:
        if request.htmx:
            return render_entry_row(request, note, "Not moved.", error.message)
        messages.error(request, error.message)
        return HttpResponseRedirect(entries_url({"agent": note.owner_agent.name}))
    moved = f"Moved {quoted(memory.value)} into your memory."
    if request.htmx:
        # The row says where it went, in place: refreshing the list would take that away.
        context = {"row_id": pk, "moved": moved, "memory": memory}
        return announce_change(render_page(request, PAGE, context, partial="note_moved"))
    return done(request, moved, tab_url("entries", f"#memory-{memory.pk}"))
