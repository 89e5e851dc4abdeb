"""A memory's value as a line of the working-memory block and of the scratchpad
(memory/working_memory.py, memory/scratchpad.py): data, never structure. One line of plain
text (`sanitize`), a Markdown opener at its start escaped (`fence`: it cannot forge a
heading, a quote, a list item or a fence), and shortened to fit its line, ending with "…".
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


ELLIPSIS = "…"  # ends a value shortened to fit its line


# What opens a Markdown block at the start of a line: a heading, a quote, a list item or
# thematic break, a setext underline, a table row, a code fence, an HTML block. A value that
# starts with one gets a backslash before it, as Markdown escapes it: it reads the same.
_OPENERS = frozenset("#>-*+=_|`~<0123456789")


_NOT_PLAIN_START = _OPENERS | {" "}


_ORDERED_ITEM = re.compile(r"[0-9]{1,9}[.)](?= |$)")  # "1. " or "1) ", not "3.5 hours"


# Characters dropped from values: controls, format characters (zero-width, bidi
# overrides), lone surrogates. Line and paragraph separators are whitespace and
# become spaces like the rest.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


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


def _as_data(value: str) -> str:
    """`fence(sanitize(value))`, in one call for the common value that needs neither."""
    if (
        value.isprintable()
        and value[:1] not in _NOT_PLAIN_START
        and "  " not in value
        and not value.endswith(" ")
    ):
        return value
    return fence(sanitize(value))


def fence(value: str) -> str:
    r"""A sanitized value as data: a Markdown opener at its start is backslash-escaped.

    "### System" becomes "\### System", "- fake" "\- fake", "1. step" "1\. step": after
    a label, or at the start of the identity line, a value cannot open a heading, a
    quote, a list item, a table row or a code fence.
    """
    if value[:1] not in _OPENERS:
        return value
    if value[0] in "0123456789":
        item = _ORDERED_ITEM.match(value)
        if item is None:
            return value
        end = item.end() - 1
        return f"{value[:end]}\\{value[end:]}"
    return "\\" + value


# An entry's kind label ("Prefers:", memory/block_rows.py ENTRY_LABELS) is left out where the
# text's own first word says it already: "Prefers: Prefers oat milk" becomes "Prefers oat
# milk", "Decided: We decided to ship" "We decided to ship". The rule, cheap and the same for
# every language: the text's first word, or its second after a subject (I, we, they, the
# user, …), is the label's word in one of its English forms below, whole and in any case.
# Only these English words match, so a text in another language keeps its label unless it
# starts with the very same word; a word that merely starts like one ("Notebook", "Factory")
# keeps it too.
LABEL_WORDS = {
    "instruction": frozenset({"note", "noted", "notes", "instruction", "instructions"}),
    "preference": frozenset(
        {"prefer", "prefers", "preferred", "preferring", "preference", "preferences"}
    ),
    "fact": frozenset({"fact", "facts"}),
    "decision": frozenset({"decide", "decided", "decides", "deciding", "decision", "decisions"}),
    "discovery": frozenset(
        {"discover", "discovered", "discovers", "discovering", "discovery", "discoveries"}
    ),
    "pattern": frozenset({"pattern", "patterns"}),
    "task": frozenset({"task", "tasks"}),
    "bugfix": frozenset({"fix", "fixed", "fixes", "bugfix", "bugfixes", "bug-fix"}),
}
_SUBJECTS = frozenset({"i", "we", "you", "they", "he", "she", "user", "the user", "the team"})
_WORD_END = ":,.;!"


def repeats_label(kind: str, value: str) -> bool:
    """Whether the text's own first word says what the kind's label would (see LABEL_WORDS)."""
    words = LABEL_WORDS.get(kind)
    if words is None:
        return False
    head = value[:60].casefold().split(maxsplit=3)
    if not head:
        return False
    if head[0].rstrip(_WORD_END) in words:
        return True
    for size in (1, 2):  # "we decided", "the user prefers"
        if len(head) > size and " ".join(head[:size]) in _SUBJECTS:
            return head[size].rstrip(_WORD_END) in words
    return False


def _shorten(value: str, size: int) -> str:
    """`value` in at most `size` characters, ending with "…" if it had to be cut."""
    if len(value) <= size:
        return value
    return value[: max(size - 1, 0)].rstrip() + ELLIPSIS


def _shortened(values: list[str], room: int) -> list[str]:
    """The values in `room` characters together: the longest are cut to an equal share."""
    left, count = room, len(values)
    for length in sorted(map(len, values)):
        share = left // count
        if length > share:
            return [_shorten(value, share) for value in values]
        left -= length
        count -= 1
    return values


def _capped(make: Callable[[list[str]], str], values: list[str], limit: int) -> str:
    """The line `make(values)`, its longest values shortened to fit in `limit` characters."""
    line = make(values)
    if len(line) > limit:
        line = make(_shortened(values, limit - len(line) + sum(map(len, values))))
    return line
