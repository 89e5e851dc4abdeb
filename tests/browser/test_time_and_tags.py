"""Issue 18 points 1 and 6 in a real browser: the time zone set in the profile is the one
every page shows times in (and names), and a tag typed as people write it is kept in the
stored form, which the entry then shows."""

from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from activity.models import ActivityEvent
from memory.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)


def test_setting_a_time_zone_moves_every_time_shown(signed_in_page, alice):
    page = signed_in_page(alice)
    page.goto("/?tab=profile")
    expect(page.locator("#time-zone")).to_contain_text("Times are shown in UTC")

    page.get_by_label("Timezone").fill("Asia/Tokyo")
    page.get_by_role("button", name="Save profile").click()
    # Saved (not only typed) before leaving the page.
    expect(page.locator("#profile-form").get_by_role("status")).to_have_text("Saved timezone.")

    page.goto("/activity/")
    expect(page.locator("#time-zone")).to_have_text("Times are shown in Asia/Tokyo.")
    event = ActivityEvent.objects.filter(user=alice).latest("created_at")
    tokyo = event.created_at.astimezone(ZoneInfo("Asia/Tokyo"))
    first = page.locator("#activity-list tbody tr").first.locator("time")
    expect(first).to_have_text(f"{tokyo:%b} {tokyo.day}, {tokyo:%H:%M}")
    expect(first).to_have_attribute("datetime", tokyo.isoformat())


def test_a_tag_typed_with_capitals_and_spaces_is_kept_normalised(signed_in_page, alice):
    page = signed_in_page(alice)
    page.goto("/?tab=entries")

    page.get_by_label("Text", exact=True).fill("Walks the dog at seven")
    page.get_by_label("Tags", exact=True).fill("Morning Routine, Café")
    page.get_by_role("button", name="Add entry").click()
    expect(page.locator("#entry-add").get_by_role("status")).to_contain_text("Added")

    memory = Memory.objects.get(user=alice, value="Walks the dog at seven")
    assert memory.tags == ["café", "morning-routine"]
    row = page.locator(f"#memory-{memory.pk}")
    expect(row).to_contain_text("morning-routine")
    expect(row).not_to_contain_text("Morning Routine")
