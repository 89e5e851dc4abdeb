"""The working-memory block injected into the assistant's system prompt (DESIGN.md).

It never exceeds its token budget, never cuts a line to fit it and is the same, byte
for byte, for the same rows. What the user stated is listed under "What you've told
me", what agents noted (source tp_extracted or document) under "What I've noticed", a
pinned one too. When the budget is too small it keeps, in order: profile lines, style
lines, pinned entries, the user's stated entries (by recency of use, then key), then the
agents' entries (by confidence, then recency of use, then key).

Every value is data, never structure (memory/block_format.py): one line (`sanitize`), a
Markdown opener at its start escaped (`fence`: it cannot forge a heading, a quote, a list
item or a fence), and no line longer than MNEMO_WORKING_MEMORY_LINE_CHARS (a value
shortened to fit ends with "…").

With `as_of`, the block is the one the rows made at that time, rebuilt from history
(memory.selectors.memory_states_as_of). memory/block_rows.py reads the rows, and keeps
what each row's key and value make (its value as data, an entry's line and its tokens)
between renders.

memory/scratchpad.py `build_scratchpad` lists the entries as recent memories instead, the
promoted ones (used often, or pinned) first and then the newest (`?format=scratchpad`),
under the same rules: the budget, whole lines, values as data.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

from django.conf import settings
from django.utils import timezone

from lib.errors import InvalidInput
from lib.tokenizer import TokenCounter, get_token_counter
from memory.block_format import _capped
from memory.block_rows import (
    BlockRow,
    entry_line,
    keep_block,
    kept_block,
    rows_as_of,
    rows_now,
)
from memory.keys import PROFILE_KEYS
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET
from profiles.services import profile_for_user

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

HEADERS = (
    "### About you",
    "### Your preferences",
    "### What you've told me",
    "### What I've noticed",
)
ABOUT, PREFERENCES, TOLD, NOTICED = range(4)
SECTIONS = ("about", "preferences", "told", "noticed")  # the headers' names in Line.section
USER, AGENT, MIXED = "user", "agent", "mixed"  # who stated a line: Line.stated_by
OVER_BUDGET = "over_budget"
EMPTY = "empty"  # nothing left of the value once sanitized
DAMAGED = "damaged"  # as of a past time: the history row holding its state is malformed


@dataclass(frozen=True)
class Omitted:
    key: str
    reason: str


@dataclass(frozen=True)
class Line:
    """One line of the block after its header, and who stated what it shows."""

    section: str  # "about", "preferences", "told" or "noticed" (SECTIONS)
    keys: tuple[str, ...]
    text: str
    # "user" when every row on the line is user_stated, "agent" when none is, else "mixed".
    stated_by: str


@dataclass(frozen=True)
class WorkingMemory:
    text: str
    tokens: int
    budget: int
    included: list[str]  # keys, in priority order
    omitted: list[Omitted]
    counter: str
    lines: list[Line]  # the lines after the headers, in the block's order
    as_of: datetime | None = None  # the past time the block was rebuilt for, if any


class _Unit(NamedTuple):
    """One line of the block; it goes in whole or not at all."""

    section: int
    keys: tuple[str, ...]
    line: str
    stated_by: str
    tokens: int  # the line's own tokens, without its line break


# Sort keys as C-level getters: a lambda per row cost about as much as the sorting.
_KEY, _PINNED, _USED_AT, _CONFIDENCE, _SECTION = map(
    attrgetter, ("key", "pinned", "used_at", "confidence", "section")
)


def build_working_memory(
    *,
    user: AbstractBaseUser,
    budget: int | None = None,
    as_of: datetime | None = None,
    agent: Agent | None = None,
) -> WorkingMemory:
    """Render the user's memory within `budget` tokens (default: the profile's budget).

    For an `agent`, the user's memory its read rule lets it read (memory/visibility.py);
    never an agent's own note, which the scratchpad lists instead.

    With `as_of` (an aware datetime, not in the future), the memory as it was then,
    rebuilt from history. History keeps no uses, so the entries are then ordered by when
    they last changed (memory_states_as_of); the budget is still today's.
    """
    budget = _check_budget(profile_for_user(user).token_budget if budget is None else budget)
    counter = get_token_counter()
    limit = settings.MNEMO_WORKING_MEMORY_LINE_CHARS
    if as_of is not None:
        rows, damaged = _rows_as_of(user, check_as_of(as_of), agent)
        return _block(rows, damaged, budget, limit, counter, as_of)
    rows = rows_now(user, agent, counter.name, _memoized_counts(counter).line, limit)
    # The block is a function of its rows (values, lines and their tokens included), the
    # budget, the line length and the counter: the same ones make the block already made,
    # kept by memory/block_rows.py. Its lists are copies, so a caller cannot change it.
    made_as = (counter.name, limit, budget, tuple(rows))
    block = kept_block(made_as)
    if block is None:
        block = _block(rows, [], budget, limit, counter, None)
        keep_block(made_as, block)
    return replace(
        block, included=list(block.included), omitted=list(block.omitted), lines=list(block.lines)
    )


def _block(
    rows: list[BlockRow],
    damaged: list[Omitted],
    budget: int,
    limit: int,
    counter: TokenCounter,
    as_of: datetime | None,
) -> WorkingMemory:
    counts = _memoized_counts(counter)
    units, omitted = _units(rows, limit, counts)
    omitted += damaged
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
        lines=[
            Line(SECTIONS[unit.section], unit.keys, unit.line, unit.stated_by)
            for unit in sorted(included, key=_SECTION)
        ],
        as_of=as_of,
    )


AS_OF_NEEDS_A_ZONE = (
    "The time needs its time zone (ISO 8601, e.g. 2025-06-03T09:00:00Z or "
    "2025-06-03T17:00:00+08:00)."
)
AS_OF_IN_THE_FUTURE = "The time is in the future; give one up to now."
AS_OF_OUT_OF_RANGE = "The time is out of range; give one between the years 1 and 9999."


def check_as_of(as_of: object) -> datetime:
    """`as_of` in UTC if it is an aware datetime not in the future; InvalidInput otherwise.

    In UTC because ISO 8601 allows offsets PostgreSQL refuses (beyond ±15:59, e.g.
    -20:00), and a time in year 1 with a positive offset is before year 1 in UTC."""
    if not isinstance(as_of, datetime) or timezone.is_naive(as_of):
        raise InvalidInput(AS_OF_NEEDS_A_ZONE, field="as_of")
    try:
        as_of = as_of.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(AS_OF_OUT_OF_RANGE, field="as_of") from None
    if as_of > timezone.now():
        raise InvalidInput(AS_OF_IN_THE_FUTURE, field="as_of")
    return as_of


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


def _rows_as_of(
    user: AbstractBaseUser, as_of: datetime, agent: Agent | None
) -> tuple[list[BlockRow], list[Omitted]]:
    """The rows as they were at `as_of` (memory/block_rows.py), and the keys history cannot
    give then, left out."""
    rows, damaged = rows_as_of(user, as_of, agent)
    return rows, [Omitted(key, DAMAGED) for key in damaged]


def _stated_by(rows: list[BlockRow]) -> str:
    stated = sum(row.user_stated for row in rows)
    return USER if stated == len(rows) else AGENT if stated == 0 else MIXED


def _units(rows: list[BlockRow], limit: int, counts: _Counts) -> tuple[list[_Unit], list[Omitted]]:
    """The block's lines in priority order, and the rows with nothing left to show."""
    profile: dict[str, BlockRow] = {}
    styles: dict[str, dict[str, BlockRow]] = {}
    entries: list[BlockRow] = []
    empty: list[Omitted] = []
    for row in sorted(rows, key=_KEY):
        if not row.value:
            empty.append(Omitted(row.key, EMPTY))
            continue
        # Keys in the table match the key grammar (a check constraint), so a cheap
        # split is enough here; memory.keys.parse_key is for keys from outside.
        if row.key in PROFILE_KEYS:
            profile[row.key] = row
        elif ":" in row.key:
            entries.append(row)
        else:
            aspect, _, platform = row.key.partition("_")
            styles.setdefault(platform, {})[aspect] = row
    units = (
        _profile_units(profile, limit, counts)
        + _style_units(styles, limit, counts)
        + _entry_units(entries, limit, counts)
    )
    return units, empty


def _profile_units(profile: dict[str, BlockRow], limit: int, counts: _Counts) -> list[_Unit]:
    units = []
    identity = [profile[key] for key in ("name", "role", "company") if key in profile]
    if identity:
        keys = tuple(row.key for row in identity)
        make = functools.partial(_identity_line, keys)
        line = _capped(make, [row.value for row in identity], limit)
        units.append(_Unit(ABOUT, keys, line, _stated_by(identity), counts.line(line)))
    for key, label in (("timezone", "Timezone:"), ("summary", "Summary:")):
        if key in profile:
            row = profile[key]
            line = _capped(functools.partial(_labelled, label), [row.value], limit)
            units.append(_Unit(ABOUT, (key,), line, _stated_by([row]), counts.line(line)))
    return units


def _labelled(label: str, values: list[str]) -> str:
    return f"{label} {values[0]}"


def _identity_line(keys: tuple[str, ...], values: list[str]) -> str:
    """The line "Kevin (Head of Growth) at YARNNN", or as much of it as is known."""
    known = dict(zip(keys, values, strict=True))
    name, role, company = (known.get(key) for key in ("name", "role", "company"))
    if name:
        who = f"{name} ({role})" if role else name
    elif role:
        who = role if company else f"Role: {role}"
    else:
        return f"Company: {company}"
    return f"{who} at {company}" if company else who


def _style_units(
    styles: dict[str, dict[str, BlockRow]], limit: int, counts: _Counts
) -> list[_Unit]:
    """One line per platform, in the order the platforms were first set.

    Style lines are short and come before every entry, so their order hardly decides
    what fits; a fixed order keeps the block steady as styles are used and updated.
    """

    def first_set(platform: str) -> int:
        return min(row.id for row in styles[platform].values())

    platforms = sorted(styles, key=first_set)
    units = []
    for platform in platforms:
        rows = [
            styles[platform][aspect]
            for aspect in ("tone", "verbosity")
            if aspect in styles[platform]
        ]
        keys = tuple(row.key for row in rows)
        line = _capped(
            functools.partial(_style_line, platform, keys), [r.value for r in rows], limit
        )
        units.append(_Unit(PREFERENCES, keys, line, _stated_by(rows), counts.line(line)))
    return units


def _style_line(platform: str, keys: tuple[str, ...], values: list[str]) -> str:
    """The line "- slack: tone: casual, verbosity: brief"."""
    aspects = (key.partition("_")[0] for key in keys)
    pairs = zip(aspects, values, strict=True)
    return f"- {platform}: " + ", ".join(f"{aspect}: {value}" for aspect, value in pairs)


def _entry_units(entries: list[BlockRow], limit: int, counts: _Counts) -> list[_Unit]:
    """Pinned first; then the user's, most recently used first; then the agents', most
    confident first, then most recently used; ties by key. Within the pinned ones, the
    user's come first too."""
    # Stable sorts from the last criterion to the first; `entries` is already by key.
    told = [row for row in entries if row.user_stated]
    noticed = [row for row in entries if not row.user_stated]
    told.sort(key=_USED_AT, reverse=True)
    noticed.sort(key=_USED_AT, reverse=True)
    noticed.sort(key=_CONFIDENCE, reverse=True)
    entries = told + noticed
    entries.sort(key=_PINNED, reverse=True)
    units = []
    for row in entries:
        line, tokens = row.line, row.tokens
        if line is None:  # not kept (as of a past time): made and counted here
            line = entry_line(row.key, row.value, limit)
            tokens = counts.line(line)
        units.append(
            _Unit(TOLD, (row.key,), line, USER, tokens)
            if row.user_stated
            else _Unit(NOTICED, (row.key,), line, AGENT, tokens)
        )
    return units


def _fit(units: list[_Unit], budget: int, counts: _Counts) -> tuple[list[int], str]:
    """Indexes of the units that fit, in priority order, and the block they make."""
    # Each line was counted when its unit was made (an entry's is kept with its row,
    # memory/block_rows.py): its own tokens plus its line break.
    costs = [unit.tokens + 1 for unit in units]
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
    """The sections in HEADERS order, each with its lines in priority order."""
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
