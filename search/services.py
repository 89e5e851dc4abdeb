"""The search log: one row per search with its latency, for the user's stats.

A search is logged in one statement of its own (`search_log`), or, when the layer that ran
it writes something too, as a part of that layer's statement (`SearchLogRow.insert_sql`):
memory/uses.py counts the uses of the hits a search returned and logs the search in
one round trip.

On its own (not inside a caller's transaction) the statement commits without waiting for
the disk (synchronous_commit off for its transaction only): a crash of the machine, not
of PostgreSQL, may lose the last fraction of a second of logs, never a memory, and no
search waits for a flush. Inside a caller's transaction the caller's commit stays durable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import Avg, Count
from django.utils import timezone

from search.models import SearchLog, SearchTool

if TYPE_CHECKING:
    import datetime

    from django.contrib.auth.models import AbstractBaseUser

# Turns off the flush for the statement's own transaction; a statement that uses it must
# read from it (FROM relaxed), or PostgreSQL never runs the CTE.
RELAXED_CTE = "relaxed AS (SELECT set_config('synchronous_commit', 'off', true))"


def relaxed_commit() -> bool:
    """Whether a statement about to run commits on its own (so it may skip the flush)."""
    return not connection.in_atomic_block


@dataclass(frozen=True)
class SearchLogRow:
    """A search to log: who ran it, which tool, and how long it has taken so far."""

    user: AbstractBaseUser | None
    tool: str
    latency_ms: float
    at: datetime.datetime

    @classmethod
    def since(cls, user: AbstractBaseUser | None, tool: SearchTool, started: float) -> SearchLogRow:
        """The log row of a search that started at `started` (time.perf_counter())."""
        latency = (time.perf_counter() - started) * 1000
        return cls(user=user, tool=tool, latency_ms=latency, at=timezone.now())

    def insert_sql(self, *, results: str, relaxed: bool) -> tuple[str, dict[str, Any]]:
        """The INSERT of this row, and its parameters (named search_*), for a statement
        that runs it as a part: `results` is an SQL expression (e.g. a count of a CTE);
        with relaxed, the statement defines RELAXED_CTE and this INSERT reads from it."""
        logs = connection.ops.quote_name(SearchLog._meta.db_table)
        sql = (
            f"INSERT INTO {logs} (user_id, tool, results, latency_ms, created_at) "  # noqa: S608 - names from the models
            f"SELECT %(search_user)s, %(search_tool)s, {results}, %(search_latency)s, "
            "%(search_at)s" + (" FROM relaxed" if relaxed else "")
        )
        params = {
            "search_user": self.user.pk if self.user is not None else None,
            "search_tool": str(self.tool),
            "search_latency": self.latency_ms,
            "search_at": self.at,
        }
        return sql, params


def search_log(
    *, user: AbstractBaseUser | None, tool: SearchTool, started: float, results: int
) -> None:
    """Log a search (no user: a system token's) with its latency since `started`."""
    row = SearchLogRow.since(user, tool, started)
    relaxed = relaxed_commit()
    sql, params = row.insert_sql(results="%(results)s", relaxed=relaxed)
    if relaxed:
        sql = f"WITH {RELAXED_CTE} {sql}"
    with connection.cursor() as cursor:
        cursor.execute(sql, {**params, "results": results})


@dataclass(frozen=True)
class SearchStats:
    queries: int
    average_ms: float
    by_tool: list[tuple[str, int, float]]  # (what searched, queries, average ms), busiest first


def search_stats(*, user: AbstractBaseUser) -> SearchStats:
    """How many searches the user's agents and search box ran, and their average latency."""
    logs = SearchLog.objects.filter(user=user)
    total = logs.aggregate(queries=Count("id"), average_ms=Avg("latency_ms"))
    per_tool = (
        logs.values("tool")
        .annotate(queries=Count("id"), average_ms=Avg("latency_ms"))
        .order_by("-queries", "tool")
    )
    labels = dict(SearchTool.choices)
    return SearchStats(
        queries=total["queries"],
        average_ms=total["average_ms"] or 0.0,
        by_tool=[(labels[row["tool"]], row["queries"], row["average_ms"]) for row in per_tool],
    )
