"""STAND-IN until h-periods lands (its file replaces this one): the period a query names.

Only what the ranking's tests and benchmark need: "8 May 2023", "May 8, 2023", "May 2023",
"2023", "yesterday", "last week".
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + ")"
_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}\.?,?\s*(\d{{4}})\b", re.IGNORECASE
)
_MONTH_DAY_YEAR = re.compile(
    rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s*(\d{{4}})\b", re.IGNORECASE
)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+(\d{{4}})\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
_RELATIVE = re.compile(r"\b(yesterday|last week)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Period:
    start: datetime.datetime  # aware, inclusive
    end: datetime.datetime  # aware, exclusive
    text: str
    span: tuple[int, int]


def find_period(query: str, *, now: datetime.datetime, zone: ZoneInfo) -> Period | None:
    """The first period the query names, in `zone`; None when it names none."""

    def day(year: int, month: int, number: int) -> datetime.datetime | None:
        try:
            return datetime.datetime(year, month, number, tzinfo=zone)
        except ValueError:
            return None

    def period(match: re.Match[str], start: datetime.datetime | None, end_of: str) -> Period | None:
        if start is None:
            return None
        if end_of == "day":
            end = start + datetime.timedelta(days=1)
        elif end_of == "week":
            end = start + datetime.timedelta(days=7)
        elif end_of == "month":
            end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
        else:
            end = start.replace(year=start.year + 1)
        return Period(start, end, match[0], match.span())

    if match := _DAY_MONTH_YEAR.search(query):
        return period(match, day(int(match[3]), MONTHS[match[2].lower()], int(match[1])), "day")
    if match := _MONTH_DAY_YEAR.search(query):
        return period(match, day(int(match[3]), MONTHS[match[1].lower()], int(match[2])), "day")
    if match := _MONTH_YEAR.search(query):
        return period(match, day(int(match[2]), MONTHS[match[1].lower()], 1), "month")
    if match := _YEAR.search(query):
        return period(match, day(int(match[1]), 1, 1), "year")
    if match := _RELATIVE.search(query):
        today = now.astimezone(zone).date()
        if match[1].lower() == "yesterday":
            start = today - datetime.timedelta(days=1)
            return period(match, day(start.year, start.month, start.day), "day")
        monday = today - datetime.timedelta(days=today.weekday() + 7)
        return period(match, day(monday.year, monday.month, monday.day), "week")
    return None


def without_period(query: str, period: Period | None) -> str:
    """The query without the words naming the period (the query itself when none)."""
    if period is None:
        return query
    start, end = period.span
    rest = f"{query[:start]} {query[end:]}"
    rest = re.sub(r"\b(in|on|during|from|of|at)\s*(?=[?.!]?\s*$)", "", rest.strip())
    return " ".join(rest.split()) or query
