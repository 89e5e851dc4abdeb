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
and German are in search/period_words.py, the resolvers that turn a match into days in
search/period_resolvers.py. The patterns are compiled once, at import. A query is split into its
words once; only the patterns whose words (or a year, or a number) it holds are run, each one
linear scan over alternations of literal words; the rest is dictionary look-ups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from search.period_resolvers import RESOLVERS, Dates
from search.period_words import (
    DAY,
    ENGLISH,
    LANGUAGES,
    NUMERIC_PATTERNS,
    YEAR,
    Kind,
    Language,
)


@dataclass(frozen=True)
class Period:
    """A stretch of time a query names, and where the query names it."""

    start: datetime  # timezone-aware, inclusive
    end: datetime  # timezone-aware, exclusive
    text: str  # the words of the query that name the period, as written
    span: tuple[int, int]  # their character offsets in the query: query[span[0]:span[1]] == text


# A period starts and ends at a word's edge, and not inside a number, an amount or a version
# ("$2022", "2.2022", "2022%", "10:2022").
START_GUARD = r"(?<!\w)(?<![$€£#])(?<!\d[.,:/-])"
END_GUARD = r"(?!\w)(?![.,:/-]\d)(?!%)"


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
                dates = RESOLVERS[self.kind](match, self.language, today)
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
