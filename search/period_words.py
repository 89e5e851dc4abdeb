"""The words of each language a search query can name a period in, and the shapes its phrases
take (search/periods.py reads them; issue 26, item 2).

Each language is one table (`Language`); English and German are here, with the numeric
patterns that are the same in every language. search/periods.py compiles them once, at
import, and search/period_resolvers.py turns a match into the days it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, auto


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

    A pattern of a kind must contain a word of the tables `_ANCHORS` (search/periods.py)
    gives for its kind (or a
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
