"""Words people use on every page (issue 30): no API path in a page's text, counts with
their proper plural, and every time in one format, its tooltip agreeing with its text.
The pages are the accessibility walk's (tests/browser/test_accessibility.py), with
something on each."""

from __future__ import annotations

import html
import re

import pytest
from django.utils import timezone

from tests.browser.test_accessibility import seed, signed_in_visits

# "1 work items", "1 memories", "1 days": a one with a plural after it (a word or two).
ONE_WITH_A_PLURAL = re.compile(
    r"(?<![\d.,:/-])\b1 (?:[a-z]+ )?(?:[a-z]+ies|[a-z]+[^s']s)\b(?![-'])"
)
TIME = re.compile(r'<time(?: class="[^"]*")? datetime="([^"]+)" title="([^"]+)">([^<]+)</time>')
TAGS = re.compile(r"<[^>]+>")


def visible_text(page: str) -> str:
    """The page's words, as a reader sees them: no tags, scripts or styles."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.DOTALL)
    return html.unescape(" ".join(TAGS.sub(" ", page).split()))


@pytest.fixture
def pages(client, alice, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    seeded = seed(alice, settings)
    client.force_login(alice)
    found = {}
    for visit in signed_in_visits(seeded):
        if visit.status != 200:
            continue  # the error pages need the browser walk's extra URLs
        response = client.get(visit.path)
        assert response.status_code == 200, visit.path
        found[visit.path] = response.content.decode()
    return found


def test_no_page_shows_an_api_path_or_a_wrong_plural(pages):
    assert len(pages) > 30
    for path, page in pages.items():
        words = visible_text(page)
        assert "/api/v1" not in page, path
        assert not re.search(r"\b(?:POST|GET) /", words), path
        assert not ONE_WITH_A_PLURAL.findall(words), (path, ONE_WITH_A_PLURAL.findall(words))


def test_every_time_shown_agrees_with_its_tooltip(pages):
    """Each <time> says the whole date and time in its tooltip and a part of it, in the same
    format, as its text (lib/when.py): never "16:21" beside "4:21 p.m."."""
    times = [(path, *found) for path, page in pages.items() for found in TIME.findall(page)]
    assert len(times) > 20
    year = str(timezone.now().year)
    for path, _iso, title, shown in times:
        assert "a.m." not in title, (path, title)
        assert "p.m." not in title, (path, title)
        assert re.fullmatch(r"[A-Z][a-z]{2} \d{1,2}, \d{4}(, \d\d:\d\d)?", title), (path, title)
        if shown.endswith("ago") or shown in ("now", "a moment ago") or "from now" in shown:
            continue  # relative ("3 minutes ago"): the tooltip says when
        # The text is the tooltip, or the tooltip without its year, or its time alone.
        assert shown in (
            title,
            title.replace(f", {year}", ""),
            title.rsplit(", ", 1)[-1],
            title.rsplit(", ", 1)[0],
        ), (path, title, shown)
