"""A period phrase's match to the days it names (search/periods.py finds the match): one
resolver per `Kind`, and the calendar arithmetic they share. Weeks start on Monday; seasons
are the northern hemisphere's meteorological ones (search/periods.py's docstring says how
each phrase resolves).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, timedelta

from search.period_words import SEASON_MONTHS, Kind, Language, Unit

Dates = tuple[date, date]  # first day, day after the last
Resolver = Callable[[re.Match[str], Language, date], Dates | None]


# Resolvers: a match's words to the days it names, or None when they name no real day.


def _date(match: re.Match[str], language: Language, today: date) -> Dates:
    month = _month_number(match["month"], language)
    return _one_day(date(int(match["year"]), month, int(match["day"])))


def _slashed_date(match: re.Match[str], language: Language, today: date) -> Dates | None:
    first, second, year = int(match["first"]), int(match["second"]), int(match["year"])
    if first <= 12 and second <= 12 and first != second:
        return None  # 08/05/2023: 8 May or 5 August, depending on where the user lives
    day, month = (first, second) if first > 12 else (second, first)
    return _one_day(date(year, month, day))


def _date_without_year(match: re.Match[str], language: Language, today: date) -> Dates | None:
    """The latest such day up to today (29 February: within the last eight years)."""
    month, day = _month_number(match["month"], language), int(match["day"])
    for year in range(today.year, today.year - 8, -1):
        if day <= calendar.monthrange(year, month)[1] and date(year, month, day) <= today:
            return _one_day(date(year, month, day))
    return None


def _month_of_year(match: re.Match[str], language: Language, today: date) -> Dates:
    return _months(int(match["year"]), _month_number(match["month"], language), 1)


def _month(match: re.Match[str], language: Language, today: date) -> Dates:
    month = _month_number(match["month"], language)
    return _recurring(month, 1, today, _qualifier(match, language))


def _year(match: re.Match[str], language: Language, today: date) -> Dates:
    return _months(int(match["year"]), 1, 12)


def _season_of_year(match: re.Match[str], language: Language, today: date) -> Dates:
    return _months(int(match["year"]), language.seasons[_key(match["season"])], SEASON_MONTHS)


def _season(match: re.Match[str], language: Language, today: date) -> Dates:
    first_month = language.seasons[_key(match["season"])]
    return _recurring(first_month, SEASON_MONTHS, today, _qualifier(match, language))


def _day_word(match: re.Match[str], language: Language, today: date) -> Dates:
    return _one_day(today + timedelta(days=language.day_words[_key(match["day_word"])]))


def _calendar_unit(match: re.Match[str], language: Language, today: date) -> Dates:
    unit = language.calendar_units[_key(match["unit"])]
    return _calendar(unit, today, language.qualifiers[_key(match["qualifier"])])


def _ago(match: re.Match[str], language: Language, today: date) -> Dates:
    unit = language.counted_units[_key(match["unit"])]
    return _calendar(unit, today, -_number(match["number"], language))


def _window(match: re.Match[str], language: Language, today: date) -> Dates:
    """From the day `number` units back to the end of today."""
    units = language.counted_units | language.calendar_units
    number = match.groupdict().get("number")  # none in "the past week"
    unit, count = units[_key(match["unit"])], _number(number, language) if number else 1
    if unit is Unit.DAY:
        first = today - timedelta(days=count)
    elif unit in (Unit.WEEK, Unit.WEEKEND):
        first = today - timedelta(weeks=count)
    else:
        first = _months_back(today, count * (12 if unit is Unit.YEAR else 1))
    return first, today + timedelta(days=1)


def _so_far(match: re.Match[str], language: Language, today: date) -> Dates:
    """From the start of this week, month or year (or of today) to the end of today."""
    unit = language.calendar_units[_key(match["unit"])] if match["unit"] else Unit.DAY
    return _calendar(unit, today, 0)[0], today + timedelta(days=1)


def _weekday(match: re.Match[str], language: Language, today: date) -> Dates:
    weekday = language.weekdays[_key(match["weekday"])]
    offset = _qualifier(match, language)
    if offset == 0:  # this Monday: the one of this week
        day = today + timedelta(days=weekday - today.weekday())
    elif offset == 1:  # next Monday: the first after today
        day = today + timedelta(days=(weekday - today.weekday()) % 7 or 7)
    else:  # on Monday, last Monday: the latest before today
        day = today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    return _one_day(day)


def _decade(match: re.Match[str], language: Language, today: date) -> Dates:
    if match["four_digits"]:
        first_year = int(match["four_digits"])
    else:  # the 90s: the latest decade with those digits that has begun
        first_year = 2000 + int(match["two_digits"])
        if first_year > today.year:
            first_year -= 100
    return date(first_year, 1, 1), date(first_year + 10, 1, 1)


RESOLVERS: dict[Kind, Resolver] = {
    Kind.DATE: _date,
    Kind.SLASHED_DATE: _slashed_date,
    Kind.DATE_WITHOUT_YEAR: _date_without_year,
    Kind.MONTH_OF_YEAR: _month_of_year,
    Kind.MONTH: _month,
    Kind.YEAR: _year,
    Kind.SEASON_OF_YEAR: _season_of_year,
    Kind.SEASON: _season,
    Kind.DAY_WORD: _day_word,
    Kind.CALENDAR_UNIT: _calendar_unit,
    Kind.AGO: _ago,
    Kind.WINDOW: _window,
    Kind.SO_FAR: _so_far,
    Kind.WEEKDAY: _weekday,
    Kind.DECADE: _decade,
}


# Calendar arithmetic on dates.


def _one_day(day: date) -> Dates:
    return day, day + timedelta(days=1)


def _months(year: int, month: int, count: int) -> Dates:
    """`count` calendar months from the first of `month` (counted as `_first_of_month` does)."""
    return _first_of_month(year, month), _first_of_month(year, month + count)


def _first_of_month(year: int, month: int) -> date:
    """The first of a month counted from January of `year`: month 13 is next January, month 0
    last December."""
    extra_years, month_index = divmod(month - 1, 12)
    return date(year + extra_years, month_index + 1, 1)


def _months_back(day: date, count: int) -> date:
    """The same day `count` months earlier, or that month's last day when it is shorter."""
    first = _first_of_month(day.year, day.month - count)
    last_day = calendar.monthrange(first.year, first.month)[1]
    return first.replace(day=min(day.day, last_day))


def _calendar(unit: Unit, today: date, offset: int) -> Dates:
    """The calendar day, week, weekend, month or year `offset` units from today's."""
    monday = today - timedelta(days=today.weekday())
    if unit is Unit.DAY:
        return _one_day(today + timedelta(days=offset))
    if unit is Unit.WEEK:
        first = monday + timedelta(weeks=offset)
        return first, first + timedelta(weeks=1)
    if unit is Unit.WEEKEND:
        saturday = monday + timedelta(weeks=offset, days=5)
        return saturday, saturday + timedelta(days=2)
    if unit is Unit.MONTH:
        return _months(today.year, today.month + offset, 1)
    return _months(today.year + offset, 1, 12)


def _recurring(first_month: int, length: int, today: date, offset: int | None) -> Dates:
    """A month or season named without a year: `offset` None (in May) the latest that has
    begun, -1 (last May) the latest that has ended, 0 (this May) the one under way or else
    this year's, 1 (next May) the first still to begin."""
    latest = today.year if today.month >= first_month else today.year - 1
    under_way = _months(latest, first_month, length)[1] > today
    if offset is None:
        year = latest
    elif offset < 0:
        year = latest - 1 if under_way else latest
    elif offset == 0:
        year = latest if under_way else today.year
    else:
        year = latest + 1
    return _months(year, first_month, length)


# Words to numbers.


def _key(words: str) -> str:
    return " ".join(words.lower().split())


def _month_number(text: str, language: Language) -> int:
    if text.isdigit():
        return int(text)
    key = _key(text)
    return language.months.get(key) or language.month_abbreviations[key]


def _number(text: str, language: Language) -> int:
    return int(text) if text.isdigit() else language.numbers[_key(text)]


def _qualifier(match: re.Match[str], language: Language) -> int | None:
    words = match.groupdict().get("qualifier")
    return language.qualifiers[_key(words)] if words else None
