"""The search box: one query across the user's memory entries and documents.

A page over two layers, so it lives in pages/ (the search engine below both layers knows
neither). At /search/.

GET /search/?q=… is a page of its own (linkable, works without JavaScript). A query that
matches nothing in words and little in meaning finds nothing ("No matches"); the page then
offers what was closest anyway, on request (&closest=1). The same box
sits on the Context page; there htmx asks for just the results region on each pause in
typing. Each one is a search_everything: one row in the user's stats, and no hit counts as
a use (the user looking is not the assistant using it). An empty query shows nothing; a bad
one (too long) says why, next to the box, with status 400 for a plain request (an htmx swap
needs a 200 to show it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from context.search import DocumentHit, search_everything
from context.selectors import scope_of_row
from context.workspace import reads_global_scope
from lib.errors import InvalidInput
from lib.pages import HtmxHttpRequest, render_page
from memory.keys import ENTRY_KINDS
from memory.occurrence import said_worth_showing
from search.ranking import HIGHLIGHT_END, HIGHLIGHT_START, Ranks

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.template.response import TemplateResponse

    from memory.search import MemoryHit

PAGE = "pages/search.html"
RESULTS_PARTIAL = "results"
RESULT_LIMIT = 10  # of each kind
_HIGHLIGHTED = re.compile(f"{re.escape(HIGHLIGHT_START)}(.*?){re.escape(HIGHLIGHT_END)}", re.DOTALL)


def highlight(snippet: str) -> SafeString:
    """Escape the snippet, then turn the service's highlight markers into <mark>.

    The markers are private-use characters that escape() leaves alone, so they survive
    escaping; a stray, unpaired marker is dropped, and touching marks (QX, -88213) join.
    """
    marked = _HIGHLIGHTED.sub(r"<mark>\1</mark>", escape(snippet)).replace("</mark><mark>", "")
    return mark_safe(marked.replace(HIGHLIGHT_START, "").replace(HIGHLIGHT_END, ""))  # noqa: S308


@dataclass(frozen=True)
class MemoryResult:
    hit: MemoryHit
    url: str
    how: str  # "words #1 · meaning #3"
    why: str  # the same spelled out, with the score
    said_shown: bool  # the day it was said is worth showing (memory/occurrence.py)


@dataclass(frozen=True)
class DocumentResult:
    hit: DocumentHit
    scope_label: str
    url: str
    snippet: SafeString
    how: str
    why: str


def _how(ranks: Ranks) -> str:
    parts = []
    if ranks.keyword_rank is not None:
        parts.append(f"words #{ranks.keyword_rank}")
    if ranks.vector_rank is not None:
        parts.append(f"meaning #{ranks.vector_rank}")
    return " · ".join(parts)


def _why(ranks: Ranks, score: float, factors: str) -> str:
    sides = []
    if ranks.keyword_rank is not None:
        sides.append(f"by its words (rank {ranks.keyword_rank})")
    if ranks.vector_rank is not None:
        sides.append(f"by meaning (rank {ranks.vector_rank})")
    blend = (
        f"{settings.MNEMO_SEARCH_VECTOR_WEIGHT:g} × meaning {ranks.vector:.2f} + "
        f"{settings.MNEMO_SEARCH_KEYWORD_WEIGHT:g} × words {ranks.keyword:.2f}"
    )
    return (
        f"Found {' and '.join(sides)}; score {score:.4f} = fused {ranks.fused:.4f} "
        f"({blend}) {factors}"
    )


def _memory_url(hit: MemoryHit) -> str:
    """Where the memory lives on the Context page: its tab, scrolled to its row."""
    memory = hit.memory
    context = reverse("pages:context")
    if memory.kind in ENTRY_KINDS:
        return f"{context}?tab=entries#memory-{memory.pk}"
    if memory.kind == "style":
        return f"{context}?tab=styles#style-{memory.key.split('_', 1)[1]}"
    return f"{context}?tab=profile#profile-{memory.key}"


def _memory_result(hit: MemoryHit) -> MemoryResult:
    factors = f"× freshness {hit.freshness:.3f} × use {hit.use_factor:.3f}"
    memory = hit.memory
    return MemoryResult(
        hit=hit,
        url=_memory_url(hit),
        how=_how(hit.ranks),
        why=_why(hit.ranks, hit.score, factors),
        said_shown=said_worth_showing(memory.occurred_at, memory.created_at),
    )


def _document_result(user: AbstractBaseUser, hit: DocumentHit) -> DocumentResult:
    scope = scope_of_row(user=user, row=hit.chunk.document)
    return DocumentResult(
        hit=hit,
        scope_label=scope.label,
        url=reverse("pages:document", args=[scope.key, hit.path]),
        snippet=highlight(hit.snippet),
        how=_how(hit.ranks),
        why=_why(hit.ranks, hit.score, f"× freshness {hit.freshness:.3f}"),
    )


def _results(user: AbstractBaseUser, query: str, *, closest: bool) -> dict[str, Any]:
    """Both kinds of results, as the page shows them (with `closest`, the nearest even
    below the relevance floor). Raises InvalidInput for a bad query."""
    found = search_everything(
        user=user,
        query=query,
        limit=RESULT_LIMIT,
        include_global=reads_global_scope(user),
        closest=closest,
    )
    return {
        "memory_results": [_memory_result(hit) for hit in found.memories],
        "document_results": [_document_result(user, hit) for hit in found.documents],
    }


def _on_search_page(request: HtmxHttpRequest) -> bool:
    """False for the box on the Context page, whose results then offer a link to this page."""
    if not request.htmx:
        return True
    current = request.htmx.current_url_abs_path or ""
    return current.split("?", 1)[0] == reverse("pages:search")


@login_required
@require_http_methods(["GET", "HEAD"])
@vary_on_headers("HX-Request")
def search_page(request: HtmxHttpRequest) -> TemplateResponse:
    query = request.GET.get("q", "")
    closest = request.GET.get("closest") == "1"
    context: dict[str, Any] = {
        "q": query,
        "closest": closest,
        "searched": False,
        "error": "",
        "nav_section": "context",
        "on_search_page": _on_search_page(request),
    }
    status = 200
    if query.strip():
        try:
            context.update(_results(request.user, query, closest=closest), searched=True)
        except InvalidInput as error:
            context["error"] = error.message
            # htmx leaves a 4xx response unswapped; it gets the message with a 200.
            status = 200 if request.htmx else 400
    return render_page(request, PAGE, context, partial=RESULTS_PARTIAL, status=status)
