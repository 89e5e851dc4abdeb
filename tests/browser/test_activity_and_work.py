"""The Activity and Work pages in a real browser: what changed shows up, filters swap in place,
and agent-written markdown renders without running anything."""

import re

import pytest
from playwright.sync_api import expect

from activity.actors import Actor
from work.services import work_create

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE_MARKDOWN = """# Findings

- first point
- second point

<script>alert("script")</script>
<img src=x onerror="alert('img')">
[a link](javascript:alert('link'))
"""


def test_activity_lists_what_changed_and_filters_in_place(
    signed_in_page, alice, alice_agent, same_document
):
    work_create(user=alice, title="Weekly report", body="Done.", actor=Actor.for_agent(alice_agent))
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    page.get_by_text("More", exact=True).click()
    page.get_by_label("Key", exact=True).fill("standup")
    page.get_by_label("Text", exact=True).fill("Standup is at 9:30")
    page.get_by_role("button", name="Add entry").click()
    expect(page.locator("#entry-add").get_by_role("status")).to_have_text(
        "Added “Standup is at 9:30” as a fact."
    )

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Activity").click()
    rows = page.locator("#activity-list tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("Memory written")
    expect(rows.nth(0)).to_contain_text("you")
    expect(rows.nth(0)).to_contain_text("fact:standup")
    expect(rows.nth(1)).to_contain_text("Work created")
    expect(rows.nth(1)).to_contain_text("assistant")

    with same_document(page):
        page.get_by_label("Event type").select_option("work_created")
        expect(rows).to_have_count(1)
        expect(rows.nth(0)).to_contain_text("Weekly report")
        page.get_by_label("Event type").select_option("memory_deleted")
        expect(page.locator("#activity-list")).to_contain_text("No activity matches this filter.")
    expect(page).to_have_url(re.compile(r"/activity/\?event_type=memory_deleted(&|$)"))

    page.get_by_label("Event type").select_option("work_created")
    rows.nth(0).get_by_role("link", name="Weekly report").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Weekly report")


def test_work_markdown_renders_as_markup_but_runs_nothing(signed_in_page, alice, alice_agent):
    item = work_create(
        user=alice,
        title="<b>Findings</b> for you",
        body=HOSTILE_MARKDOWN,
        actor=Actor.for_agent(alice_agent),
    )
    page = signed_in_page(alice)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Work").click()
    expect(page.locator(f"#work-{item.pk}")).to_contain_text("assistant")

    page.get_by_role("link", name="<b>Findings</b> for you").click()

    expect(page.locator("#work-title")).to_have_text("<b>Findings</b> for you")
    body = page.locator("#work-body")
    expect(body.get_by_role("heading", name="Findings")).to_be_visible()
    expect(body.get_by_role("listitem")).to_have_text(["first point", "second point"])
    expect(page.locator("#main script, #main img, #main [onerror]")).to_have_count(0)
    expect(page.locator("#main a[href^='javascript']")).to_have_count(0)
    before = page.url
    page.get_by_text("a link").click()
    expect(page).to_have_url(before)
    assert dialogs == []


def test_bob_cannot_open_alices_work(signed_in_page, alice, bob):
    item = work_create(user=alice, title="Alice's plan", body="secret", actor=Actor.for_user(alice))
    page = signed_in_page(bob)

    response = page.goto(f"/work/{item.pk}/")

    assert response is not None
    assert response.status == 404
    expect(page.locator("body")).not_to_contain_text("Alice's plan")
    page.goto("/work/")
    expect(page.locator("#work-list")).not_to_contain_text("Alice's plan")
