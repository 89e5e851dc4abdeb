"""What the Context page's parts share (pages/views/context_page.py and the modules of
its tabs, history and recently deleted): the page's template and tab links, the lookups of
the user's memories and history rows, the htmx event that refreshes the preview, the ids
kept across a refresh, how a memory is shown (its origin, a short quote, a stored state's
text; an import's tool, portability/origins.py), the credential warning after a save, and
the entry list's address.

Nothing typed is lost when a region is swapped: static/js/unsaved.js asks before a tab
switch or leaving the page with unsaved edits, and sends the ids of open entry editors and
of edited style rows inside a region it refreshes in the `Mnemo-Keep` header; the region is
rendered with `hx-preserve` on those ids, so htmx keeps the live elements, typing included
(`kept_ids`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.text import Truncator

from activity.actors import Actor, ActorKind
from lib.credentials import saved_warning
from lib.pages import HtmxHttpRequest, Who, done, render_page
from memory.forms import KIND_LABELS
from memory.keys import ENTRY_KINDS
from memory.models import MAX_VALUE_LENGTH, Memory, MemoryHistory, Source
from memory.occurrence import said_worth_showing
from memory.outcomes import MemoryWrite
from memory.selectors import MemoryBatch, memory_agent_names, memory_list
from portability.origins import changes_imported_from, imported_who, memories_imported_from

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


PAGE = "pages/context.html"
TABS = {"profile": "Profile", "styles": "Styles", "entries": "Entries"}
MEMORY_CHANGED = "memory-changed"
ENTRIES_CHANGED = "entries-changed"
KEEP_HEADER = "Mnemo-Keep"
QUOTE_CHARS = 60
LIST_PARAMS = (
    "agent",
    "kind",
    "tag",
    "q",
    "page",
)  # what the entry list shows, kept across changes


def get_memory_for_user(user: AbstractBaseUser, pk: int) -> Memory:
    return get_object_or_404(Memory.objects.select_related("owner_agent"), user=user, pk=pk)


def get_entry_for_user(user: AbstractBaseUser, pk: int) -> Memory:
    memory = get_memory_for_user(user, pk)
    if memory.kind not in ENTRY_KINDS:
        raise Http404("Not an entry.")
    return memory


def get_history_for_user(user: AbstractBaseUser, history_id: int) -> MemoryHistory:
    return get_object_or_404(
        MemoryHistory.objects.select_related("actor_user", "actor_agent"),
        user=user,
        pk=history_id,
    )


def actor_of(request: HtmxHttpRequest) -> Actor:
    return Actor.for_user(request.user)


def tab_url(tab: str, anchor: str = "") -> str:
    return f"{reverse('pages:context')}?tab={tab}{anchor}"


def context_tab_links() -> list[dict[str, Any]]:
    """The Context page's tab nav. Profile, Styles and Entries swap in place with htmx;
    Documents is its own page (pages/views/documents.py) that shows the same nav."""
    tabs: list[dict[str, Any]] = [
        {"name": name, "label": label, "url": tab_url(name), "htmx": True}
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


def announce_change(response: HttpResponse, *events: str) -> HttpResponse:
    """Tell the page (the preview, the entry list) that memory changed."""
    response.headers["HX-Trigger"] = ", ".join((MEMORY_CHANGED, *events))
    return response


def kept_ids(request: HtmxHttpRequest) -> set[str]:
    """The ids of elements with unsaved typing inside the region an htmx request refreshes
    (open entry editors, edited style rows), sent by static/js/unsaved.js. The region marks
    them `hx-preserve`, so htmx keeps the live elements instead of the fresh ones."""
    if not request.htmx:
        return set()
    return {part for part in request.headers.get(KEEP_HEADER, "").split() if len(part) <= 100}


def quoted(text: str) -> str:
    """An entry's text as a short quote for notes and accessible names."""
    return f"“{Truncator(' '.join(text.split())).chars(QUOTE_CHARS)}”"


def joined_with_and(words: list[str]) -> str:
    """The words as a sentence lists them: "name, role and timezone"."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def with_article(word: str) -> str:
    """The word after its indefinite article: "an event", "a fact"."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def annotate_memories(user: AbstractBaseUser, memories: list[Memory]) -> list[Memory]:
    """Attach where each memory came from (stated by the user, or noted by which agent), its
    kind as a word, its text as a short quote, and whether the day it was said is worth
    showing."""
    noted = [
        memory.key
        for memory in memories
        if memory.source != Source.USER_STATED and memory.owner_agent_id is None
    ]
    agents = memory_agent_names(user=user, keys=noted) if noted else {}
    imported = (
        memories_imported_from(
            user=user,
            memory_ids=[m.pk for m in memories if m.source == Source.TP_EXTRACTED],
        )
        if noted
        else {}
    )
    for memory in memories:
        memory.kind_label = KIND_LABELS.get(memory.kind, "")
        memory.quoted = quoted(memory.value)
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
        elif memory.pk in imported:  # another tool's memory, imported: say which tool
            memory.origin_kind = "system"
            memory.origin_label = f"imported from {imported[memory.pk]}"
        elif memory.source == Source.DOCUMENT:
            memory.origin_kind, memory.origin_label = "agent", "promoted from a document"
        else:
            memory.origin_kind, memory.origin_label = "agent", "noted by an agent"
    return memories


def name_imports(request: HtmxHttpRequest, rows: list[MemoryHistory]) -> None:
    """History rows that an import of another tool wrote say where it came from ("an import
    from ChatGPT") rather than "system"; call after setting each row's `who`."""
    system = [row.pk for row in rows if row.actor_type == ActorKind.SYSTEM]
    tools = changes_imported_from(user=request.user, history_ids=system) if system else {}
    for row in rows:
        if row.pk in tools:
            row.who = Who(ActorKind.SYSTEM, *imported_who(tools[row.pk]))


def shown_text(value: object) -> str | None:
    """A stored state's text as the history page shows it: text only, and no longer than a
    value may be (a damaged row may hold anything)."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_VALUE_LENGTH else value[:MAX_VALUE_LENGTH] + "…"


def memories_by_key(user: AbstractBaseUser, kind: str = "style") -> dict[str, Memory]:
    return {memory.key: memory for memory in memory_list(user=user, kind=kind)}


def render_entry_row(
    request: HtmxHttpRequest, memory: Memory, note: str = "", warning: str = ""
) -> HttpResponse:
    annotate_memories(request.user, [memory])
    memory.note, memory.warning = note, warning
    return render_page(request, PAGE, {"memory": memory}, partial="entry_row")


def credential_warning(*writes: MemoryWrite) -> str:
    """What the page says when the user saved what looks like a credential: agents may
    not store one (memory/services.py refuses them), the user may, and should know their
    agents will read it."""
    credential = next(filter(None, (write.credential for write in writes)), None)
    return saved_warning(credential) if credential is not None else ""


def done_with_warning(
    request: HtmxHttpRequest, message: str, url: str, warning: str
) -> HttpResponse:
    """done(), with the credential warning as a second flash."""
    response = done(request, message, url)
    if warning:
        messages.warning(request, warning)
    return response


@dataclass
class BulkBox:
    """What the entry list says above it after a bulk action: the note, and the batch an
    Undo button undoes (or, after a plain POST's redirect, the batch alone: the flash has
    the note)."""

    note: str = ""
    error: bool = False
    batch: uuid.UUID | None = None
    offer: MemoryBatch | None = None


def entries_url(params: QueryDict | dict[str, str], **extra: object) -> str:
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


def list_params_from(data: QueryDict) -> QueryDict:
    """The entry list's filters and page from a form's hidden copies of them."""
    params = QueryDict(mutable=True)
    for name in LIST_PARAMS:
        if data.get(name):
            params[name] = data[name]
    return params
