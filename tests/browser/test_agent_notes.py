"""Agents' own notes in a real browser (issue 27, item 1): the Entries tab's "Whose" filter
shows an agent's notes in place with htmx, and "Move into my memory" makes one the user's."""

import pytest
from playwright.sync_api import expect

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_filter_by_agent_then_move_a_note_into_my_memory(signed_in_page, alice, same_document):
    coder = AgentFactory(user=alice, name="coder")
    memory_upsert(user=alice, key="fact:tea", value="Drinks green tea", actor=Actor.for_user(alice))
    memory_upsert(
        user=alice,
        key="discovery:arm-runners",
        value="The CI runners are <b>ARM</b> machines",
        actor=Actor.for_agent(coder),
        owner_agent=coder,
    )
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    entries = page.locator("#entry-list")
    expect(entries).to_contain_text("Drinks green tea")
    expect(entries).not_to_contain_text("ARM")

    with same_document(page):
        page.get_by_label("Whose").select_option(label="coder's notes (1)")
        note = entries.locator("li.entry", has_text="The CI runners are <b>ARM</b> machines")
        expect(note).to_be_visible()  # the markup is text, escaped
        expect(note.locator(".badge.agent")).to_have_text("coder's note")
        expect(entries).not_to_contain_text("Drinks green tea")

        note.get_by_role("button", name="Move into my memory").click()
        expect(entries.locator("li.entry.moved")).to_contain_text(
            "Moved “The CI runners are <b>ARM</b> machines” into your memory."
        )

    moved = Memory.objects.get(user=alice, key="discovery:arm-runners")
    assert (moved.owner_agent_id, moved.source) == (None, "user_stated")
    page.goto("/?tab=entries")
    expect(page.locator("#entry-list")).to_contain_text("The CI runners are <b>ARM</b> machines")
