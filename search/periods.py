"""The period a search query names ("May 2023", "last week", "in the spring") and the query
without it, for date-aware search (issue 26, item 2).

Only the standard library (re, datetime, zoneinfo): python-dateutil reaches the environment
only through Celery, not as a declared dependency, and the arithmetic needed here is stepping
calendar months, a few lines; dateparser is not installed and would load a large locale
database into every search process for a handful of phrase shapes.

How phrases resolve, against today's date in the user's zone (`now` seen in `zone`); every
period runs from local midnight to local midnight, `end` exclusive:

- A date: ISO `2023-05-08`, `8 May 2023`, `May 8, 2023`, `May 8th 2023`, `the 8th of May
  2023`, `2023/05/08`, `8.5.2023` (day first, as everywhere dots are used). `08/05/2023` is
  8 May in most of the world and 5 August in the US, so a slashed date counts only when it
  reads one way (`25/12/2024`, `12/25/2024`): no period beats a wrong one.
- A month: `May 2023`, `2023-05`; `in May` is the latest May that has begun (this one, when
  it is May); `last May` the latest that has ended; `this May` this year's; `next May` the
  first still to begin. Seasons the same way: `summer 2022`, `in the spring`, `last summer`.
  `early`, `mid-` or `late` before a month or a year still name all of it: the period is a
  favour in ranking, not a filter.
- A year: `in 2022`, `the year 2022`, `late 2022`, or a year that is the whole query; a year
  elsewhere ("2022 photos") is more often a number than a period.
- Days, weeks, months, years against today: `yesterday`, `last week`, `this month`, `3 days
  ago` (the calendar day, week, month or year that holds the date three days back),
  `the past 3 days` (those three and today), `the last week` (the seven days before today,
  and today), `earlier this year` (from its start to the end of today).
- Weeks start on Monday (ISO 8601); a weekend is Saturday and Sunday, `last weekend` the one
  before this week's. `on Monday` and `last Monday` are the latest Monday before today,
  `this Monday` this week's, `next Monday` the first after today.
- Seasons are the northern hemisphere's meteorological ones: spring March to May, summer
  June to August, autumn September to November, winter December to February; `winter 2022`
  begins in December 2022.
- A decade: `the 1990s`, `in the 90s` (the latest such decade that has begun).

What is not a period: a month, weekday or year standing alone ("august rush", "sunday roast
recipe", "2 cats") needs a preposition before it (in, on, during, since…); a season needs a
preposition, last/this/next, or a year ("the spring in my watch"). In English a month alone
followed by a capitalised word is a name ("songs from June Carter"), and "May" after
last/this/next counts only when capitalised ("this may be wrong").

A preposition licenses a phrase but does not change the period: "since May 2023" favours May
2023, "before 2020" the year 2020. Ranges ("2020-2022", "from May to July") are not read.

When the query names several periods, the first one counts; at the same place, the longest
phrase ("May 8, 2023" rather than "May 8").

Each language is one table (`Language`: its words and the shapes its phrases take); English
and German are here. The patterns are compiled once, at import. A query is split into its
words once; only the patterns whose words (or a year, or a number) it holds are run, each one
linear scan over alternations of literal words; the rest is dictionary look-ups.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from enum import Enum, auto
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Period:
    """A stretch of time a query names, and where the query names it."""

    start: datetime  # timezone-aware, inclusive
    end: datetime  # timezone-aware, exclusive
    text: str  # the words of the query that name the period, as written
    span: tuple[int, int]  # their character offsets in the query: query[span[0]:span[1]] == text


class Unit(Enum):
    DAY = auto()
    WEEK = auto()
    WEEKEND = auto()
    MONTH = auto()
    YEAR = auto()


class Kind(Enum):
    """What a pattern's match means; each kind has one resolver (`_RESOLVERS`)."""

    DATE = auto()  # groups year, month, day
    SLASHED_DATE = auto()  # groups first, second, year: day/month or month/day
    DATE_WITHOUT_YEAR = auto()  # groups month, day
    MONTH_OF_YEAR = auto()  # groups year, month
    MONTH = auto()  # group month, qualifier?
    YEAR = auto()  # group year
    SEASON_OF_YEAR = auto()  # groups season, year
    SEASON = auto()  # group season, qualifier?
    DAY_WORD = auto()  # group day_word
    CALENDAR_UNIT = auto()  # groups qualifier, unit
    AGO = auto()  # groups number, unit
    WINDOW = auto()  # groups number?, unit
    SO_FAR = auto()  # group unit? (none: today)
    WEEKDAY = auto()  # group weekday, qualifier?
    DECADE = auto()  # group two_digits or four_digits


SPRING, SUMMER, AUTUMN, WINTER = 3, 6, 9, 12  # a season's first month
SEASON_MONTHS = 3


@dataclass(frozen=True)
class Language:
    """One language's words, and the shapes of its phrases.

    A pattern is a regular expression (matched ignoring case) whose placeholders stand for
    the word lists below: {month} (full names), {month_any} (names or abbreviations),
    {month_named} (full names, the `capitalised` ones only as capitalised), {weekday},
    {season}, {qualifier}, {day_word}, {calendar_unit}, {counted_unit}, {number}, {prep},
    {season_prep}, {weekday_prep}, and the numbers {year} (1900 to 2100) and {day}. A group
    named `body` marks the words that name the period (a preposition before them is left
    out); without one, the whole match names it. Keys are lower case.

    A pattern of a kind must contain a word of the tables `_ANCHORS` gives for its kind (or a
    year, or a number): a query holding none of them skips the pattern.
    """

    months: Mapping[str, int]
    month_abbreviations: Mapping[str, int]  # need a day or a year beside them
    weekdays: Mapping[str, int]  # Monday is 0
    seasons: Mapping[str, int]
    qualifiers: Mapping[str, int]  # last: -1, this: 0, next: 1
    day_words: Mapping[str, int]  # days from today
    calendar_units: Mapping[str, Unit]  # after a qualifier: "last week"
    counted_units: Mapping[str, Unit]  # after a number: "3 weeks ago"
    numbers: Mapping[str, int]  # numbers written as words
    prepositions: tuple[str, ...]  # make a month, a date without a year or a year a period
    season_prepositions: tuple[str, ...]
    weekday_prepositions: tuple[str, ...]
    other_prepositions: tuple[str, ...]  # taken out with a period, license nothing
    articles: tuple[str, ...]  # taken out with a period: "in the last week"
    capitalised: frozenset[str]  # months that are also common words ("may")
    patterns: tuple[tuple[Kind, str], ...]

    def all_prepositions(self) -> set[str]:
        return {
            *self.prepositions,
            *self.season_prepositions,
            *self.weekday_prepositions,
            *self.other_prepositions,
        }


ENGLISH_DAY = r"{day}(?:st|nd|rd|th)?"
# "early May", "mid-May 2023": the words name the whole month (a favour, not a filter).
PART_OF = r"(?:(?:early|mid|late)[-\s]+)?"

ENGLISH = Language(
    months={
        name: number
        for number, name in enumerate(
            (
                "january",
                "february",
                "march",
                "april",
                "may",
                "june",
                "july",
                "august",
                "september",
                "october",
                "november",
                "december",
            ),
            start=1,
        )
    },
    month_abbreviations={
        "jan": 1,
        "feb": 2,
        "mar": 3,
        "apr": 4,
        "jun": 6,
        "jul": 7,
        "aug": 8,
        "sep": 9,
        "sept": 9,
        "oct": 10,
        "nov": 11,
        "dec": 12,
    },
    weekdays={
        "monday": 0,
        "tuesday": 1,
        "wednesday": 2,
        "thursday": 3,
        "friday": 4,
        "saturday": 5,
        "sunday": 6,
    },
    seasons={
        "spring": SPRING,
        "summer": SUMMER,
        "autumn": AUTUMN,
        "fall": AUTUMN,
        "winter": WINTER,
    },
    qualifiers={"last": -1, "this": 0, "next": 1},
    day_words={
        "today": 0,
        "tonight": 0,
        "this morning": 0,
        "this afternoon": 0,
        "this evening": 0,
        "yesterday": -1,
        "last night": -1,
        "the day before yesterday": -2,
        "tomorrow": 1,
    },
    calendar_units={
        "week": Unit.WEEK,
        "weekend": Unit.WEEKEND,
        "month": Unit.MONTH,
        "year": Unit.YEAR,
    },
    counted_units={
        "day": Unit.DAY,
        "days": Unit.DAY,
        "week": Unit.WEEK,
        "weeks": Unit.WEEK,
        "weekend": Unit.WEEKEND,
        "weekends": Unit.WEEKEND,
        "month": Unit.MONTH,
        "months": Unit.MONTH,
        "year": Unit.YEAR,
        "years": Unit.YEAR,
    },
    numbers={
        "a": 1,
        "an": 1,
        "one": 1,
        "a couple of": 2,
        "two": 2,
        "three": 3,
        "four": 4,
        "five": 5,
        "six": 6,
        "seven": 7,
        "eight": 8,
        "nine": 9,
        "ten": 10,
        "eleven": 11,
        "twelve": 12,
    },
    prepositions=(
        "in",
        "on",
        "during",
        "since",
        "from",
        "until",
        "till",
        "before",
        "after",
        "around",
        "throughout",
    ),
    season_prepositions=("in", "during", "over", "through", "throughout", "since"),
    weekday_prepositions=("on", "since", "from", "until", "till", "before", "after"),
    other_prepositions=("of", "for", "at", "by"),
    articles=("the",),
    capitalised=frozenset({"may"}),
    patterns=(
        (Kind.DATE, rf"(?:the\s+)?{ENGLISH_DAY}(?:\s+of)?\s+{{month_any}},?\s+{{year}}"),
        (Kind.DATE, rf"{{month_any}}\s+(?:the\s+)?{ENGLISH_DAY},?\s+{{year}}"),
        (
            Kind.DATE_WITHOUT_YEAR,
            rf"{{prep}}\s+(?P<body>(?:the\s+)?{ENGLISH_DAY}(?:\s+of)?\s+{{month_any}})",
        ),
        (Kind.DATE_WITHOUT_YEAR, rf"{{prep}}\s+(?P<body>{{month_any}}\s+(?:the\s+)?{ENGLISH_DAY})"),
        (Kind.MONTH_OF_YEAR, rf"{PART_OF}{{month_any}},?\s+(?:of\s+)?{{year}}"),
        # A capitalised word after a month alone makes it a name: "from June Carter".
        (Kind.MONTH, rf"{{prep}}\s+(?P<body>{PART_OF}{{month}})(?!\s+(?-i:[A-Z][a-z]))"),
        (Kind.MONTH, r"{qualifier}\s+{month_named}(?!\s+(?-i:[A-Z][a-z]))"),
        (Kind.YEAR, r"{prep}\s+(?P<body>{year})"),
        (Kind.YEAR, r"(?:the\s+)?year\s+{year}"),
        (Kind.YEAR, r"(?:early|mid|late)[-\s]+{year}"),
        (Kind.SEASON_OF_YEAR, r"(?:the\s+)?{season},?\s+(?:of\s+)?{year}"),
        (Kind.SEASON, r"{season_prep}\s+(?P<body>(?:the\s+)?{season})"),
        (Kind.SEASON, r"{qualifier}\s+{season}"),
        (Kind.DAY_WORD, r"{day_word}"),
        (Kind.CALENDAR_UNIT, r"{qualifier}\s+{calendar_unit}"),
        (Kind.AGO, r"{number}\s+{counted_unit}\s+ago"),
        (Kind.WINDOW, r"(?:the\s+)?(?:past|last)\s+{number}\s+{counted_unit}"),
        # "the last week" is the seven days to today; "last week" the calendar week before this.
        (Kind.WINDOW, r"the\s+(?:past|last)\s+{calendar_unit}"),
        (Kind.SO_FAR, r"earlier\s+(?:this\s+{calendar_unit}|today)"),
        (Kind.WEEKDAY, r"{weekday_prep}\s+(?P<body>{weekday})"),
        (Kind.WEEKDAY, r"{qualifier}\s+{weekday}"),
        (
            Kind.DECADE,
            r"the\s+'?(?P<two_digits>\d0)'?s|(?:the\s+)?(?P<four_digits>(?:19|20)\d0)'?s",
        ),
    ),
)

GERMAN = Language(
    months={
        "januar": 1,
        "jänner": 1,
        "februar": 2,
        "märz": 3,
        "maerz": 3,
        "april": 4,
        "mai": 5,
        "juni": 6,
        "juli": 7,
        "august": 8,
        "september": 9,
        "oktober": 10,
        "november": 11,
        "dezember": 12,
    },
    month_abbreviations={
        "jan": 1,
        "feb": 2,
        "mär": 3,
        "apr": 4,
        "jun": 6,
        "jul": 7,
        "aug": 8,
        "sep": 9,
        "sept": 9,
        "okt": 10,
        "nov": 11,
        "dez": 12,
    },
    weekdays={
        "montag": 0,
        "dienstag": 1,
        "mittwoch": 2,
        "donnerstag": 3,
        "freitag": 4,
        "samstag": 5,
        "sonnabend": 5,
        "sonntag": 6,
    },
    seasons={
        "frühling": SPRING,
        "fruehling": SPRING,
        "frühjahr": SPRING,
        "sommer": SUMMER,
        "herbst": AUTUMN,
        "winter": WINTER,
    },
    qualifiers={
        **dict.fromkeys(("letzte", "letzten", "letzter", "letztes"), -1),
        **dict.fromkeys(("vergangene", "vergangenen", "vergangener", "vergangenes"), -1),
        **dict.fromkeys(("vorige", "vorigen", "voriger", "voriges"), -1),
        **dict.fromkeys(("diese", "diesen", "dieser", "dieses"), 0),
        **dict.fromkeys(("nächste", "nächsten", "nächster", "nächstes"), 1),
        **dict.fromkeys(("naechste", "naechsten", "naechster", "naechstes"), 1),
    },
    day_words={
        "heute": 0,
        "heute morgen": 0,
        "heute früh": 0,
        "heute abend": 0,
        "gestern": -1,
        "gestern abend": -1,
        "letzte nacht": -1,
        "vorgestern": -2,
    },
    calendar_units={
        "woche": Unit.WEEK,
        "wochenende": Unit.WEEKEND,
        "monat": Unit.MONTH,
        "jahr": Unit.YEAR,
    },
    counted_units={
        "tag": Unit.DAY,
        "tagen": Unit.DAY,
        "woche": Unit.WEEK,
        "wochen": Unit.WEEK,
        "wochenende": Unit.WEEKEND,
        "wochenenden": Unit.WEEKEND,
        "monat": Unit.MONTH,
        "monaten": Unit.MONTH,
        "jahr": Unit.YEAR,
        "jahren": Unit.YEAR,
    },
    numbers={
        **dict.fromkeys(("ein", "eine", "einem", "einer", "einen"), 1),
        "zwei": 2,
        "drei": 3,
        "vier": 4,
        "fünf": 5,
        "sechs": 6,
        "sieben": 7,
        "acht": 8,
        "neun": 9,
        "zehn": 10,
        "elf": 11,
        "zwölf": 12,
    },
    # Not "in": German says "im Mai", and English's "in" before "April" would reach past
    # English's own guard for names ("in April Ludgate's style").
    prepositions=("im", "am", "seit", "ab", "während", "bis", "vor", "nach", "von", "vom"),
    season_prepositions=("im", "seit", "während"),
    weekday_prepositions=("am", "seit", "ab", "bis", "von", "vom"),
    other_prepositions=("für", "aus"),
    articles=("dem", "den", "der", "die", "das"),
    capitalised=frozenset(),
    patterns=(
        (Kind.DATE, r"{day}\.?\s+{month_any}\s+{year}"),
        (Kind.DATE_WITHOUT_YEAR, r"{prep}\s+(?P<body>{day}\.?\s+{month_any})"),
        (Kind.MONTH_OF_YEAR, r"{month_any}\s+{year}"),
        (Kind.MONTH, r"{prep}\s+(?P<body>{month})"),
        (Kind.MONTH, r"{qualifier}\s+{month_named}"),
        (Kind.YEAR, r"{prep}\s+(?P<body>{year})"),
        (Kind.YEAR, r"Jahre?\s+{year}"),
        (Kind.SEASON_OF_YEAR, r"{season}\s+{year}"),
        (Kind.SEASON, r"{season_prep}\s+(?P<body>{season})"),
        (Kind.SEASON, r"{qualifier}\s+{season}"),
        (Kind.DAY_WORD, r"{day_word}"),
        (Kind.CALENDAR_UNIT, r"{qualifier}\s+{calendar_unit}"),
        (Kind.AGO, r"vor\s+{number}\s+{counted_unit}"),
        (Kind.WINDOW, r"(?:den\s+)?(?:letzten|vergangenen)\s+{number}\s+{counted_unit}"),
        (Kind.WEEKDAY, r"{weekday_prep}\s+(?P<body>{weekday})"),
        (Kind.WEEKDAY, r"{qualifier}\s+{weekday}"),
        (
            Kind.DECADE,
            r"(?:die|den)\s+(?P<two_digits>\d0)er(?:n|\s+jahren?)?"
            r"|(?:(?:die|den)\s+)?(?P<four_digits>(?:19|20)\d0)er(?:n|\s+jahren?)?",
        ),
    ),
)

LANGUAGES = (ENGLISH, GERMAN)

# Numbers, the same in every language.
NUMERIC_PATTERNS = (
    (Kind.DATE, r"{year}-(?P<month>0[1-9]|1[0-2])-(?P<day>0[1-9]|[12]\d|3[01])"),
    (Kind.MONTH_OF_YEAR, r"{year}-(?P<month>0[1-9]|1[0-2])"),
    (Kind.DATE, r"{year}/(?P<month>0?[1-9]|1[0-2])/{day}"),
    (Kind.DATE, r"{day}\.(?P<month>0?[1-9]|1[0-2])\.{year}"),
    (Kind.SLASHED_DATE, r"(?P<first>\d{1,2})/(?P<second>\d{1,2})/{year}"),
    (Kind.YEAR, r"^\s*(?P<body>{year})[\s?.!]*$"),  # a year that is the whole query
)

YEAR = r"(?P<year>19\d\d|20\d\d|2100)"
DAY = r"(?P<day>3[01]|[12]\d|0?[1-9])"
# A period starts and ends at a word's edge, and not inside a number, an amount or a version
# ("$2022", "2.2022", "2022%", "10:2022").
START_GUARD = r"(?<!\w)(?<![$€£#])(?<!\d[.,:/-])"
END_GUARD = r"(?!\w)(?![.,:/-]\d)(?!%)"

Dates = tuple[date, date]  # first day, day after the last
Resolver = Callable[[re.Match[str], Language, date], Dates | None]


def find_period(query: str, *, now: datetime, zone: ZoneInfo) -> Period | None:
    """The period the query names, resolved in `zone` against `now` (aware); None when it
    names none."""
    if now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    today = now.astimezone(zone).date()
    clues = _Clues.of(query)
    found = [
        match for rule in _RULES if rule.may_match(clues) and (match := rule.first(query, today))
    ]
    if not found:
        return None
    # The first period named; at the same place, the longest phrase.
    start, end, (first, after) = min(found, key=lambda match: (match[0], -match[1]))
    return Period(
        start=_midnight(first, zone),
        end=_midnight(after, zone),
        text=query[start:end],
        span=(start, end),
    )


def without_period(query: str, period: Period | None) -> str:
    """The query with the period's words (and a preposition before them such as
    in/on/during/since/from, and an article) taken out, spaces tidied; the query itself when
    period is None or when nothing would be left. "last" in "last week" is one of the
    period's words: it says which week."""
    if period is None:
        return query
    start, end = period.span
    if query[start:end] != period.text:  # a period found in another query
        return query
    before = _WORDS_BEFORE_A_PERIOD.sub("", query[:start])
    rest = _tidy(f"{before} {query[end:]}")
    return rest if re.search(r"\w", rest) else query


def _tidy(text: str) -> str:
    text = re.sub(r"\(\s*\)", " ", text)  # parentheses that held only the period
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r" (?=[,.;:!?)])|(?<=\() ", "", text)
    text = re.sub(r"[,;:](?=[,;:.!?)]|$)", "", text)  # a comma left before other punctuation
    return text.strip(" ,;:")


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(), tzinfo=zone)


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


_RESOLVERS: dict[Kind, Resolver] = {
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


# Compiling the tables, once.


def _alternation(words: Iterable[str]) -> str:
    """The words as one alternation, shared beginnings written once ("ju(?:ne|ly)"): a
    position that starts none of them is left after a character or two, not after trying
    each word. A space in a phrase is any whitespace."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for character in " ".join(word.lower().split()):
            node = node.setdefault(character, {})
        node[""] = {}  # a word ends here
    return _trie_pattern(trie)


def _trie_pattern(node: dict[str, dict]) -> str:
    branches = [
        (r"\s+" if character == " " else re.escape(character)) + _trie_pattern(child)
        for character, child in sorted(node.items())
        if character
    ]
    if not branches:
        return ""
    pattern = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    return f"(?:{pattern})?" if "" in node else pattern


def _named_months(language: Language) -> str:
    """Full month names; those that are also common words only as capitalised."""
    plain = _alternation(set(language.months) - language.capitalised)
    capitalised = [f"(?-i:{re.escape(name.capitalize())})" for name in language.capitalised]
    return "|".join([plain, *capitalised])


def _fragments(language: Language | None) -> dict[str, str]:
    fragments = {"year": YEAR, "day": DAY}
    if language is None:
        return fragments
    numbers = _alternation(language.numbers)
    abbreviations = language.month_abbreviations
    return fragments | {
        "month": f"(?P<month>{_alternation(language.months)})",
        "month_any": rf"(?P<month>{_alternation([*language.months, *abbreviations])})\.?",
        "month_named": f"(?P<month>{_named_months(language)})",
        "weekday": f"(?P<weekday>{_alternation(language.weekdays)})",
        "season": f"(?P<season>{_alternation(language.seasons)})",
        "qualifier": f"(?P<qualifier>{_alternation(language.qualifiers)})",
        "day_word": f"(?P<day_word>{_alternation(language.day_words)})",
        "calendar_unit": f"(?P<unit>{_alternation(language.calendar_units)})",
        "counted_unit": f"(?P<unit>{_alternation(language.counted_units)})",
        "number": rf"(?P<number>\d{{1,3}}|{numbers})",
        "prep": f"(?:{_alternation(language.prepositions)})",
        "season_prep": f"(?:{_alternation(language.season_prepositions)})",
        "weekday_prep": f"(?:{_alternation(language.weekday_prepositions)})",
    }


def _compile(pattern: str, fragments: Mapping[str, str]) -> re.Pattern[str]:
    """A pattern with its placeholders filled ({1,3} and the like are left as they are)."""
    filled = re.sub(r"\{(\w+)\}", lambda name: fragments.get(name[1], name[0]), pattern)
    if "(?P<body>" not in filled:
        filled = f"(?P<body>{filled})"
    return re.compile(f"{START_GUARD}(?:{filled}){END_GUARD}", re.IGNORECASE)


# Which rules can match: most queries name no period, and a rule whose words (or numbers) are
# all absent from the query need not be tried.


@dataclass(frozen=True)
class _Clues:
    words: frozenset[str]  # the query's words in lower case, without digits
    has_number: bool
    has_year: bool  # four digits from 1900 to 2100

    @classmethod
    def of(cls, query: str) -> _Clues:
        return cls(
            words=frozenset(re.findall(r"[^\W\d_]+", query.lower())),
            has_number=any(character.isdigit() for character in query),
            has_year=_YEAR_DIGITS.search(query) is not None,
        )


_YEAR_DIGITS = re.compile(r"(?<!\d)(?:19\d\d|20\d\d|2100)(?!\d)")
# What every pattern of a kind contains: a year, a number, or a word of these tables.
NEEDS_YEAR, NEEDS_NUMBER = "year", "number"
_ANCHORS: dict[Kind, tuple[str, ...]] = {
    Kind.DATE: (NEEDS_YEAR,),
    Kind.SLASHED_DATE: (NEEDS_YEAR,),
    Kind.DATE_WITHOUT_YEAR: (NEEDS_NUMBER,),
    Kind.MONTH_OF_YEAR: (NEEDS_YEAR,),
    Kind.MONTH: ("months",),
    Kind.YEAR: (NEEDS_YEAR,),
    Kind.SEASON_OF_YEAR: (NEEDS_YEAR,),
    Kind.SEASON: ("seasons",),
    Kind.DAY_WORD: ("day_words",),
    Kind.CALENDAR_UNIT: ("calendar_units",),
    Kind.AGO: ("counted_units",),
    Kind.WINDOW: ("counted_units", "calendar_units"),
    Kind.SO_FAR: ("calendar_units", "day_words"),  # earlier this year, earlier today
    Kind.WEEKDAY: ("weekdays",),
    Kind.DECADE: (NEEDS_NUMBER,),
}


@dataclass(frozen=True)
class _Rule:
    kind: Kind
    pattern: re.Pattern[str]
    language: Language
    needs: str | None  # NEEDS_YEAR, NEEDS_NUMBER, or None: one of `words`
    words: frozenset[str]

    @classmethod
    def build(
        cls, kind: Kind, pattern: str, language: Language, fragments: dict[str, str]
    ) -> _Rule:
        anchors = _ANCHORS[kind]
        needs = anchors[0] if anchors[0] in (NEEDS_YEAR, NEEDS_NUMBER) else None
        # A phrase is there only if its last word is: "the day before yesterday".
        words = frozenset(
            phrase.split()[-1]
            for table in anchors
            if needs is None
            for phrase in getattr(language, table)
        )
        return cls(kind, _compile(pattern, fragments), language, needs, words)

    def may_match(self, clues: _Clues) -> bool:
        if self.needs == NEEDS_YEAR:
            return clues.has_year
        if self.needs == NEEDS_NUMBER:
            return clues.has_number
        return not self.words.isdisjoint(clues.words)

    def first(self, query: str, today: date) -> tuple[int, int, Dates] | None:
        """The first match that names real days: where its words are, and the days."""
        for match in self.pattern.finditer(query):
            try:
                dates = _RESOLVERS[self.kind](match, self.language, today)
            except (ValueError, OverflowError):  # 31 February, 999 years before year 1
                continue
            if dates:
                return (*match.span("body"), dates)
        return None


def _rules() -> tuple[_Rule, ...]:
    # The numeric patterns look up no words: any table will do for them.
    numeric = _fragments(None)
    rules = [_Rule.build(kind, pattern, ENGLISH, numeric) for kind, pattern in NUMERIC_PATTERNS]
    for language in LANGUAGES:
        fragments = _fragments(language)
        rules += [
            _Rule.build(kind, pattern, language, fragments) for kind, pattern in language.patterns
        ]
    return tuple(rules)


def _words_before_a_period() -> re.Pattern[str]:
    """A preposition and an article just before a period, at the end of what precedes it."""
    prepositions = set().union(*(language.all_prepositions() for language in LANGUAGES))
    articles = {article for language in LANGUAGES for article in language.articles}
    return re.compile(
        rf"(?<!\w)(?:(?:{_alternation(prepositions)})\s+)?(?:(?:{_alternation(articles)})\s+)?$",
        re.IGNORECASE,
    )


_RULES = _rules()
_WORDS_BEFORE_A_PERIOD = _words_before_a_period()
