"""The working-memory block injected into the assistant's system prompt (DESIGN.md).

It never exceeds its token budget, never cuts an entry in half and is the same,
byte for byte, for the same rows. When the budget is too small it keeps, in order:
profile lines, style lines, pinned entries, then the other entries by recency of
use, confidence and key.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

from django.db import connection

from lib.errors import InvalidInput
from lib.tokenizer import TokenCounter, get_token_counter
from memory.keys import PROFILE_KEYS
from memory.models import Memory
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET
from profiles.services import profile_for_user

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

HEADERS = ("### About you", "### Your preferences", "### What you've told me")
ABOUT, PREFERENCES, TOLD = range(3)
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
OVER_BUDGET = "over_budget"
EMPTY = "empty"  # nothing left of the value once sanitized
# Characters dropped from values: controls, format characters (zero-width, bidi
# overrides), lone surrogates. Line and paragraph separators are whitespace and
# become spaces like the rest.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


@dataclass(frozen=True)
class Omitted:
    key: str
    reason: str


@dataclass(frozen=True)
class WorkingMemory:
    text: str
    tokens: int
    budget: int
    included: list[str]
    omitted: list[Omitted]
    counter: str


class _Unit(NamedTuple):
    """One line of the block; it goes in whole or not at all."""

    section: int
    keys: tuple[str, ...]
    line: str


class _Row(NamedTuple):
    key: str
    value: str
    pinned: bool
    confidence: float
    used_at: int  # last used, or else last updated, in microseconds since 1970
    id: int  # rows are numbered in the order they were created


# Sort keys as C-level getters: a lambda per row cost about as much as the sorting.
_KEY, _PINNED, _USED_AT, _CONFIDENCE = map(attrgetter, ("key", "pinned", "used_at", "confidence"))


def build_working_memory(*, user: AbstractBaseUser, budget: int | None = None) -> WorkingMemory:
    """Render the user's memory within `budget` tokens (default: the profile's budget)."""
    budget = _check_budget(profile_for_user(user).token_budget if budget is None else budget)
    counter = get_token_counter()
    counts = _memoized_counts(counter)
    units, omitted = _units(_rows(user))
    chosen, text = _fit(units, budget, counts)
    included, left_out = _split(units, chosen)
    omitted += [_over_budget(key) for unit in left_out for key in unit.keys]
    return WorkingMemory(
        text=text,
        tokens=counts.block(text) if text else 0,
        budget=budget,
        included=[key for unit in included for key in unit.keys],
        omitted=omitted,
        counter=counter.name,
    )


@functools.lru_cache(maxsize=16384)
def _over_budget(key: str) -> Omitted:
    # Omitted is immutable, so renders share one per key: a block for hundreds of
    # memories leaves most of them out, and building them anew was a tenth of a render.
    return Omitted(key, OVER_BUDGET)


def _check_budget(budget: object) -> int:
    if (
        isinstance(budget, bool)
        or not isinstance(budget, int)
        or not MIN_TOKEN_BUDGET <= budget <= MAX_TOKEN_BUDGET
    ):
        raise InvalidInput(
            f"Budget must be a whole number of tokens from {MIN_TOKEN_BUDGET} "
            f"to {MAX_TOKEN_BUDGET}.",
            field="budget",
        )
    return budget


def _rows(user: AbstractBaseUser) -> list[_Row]:
    """The user's rows, values sanitized. A read: access counts are left as they are."""
    # Sorted later, by code point: the database's collation must not change the bytes.
    # A timestamp as whole microseconds is exact and much cheaper to read than a datetime.
    with connection.cursor() as cursor:
        cursor.execute(_rows_sql(), [user.pk])
        rows = cursor.fetchall()
    return [
        _Row(key, sanitize(value), pinned, confidence, used_at, row_id)
        for key, value, pinned, confidence, used_at, row_id in rows
    ]


@functools.cache
def _rows_sql() -> str:
    # Written once rather than built by the ORM on every render (bench/README.md, issue 12).
    table = connection.ops.quote_name(Memory._meta.db_table)
    return (
        "SELECT key, value, pinned, confidence, (EXTRACT(EPOCH FROM "  # noqa: S608 - the model's table
        "COALESCE(last_accessed_at, updated_at)) * 1000000)::bigint, id "
        f"FROM {table} WHERE user_id = %s"
    )


def sanitize(value: str) -> str:
    """One line of plain text: whitespace runs become one space, controls are dropped."""
    if value.isprintable():
        # Printable text has no whitespace but " ", so most values need no change at all.
        if "  " not in value and not value.startswith(" ") and not value.endswith(" "):
            return value
    else:
        value = "".join(
            char
            for char in value
            if char.isspace() or unicodedata.category(char) not in _DROPPED_CATEGORIES
        )
    return " ".join(value.split())


def _units(rows: list[_Row]) -> tuple[list[_Unit], list[Omitted]]:
    """The block's lines in priority order, and the rows with nothing left to show."""
    profile: dict[str, str] = {}
    styles: dict[str, dict[str, _Row]] = {}
    entries: list[_Row] = []
    empty: list[Omitted] = []
    for row in sorted(rows, key=_KEY):
        if not row.value:
            empty.append(Omitted(row.key, EMPTY))
            continue
        # Keys in the table match the key grammar (a check constraint), so a cheap
        # split is enough here; memory.keys.parse_key is for keys from outside.
        if row.key in PROFILE_KEYS:
            profile[row.key] = row.value
        elif ":" in row.key:
            entries.append(row)
        else:
            aspect, _, platform = row.key.partition("_")
            styles.setdefault(platform, {})[aspect] = row
    units = _profile_units(profile) + _style_units(styles) + _entry_units(entries)
    return units, empty


def _profile_units(profile: dict[str, str]) -> list[_Unit]:
    units = []
    identity_keys = tuple(key for key in ("name", "role", "company") if key in profile)
    if identity_keys:
        units.append(_Unit(ABOUT, identity_keys, _identity_line(profile)))
    if "timezone" in profile:
        units.append(_Unit(ABOUT, ("timezone",), f"Timezone: {profile['timezone']}"))
    if "summary" in profile:
        units.append(_Unit(ABOUT, ("summary",), f"Summary: {profile['summary']}"))
    return units


def _identity_line(profile: dict[str, str]) -> str:
    """The line "Kevin (Head of Growth) at YARNNN", or as much of it as is known."""
    name, role, company = (profile.get(key) for key in ("name", "role", "company"))
    if name:
        who = f"{name} ({role})" if role else name
    elif role:
        who = role if company else f"Role: {role}"
    else:
        return f"Company: {company}"
    return f"{who} at {company}" if company else who


def _style_units(styles: dict[str, dict[str, _Row]]) -> list[_Unit]:
    """One line per platform, in the order the platforms were first set.

    Style lines are short and come before every entry, so their order hardly decides
    what fits; a fixed order keeps the block steady as styles are used and updated.
    """

    def first_set(platform: str) -> int:
        return min(row.id for row in styles[platform].values())

    platforms = sorted(styles, key=first_set)
    units = []
    for platform in platforms:
        present = [
            (aspect, styles[platform][aspect])
            for aspect in ("tone", "verbosity")
            if aspect in styles[platform]
        ]
        keys = tuple(row.key for _, row in present)
        line = f"- {platform}: " + ", ".join(f"{aspect}: {row.value}" for aspect, row in present)
        units.append(_Unit(PREFERENCES, keys, line))
    return units


def _entry_units(entries: list[_Row]) -> list[_Unit]:
    """Pinned first, then most recently used, then most confident, then by key."""
    # Stable sorts from the last criterion to the first; `entries` is already by key.
    entries = sorted(entries, key=_CONFIDENCE, reverse=True)
    entries.sort(key=_USED_AT, reverse=True)
    entries.sort(key=_PINNED, reverse=True)
    return [
        _Unit(TOLD, (row.key,), f"- {ENTRY_LABELS[row.key.partition(':')[0]]} {row.value}")
        for row in entries
    ]


def _fit(units: list[_Unit], budget: int, counts: _Counts) -> tuple[list[int], str]:
    """Indexes of the units that fit, in priority order, and the block they make."""
    # Each line is counted once here (and memoized across renders): its own tokens plus
    # its line break.
    costs = [counts.line(unit.line) + 1 for unit in units]
    headers = [counts.line(header) + 2 for header in HEADERS]  # with the blank line before
    all_keys = _key_count(units)
    chosen = _greedy(units, costs, headers, budget)
    if len(chosen) < len(units):
        # Room for the "left out" line, sized for the largest number it could show.
        reserve = counts.line(_left_out_line(all_keys)) + 2
        chosen = _greedy(units, costs, headers, budget - reserve)
    # Lines were counted one by one, but tokens can merge across line breaks: count the
    # whole text and drop the lowest-priority lines until it fits.
    while True:
        included = [units[index] for index in chosen]
        text = _render(included, all_keys - _key_count(included))
        if not chosen or counts.block(text) <= budget:
            return chosen, text
        chosen.pop()


def _greedy(units: list[_Unit], costs: list[int], headers: list[int], budget: int) -> list[int]:
    """Take units in priority order while they fit; a header is paid with its first line."""
    chosen: list[int] = []
    used = 0
    opened: set[int] = set()
    for index, unit in enumerate(units):
        cost = costs[index]
        if unit.section not in opened:
            cost += headers[unit.section]
        if used + cost <= budget:
            chosen.append(index)
            used += cost
            opened.add(unit.section)
    return chosen


def _split(units: list[_Unit], chosen: list[int]) -> tuple[list[_Unit], list[_Unit]]:
    """The chosen units and the others, both in priority order."""
    kept = set(chosen)
    return (
        [units[index] for index in chosen],
        [unit for index, unit in enumerate(units) if index not in kept],
    )


def _render(units: list[_Unit], left_out: int) -> str:
    blocks = []
    for section, header in enumerate(HEADERS):
        lines = [unit.line for unit in units if unit.section == section]
        if lines:
            blocks.append("\n".join([header, *lines]))
    if left_out:
        blocks.append(_left_out_line(left_out))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _left_out_line(count: int) -> str:
    noun = "memory" if count == 1 else "memories"
    return f"({count} more {noun} left out to fit the budget)"


def _key_count(units: list[_Unit]) -> int:
    return sum(len(unit.keys) for unit in units)


class _Counts(NamedTuple):
    """A counter's count, memoized so that repeated renders do not re-tokenize."""

    line: Callable[[str], int]
    block: Callable[[str], int]  # whole texts, up to ~50 KB each: fewer are kept


@functools.cache
def _memoized_counts(counter: TokenCounter) -> _Counts:
    return _Counts(
        line=functools.lru_cache(maxsize=4096)(counter.count),
        block=functools.lru_cache(maxsize=64)(counter.count),
    )
