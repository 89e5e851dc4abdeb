"""The scratchpad (`?format=scratchpad`): the calling agent's own notes as recent memories,
the promoted ones (used often, or pinned) first and then the newest, under the working
memory's rules (memory/working_memory.py): the budget, whole lines, values as data
(memory/block_format.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from lib.tokenizer import get_token_counter
from memory.block_format import ELLIPSIS, _as_data, _shorten
from memory.selectors import memory_list_recent, user_zone
from memory.working_memory import _check_budget, _Counts, _left_out_line, _memoized_counts
from profiles.services import profile_for_user

if TYPE_CHECKING:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent


SCRATCHPAD_HEADER = "## Recent Memories"


# The fewest tokens a scratchpad line can take ("- [2025-06-03] Task: x" and its line
# break): no more rows than the budget could show are read.
_MIN_LINE_TOKENS = 8


@dataclass(frozen=True)
class Scratchpad:
    text: str
    tokens: int
    budget: int
    included: list[str]  # keys, in memory_list_recent's order
    left_out: int  # entries after them that did not fit
    counter: str


def build_scratchpad(
    *, user: AbstractBaseUser, agent: Agent | None, budget: int | None = None
) -> Scratchpad:
    """The calling `agent`'s own notes as `## Recent Memories` and one line each, in
    memory_list_recent's order (the promoted ones, then those added or changed in the last
    7 days, newest first): `- [YYYY-MM-DD] Kind: text (tags)`, the date the user's (their
    `timezone` memory, else UTC). Without an agent (the user's own call) it is empty: a
    scratchpad is an agent's.

    The block's rules: within `budget` tokens (default: the profile's) by the same counter,
    never a line cut to fit it, each value one line of data (`_as_data`) and each line at
    most MNEMO_WORKING_MEMORY_LINE_CHARS (a long value ends with "…"). It keeps the first
    lines that fit, in order, and says how many after them were left out.
    """
    budget = _check_budget(profile_for_user(user).token_budget if budget is None else budget)
    counter = get_token_counter()
    counts = _memoized_counts(counter)
    most = budget // _MIN_LINE_TOKENS
    recent = memory_list_recent(user=user, agent=agent)
    rows = list(recent.values_list("key", "value", "tags", "updated_at")[:most])
    total = recent.count() if len(rows) == most else len(rows)
    zone = user_zone(user)
    limit = settings.MNEMO_WORKING_MEMORY_LINE_CHARS
    lines: list[tuple[str, str]] = []  # (key, line)
    for key, value, tags, updated_at in rows:
        data = _as_data(value)
        if data:
            lines.append((key, _scratchpad_line(key, data, tags, updated_at, zone, limit)))
    total -= len(rows) - len(lines)  # nothing left to show of those: not "left out"
    chosen = _fit_recent(lines, total, budget, counts)
    text = _render_recent([line for _, line in lines[:chosen]], total - chosen)
    return Scratchpad(
        text=text,
        tokens=counts.block(text) if text else 0,
        budget=budget,
        included=[key for key, _ in lines[:chosen]],
        left_out=total - chosen,
        counter=counter.name,
    )


def _scratchpad_line(
    key: str, value: str, tags: list[str], updated_at: datetime, zone: ZoneInfo, limit: int
) -> str:
    """`- [YYYY-MM-DD] Kind: value (tags)` in at most `limit` characters: tags beyond a
    third of it are left out ("…"), then the value is shortened to fit."""
    prefix = f"- [{updated_at.astimezone(zone):%Y-%m-%d}] {key.partition(':')[0].capitalize()}: "
    shown: list[str] = []
    for tag in tags:
        if len(", ".join([*shown, tag])) + 3 > limit // 3:
            shown.append(ELLIPSIS)
            break
        shown.append(tag)
    suffix = f" ({', '.join(shown)})" if shown else ""
    return prefix + _shorten(value, limit - len(prefix) - len(suffix)) + suffix


def _fit_recent(lines: list[tuple[str, str]], total: int, budget: int, counts: _Counts) -> int:
    """How many of the lines, from the first, fit in the budget with the header (and the
    "left out" line when some do not)."""

    def fitting(room: int) -> int:
        used = counts.line(SCRATCHPAD_HEADER) + 1
        for index, (_, line) in enumerate(lines):
            used += counts.line(line) + 1
            if used > room:
                return index
        return len(lines)

    chosen = fitting(budget)
    if chosen < total:
        chosen = fitting(budget - counts.line(_left_out_line(total)) - 2)
    # Tokens can merge across line breaks: count the whole text, as the block does.
    while chosen:
        shown = [line for _, line in lines[:chosen]]
        if counts.block(_render_recent(shown, total - chosen)) <= budget:
            break
        chosen -= 1
    return chosen


def _render_recent(lines: list[str], left_out: int) -> str:
    blocks = ["\n".join([SCRATCHPAD_HEADER, *lines])] if lines else []
    if left_out:
        blocks.append(_left_out_line(left_out))
    return "\n\n".join(blocks) + "\n" if blocks else ""
