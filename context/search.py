"""Searching documents, and the one search of both layers, memories and documents together,
that the search box and `ask_memory` share (`search_everything`).

The engine (search/ranking.py) ranks the chunk rows a caller may read, as
context/workspace.py says; a document is found by its best chunk, its score the chunk's
fused score * freshness (bounded, search/ranking.freshness, by the time since the document
last changed; documents have no use factor).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Q
from django.utils import timezone

from context.models import DocumentChunk
from context.services import PROFILE_PATH
from context.workspace import readable_scope, under_prefix
from memory.models import Memory
from memory.search import MEMORY_ROLE, MemoryHit, memory_hits, rank_memories, search_memory
from search.models import SearchTool
from search.ranking import (
    Ranks,
    check_query,
    freshness,
    fuse,
    headline,
    query_vector_soon,
    query_vectors_soon,
)
from search.services import search_log

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent
    from search.ranking import PendingVector, QueryVector

# The embedder_role of the document source (context/apps.py registers it).
DOCUMENT_ROLE = "documents"


@dataclass(frozen=True)
class DocumentHit:
    chunk: DocumentChunk
    path: str
    scope: str
    snippet: str  # with HIGHLIGHT_START/END around matched words
    score: float  # ranks.fused * freshness
    ranks: Ranks
    freshness: float


def search_documents(
    *,
    user: AbstractBaseUser | None,
    query: str,
    limit: int = 10,
    path_prefix: str = "",
    agent: Agent | None = None,
    include_global: bool = False,
    scope: str | None = None,
) -> list[DocumentHit]:
    """The best chunk of each best-matching document an agent (or, with user=None, a
    system token: the global scope only) may read: its user's own, its private notes and
    its user's granted scopes, or only the one `scope` names (context/workspace.py); not
    the consolidated profile, USER_MEMORY.md. Logged (for the user's stats)."""
    started = time.perf_counter()
    query, limit = check_query(query, limit)
    readable = readable_scope(
        user=user,
        agent=agent,
        include_global=include_global,
        scope=scope,
        path_field="document__path",
    )
    if path_prefix:
        readable &= under_prefix(path_prefix, agent, path_field="document__path")
    # The consolidated profile is in every system prompt already (briefing/system_prompt.py):
    # as a result it would hand an agent the whole profile again. The search box keeps it.
    readable &= ~Q(
        document__user__isnull=False, document__agent__isnull=True, document__path=PROFILE_PATH
    )
    # A system token's search (no user) reads the global scope only: its own vectors, 0.
    vector = query_vector_soon(query, DOCUMENT_ROLE, user_id=0 if user is None else user.pk)
    hits = _document_hits(readable, query, vector, limit)
    search_log(user=user, tool=SearchTool.MEMORY_SEARCH, started=started, results=len(hits))
    return hits


@dataclass(frozen=True)
class BothLayers:
    """What one search of both layers found, each layer's hits best first."""

    memories: list[MemoryHit]
    documents: list[DocumentHit]


def search_everything(
    *,
    user: AbstractBaseUser,
    query: str,
    limit: int = 10,
    include_global: bool = False,
    closest: bool = False,
    agent: Agent | None = None,
    document_limit: int | None = None,
) -> BothLayers:
    """The one search of both layers: the memories and the documents best matching the
    query, at most `limit` memories and `document_limit` (default `limit`) documents.

    Who reads decides what is found, what counts and what is logged:
    - the user, through the search box (no `agent`): their memories and documents, their
      agents' private notes and their granted scopes included, with one query embedding
      per model and one log row. Looking is not using: the hits' access counts (which rank
      the working memory) stay as they are. `closest` shows what was nearest even below
      the relevance floor (the page's "show the closest").
    - an agent, through `ask_memory` (briefing/ask.py): exactly what its own tools would
      find, `search_memory` (memory/search.py) and `memory_search` (`search_documents`),
      each logged as its tool's, and the memories found count as used, as after a search
      of its own (the agent uses them, through the answer)."""
    document_limit = limit if document_limit is None else document_limit
    if agent is not None:
        return BothLayers(
            memories=search_memory(user=user, agent=agent, query=query, limit=limit),
            documents=search_documents(
                user=user,
                agent=agent,
                include_global=include_global,
                query=query,
                limit=document_limit,
            ),
        )
    started = time.perf_counter()
    query, limit = check_query(query, limit)
    query, document_limit = check_query(query, document_limit)
    vectors = query_vectors_soon(query, [MEMORY_ROLE, DOCUMENT_ROLE], user_id=user.pk)
    ranked = rank_memories(
        user=user, query=query, vector=vectors[MEMORY_ROLE], limit=limit, closest=closest
    )
    scope = readable_scope(
        user=user, all_agents=True, include_global=include_global, path_field="document__path"
    )
    results = BothLayers(
        memories=memory_hits(ranked, Memory.objects.in_bulk([row.pk for row in ranked])),
        documents=_document_hits(
            scope, query, vectors[DOCUMENT_ROLE], document_limit, closest=closest
        ),
    )
    found = len(results.memories) + len(results.documents)
    search_log(user=user, tool=SearchTool.PAGE, started=started, results=found)
    return results


def _document_hits(
    scope: Q,
    query: str,
    vector: QueryVector | PendingVector | None,
    limit: int,
    *,
    closest: bool = False,
) -> list[DocumentHit]:
    fused, _ = fuse(DocumentChunk.objects.filter(scope), query, vector, closest=closest)
    rows = (
        DocumentChunk.objects.filter(pk__in=list(fused))
        .select_related("document", "document__shared_scope")
        .annotate(snippet=headline(query, "text"))
    )
    now = timezone.now()
    best: dict[int, DocumentHit] = {}
    for chunk in rows:
        ranks = fused[chunk.pk]
        fresh = freshness(now - chunk.document.updated_at)
        hit = DocumentHit(
            chunk=chunk,
            path=chunk.document.path,
            scope=chunk.document.scope,
            snippet=chunk.snippet,
            score=ranks.fused * fresh,
            ranks=ranks,
            freshness=fresh,
        )
        current = best.get(chunk.document_id)
        if current is None or hit.score > current.score:
            best[chunk.document_id] = hit
    return sorted(best.values(), key=lambda hit: (-hit.score, hit.path))[:limit]
