"""Notes that look alike (memory/look_alike.py), from the Inbox's suggestion: each group
with its notes, merged (one kept, the others deleted as one undoable action) or left as
they are. An htmx request gets the group's outcome back in place of the group; a plain POST
redirects to the page with a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from activity.actors import Actor
from lib.errors import ServiceError
from lib.pages import HtmxHttpRequest, done, render_page
from memory.bulk import memory_merge_look_alikes
from memory.entries import look_alike_dismiss
from memory.look_alike import NOTES, look_alike_groups
from memory.selectors import memory_agent_names

if TYPE_CHECKING:
    from uuid import UUID

    from django.contrib.auth.models import AbstractBaseUser

    from memory.bulk import BulkResult
    from memory.look_alike import LookAlikeGroup

PAGE = "memory/look_alike.html"


@dataclass(frozen=True)
class Outcome:
    """What became of a group, shown in its place: `batch` offers the undo of a merge."""

    anchor: int  # the group's element id: look-alike-<anchor>
    note: str
    error: bool = False
    batch: UUID | None = None


def _page_url() -> str:
    return reverse("look_alike_notes")


def _page_context(user: AbstractBaseUser) -> dict[str, Any]:
    groups = look_alike_groups(user=user)
    _attach_who(user, groups)
    return {"groups": groups, "compared": NOTES}


def _attach_who(user: AbstractBaseUser, groups: list[LookAlikeGroup]) -> None:
    """Each note's `noted_by`: the agent that wrote it, when one did (else the system's)."""
    keys = [note.key for group in groups for note in group.notes]
    agents = memory_agent_names(user=user, keys=keys) if keys else {}
    for group in groups:
        for note in group.notes:
            note.noted_by = agents.get(note.key, "")


@login_required
@require_http_methods(["GET", "HEAD"])
def look_alike_page(request: HtmxHttpRequest) -> HttpResponse:
    return render_page(request, PAGE, _page_context(request.user))


def _posted_ids(request: HtmxHttpRequest) -> list[int] | None:
    raw = request.POST.getlist("ids")
    if not raw or not all(value.isdigit() for value in raw):
        return None
    return [int(value) for value in raw]


BAD_REQUEST = "That request could not be understood. Reload the page and try again."


@login_required
@require_http_methods(["POST"])
def look_alike_merge(request: HtmxHttpRequest) -> HttpResponse:
    """Keep the chosen note of a group and delete the others (memory_merge_look_alikes)."""
    ids, keep = _posted_ids(request), request.POST.get("keep", "")
    if ids is None or not keep.isdigit():
        return _answer(request, Outcome(0, BAD_REQUEST, error=True), status=400)
    anchor = min(ids)
    try:
        result = memory_merge_look_alikes(
            user=request.user, keep_id=int(keep), memory_ids=ids, actor=_actor(request)
        )
    except ServiceError as error:
        return _answer(request, Outcome(anchor, error.message, error=True))
    note, failed = _merge_note(result)
    return _answer(request, Outcome(anchor, note, error=failed, batch=result.batch))


def _merge_note(result: BulkResult) -> tuple[str, bool]:
    """ "Merged: 3 notes deleted, the one you chose kept." and whether any was refused."""
    done_count = len(result.done)
    parts = [
        f"Merged: {done_count} note{'s' if done_count != 1 else ''} deleted, "
        "the one you chose kept."
    ]
    if result.missing:
        parts.append(f"{result.missing} gone already.")
    parts.extend(row.message for row in result.refused)
    if done_count:
        parts.append("Undo brings them all back; each is also in Recently deleted.")
    return " ".join(parts), bool(result.refused)


@login_required
@require_http_methods(["POST"])
def look_alike_dismiss_view(request: HtmxHttpRequest) -> HttpResponse:
    """Leave a group as it is: not suggested again (look_alike_dismiss)."""
    ids = _posted_ids(request)
    if ids is None:
        return _answer(request, Outcome(0, BAD_REQUEST, error=True), status=400)
    try:
        look_alike_dismiss(user=request.user, memory_ids=ids, actor=_actor(request))
    except ServiceError as error:
        return _answer(request, Outcome(min(ids), error.message, error=True))
    note = "Left as they are; this group is not suggested again."
    return _answer(request, Outcome(min(ids), note))


def _actor(request: HtmxHttpRequest) -> Actor:
    return Actor.for_user(request.user)


def _answer(request: HtmxHttpRequest, outcome: Outcome, *, status: int = 200) -> HttpResponse:
    if request.htmx:
        return render_page(request, PAGE, {"outcome": outcome}, partial="outcome", status=status)
    if status != 200:
        context = {**_page_context(request.user), "page_error": outcome.note}
        return render_page(request, PAGE, context, status=status)
    if outcome.error:
        messages.error(request, outcome.note)
        return HttpResponseRedirect(_page_url())
    return done(request, outcome.note, _page_url())
