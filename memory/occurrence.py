"""When and in which conversation a memory was said: the rules for `occurred_at` and
`session` (memory/models.py), for every write path and every stored state.

`occurred_at` comes as ISO 8601: a date (`2023-05-08`: the start of that day) or a
date-time (`2023-05-08T13:56:00`, with or without `Z` or an offset). A value without an
offset is the user's local time (memory/selectors.py `user_zone`). A memory may describe
a planned event, so the future is allowed; a year outside 1900 to 2200 is a typo, not a
memory. History keeps the time as an ISO string in UTC (`as_stored`), so two states of
one instant compare equal whatever zone the write gave.

`session` names the conversation: one line of at most 100 characters, trimmed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from lib.errors import InvalidInput
from memory.models import MAX_SESSION_LENGTH

MIN_YEAR, MAX_YEAR = 1900, 2200
# A page shows the day a memory was said only when it is this far from the day the memory
# was written: said the day it was written, it says nothing the row's own time does not.
SAID_APART = timedelta(days=1)
_EG = "e.g. 2023-05-08, 2023-05-08T13:56:00 or 2023-05-08T13:56:00+02:00"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
# Categories a one-line name cannot hold: control characters (newlines, NUL, …),
# unpaired surrogates (not UTF-8, PostgreSQL refuses them) and the line and paragraph
# separators.
_NOT_IN_A_LINE = frozenset({"Cc", "Cs", "Zl", "Zp"})


def parse_occurred_at(value: object, *, zone: Callable[[], tzinfo]) -> datetime:
    """The instant `value` names, in UTC. `zone` gives the user's zone, asked for only
    when the value has no offset of its own (it costs a query). InvalidInput, naming the
    field, when it is not one."""
    if isinstance(value, datetime):
        local = value
    elif isinstance(value, date):
        local = datetime.combine(value, time())
    elif isinstance(value, str):
        local = _parse_text(value.strip())
    else:
        raise _invalid(f"occurred_at must be an ISO 8601 date or date-time ({_EG}).")
    if not MIN_YEAR <= local.year <= MAX_YEAR:
        raise _invalid(f"occurred_at must fall between the years {MIN_YEAR} and {MAX_YEAR}.")
    if local.tzinfo is None:
        local = local.replace(tzinfo=zone())
    return local.astimezone(UTC)


def _parse_text(text: str) -> datetime:
    shown = text[:40]
    if _DATE.fullmatch(text):
        parse: Callable[[str], date] = date.fromisoformat
    elif _DATE_TIME.fullmatch(text):
        parse = datetime.fromisoformat
    else:
        raise _invalid(f"occurred_at '{shown}' is not an ISO 8601 date or date-time ({_EG}).")
    try:
        parsed = parse(text)
    except ValueError:  # well formed, but no such day or time (2023-02-30, 25:00)
        raise _invalid(f"occurred_at '{shown}' is not a real date or time.") from None
    return parsed if isinstance(parsed, datetime) else datetime.combine(parsed, time())


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(message, field="occurred_at")


def clean_session(value: object) -> str:
    """The session's name, trimmed; InvalidInput naming the field when it is not one."""
    if not isinstance(value, str):
        raise InvalidInput("session must be text.", field="session")
    if problem := session_problem(value.strip()):
        raise InvalidInput(f"session {problem}.", field="session")
    return value.strip()


def session_problem(value: object) -> str:
    """Why `value` is not a session's name ("" when it is one)."""
    if not isinstance(value, str):
        return "is not text"
    if len(value) > MAX_SESSION_LENGTH:
        return f"is {len(value)} characters long; the longest allowed is {MAX_SESSION_LENGTH}"
    if any(unicodedata.category(char) in _NOT_IN_A_LINE for char in value):
        return "must be one line, without control characters"
    return ""


def as_stored(moment: datetime) -> str:
    """`occurred_at` as history keeps it: ISO 8601 in UTC."""
    return moment.astimezone(UTC).isoformat()


def stored_problem(text: object) -> str:
    """Why `text` is not an `occurred_at` as history keeps it ("" when it is one)."""
    if not isinstance(text, str) or not _DATE_TIME.fullmatch(text):
        return "its occurred_at is not an ISO 8601 date-time"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return "its occurred_at is not a real date and time"
    if moment.tzinfo is None:
        return "its occurred_at has no time zone"
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        return f"its occurred_at is not between the years {MIN_YEAR} and {MAX_YEAR}"
    return ""


def from_stored(text: str) -> datetime:
    """A stored `occurred_at` that passed stored_problem, as the row holds it."""
    return datetime.fromisoformat(text).astimezone(UTC)


def said_worth_showing(occurred_at: datetime, created_at: datetime) -> bool:
    """Whether a page shows the day a memory was said: an agent's dated note, an import, a
    past event; not a memory said when it was written."""
    return abs(occurred_at - created_at) > SAID_APART
