"""Issue 18 points 1 and 6 in a real browser: the time zone set in the profile is the one
every page shows times in (and names), and a tag typed as people write it is kept in the
stored form, which the entry then shows."""

from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from activity.actors import Actor
from activity.models import ActivityEvent
from memory.models import Memory
from memory.services import memory_upsert

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


def test_a_typed_tag_is_said_as_saved_and_found_by_the_filter_as_typed(
    signed_in_page, alice, htmx_settled
):
    """Issue 30: "Morning Routine" is saved as #morning-routine, the page says so, and the
    filter finds the entry by what was typed; an emoji alone is left out with a word."""
    memory_upsert(
        user=alice,
        key="fact:tea",
        value="Drinks green tea",
        actor=Actor.for_user(alice),
        tags=["tea"],
    )
    page = signed_in_page(alice)
    page.goto("/?tab=entries")

    page.get_by_label("Text", exact=True).fill("Walks the dog at seven")
    page.get_by_label("Tags", exact=True).fill("Morning Routine, 🍣")
    page.get_by_role("button", name="Add entry").click()
    status = page.locator("#entry-add").get_by_role("status")
    expect(status).to_contain_text("'Morning Routine' saved as #morning-routine")
    expect(status).to_contain_text("'🍣' left out: a tag needs a letter or a digit")
    memory = Memory.objects.get(user=alice, value="Walks the dog at seven")
    assert memory.tags == ["morning-routine"]
    htmx_settled(page)

    page.get_by_label("Filter by tag").fill("Morning Routine")
    page.get_by_label("Filter by tag").press("Enter")
    expect(page.locator("#tag-typed")).to_have_text("Tag “Morning Routine” is #morning-routine.")
    entries = page.locator("#entry-list")
    expect(entries.locator(f"#memory-{memory.pk}")).to_be_visible()
    expect(entries).not_to_contain_text("Drinks green tea")


def test_a_time_zone_typed_in_lower_case_is_saved_by_its_name(signed_in_page, alice):
    page = signed_in_page(alice)
    page.goto("/?tab=profile")

    page.get_by_label("Timezone").fill("europe/berlin")
    page.get_by_role("button", name="Save profile").click()

    expect(page.locator("#profile-form").get_by_role("status")).to_have_text("Saved timezone.")
    expect(page.get_by_label("Timezone")).to_have_value("Europe/Berlin")
    assert Memory.objects.get(user=alice, key="timezone").value == "Europe/Berlin"
    page.reload()
    expect(page.locator("#time-zone")).to_have_text("Times are shown in Europe/Berlin.")
