"""The rows the working-memory block is made of (memory/working_memory.py), read once.

A render needs each row's value as data (memory/block_format.py), and an entry's line and
its tokens. Those depend only on the row's key and value, so they are kept per process,
keyed by the row's id and `updated_at`: every write of a value or a key stamps a new
`updated_at` (memory/services.py `_write_once`, memory/entries.py `_rename_once`). A
render then reads the rows without their values, and only the values it has not seen
(a new or changed row) in a second statement. The kept lines belong to one token counter
and one line length (MNEMO_WORKING_MEMORY_LINE_CHARS): another counter (MNEMO_TOKENIZER)
or length never uses them.

As of a past time (`rows_as_of`), the rows come from history and nothing is kept: their
lines are made and counted by the render.
"""

from __future__ import annotations

import functools
import itertools
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db import connection

from memory.block_format import _as_data, _shorten, repeats_label
from memory.keys import PROFILE_KEYS
from memory.models import Memory, Source
from memory.selectors import memory_states_as_of
from memory.visibility import readable_sql, rule_allows_tags

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

ENTRY_LABELS = {
    "instruction": "Note:",
    "preference": "Prefers:",
    "fact": "Fact:",
    "decision": "Decided:",
    "discovery": "Discovered:",
    "pattern": "Pattern:",
    "task": "Task:",
    "bugfix": "Fixed:",
}
_PREFIXES = {kind: f"- {label} " for kind, label in ENTRY_LABELS.items()}
# Rows kept per process, over every user, counter and line length: about 1 KB each. When
# full, the oldest kept half is dropped (a dropped row's value is read again once).
KEPT_ROWS = 50_000
# Blocks kept per process (memory/working_memory.py), each by the rows it was made of
# (about 150 KB with those rows, for 500 entries).
KEPT_BLOCKS = 64
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class BlockRow(NamedTuple):
    key: str
    value: str  # sanitized and fenced
    pinned: bool
    confidence: float
    used_at: int  # last used, or else last updated, in microseconds since 1970
    id: int  # rows are numbered in the order they were created
    user_stated: bool
    # An entry's line and its tokens, when kept; None for the other rows, and for rows
    # as of a past time (the render makes and counts their lines).
    line: str | None = None
    tokens: int = 0


class _Kept(NamedTuple):
    """What a row's key and value make, for one counter and line length."""

    key: str
    value: str
    line: str | None
    tokens: int


_kept: dict[tuple[str, int, int, int], _Kept] = {}  # (counter, limit, id, updated_at)
_kept_blocks: dict[Hashable, object] = {}
_kept_lock = threading.Lock()  # held to add (and drop) rows and blocks; a render reads without


def entry_line(key: str, value: str, limit: int) -> str | None:
    """An entry's line "- Fact: …" ("- We decided …" without a label that the text repeats,
    memory/block_format.py `repeats_label`), shortened to `limit` characters; None for a key
    that is not an entry (a profile or style key) and for a value with nothing left to show."""
    if not value or key in PROFILE_KEYS or ":" not in key:
        return None
    # Keys in the table match the key grammar (a check constraint), so the kind is known.
    kind = key.partition(":")[0]
    # No "Prefers: Prefers oat milk": the label goes where the text says it already.
    prefix = "- " if repeats_label(kind, value) else _PREFIXES[kind]
    line = prefix + value
    if len(line) > limit:
        line = prefix + _shorten(value, limit - len(prefix))
    return line


def rows_now(
    user: AbstractBaseUser,
    agent: Agent | None,
    counter: str,
    count: Callable[[str], int],
    limit: int,
) -> list[BlockRow]:
    """The user's rows `agent` may read here, with their values as data and the entries'
    lines counted by `count` (the counter named `counter`). A read: access counts are left
    as they are."""
    # Sorted later, by code point: the database's collation must not change the bytes.
    # A timestamp as whole microseconds is exact and much cheaper to read than a datetime.
    readable, params = readable_sql(agent, own=False)
    with connection.cursor() as cursor:
        cursor.execute(_rows_sql(readable), [str(Source.USER_STATED), user.pk, *params])
        found = cursor.fetchall()
    made: dict[int, _Kept] = {}
    missing = []
    for key, _pinned, _confidence, _used_at, row_id, _user_stated, updated_at in found:
        row = _kept.get((counter, limit, row_id, updated_at))
        if row is None or row.key != key:  # the same stamp and another key: not ours
            missing.append(row_id)
        else:
            made[row_id] = row
    if missing:
        # Read in a second statement, a row may have changed or gone since the first: it is
        # shown (and kept) as this one finds it, as two statements apart would show it
        # anyway. It must still be readable: a write that hides a row from the agent also
        # changes it.
        made.update(_read_values(user, missing, (readable, params), counter, count, limit))
    return [
        BlockRow(row.key, row.value, pinned, confidence, used_at, row_id, user_stated, *row[2:])
        for _key, pinned, confidence, used_at, row_id, user_stated, _ in found
        if (row := made.get(row_id)) is not None
    ]


def _read_values(
    user: AbstractBaseUser,
    ids: list[int],
    readable: tuple[str, list[object]],
    counter: str,
    count: Callable[[str], int],
    limit: int,
) -> dict[int, _Kept]:
    """The rows of `ids` still there and `readable` (memory/visibility.py's condition and
    its parameters), read, made, and kept under their stamps."""
    condition, params = readable
    with connection.cursor() as cursor:
        cursor.execute(_values_sql(condition), [user.pk, ids, *params])
        found = cursor.fetchall()
    made, stamps = {}, {}
    for row_id, key, value, updated_at in found:
        value = _as_data(value)
        line = entry_line(key, value, limit)
        made[row_id] = _Kept(key, value, line, 0 if line is None else count(line))
        stamps[row_id] = updated_at
    with _kept_lock:
        _make_room(_kept, len(made), KEPT_ROWS)
        for row_id, row in made.items():
            _kept[counter, limit, row_id, stamps[row_id]] = row
    return made


def kept_block(made_as: Hashable) -> Any:
    """The block kept as made from `made_as` (its rows and settings), or None."""
    return _kept_blocks.get(made_as)


def keep_block(made_as: Hashable, block: object) -> None:
    with _kept_lock:
        _make_room(_kept_blocks, 1, KEPT_BLOCKS)
        _kept_blocks[made_as] = block


def _make_room(kept: dict, coming: int, most: int) -> None:
    """Before `coming` more go into `kept` (held under _kept_lock): if they would make it
    more than `most`, drop the oldest half of it and as many more as are coming."""
    if len(kept) + coming > most:
        for oldest in list(itertools.islice(kept, len(kept) // 2 + coming)):
            del kept[oldest]


def forget_kept_rows() -> None:
    """Drop every kept row and block (tests; the next render reads every value again)."""
    with _kept_lock:
        _kept.clear()
        _kept_blocks.clear()


def _micros(column: str) -> str:
    return f"(EXTRACT(EPOCH FROM {column}) * 1000000)::bigint"


@functools.cache
def _rows_sql(readable: str) -> str:
    # Written once per kind of reader rather than built by the ORM on every render
    # (bench/README.md, issue 12); `readable` is memory/visibility.py's condition.
    used_at = _micros("COALESCE(last_accessed_at, updated_at)")
    return _select(
        f"key, pinned, confidence, {used_at}, id, source = %s, {_micros('updated_at')}",
        f"user_id = %s AND {readable}",
    )


@functools.cache
def _values_sql(readable: str) -> str:
    return _select(
        f"id, key, value, {_micros('updated_at')}",
        f"user_id = %s AND id = ANY(%s) AND {readable}",
    )


def _select(columns: str, condition: str) -> str:
    table = connection.ops.quote_name(Memory._meta.db_table)
    return f"SELECT {columns} FROM {table} WHERE {condition}"  # noqa: S608 - the model's table


def rows_as_of(
    user: AbstractBaseUser, as_of: datetime, agent: Agent | None
) -> tuple[list[BlockRow], list[str]]:
    """The rows as they were at `as_of`, last changed standing in for last used, of those
    `agent`'s read rule lets it read by their tags then; and the keys whose state then
    history cannot give (memory/snapshots.py)."""
    microsecond = timedelta(microseconds=1)
    found = memory_states_as_of(user=user, as_of=as_of)
    rows = [
        BlockRow(
            state.key,
            _as_data(state.value),
            state.pinned,
            state.confidence,
            (state.changed_at - _EPOCH) // microsecond,
            state.created_id,
            state.source == Source.USER_STATED,
        )
        for state in found.states
        if rule_allows_tags(agent, state.tags)
    ]
    return rows, list(found.damaged)
