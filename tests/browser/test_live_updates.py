"""The Context page's live regions stay current: when changes land while they refresh, and
when the Back button brings an earlier tab back.

The working-memory preview and the entry list reload themselves (hx-trigger on the
`memory-changed` / `entries-changed` events) and swap their own outerHTML. A refresh that
is still in flight when the next change lands must not leave the region showing the older
state. These tests hold the first refresh's response in the browser until a second change
has been made, then release it: the region must end up showing the second change
(hx-sync="this:replace" on the region). Back must not bring a stale snapshot either
(htmx's history cache is off in base.html).
"""

import pytest
from playwright.sync_api import Page, Route, expect

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db(transaction=True)


class HoldFirst:
    """A route handler that fetches the first matching response and holds it back."""

    def __init__(self, hx_target: str) -> None:
        self.hx_target = hx_target
        self.held: list[tuple[Route, object]] = []

    def __call__(self, route: Route) -> None:
        if self.held or route.request.headers.get("hx-target") != self.hx_target:
            route.continue_()
        else:
            self.held.append((route, route.fetch()))

    def release(self) -> None:
        assert len(self.held) == 1, "the first refresh was never requested"
        route, response = self.held.pop()
        route.fulfill(response=response)


def test_the_preview_shows_a_change_made_while_it_refreshes(signed_in_page, alice):
    memory_upsert(user=alice, key="fact:city", value="Paris", actor=Actor.for_user(alice))
    memory = Memory.objects.get(user=alice, key="fact:city")
    page: Page = signed_in_page(alice)
    page.goto("/?tab=entries")
    hold = HoldFirst("preview")
    page.route("**/preview/", hold)
    row = page.locator(f"#memory-{memory.pk}")

    row.get_by_role("button", name="Pin “Paris”").click()
    expect(row.get_by_role("button", name="Unpin “Paris”")).to_be_visible()
    row.get_by_role("button", name="Delete “Paris”").click()
    expect(row).to_contain_text("Deleted “Paris”.")
    hold.release()

    # Short timeout: once released, the refreshes take milliseconds.
    expect(page.locator("#working-memory-text")).to_have_text("", timeout=3_000)


def test_the_entry_list_shows_an_entry_added_while_it_refreshes(signed_in_page, alice):
    page: Page = signed_in_page(alice)
    page.goto("/?tab=entries")
    hold = HoldFirst("entry-list")
    page.route("**/?*", hold)

    for which in ("first", "second"):
        page.get_by_label("Text", exact=True).fill(f"the {which} entry")
        page.get_by_role("button", name="Add entry").click()
        expect(page.locator("#entry-add").get_by_role("status")).to_have_text(
            f"Added “the {which} entry” as a fact."
        )
    hold.release()

    second = Memory.objects.get(user=alice, key="fact:the-second-entry")
    expect(page.locator(f"#memory-{second.pk} .value")).to_have_text(
        "the second entry", timeout=3_000
    )


def test_back_to_an_earlier_tab_shows_the_current_working_memory(signed_in_page, alice):
    page: Page = signed_in_page(alice)
    page.get_by_role("link", name="Styles").click()
    expect(page.get_by_role("heading", name="Styles")).to_be_visible()
    page.get_by_role("link", name="Entries").click()
    page.get_by_label("Text", exact=True).fill("Standup is at 9:30")
    page.get_by_role("button", name="Add entry").click()
    expect(page.locator("#working-memory-text")).to_contain_text("- Fact: Standup is at 9:30")

    page.go_back()

    expect(page.get_by_role("heading", name="Styles")).to_be_visible()
    expect(page.locator("#working-memory-text")).to_contain_text(
        "- Fact: Standup is at 9:30", timeout=3_000
    )
