"""Many entries in a real browser: selecting several and re-tagging, deleting and undoing
them in place with htmx; "Select all on this page" with and without JavaScript; the list's
pages keeping the filters."""

import re

import pytest
from playwright.sync_api import Page, expect

from activity.actors import Actor
from memory.models import Memory, MemoryHistory
from memory.services import memory_upsert
from tests.factories import MemoryFactory

pytestmark = pytest.mark.django_db(transaction=True)


def say(user, key, value, **kwargs):
    return memory_upsert(
        user=user, key=key, value=value, actor=Actor.for_user(user), **kwargs
    ).memory


def tags(user) -> dict[str, list[str]]:
    return dict(Memory.objects.filter(user=user).values_list("key", "tags"))


def box(page: Page, text: str):
    return page.get_by_role("checkbox", name=f"Select “{text}”")


def test_select_retag_delete_and_undo_in_place(signed_in_page, alice, same_document):
    say(alice, "fact:tea", "Drinks green tea")
    say(alice, "fact:standup", "Standup is at 9:30", tags=["work"])
    say(alice, "preference:bullets", "Bullet points in reports")
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    result = page.locator("#bulk-result")
    note = result.locator("p")
    preview = page.locator("#working-memory-text")
    expect(preview).to_contain_text("Drinks green tea")

    with same_document(page):
        box(page, "Drinks green tea").check()
        box(page, "Bullet points in reports").check()
        page.get_by_label("Tags to add or remove").fill("Morning Routine, work")
        page.get_by_role("button", name="Add tags to the selected entries").click()
        expect(note).to_have_text("2 re-tagged. Tag: 'Morning Routine' saved as #morning-routine.")
        # The list came back with the new tags on those two cards, the boxes cleared.
        tea = page.locator("li.entry", has_text="Drinks green tea")
        expect(tea.locator(".badge.tag")).to_have_text(["#morning-routine", "#work"])
        expect(box(page, "Drinks green tea")).not_to_be_checked()
        assert tags(alice) == {
            "fact:tea": ["morning-routine", "work"],
            "fact:standup": ["work"],
            "preference:bullets": ["morning-routine", "work"],
        }

        box(page, "Drinks green tea").check()
        box(page, "Standup is at 9:30").check()
        page.get_by_role("button", name="Delete selected").click()
        expect(note).to_have_text("2 deleted.")
        expect(page.locator("#entry-list li.entry .key")).to_have_text(["preference:bullets"])
        # The preview follows (memory-changed).
        expect(preview).not_to_contain_text("Drinks green tea")
        assert sorted(tags(alice)) == ["preference:bullets"]

        result.get_by_role("button", name="Undo that").click()
        expect(note).to_have_text("2 put back.")
        expect(page.locator("#entry-list li.entry .key")).to_have_count(3)
        expect(preview).to_contain_text("Drinks green tea")
    # Back with the tags the re-tag gave them, each through its own restore.
    assert tags(alice) == {
        "fact:tea": ["morning-routine", "work"],
        "fact:standup": ["work"],
        "preference:bullets": ["morning-routine", "work"],
    }
    assert MemoryHistory.objects.filter(user=alice, action="restore").count() == 2


def test_select_all_on_this_page_ticks_every_box_and_shows_a_partial_choice(
    signed_in_page, alice, same_document
):
    for number in range(3):
        say(alice, f"fact:n{number}", f"Note {number}")
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    every = page.get_by_label("Select all 3 on this page")
    boxes = page.locator("#entry-list input.select-entry")

    every.check()
    for index in range(3):
        expect(boxes.nth(index)).to_be_checked()
    box(page, "Note 1").uncheck()
    expect(every).not_to_be_checked()
    assert every.evaluate("element => element.indeterminate") is True
    box(page, "Note 1").check()
    expect(every).to_be_checked()

    with same_document(page):
        box(page, "Note 2").uncheck()
        page.get_by_role("button", name="Pin selected", exact=True).click()
        expect(page.locator("#bulk-result p")).to_have_text("2 pinned.")
    assert dict(Memory.objects.filter(user=alice).values_list("key", "pinned")) == {
        "fact:n0": True,
        "fact:n1": True,
        "fact:n2": False,
    }


def test_without_javascript_select_all_and_undo_are_plain_forms(signed_in_page, alice):
    for number in range(3):
        say(alice, f"fact:n{number}", f"Note {number}", tags=["work"])
    say(alice, "fact:home", "At home", tags=["home"])
    page = signed_in_page(alice, java_script_enabled=False)
    page.goto("/?tab=entries&tag=work")

    page.get_by_label("Select all 3 on this page").check()
    page.get_by_role("button", name="Delete selected").click()
    expect(page.locator("#flash")).to_have_text("3 deleted.")
    expect(page).to_have_url(re.compile(r"/\?tab=entries&tag=work&batch="))
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == ["fact:home"]

    page.locator("#bulk-result").get_by_role("button", name="Undo that").click()
    expect(page.locator("#flash")).to_have_text("3 put back.")
    expect(page).to_have_url(re.compile(r"/\?tab=entries&tag=work$"))
    expect(page.locator("#entry-list li.entry .key")).to_have_count(3)
    assert Memory.objects.filter(user=alice).count() == 4


def test_pages_of_fifty_keep_the_filters_in_place(signed_in_page, alice, same_document):
    for number in range(60):
        MemoryFactory(user=alice, key=f"fact:item-{number:02d}", value=f"Fact {number}")
    for number in range(3):
        MemoryFactory(user=alice, key=f"preference:p{number}", value=f"Prefers {number}")
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    entries = page.locator("#entry-list li.entry")
    expect(entries).to_have_count(50)
    expect(page.locator("#entry-list")).to_contain_text("1–50 of 63 entries")

    with same_document(page):
        page.get_by_label("Filter by kind").select_option("fact")
        expect(page.locator("#entry-list")).to_contain_text(
            "1–50 of 60 matching (63 entries in all)"
        )
        page.get_by_role("link", name="Next page").click()
        expect(page.locator("#entry-list")).to_contain_text("51–60 of 60 matching")
        expect(entries).to_have_count(10)
        expect(page).to_have_url(re.compile(r"kind=fact&page=2$"))
        # "Select all" now means the ten of this page.
        page.get_by_label("Select all 10 on this page").check()
        page.get_by_role("button", name="Delete selected").click()
        expect(page.locator("#bulk-result p")).to_have_text("10 deleted.")
        # The list stays filtered; page 2 is gone, so it shows the last page there is.
        expect(page.locator("#entry-list")).to_contain_text("50 of 53 entries")
    assert Memory.objects.filter(user=alice, key__startswith="fact:").count() == 50
