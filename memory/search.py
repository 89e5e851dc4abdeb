"""Searching one user's memories: the search engine's fused ranks (search/ranking.py),
nudged by use and freshness.

score = fused * freshness * use, where both factors are bounded (search/ranking.py):

- use, in [1, 1 + MNEMO_SEARCH_USE_NUDGE], grows with log(1 + access_count) and stops
  growing at USES_AT_FULL_NUDGE uses: a memory agents keep finding wins a near tie,
  never over a clearly better match;
- freshness, in [1 - MNEMO_SEARCH_AGE_NUDGE, 1], fades with the time since the memory last
  changed, except for what the user stated (Source.USER_STATED), which never fades.

With the default nudges (0.05 each, at most 0.1 by the settings' checks) the two together
move a score by at most ±10%. Age raises the bar instead of lowering a match: an
agent-noted memory that has not changed for MNEMO_SEARCH_AGE_BAR_DAYS needs a similarity
MNEMO_SEARCH_AGE_BAR above the model's row floor (less, in proportion, when younger) to be
returned by meaning; found by its words it is returned as any other.

An agent's search counts the returned memories as used and logs the search, in one
statement (memory/uses.py memory_count_uses).
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from lib.tags import normalize_tag
from memory.models import Memory, Source
from memory.selectors import of_kind, user_zone
from memory.uses import memory_count_uses
from memory.visibility import readable_memories
from search.models import SearchTool
from search.periods import Period, find_period, without_period
from search.ranking import (
    Floor,
    Ranks,
    check_query,
    episode_lift,
    floor_for,
    freshness,
    fuse,
    query_vector_soon,
    resolved,
    use_factor,
)
from search.services import SearchLogRow

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent
    from search.ranking import PendingVector, QueryVector

UTC = ZoneInfo("UTC")

# The embedder_role of the memory source (memory/apps.py registers it).
MEMORY_ROLE = "memories"

# A memory whose occurred_at falls in the period the query names scores this much more
# (a factor 1 + PERIOD_BONUS). Calibration: bench/README.md, "Time and conversations".
PERIOD_BONUS = 0.2


@dataclass(frozen=True)
class RankedMemory:
    pk: int
    score: float
    ranks: Ranks
    freshness: float  # in [1 - AGE_NUDGE, 1]; 1 for what the user stated
    use_factor: float  # in [1, 1 + USE_NUDGE]


@dataclass(frozen=True)
class MemoryHit:
    memory: Memory
    score: float  # ranks.fused * freshness * use_factor
    ranks: Ranks
    freshness: float
    use_factor: float


def search_memory(
    *,
    user: AbstractBaseUser,
    query: str,
    limit: int = 10,
    kind: str | None = None,
    tags: list[str] | None = None,
    agent: Agent | None = None,
) -> list[MemoryHit]:
    """The memories best matching the query, for an agent: of the user's memory what its
    read rule lets it read, and its own notes (memory/visibility.py; no agent: the user's
    memory). The hits count as a use (access_count and last_accessed_at), and the search
    is logged."""
    started = time.perf_counter()
    query, limit = check_query(query, limit)
    ranked = rank_memories(
        user=user,
        query=query,
        vector=query_vector_soon(query, MEMORY_ROLE, user_id=user.pk),
        limit=limit,
        kind=kind,
        tags=tags,
        agent=agent,
    )
    used = memory_count_uses(
        user=user,
        memory_ids=[row.pk for row in ranked],
        search=SearchLogRow.since(user, SearchTool.SEARCH_MEMORY, started),
    )
    return memory_hits(ranked, used)


def rank_memories(
    *,
    user: AbstractBaseUser,
    query: str,
    vector: QueryVector | PendingVector | None,
    limit: int,
    kind: str | None = None,
    tags: list[str] | None = None,
    closest: bool = False,
    agent: Agent | None = None,
) -> list[RankedMemory]:
    """The best `limit` of the memories `agent` may read (no agent: the user's memory),
    best first, with the parts of their score; with `closest`, whatever was nearest even
    below the relevance floor. Reads, changes nothing."""
    rows = of_kind(readable_memories(user=user, agent=agent), kind)
    if tags:
        # Typed as tags are stored (lib/tags.py): "Morning Routine" is #morning-routine.
        rows = rows.filter(tags__contains=[normalize_tag(tag) for tag in tags])
    now = timezone.now()
    period = _named_period(user, query, now)
    # Each side also reads what the ranking needs, so no candidate is fetched again.
    fused, (updated_at, access_count, source, occurred_at, session) = fuse(
        rows,
        query,
        vector,
        "updated_at",
        "access_count",
        "source",
        "occurred_at",
        "session",
        closest=closest,
        keyword_query=without_period(query, period) if period else None,
    )
    floor = floor_for(resolved(vector), query)
    ranked = []
    for pk, ranks in fused.items():
        stated = source[pk] == Source.USER_STATED
        if not (closest or stated or _clears_age_bar(ranks, now - updated_at[pk], floor)):
            continue
        fresh = freshness(now - updated_at[pk], fades=not stated)
        use = use_factor(access_count[pk])
        dated = period is not None and period.start <= occurred_at[pk] < period.end
        score = ranks.fused * fresh * use * (1 + PERIOD_BONUS * dated)
        ranked.append(RankedMemory(pk, score, ranks, fresh, use))
    lifted = episode_lift({row.pk: row.score for row in ranked}, session)
    ranked = [replace(row, score=lifted[row.pk]) for row in ranked]
    ranked.sort(key=lambda row: (-row.score, row.pk))
    return ranked[:limit]


def _named_period(user: AbstractBaseUser, query: str, now: datetime.datetime) -> Period | None:
    """The period the query names, in the user's time zone. Whether a query names one does
    not depend on the zone (only where its bounds fall), so the zone, one more statement,
    is read only for a query that names one."""
    if find_period(query, now=now, zone=UTC) is None:
        return None
    return find_period(query, now=now, zone=user_zone(user))


def _clears_age_bar(ranks: Ranks, age: datetime.timedelta, floor: Floor) -> bool:
    """Is an agent-noted memory of this age close enough to the query? Found by its words
    it is; by meaning, its similarity must clear the row floor raised by the age bar."""
    if ranks.keyword_rank is not None:
        return True
    days = max(age.total_seconds(), 0) / 86400
    bar = settings.MNEMO_SEARCH_AGE_BAR * min(days / settings.MNEMO_SEARCH_AGE_BAR_DAYS, 1.0)
    return ranks.similarity is not None and ranks.similarity >= floor.raised(bar).row


def memory_hits(ranked: list[RankedMemory], memories: dict[int, Memory]) -> list[MemoryHit]:
    """The ranked memories as hits, leaving out any deleted since it was ranked."""
    return [
        MemoryHit(memories[row.pk], row.score, row.ranks, row.freshness, row.use_factor)
        for row in ranked
        if row.pk in memories
    ]
