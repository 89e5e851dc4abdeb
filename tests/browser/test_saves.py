"""Saves that mean what they say (issue 30), in a real browser: the profile's one Save
keeps every field (a reload shows them all, or with a refused field none), a restore brings
back the same memories (their history links work again, their creation time kept), and
adding an entry that is there already says so and links to it."""

import re

import pytest
from playwright.sync_api import Page, expect

from activity.actors import Actor
from memory.bulk import memory_delete_all
from memory.models import Memory
from memory.services import memory_delete, memory_upsert

pytestmark = pytest.mark.django_db(transaction=True)

OLD = {
    "Name": "Kevin",
    "Role": "Analyst",
    "Company": "Acme",
    "Timezone": "Europe/Paris",
    "Summary": "Counts things.",
}
NEW = {
    "Name": "Kevin Tan",
    "Role": "Head of Growth",
    "Company": "YARNNN",
    "Timezone": "Asia/Singapore",
    "Summary": "Runs growth experiments.",
}


def profile_field(page: Page, label: str):
    return page.locator("#profile-form").get_by_label(label, exact=True)


def say(user, key: str, value: str) -> Memory:
    return memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user)).memory


def test_changing_every_profile_field_then_reloading_shows_every_change(signed_in_page, alice):
    for label, value in OLD.items():
        say(alice, label.lower(), value)
    page = signed_in_page(alice)

    # A refused field saves nothing, not the fields before it: a reload shows the old ones.
    for label, value in NEW.items():
        profile_field(page, label).fill(value)
    profile_field(page, "Timezone").fill("Mars/Olympus_Mons")
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#profile-form [role=alert]")).to_contain_text("Nothing was saved")
    page.once("dialog", lambda dialog: dialog.accept())  # leave the typed text
    page.reload()
    for label, value in OLD.items():
        expect(profile_field(page, label)).to_have_value(value)

    for label, value in NEW.items():
        profile_field(page, label).fill(value)
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#profile-form").get_by_role("status")).to_have_text(
        "Saved name, role, company, timezone and summary."
    )
    page.reload()
    for label, value in NEW.items():
        expect(profile_field(page, label)).to_have_value(value)


def test_restore_all_after_delete_all_keeps_history_links_and_creation_times(
    signed_in_page, alice, url, same_document
):
    tea = say(alice, "fact:tea", "Drinks green tea")
    say(alice, "fact:tea", "Drinks oolong tea")
    name = say(alice, "name", "Kevin")
    created = {tea.pk: tea.created_at, name.pk: name.created_at}
    memory_delete_all(user=alice, actor=Actor.for_user(alice))
    page = signed_in_page(alice)
    # While it is deleted, the old link has nothing to show.
    assert page.goto(url("pages:memory_history", tea.pk)).status == 404

    page.goto(url("pages:deleted_memories"))
    with same_document(page):
        page.get_by_role("button", name=re.compile(r"^Restore all 2")).click()
        expect(page.locator("#bulk-result")).to_contain_text("2")

    assert {m.pk: m.created_at for m in Memory.objects.filter(user=alice)} == created
    response = page.goto(url("pages:memory_history", tea.pk))
    assert response.status == 200
    timeline = page.locator("main")
    expect(timeline).to_contain_text("Drinks oolong tea")
    # The whole life of the memory, from before the deletion: created, changed, deleted,
    # restored.
    for word in ("Created", "Updated", "Deleted", "Restored"):
        expect(timeline).to_contain_text(word)


def test_restoring_one_deleted_memory_keeps_its_history_link(signed_in_page, alice, url):
    tea = say(alice, "fact:tea", "Drinks green tea")
    memory_delete(user=alice, key="fact:tea", actor=Actor.for_user(alice))
    page = signed_in_page(alice)
    page.goto(url("pages:deleted_memories"))
    page.get_by_role("button", name="Restore fact:tea").click()
    status = page.get_by_role("status")
    expect(status).to_contain_text("Restored fact:tea")
    status.get_by_role("link", name="See its history").click()
    expect(page).to_have_url(re.compile(rf"/memories/{tea.pk}/history/$"))
    assert Memory.objects.get(user=alice, key="fact:tea").created_at == tea.created_at


def test_adding_an_entry_that_is_there_already_says_so_and_links_to_it(
    signed_in_page, alice, same_document
):
    existing = say(alice, "preference:prefers-oat-milk-in-coffee", "Prefers oat milk in coffee.")
    page = signed_in_page(alice)
    with same_document(page):
        page.get_by_role("link", name="Entries").click()
        page.get_by_label("Kind", exact=True).select_option("preference")
        page.get_by_label("Text", exact=True).fill("Prefers oat milk in coffee.")
        page.get_by_role("button", name="Add entry").click()
        said = page.locator("#entry-add").get_by_role("status")
        expect(said).to_have_text(
            "You have this already: Prefers oat milk in coffee. Nothing was added."
        )
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == [existing.key]

    said.get_by_role("link", name="Prefers oat milk in coffee.").click()
    row = page.locator(f"#memory-{existing.pk}")
    expect(row).to_be_visible()
    expect(row.locator(".value")).to_have_text("Prefers oat milk in coffee.")
    expect(page.locator("#entry-list .entry")).to_have_count(1)
