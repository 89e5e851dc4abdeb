"""The Context page's entry list: filtered, ENTRIES_PER_PAGE at a time, grouped by kind,
with the bulk form and, after a bulk action, what it did and its Undo. Shown by the Entries
tab (pages/views/context_page.py) and refreshed by the entry and bulk views
(pages/views/context_entries.py, pages/views/context_bulk.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.http import QueryDict

from lib.pages import HtmxHttpRequest
from memory.forms import KIND_LABELS, EntryBulkForm, EntryFilterForm
from memory.keys import ENTRY_KINDS
from memory.models import Memory
from memory.selectors import agents_with_notes, entry_counts_by_kind, entry_list, memory_batch
from pages.views.context_shared import BulkBox, annotate_memories, entries_url, kept_ids

ENTRIES_PER_PAGE = 50


@dataclass
class EntryGroup:
    kind: str
    label: str
    members: list[Memory]
    count: int  # of this kind among the entries listed, on every page
    continued: bool  # some of them are on the pages before this one


def _page_links(page: Page, params: dict[str, str]) -> list[dict[str, Any]]:
    """Links to the other pages of the list (a gap is a link without a url)."""
    links = []
    for number in page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1):
        if number == page.paginator.ELLIPSIS:
            links.append({"label": number, "url": ""})
        else:
            url = entries_url({**params, "page": str(number)})
            links.append({"label": number, "url": url, "current": number == page.number})
    return links


def entries_context(
    request: HtmxHttpRequest,
    params: QueryDict | None = None,
    *,
    bulk_form: EntryBulkForm | None = None,
    bulk: BulkBox | None = None,
) -> dict[str, Any]:
    """The entry list, filtered, ENTRIES_PER_PAGE at a time, grouped by kind, with the bulk
    form. `params` holds the filters and the page (the GET's, or a POST's hidden copies of
    them). Entries whose editor is open in the page (`kept_ids`) stay listed whatever the
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
        for element in kept_ids(request)
        if element.startswith("memory-") and element[len("memory-") :].isdigit()
    }
    if extra := kept - {memory.pk for memory in rows}:
        rows += list(
            Memory.objects.filter(user=user, key__contains=":", pk__in=extra).select_related(
                "owner_agent"
            )
        )
    annotate_memories(user, rows)
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
    # A tag typed otherwise than stored ("Morning Routine") filters by the stored one, and
    # the list says which (lib/tags.py).
    typed_tag = filter_form.cleaned_data["tag"].strip() if filter_form.is_valid() else ""
    return {
        "tag_typed": typed_tag if typed_tag.removeprefix("#") != filters["tag"] else "",
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
        "previous_url": entries_url({**filters, "page": str(page.number - 1)}),
        "next_url": entries_url({**filters, "page": str(page.number + 1)}),
        "list_url": entries_url(shown),
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
