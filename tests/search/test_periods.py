"""search/periods.py: the period a query names, against a fixed now in zones that are not UTC.

No database: these are plain functions of the query, now and the zone.
"""

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from search import periods
from search.periods import Period, find_period, without_period

SINGAPORE = ZoneInfo("Asia/Singapore")
NEW_YORK = ZoneInfo("America/New_York")
# Friday 27 November 2026, 10:00 in Singapore: 02:00 UTC, Thursday 21:00 in New York.
NOW = datetime(2026, 11, 27, 10, 0, tzinfo=SINGAPORE)

# The query, the words that name its period, the period's first day and the day after its last.
NAMED = [
    # Dates
    ("what did I do on 2023-05-08", "2023-05-08", date(2023, 5, 8), date(2023, 5, 9)),
    ("dinner on 8 May 2023", "8 May 2023", date(2023, 5, 8), date(2023, 5, 9)),
    ("May 8, 2023", "May 8, 2023", date(2023, 5, 8), date(2023, 5, 9)),
    ("the party on May 8th 2023", "May 8th 2023", date(2023, 5, 8), date(2023, 5, 9)),
    (
        "what happened on the 8th of May 2023?",
        "the 8th of May 2023",
        date(2023, 5, 8),
        date(2023, 5, 9),
    ),
    ("flight on Jan 5, 2024", "Jan 5, 2024", date(2024, 1, 5), date(2024, 1, 6)),
    ("Sunday, 8 May 2022", "8 May 2022", date(2022, 5, 8), date(2022, 5, 9)),
    ("receipt 25/12/2024", "25/12/2024", date(2024, 12, 25), date(2024, 12, 26)),
    ("receipt 12/25/2024", "12/25/2024", date(2024, 12, 25), date(2024, 12, 26)),
    ("backup from 2024/12/25", "2024/12/25", date(2024, 12, 25), date(2024, 12, 26)),
    ("Termin 8.5.2023", "8.5.2023", date(2023, 5, 8), date(2023, 5, 9)),
    # A date without a year: the latest such day up to today
    ("what did we do on May 8", "May 8", date(2026, 5, 8), date(2026, 5, 9)),
    ("on 3 December", "3 December", date(2025, 12, 3), date(2025, 12, 4)),
    ("born on 29 February", "29 February", date(2024, 2, 29), date(2024, 3, 1)),
    # Months
    ("May 2023", "May 2023", date(2023, 5, 1), date(2023, 6, 1)),
    ("what did she do in May 2023?", "May 2023", date(2023, 5, 1), date(2023, 6, 1)),
    ("our Sept. 2025 trip", "Sept. 2025", date(2025, 9, 1), date(2025, 10, 1)),
    ("report 2023-05", "2023-05", date(2023, 5, 1), date(2023, 6, 1)),
    ("the trip in mid-May 2023", "mid-May 2023", date(2023, 5, 1), date(2023, 6, 1)),
    ("what did I read in May", "May", date(2026, 5, 1), date(2026, 6, 1)),
    ("In May I flew to Lisbon", "May", date(2026, 5, 1), date(2026, 6, 1)),
    ("in early May", "early May", date(2026, 5, 1), date(2026, 6, 1)),
    ("gifts bought in December", "December", date(2025, 12, 1), date(2026, 1, 1)),
    ("during November", "November", date(2026, 11, 1), date(2026, 12, 1)),  # under way
    ("last May", "last May", date(2026, 5, 1), date(2026, 6, 1)),
    ("last November", "last November", date(2025, 11, 1), date(2025, 12, 1)),
    ("this March", "this March", date(2026, 3, 1), date(2026, 4, 1)),
    ("next March", "next March", date(2027, 3, 1), date(2027, 4, 1)),
    # Years
    ("what happened in 2022", "2022", date(2022, 1, 1), date(2023, 1, 1)),
    ("2022", "2022", date(2022, 1, 1), date(2023, 1, 1)),
    ("friends since 2019", "2019", date(2019, 1, 1), date(2020, 1, 1)),
    ("in the year 1999", "the year 1999", date(1999, 1, 1), date(2000, 1, 1)),
    ("late 2021", "late 2021", date(2021, 1, 1), date(2022, 1, 1)),
    # Seasons (northern hemisphere)
    ("summer 2022", "summer 2022", date(2022, 6, 1), date(2022, 9, 1)),
    ("photos from the summer of 2022", "the summer of 2022", date(2022, 6, 1), date(2022, 9, 1)),
    ("the fall of 2021", "the fall of 2021", date(2021, 9, 1), date(2021, 12, 1)),
    ("winter 2022", "winter 2022", date(2022, 12, 1), date(2023, 3, 1)),
    ("what did we plant in the spring", "the spring", date(2026, 3, 1), date(2026, 6, 1)),
    ("during the winter", "the winter", date(2025, 12, 1), date(2026, 3, 1)),
    ("last summer", "last summer", date(2026, 6, 1), date(2026, 9, 1)),
    ("last autumn", "last autumn", date(2025, 9, 1), date(2025, 12, 1)),  # this one is under way
    ("this autumn", "this autumn", date(2026, 9, 1), date(2026, 12, 1)),
    ("this winter", "this winter", date(2026, 12, 1), date(2027, 3, 1)),
    ("next spring", "next spring", date(2027, 3, 1), date(2027, 6, 1)),
    # Days
    ("what did I eat yesterday", "yesterday", date(2026, 11, 26), date(2026, 11, 27)),
    ("today", "today", date(2026, 11, 27), date(2026, 11, 28)),
    ("tonight", "tonight", date(2026, 11, 27), date(2026, 11, 28)),
    (
        "the day before yesterday",
        "the day before yesterday",
        date(2026, 11, 25),
        date(2026, 11, 26),
    ),
    ("the film last night", "last night", date(2026, 11, 26), date(2026, 11, 27)),
    ("3 days ago", "3 days ago", date(2026, 11, 24), date(2026, 11, 25)),
    # Weeks (Monday to Monday) and weekends (Saturday and Sunday)
    ("meetings last week", "last week", date(2026, 11, 16), date(2026, 11, 23)),
    ("this week", "this week", date(2026, 11, 23), date(2026, 11, 30)),
    ("next week", "next week", date(2026, 11, 30), date(2026, 12, 7)),
    ("two weeks ago", "two weeks ago", date(2026, 11, 9), date(2026, 11, 16)),
    ("a couple of weeks ago", "a couple of weeks ago", date(2026, 11, 9), date(2026, 11, 16)),
    ("last weekend", "last weekend", date(2026, 11, 21), date(2026, 11, 23)),
    ("this weekend", "this weekend", date(2026, 11, 28), date(2026, 11, 30)),
    # Weekdays: today is a Friday
    ("last Monday", "last Monday", date(2026, 11, 23), date(2026, 11, 24)),
    ("what did I cook on Monday", "Monday", date(2026, 11, 23), date(2026, 11, 24)),
    ("on Friday", "Friday", date(2026, 11, 20), date(2026, 11, 21)),
    ("this Wednesday", "this Wednesday", date(2026, 11, 25), date(2026, 11, 26)),
    ("next Monday", "next Monday", date(2026, 11, 30), date(2026, 12, 1)),
    # Calendar months and years against today
    ("bills last month", "last month", date(2026, 10, 1), date(2026, 11, 1)),
    ("this month", "this month", date(2026, 11, 1), date(2026, 12, 1)),
    ("6 months ago", "6 months ago", date(2026, 5, 1), date(2026, 6, 1)),
    ("last year", "last year", date(2025, 1, 1), date(2026, 1, 1)),
    ("this year", "this year", date(2026, 1, 1), date(2027, 1, 1)),
    ("a year ago", "a year ago", date(2025, 1, 1), date(2026, 1, 1)),
    # Windows that end with today
    ("the past 3 days", "the past 3 days", date(2026, 11, 24), date(2026, 11, 28)),
    ("meetings in the last week", "the last week", date(2026, 11, 20), date(2026, 11, 28)),
    ("earlier this year", "earlier this year", date(2026, 1, 1), date(2026, 11, 28)),
    ("earlier today", "earlier today", date(2026, 11, 27), date(2026, 11, 28)),
    ("earlier this month", "earlier this month", date(2026, 11, 1), date(2026, 11, 28)),
    # Decades
    ("music from the 90s", "the 90s", date(1990, 1, 1), date(2000, 1, 1)),
    ("the 1980s", "the 1980s", date(1980, 1, 1), date(1990, 1, 1)),
    ("in the 20s", "the 20s", date(2020, 1, 1), date(2030, 1, 1)),
    # German
    ("Urlaub im Mai 2023", "Mai 2023", date(2023, 5, 1), date(2023, 6, 1)),
    ("am 8. Mai 2023", "8. Mai 2023", date(2023, 5, 8), date(2023, 5, 9)),
    ("im März", "März", date(2026, 3, 1), date(2026, 4, 1)),
    ("im Sommer", "Sommer", date(2026, 6, 1), date(2026, 9, 1)),
    ("Herbst 2021", "Herbst 2021", date(2021, 9, 1), date(2021, 12, 1)),
    ("gestern", "gestern", date(2026, 11, 26), date(2026, 11, 27)),
    ("letzte Woche", "letzte Woche", date(2026, 11, 16), date(2026, 11, 23)),
    ("vor 3 Tagen", "vor 3 Tagen", date(2026, 11, 24), date(2026, 11, 25)),
    ("vor einem Monat", "vor einem Monat", date(2026, 10, 1), date(2026, 11, 1)),
    ("letzten Montag", "letzten Montag", date(2026, 11, 23), date(2026, 11, 24)),
    ("in den 90ern", "den 90ern", date(1990, 1, 1), date(2000, 1, 1)),
]

NOT_NAMED = [
    "may I ask what you know about me",
    "Will she march?",
    "the spring in my watch is broken",  # a season needs in/during…, last/this/next or a year
    "I have 2 cats",
    "room 101",
    "sunday roast recipe",  # a weekday alone needs on/since… or last/this/next
    "august rush soundtrack",  # a month alone needs in/during/since…
    "Mayday parade tickets",
    "songs by June Carter",
    "songs from June Carter",  # a capitalised word after a month alone: a name
    "quotes in April Ludgate's style",
    "2022 photos",  # a year needs a preposition, or to be the whole query
    "the 2022 photos",
    "this may be wrong",  # "May" after this/last/next only when capitalised
    "it may rain",
    "what comes next may surprise you",
    "spring cleaning tips",
    "fall risk assessment",
    "winter tyres",
    "summer camp ideas",
    "the summer house next to the lake",
    "my weekend plans",
    "2 weeks notice",
    "the last days of summer",
    "tea",
    "oat milk",
    "08/05/2023",  # 8 May or 5 August: no period rather than a wrong one
    "2023-02-30",
    "2023-13-01",
    "in 1850",  # years from 1900 to 2100 only
    "in 2200",
    "in 20220 steps",
    "call 2023-555-0100",
    "order #2023-05",
    "in 2023-2024",  # ranges are not read
    "the march on Washington",
    "Tuesday Weld movies",
]


def midnight(day: date, zone: ZoneInfo = SINGAPORE) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=zone)


@pytest.mark.parametrize(("query", "text", "first", "after"), NAMED, ids=[row[0] for row in NAMED])
def test_a_named_period_is_found_with_its_words(query, text, first, after):
    period = find_period(query, now=NOW, zone=SINGAPORE)
    assert period is not None
    assert (period.start, period.end) == (midnight(first), midnight(after))
    assert period.start.tzinfo == SINGAPORE
    assert period.end.tzinfo == SINGAPORE
    assert period.text == text
    assert period.span == (query.index(text), query.index(text) + len(text))
    assert query[period.span[0] : period.span[1]] == text


@pytest.mark.parametrize("query", NOT_NAMED)
def test_words_that_name_no_period(query):
    assert find_period(query, now=NOW, zone=SINGAPORE) is None


def test_skipping_the_patterns_whose_words_are_absent_changes_no_answer(monkeypatch):
    """find_period runs only the patterns whose words (or a year, or a number) the query
    holds; running them all finds the same periods."""
    queries = [row[0] for row in NAMED] + NOT_NAMED
    skipping = [find_period(query, now=NOW, zone=SINGAPORE) for query in queries]
    monkeypatch.setattr(periods._Rule, "may_match", lambda rule, clues: True)
    assert [find_period(query, now=NOW, zone=SINGAPORE) for query in queries] == skipping


def test_today_is_the_users_day_not_utcs():
    """02:00 UTC on the 27th is the 27th in Singapore and still the 26th in New York."""
    instant = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
    in_singapore = find_period("yesterday", now=instant, zone=SINGAPORE)
    in_new_york = find_period("yesterday", now=instant, zone=NEW_YORK)
    assert in_singapore is not None
    assert in_new_york is not None
    assert in_singapore.start == midnight(date(2026, 11, 26), SINGAPORE)
    assert in_new_york.start == midnight(date(2026, 11, 25), NEW_YORK)
    assert in_new_york.end == midnight(date(2026, 11, 26), NEW_YORK)


def test_a_period_runs_from_local_midnight_to_local_midnight_across_a_change_of_clocks():
    """New York leaves daylight saving time on 1 November 2026: November starts at -04:00
    and ends at -05:00."""
    period = find_period("this month", now=NOW, zone=NEW_YORK)
    assert period is not None
    assert period.start == midnight(date(2026, 11, 1), NEW_YORK)
    assert period.end == midnight(date(2026, 12, 1), NEW_YORK)
    assert period.start.utcoffset().total_seconds() == -4 * 3600
    assert period.end.utcoffset().total_seconds() == -5 * 3600


def test_seasons_and_months_without_a_year_in_january():
    january = datetime(2027, 1, 15, 9, 0, tzinfo=SINGAPORE)

    def dates(query: str) -> tuple[date, date]:
        period = find_period(query, now=january, zone=SINGAPORE)
        assert period is not None
        return period.start.date(), period.end.date()

    assert dates("this winter") == (date(2026, 12, 1), date(2027, 3, 1))  # under way
    assert dates("in the winter") == (date(2026, 12, 1), date(2027, 3, 1))
    assert dates("last winter") == (date(2025, 12, 1), date(2026, 3, 1))
    assert dates("in the summer") == (date(2026, 6, 1), date(2026, 9, 1))
    assert dates("in December") == (date(2026, 12, 1), date(2027, 1, 1))
    assert dates("last month") == (date(2026, 12, 1), date(2027, 1, 1))
    assert dates("this May") == (date(2027, 5, 1), date(2027, 6, 1))


def test_the_first_period_named_counts():
    first = find_period("yesterday and in May 2023", now=NOW, zone=SINGAPORE)
    second = find_period("in May 2023 and yesterday", now=NOW, zone=SINGAPORE)
    both_months = find_period("in May 2023 and June 2024", now=NOW, zone=SINGAPORE)
    assert first is not None
    assert second is not None
    assert both_months is not None
    assert first.text == "yesterday"
    assert second.text == "May 2023"
    assert both_months.text == "May 2023"


def test_at_one_place_the_longest_phrase_counts():
    """ "on May 8, 2023" holds "May 8" (a date without a year) and "May 8, 2023"."""
    period = find_period("on May 8, 2023", now=NOW, zone=SINGAPORE)
    assert period is not None
    assert period.text == "May 8, 2023"
    assert period.start == midnight(date(2023, 5, 8))


def test_case_and_spacing_do_not_matter():
    period = find_period("WHAT HAPPENED  IN   MAY  2023", now=NOW, zone=SINGAPORE)
    assert period is not None
    assert period.text == "MAY  2023"
    assert period.start == midnight(date(2023, 5, 1))


def test_now_must_be_aware():
    with pytest.raises(ValueError, match="aware"):
        find_period("yesterday", now=datetime(2026, 11, 27, 10, 0), zone=SINGAPORE)


@pytest.mark.parametrize(
    ("query", "rest"),
    [
        ("what did she do in May 2023?", "what did she do?"),
        ("Yesterday, what did I eat", "what did I eat"),
        ("dinner with Sam last week", "dinner with Sam"),
        ("photos from the summer of 2022", "photos"),
        ("what happened on the 8th of May 2023 at the park", "what happened at the park"),
        ("what did we talk about during the winter", "what did we talk about"),
        ("meetings in the last week", "meetings"),
        ("songs (from 2019) I liked", "songs I liked"),
        ("what happened, yesterday?", "what happened?"),
        ("Urlaub im Mai 2023", "Urlaub"),
        ("Termine in der letzten Woche", "Termine"),
    ],
)
def test_without_period_takes_out_the_period_and_its_preposition(query, rest):
    assert without_period(query, find_period(query, now=NOW, zone=SINGAPORE)) == rest


@pytest.mark.parametrize("query", ["yesterday", "in May 2023?", "during the winter"])
def test_without_period_keeps_a_query_that_is_only_a_period(query):
    period = find_period(query, now=NOW, zone=SINGAPORE)
    assert period is not None
    assert without_period(query, period) == query


def test_without_period_keeps_a_query_without_one():
    assert without_period("oat milk", None) == "oat milk"


def test_without_period_keeps_a_query_the_period_was_not_found_in():
    period = Period(
        start=midnight(date(2026, 11, 26)),
        end=midnight(date(2026, 11, 27)),
        text="yesterday",
        span=(0, 9),
    )
    assert without_period("tea with Sam", period) == "tea with Sam"
