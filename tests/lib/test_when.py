"""One date and time format per locale (lib/when.py, config/formats/en/formats.py)."""

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.template import Context, Template
from django.utils import timezone

from lib.when import full_text, when_tag, when_text

MOMENT = datetime(2024, 3, 5, 15, 7, tzinfo=UTC)  # 16:07 in Berlin, 23:07 in Singapore


@pytest.fixture
def berlin():
    with timezone.override(ZoneInfo("Europe/Berlin")):
        yield


def test_each_style_in_the_locales_format(berlin):
    assert when_text(MOMENT) == "Mar 5, 2024, 16:07"
    assert when_text(MOMENT, "date") == "Mar 5, 2024"
    assert when_text(MOMENT, "time") == "16:07"
    # Not this year: "short" keeps the year rather than leave a date that reads as this one's.
    assert when_text(MOMENT, "short") == "Mar 5, 2024, 16:07"
    assert full_text(MOMENT) == "Mar 5, 2024, 16:07"


def test_short_leaves_out_only_this_years_year(berlin):
    now = timezone.localtime()
    this_year = now.replace(month=1, day=2, hour=9, minute=5)
    assert when_text(this_year, "short") == "Jan 2, 09:05"
    assert when_text(this_year.replace(year=now.year - 1), "short").startswith(
        f"Jan 2, {now.year - 1}, "
    )


def test_the_active_zone_decides_the_day_and_the_hour():
    with timezone.override(ZoneInfo("Asia/Singapore")):
        assert when_text(MOMENT) == "Mar 5, 2024, 23:07"
    with timezone.override(ZoneInfo("Pacific/Kiritimati")):  # UTC+14: the next day
        assert when_text(MOMENT, "date") == "Mar 6, 2024"


def test_relative_text_keeps_the_full_tooltip(berlin):
    moment = timezone.now() - timedelta(minutes=3)
    html = when_tag(moment, "ago")
    assert ">3\xa0minutes ago</time>" in html
    assert f'title="{full_text(moment)}"' in html


def test_the_tag_writes_one_time_element():
    with timezone.override(ZoneInfo("Europe/Berlin")):
        html = Template('{% when moment "short" css="old" %}').render(Context({"moment": MOMENT}))
    assert html == (
        '<time class="old" datetime="2024-03-05T16:07:00+01:00" title="Mar 5, 2024, 16:07">'
        "Mar 5, 2024, 16:07</time>"
    )
    assert Template("{% when nothing %}").render(Context({"nothing": None})) == ""
    assert Template('{{ moment|when:"time" }}').render(Context({"moment": MOMENT})) == "15:07"


def test_a_day_alone_has_no_time():
    assert when_text(date(2024, 3, 5)) == "Mar 5, 2024"
    assert when_tag(date(2024, 3, 5)) == (
        '<time datetime="2024-03-05" title="Mar 5, 2024">Mar 5, 2024</time>'
    )


def test_an_unknown_style_is_refused():
    with pytest.raises(ValueError, match="Unknown time style"):
        when_text(MOMENT, "long")
