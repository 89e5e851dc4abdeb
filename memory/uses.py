"""Counting uses: an agent's read of a memory, or a search that returned it to an agent,
counts as a use (access_count, last_accessed_at). Not a change to the memory, so no
history or activity is written. memory/search.py logs searches through it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils import timezone

from lib.errors import NotFound
from memory.keys import parse_key
from memory.models import Memory
from memory.write_sql import _quote
from search.fields import SEARCH_COLUMNS
from search.services import RELAXED_CTE, SearchLogRow, relaxed_commit

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent


def memory_record_access(
    *, user: AbstractBaseUser, key: str, owner_agent: Agent | None = None
) -> Memory:
    """Read one memory as an agent does: the read counts as a use (memory_count_uses).
    `owner_agent`: that agent's own note under the key, else the user's memory.

    Not a change to the memory, so no history or activity is written.
    """
    parse_key(key)
    rows = Memory.objects.filter(user=user, owner_agent=owner_agent, key=key)
    ids = list(rows.values_list("pk", flat=True))
    used = memory_count_uses(user=user, memory_ids=ids)
    if not used:  # no such key, or deleted since
        raise NotFound(f"No memory with key '{key}'.", field="key")
    (memory,) = used.values()
    return memory


def memory_count_uses(
    *, user: AbstractBaseUser, memory_ids: list[int], search: SearchLogRow | None = None
) -> dict[int, Memory]:
    """Count a use of each of the user's memories in `memory_ids` (access_count + 1,
    last_accessed_at now): an agent read it, or a search returned it to an agent. The only
    code that changes access_count. Returns those memories as they are after it, by id (a
    row deleted meanwhile is not among them).

    With `search`, the same statement logs that search (search/services.py), its result
    count being the memories counted. On its own (not inside a caller's transaction) the
    statement commits without waiting for the disk (synchronous_commit off for its
    transaction only): a crash of the machine, not of PostgreSQL, may lose the last fraction
    of a second of counts and logs, never a memory, and no read waits for a flush."""
    relaxed = relaxed_commit()
    sql, params = _count_uses_sql(relaxed=relaxed, search=search)
    params |= {"user": user.pk, "ids": list(memory_ids), "now": timezone.now()}
    return {memory.pk: memory for memory in Memory.objects.raw(sql, params)}


def _count_uses_sql(*, relaxed: bool, search: SearchLogRow | None) -> tuple[str, dict[str, Any]]:
    columns = ", ".join(
        _quote(field.column)
        for field in Memory._meta.concrete_fields
        if field.name not in SEARCH_COLUMNS  # as Memory.objects reads rows
    )
    parts = [RELAXED_CTE] if relaxed else []
    parts.append(
        f"used AS (UPDATE {_quote(Memory._meta.db_table)} "  # noqa: S608 - names from the models
        "SET access_count = access_count + 1, last_accessed_at = %(now)s"
        + (" FROM relaxed" if relaxed and search is None else "")
        + f" WHERE id = ANY(%(ids)s) AND user_id = %(user)s RETURNING {columns})"
    )
    params: dict[str, Any] = {}
    if search is not None:  # its INSERT reads relaxed, which sets the commit mode
        log, params = search.insert_sql(results="(SELECT count(*) FROM used)", relaxed=relaxed)
        parts.append(f"logged AS ({log})")
    return f"WITH {', '.join(parts)} SELECT {columns} FROM used", params  # noqa: S608 - names from the models
