"""Issue 26 point 1 in a real browser: the Entries tab says when an entry was said and in
which conversation, in the user's zone, with an agent's text shown as text; the add and
edit forms set both."""

from datetime import UTC, datetime

import pytest
from playwright.sync_api import expect

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = "<script>window.forged = 1</script>"


@pytest.fixture
def alice_in_singapore(alice):
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_user(alice))
    return alice


def test_an_agents_dated_note_says_when_and_where_as_text(
    signed_in_page, alice_in_singapore, alice_agent
):
    memory = memory_upsert(
        user=alice_in_singapore,
        key="fact:moved",
        value="Moved to Lisbon",
        actor=Actor.for_agent(alice_agent),
        occurred_at="2023-05-07T20:00:00Z",  # 04:00 on 8 May in Singapore
        session=SCRIPT,
    ).memory
    page = signed_in_page(alice_in_singapore)

    page.goto("/?tab=entries")

    said = page.locator(f"#memory-{memory.pk} .said")
    expect(said).to_have_text(f"said May 8, 2023 · in conversation {SCRIPT}")
    assert page.evaluate("window.forged") is None


def test_adding_and_editing_the_day_and_conversation(signed_in_page, alice_in_singapore):
    page = signed_in_page(alice_in_singapore)
    page.goto("/?tab=entries")

    page.get_by_label("Text", exact=True).fill("Ran the Lisbon marathon")
    page.locator("#entry-add summary").click()
    page.get_by_label("Said or happened on", exact=True).fill("2023-10-15")
    page.get_by_label("Conversation", exact=True).fill("diary")
    page.get_by_role("button", name="Add entry").click()
    expect(page.locator("#entry-add").get_by_role("status")).to_contain_text("Added")

    memory = Memory.objects.get(user=alice_in_singapore, value="Ran the Lisbon marathon")
    assert (memory.occurred_at, memory.session) == (datetime(2023, 10, 14, 16, tzinfo=UTC), "diary")
    row = page.locator(f"#memory-{memory.pk}")
    expect(row.locator(".said")).to_have_text("said Oct 15, 2023 · in conversation diary")

    row.get_by_role("link", name="Edit").click()
    editor = page.locator(f"#memory-{memory.pk}.editing")
    expect(editor.get_by_label("Said or happened on")).to_have_value("2023-10-15")
    expect(editor.get_by_label("Conversation")).to_have_value("diary")
    editor.get_by_label("Conversation").fill("")
    editor.get_by_label("Said or happened on").fill("2023-10-16")
    editor.get_by_role("button", name="Save").click()

    row = page.locator(f"#memory-{memory.pk}:not(.editing)")
    expect(row.locator(".said")).to_have_text("said Oct 16, 2023")
    memory.refresh_from_db()
    assert (memory.occurred_at, memory.session) == (datetime(2023, 10, 15, 16, tzinfo=UTC), "")
