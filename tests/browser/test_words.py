"""Words people use, in a real browser (issue 30): a search result leads with the memory's
text and names its key after it; a time's tooltip and its text are in one format."""

import re

import pytest
from playwright.sync_api import expect

from activity.actors import Actor
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "I live in Berlin near the Spree"
KEY = "fact:i-live-in-berlin"


def test_a_search_result_shows_the_text_before_the_key(signed_in_page, alice):
    memory_upsert(user=alice, key=KEY, value=TEXT, actor=Actor.for_user(alice))
    page = signed_in_page(alice)
    page.goto("/search/?q=Berlin")

    hit = page.locator(".memory-hit").first
    expect(hit.get_by_role("link", name=TEXT)).to_be_visible()
    expect(hit.locator("code.key")).to_have_text(KEY)
    # Read in order, as a person (or a screen reader) meets them: the text comes first.
    words = hit.inner_text()
    assert words.index(TEXT) < words.index(KEY)
    text_box = hit.get_by_role("link", name=TEXT).bounding_box()
    key_box = hit.locator("code.key").bounding_box()
    assert text_box["y"] < key_box["y"]


def test_a_times_tooltip_and_its_text_use_one_format(signed_in_page, alice):
    memory_upsert(user=alice, key="timezone", value="Europe/Berlin", actor=Actor.for_user(alice))
    memory_upsert(user=alice, key=KEY, value=TEXT, actor=Actor.for_user(alice))
    page = signed_in_page(alice)
    page.goto("/activity/")

    when = page.locator("#activity-list time").first
    shown, tooltip = when.inner_text(), when.get_attribute("title")
    # "Nov 28, 16:21" beside "Nov 28, 2026, 16:21": 24-hour both, the month as a word.
    assert re.fullmatch(r"[A-Z][a-z]{2} \d{1,2}, \d\d:\d\d", shown), shown
    assert re.fullmatch(r"[A-Z][a-z]{2} \d{1,2}, \d{4}, \d\d:\d\d", tooltip), tooltip
    day, _, time = tooltip.rpartition(", ")
    assert shown == f"{day.rsplit(',', 1)[0]}, {time}"
    # In the person's zone: the datetime attribute carries Berlin's offset, and so the text.
    assert re.search(r"\+0[12]:00$", when.get_attribute("datetime"))
    assert time == when.get_attribute("datetime")[11:16]

    # The history page shows relative times ("now"), the same tooltip format.
    page.goto("/?tab=entries")
    page.get_by_role("link", name=f"History of “{TEXT}”").click()
    relative = page.locator(".timeline-head time").first
    assert re.fullmatch(r"[A-Z][a-z]{2} \d{1,2}, \d{4}, \d\d:\d\d", relative.get_attribute("title"))
    content = page.content()
    assert "a.m." not in content
    assert "p.m." not in content
