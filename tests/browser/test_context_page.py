"""The Context page in a real browser: each tab's add, edit and delete through htmx, the
working-memory preview following along without a reload, history and undo."""

import re

import pytest
from playwright.sync_api import Page, expect

from activity.actors import Actor
from memory.models import Memory, MemoryHistory
from memory.services import memory_delete, memory_update, memory_upsert
from memory.working_memory import build_working_memory

pytestmark = pytest.mark.django_db(transaction=True)


def preview(page: Page):
    return page.locator("#working-memory-text")


def assert_preview_is(page: Page, user, expected: str) -> None:
    """The preview shows exactly the block the API sends, and that block is `expected`."""
    shown = preview(page).text_content()
    assert shown == build_working_memory(user=user).text
    assert shown == expected


def values(user) -> dict[str, str]:
    return dict(Memory.objects.filter(user=user).values_list("key", "value"))


def profile_field(page: Page, label: str):
    return page.locator("#profile-form").get_by_label(label, exact=True)


def test_profile_is_one_form_saving_every_field_with_the_preview_following(
    signed_in_page, alice, same_document
):
    page = signed_in_page(alice)
    expect(page.get_by_role("link", name="Profile")).to_have_attribute("aria-current", "page")
    expect(preview(page)).to_have_text("")
    save = page.get_by_role("button", name="Save profile")
    status = page.locator("#profile-form").get_by_role("status")

    with same_document(page):
        profile_field(page, "Name").fill("Alice Example")
        profile_field(page, "Role").fill("Head of Growth")
        save.click()
        expect(status).to_have_text("Saved name and role.")
        expect(preview(page)).to_contain_text("Alice Example (Head of Growth)")
        assert_preview_is(page, alice, "### About you\nAlice Example (Head of Growth)\n")

        profile_field(page, "Name").fill("Alice Smith")
        profile_field(page, "Timezone").fill("Mars/Olympus_Mons")
        save.click()
        # Refused: nothing saved, every typed value still there, the error on its field.
        expect(page.locator("#profile-timezone .field-error")).to_contain_text("Mars/Olympus_Mons")
        expect(page.locator("#profile-form [role=alert]")).to_contain_text("Nothing was saved")
        expect(profile_field(page, "Name")).to_have_value("Alice Smith")
        expect(profile_field(page, "Timezone")).to_have_value("Mars/Olympus_Mons")
        assert values(alice) == {"name": "Alice Example", "role": "Head of Growth"}

        profile_field(page, "Timezone").fill("Europe/Paris")
        profile_field(page, "Role").fill("")
        save.click()
        expect(status).to_have_text("Saved name and timezone; removed role.")
        expect(preview(page)).to_contain_text("Timezone: Europe/Paris")
        expect(preview(page)).not_to_contain_text("Head of Growth")
        assert_preview_is(page, alice, "### About you\nAlice Smith\nTimezone: Europe/Paris\n")

        save.click()
        expect(status).to_have_text("No change.")

    assert values(alice) == {"name": "Alice Smith", "timezone": "Europe/Paris"}


def test_all_five_profile_fields_typed_then_one_save_are_all_kept(signed_in_page, alice):
    page = signed_in_page(alice)
    typed = {
        "Name": "Kevin",
        "Role": "Head of Growth",
        "Company": "YARNNN",
        "Timezone": "Asia/Singapore",
        "Summary": "Runs growth experiments.",
    }
    for label, value in typed.items():
        profile_field(page, label).fill(value)
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#profile-form").get_by_role("status")).to_have_text(
        "Saved name, role, company, timezone and summary."
    )

    page.reload()
    for label, value in typed.items():
        expect(profile_field(page, label)).to_have_value(value)
    assert values(alice) == {
        "name": "Kevin",
        "role": "Head of Growth",
        "company": "YARNNN",
        "timezone": "Asia/Singapore",
        "summary": "Runs growth experiments.",
    }
    assert MemoryHistory.objects.filter(user=alice).count() == 5


QUESTION = "You have changes that are not saved. Leave without saving them?"


def answer_dialogs(page: Page, *answers: bool) -> list[tuple[str, str]]:
    """Answer the page's next dialogs in turn (True: OK, False: Cancel); returns what was
    asked, as (type, message)."""
    asked: list[tuple[str, str]] = []
    pending = list(answers)

    def answer(dialog) -> None:
        asked.append((dialog.type, dialog.message))
        if pending.pop(0):
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", answer)
    return asked


def test_switching_tabs_with_unsaved_typing_asks_first(
    signed_in_page, alice, same_document, htmx_settled
):
    page = signed_in_page(alice)
    asked = answer_dialogs(page, False, True)
    with same_document(page):
        # Nothing typed: the tabs switch without a question.
        page.get_by_role("link", name="Styles").click()
        expect(page.get_by_role("heading", name="Styles")).to_be_visible()
        page.get_by_role("link", name="Profile").click()
        expect(page.get_by_role("heading", name="Profile")).to_be_visible()

        profile_field(page, "Name").fill("Kevin")
        with page.expect_event("dialog"):
            page.get_by_role("link", name="Entries").click()
        assert asked == [("confirm", QUESTION)]
        # Cancelled: no request, still on Profile with the text.
        htmx_settled(page)
        expect(page.get_by_role("link", name="Profile")).to_have_attribute("aria-current", "page")
        expect(profile_field(page, "Name")).to_have_value("Kevin")
        expect(page).not_to_have_url(re.compile(r"tab=entries"))

        with page.expect_event("dialog"):
            page.get_by_role("link", name="Entries").click()
        expect(page.get_by_role("heading", name="Entries")).to_be_visible()
    assert asked == [("confirm", QUESTION), ("confirm", QUESTION)]
    assert values(alice) == {}


def test_leaving_the_page_with_unsaved_typing_asks_first(signed_in_page, alice):
    page = signed_in_page(alice)
    asked = answer_dialogs(page, False)
    profile_field(page, "Role").click()
    page.keyboard.type("CEO")  # typed keys: the page had a user gesture, so it may ask
    with page.expect_event("dialog"):
        page.get_by_role("link", name="Activity").click()
    assert [kind for kind, _ in asked] == ["beforeunload"]
    expect(page.get_by_role("heading", name="Profile")).to_be_visible()
    expect(profile_field(page, "Role")).to_have_value("CEO")

    # Saving clears it: the same link now simply leaves.
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#profile-form").get_by_role("status")).to_have_text("Saved role.")
    page.get_by_role("link", name="Activity").click()
    expect(page).to_have_url(re.compile(r"/activity/$"))
    assert len(asked) == 1
    assert values(alice) == {"role": "CEO"}


def test_styles_add_change_and_remove_a_platform_with_the_preview_following(
    signed_in_page, alice, same_document
):
    page = signed_in_page(alice)

    with same_document(page):
        page.get_by_role("link", name="Styles").click()
        expect(page.get_by_role("heading", name="Styles")).to_be_visible()
        expect(page).to_have_url(re.compile(r"/\?tab=styles$"))

        page.get_by_label("Platform", exact=True).fill("slack")
        page.get_by_label("Tone", exact=True).fill("casual")
        page.get_by_label("Verbosity", exact=True).fill("brief")
        page.get_by_role("button", name="Add platform").click()
        expect(preview(page)).to_contain_text("- slack: tone: casual, verbosity: brief")
        assert_preview_is(
            page, alice, "### Your preferences\n- slack: tone: casual, verbosity: brief\n"
        )

        page.get_by_label("Tone for slack").fill("formal")
        page.get_by_label("Verbosity for slack").fill("")
        page.get_by_role("button", name="Save slack").click()
        expect(page.locator("#style-slack").get_by_role("status")).to_have_text("Saved slack.")
        expect(preview(page)).to_contain_text("- slack: tone: formal")
        expect(preview(page)).not_to_contain_text("verbosity")
        assert values(alice) == {"tone_slack": "formal"}

        page.get_by_role("button", name="Remove slack").click()
        expect(page.locator("#style-slack")).to_contain_text("Removed slack.")
        expect(preview(page)).not_to_contain_text("slack")
        expect(preview(page)).to_have_text("")

    assert values(alice) == {}


def test_entries_add_edit_pin_delete_and_undo_with_the_preview_following(
    signed_in_page, alice, same_document, htmx_settled
):
    page = signed_in_page(alice)

    with same_document(page):
        page.get_by_role("link", name="Entries").click()
        expect(page.get_by_role("heading", name="Entries")).to_be_visible()

        expect(page.get_by_label("Slug")).to_have_count(0)
        page.get_by_label("Kind", exact=True).select_option("preference")
        page.get_by_text("More", exact=True).click()  # the optional key
        page.get_by_label("Key", exact=True).fill("reports")
        page.get_by_label("Text", exact=True).fill("bullet points in reports")
        page.get_by_label("Tags", exact=True).fill("work, Reports")
        page.get_by_role("button", name="Add entry").click()
        expect(page.locator("#entry-add").get_by_role("status")).to_have_text(
            "Added “bullet points in reports” as a preference. Tag: 'Reports' saved as #reports."
        )
        expect(preview(page)).to_contain_text("- Prefers: bullet points in reports")
        memory = Memory.objects.get(user=alice, key="preference:reports")
        assert (memory.value, memory.tags) == ("bullet points in reports", ["reports", "work"])
        row = page.locator(f"#memory-{memory.pk}")
        expect(row.locator(".value")).to_have_text("bullet points in reports")
        # The form is empty again, ready for the next entry.
        expect(page.get_by_label("Text", exact=True)).to_have_value("")

        row.get_by_role("link", name="Edit “bullet points in reports”").click()
        row.get_by_label("Text", exact=False).fill("numbered lists in reports")
        row.get_by_role("button", name="Save").click()
        expect(row.get_by_role("status")).to_have_text("Saved.")
        expect(row.locator(".value")).to_have_text("numbered lists in reports")
        expect(preview(page)).to_contain_text("- Prefers: numbered lists in reports")
        expect(preview(page)).not_to_contain_text("bullet points")

        row.get_by_role("button", name="Pin “numbered lists in reports”").click()
        expect(row.get_by_text("Pinned", exact=True)).to_be_visible()
        expect(row.get_by_role("button", name="Unpin “numbered lists in reports”")).to_be_visible()
        # Pinning refreshes the preview without changing its text. Let that refresh finish
        # before the next change: a change during it is lost (test_live_updates.py).
        htmx_settled(page)

        row.get_by_role("button", name="Delete “numbered lists in reports”").click()
        expect(row).to_contain_text("Deleted “numbered lists in reports”.")
        expect(preview(page)).not_to_contain_text("numbered lists")
        assert values(alice) == {}

        row.get_by_role("button", name="Undo").click()
        expect(preview(page)).to_contain_text("- Prefers: numbered lists in reports")
        # Restoring writes a new row (a new pk) with the old value, tags and pin.
        memory = Memory.objects.get(user=alice, key="preference:reports")
        restored = page.locator(f"#memory-{memory.pk}")
        expect(restored.locator(".value")).to_have_text("numbered lists in reports")
        expect(restored.get_by_text("Pinned", exact=True)).to_be_visible()

    assert (memory.value, memory.tags, memory.pinned) == (
        "numbered lists in reports",
        ["reports", "work"],
        True,
    )


def test_an_open_edit_survives_adding_an_entry_and_filtering_the_list(
    signed_in_page, alice, same_document, htmx_settled
):
    me = Actor.for_user(alice)
    tea = memory_upsert(user=alice, key="fact:tea", value="Drinks tea", actor=me).memory
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    row = page.locator(f"#memory-{tea.pk}")
    text = row.get_by_label("Text", exact=False)

    with same_document(page):
        row.get_by_role("link", name="Edit “Drinks tea”").click()
        text.fill("Drinks green tea, no sugar")

        # Adding another entry refreshes the list (entries-changed): the editor stays.
        page.locator("#entry-add").get_by_label("Text", exact=True).fill("Standup is at 9:30")
        page.get_by_role("button", name="Add entry").click()
        expect(page.locator("#entry-add").get_by_role("status")).to_have_text(
            "Added “Standup is at 9:30” as a fact."
        )
        expect(page.locator("#entry-list")).to_contain_text("Standup is at 9:30")
        htmx_settled(page)
        expect(text).to_have_value("Drinks green tea, no sugar")

        # Filtering the list down to something else keeps the open editor too.
        page.get_by_label("Search text").fill("standup")
        expect(page.locator("#entry-list")).to_contain_text("2 of 2 entries")
        htmx_settled(page)
        expect(text).to_have_value("Drinks green tea, no sugar")

        row.get_by_role("button", name="Save").click()
        expect(row.get_by_role("status")).to_have_text("Saved.")
        expect(row.locator(".value")).to_have_text("Drinks green tea, no sugar")
    assert values(alice) == {
        "fact:tea": "Drinks green tea, no sugar",
        "fact:standup-is-at-930": "Standup is at 9:30",
    }


def test_an_edited_style_row_survives_adding_a_platform(signed_in_page, alice, htmx_settled):
    memory_upsert(user=alice, key="tone_slack", value="casual", actor=Actor.for_user(alice))
    page = signed_in_page(alice)
    page.goto("/?tab=styles")
    page.get_by_label("Tone for slack").fill("formal")
    page.get_by_label("Platform", exact=True).fill("gmail")
    page.get_by_label("Verbosity", exact=True).fill("detailed")
    page.get_by_role("button", name="Add platform").click()
    expect(page.locator("#styles-panel").get_by_role("status")).to_have_text("Added gmail.")
    htmx_settled(page)
    expect(page.get_by_label("Tone for slack")).to_have_value("formal")
    assert values(alice) == {"tone_slack": "casual", "verbosity_gmail": "detailed"}


def test_changing_an_entrys_kind_moves_it_and_keeps_its_history(
    signed_in_page, alice, same_document
):
    tea = memory_upsert(
        user=alice,
        key="fact:oat-milk",
        value="Oat milk in flat whites",
        actor=Actor.for_user(alice),
    ).memory
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    row = page.locator(f"#memory-{tea.pk}")
    expect(page.locator("#kind-fact")).to_be_visible()

    with same_document(page):
        row.get_by_role("link", name="Edit “Oat milk in flat whites”").click()
        row.get_by_label("Kind", exact=False).select_option("preference")
        row.get_by_role("button", name="Save").click()
        # The list regroups it: under Preference, no Fact group left.
        expect(page.locator("#kind-preference")).to_have_text("Preference 1")
        expect(page.locator("#kind-fact")).to_have_count(0)
        expect(row.locator(".badge.kind")).to_have_text("Preference")
        expect(row.locator(".key")).to_have_text("preference:oat-milk")
        expect(preview(page)).to_contain_text("Prefers: Oat milk in flat whites")

    row.get_by_role("link", name="History of “Oat milk in flat whites”").click()
    expect(page.get_by_role("heading", name="History of “Oat milk in flat whites”")).to_be_visible()
    expect(page.locator(".timeline-item")).to_have_count(2)
    expect(page.locator(".timeline-item").first).to_contain_text(
        "Renamed from fact:oat-milk to preference:oat-milk"
    )
    assert values(alice) == {"preference:oat-milk": "Oat milk in flat whites"}
    assert Memory.objects.get(user=alice).pk == tea.pk


def test_filters_narrow_the_entry_list_in_place(signed_in_page, alice, same_document):
    me = Actor.for_user(alice)
    memory_upsert(user=alice, key="fact:standup", value="Standup is at 9:30", actor=me)
    memory_upsert(user=alice, key="fact:lunch", value="Lunch at noon", actor=me, tags=["food"])
    memory_upsert(user=alice, key="preference:tea", value="Green tea", actor=me, tags=["food"])
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    entries = page.locator("#entry-list li.entry .key")
    expect(entries).to_have_count(3)

    with same_document(page):
        page.get_by_label("Search text").fill("standup")
        expect(entries).to_have_text(["fact:standup"])
        expect(page).to_have_url(re.compile(r"[?&]q=standup(&|$)"))

        page.get_by_label("Search text").fill("")
        page.get_by_label("Filter by tag").fill("food")
        expect(entries).to_have_text(["fact:lunch", "preference:tea"])

        page.get_by_label("Filter by kind").select_option("preference")
        expect(entries).to_have_text(["preference:tea"])
        expect(page.locator("#entry-list")).to_contain_text("1 of 3 entries")

        page.get_by_label("Filter by kind").select_option("task")
        expect(page.locator("#entry-list")).to_contain_text("No entries match these filters.")


def test_the_token_budget_is_checked_and_applied_in_the_preview(
    signed_in_page, alice, same_document
):
    me = Actor.for_user(alice)
    for number in range(12):
        memory_upsert(
            user=alice, key=f"fact:item-{number:02}", value=f"fact {number} " * 30, actor=me
        )
    page = signed_in_page(alice)
    budget = page.get_by_label("Token budget")
    expect(page.locator("#preview")).to_contain_text("Nothing left out.")

    with same_document(page):
        budget.fill("100")
        page.get_by_role("button", name="Save budget").click()
        expect(page.locator("#preview .field-error")).to_have_text(
            "Ensure this value is greater than or equal to 500."
        )
        expect(page.locator("#preview")).to_contain_text("Nothing left out.")

        budget.fill("500")
        page.get_by_role("button", name="Save budget").click()
        expect(page.locator("#preview").get_by_role("status")).to_have_text("Saved.")
        expect(page.locator("#preview .omitted summary")).to_contain_text("Left out:")

    block = build_working_memory(user=alice)
    assert block.budget == 500
    assert block.omitted
    assert_preview_is(page, alice, block.text)
    assert block.text.endswith("left out to fit the budget)\n")


def test_restore_an_old_value_from_the_history_page(signed_in_page, alice, same_document):
    actor = Actor.for_user(alice)
    memory_upsert(user=alice, key="fact:home-city", value="Paris", actor=actor)
    memory_update(user=alice, key="fact:home-city", value="Lisbon", actor=actor)
    created = MemoryHistory.objects.get(user=alice, key="fact:home-city", action="create")
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    expect(preview(page)).to_contain_text("- Fact: Lisbon")

    page.get_by_role("link", name="History of “Lisbon”").click()
    expect(page.get_by_role("heading", name="History of “Lisbon”")).to_be_visible()
    current = page.locator("#history-timeline .current .value")
    expect(current).to_have_text("Lisbon")
    expect(page.locator(".timeline-item")).to_have_count(2)
    expect(page.get_by_role("button", name="Restore this version")).to_have_count(1)

    with same_document(page):
        page.locator(f"#history-{created.pk}").get_by_role("button", name="Restore").click()
        expect(page.locator("#history-timeline").get_by_role("status")).to_have_text(
            "Restored fact:home-city."
        )
        expect(current).to_have_text("Paris")
        expect(page.locator(".timeline-item")).to_have_count(3)
    assert values(alice) == {"fact:home-city": "Paris"}

    page.get_by_role("link", name="Back to Context").click()
    expect(preview(page)).to_contain_text("- Fact: Paris")
    expect(preview(page)).not_to_contain_text("Lisbon")


def test_restore_from_recently_deleted(signed_in_page, alice, same_document):
    actor = Actor.for_user(alice)
    memory_upsert(user=alice, key="decision:stack", value="Use PostgreSQL", actor=actor)
    deleted = memory_delete(user=alice, key="decision:stack", actor=actor)
    page = signed_in_page(alice)
    page.goto("/?tab=entries")
    expect(preview(page)).to_have_text("")

    page.get_by_role("link", name="Recently deleted").click()
    item = page.locator(f"#deleted-{deleted.pk}")
    expect(item.locator(".value")).to_have_text("Use PostgreSQL")
    with same_document(page):
        item.get_by_role("button", name="Restore decision:stack").click()
        expect(item.get_by_role("status")).to_contain_text("Restored decision:stack.")
    assert values(alice) == {"decision:stack": "Use PostgreSQL"}


def test_values_that_look_like_html_show_as_text_and_run_nothing(
    signed_in_page, alice, alice_agent
):
    payload = "<img src=x onerror=alert(1)>"
    memory_upsert(
        user=alice,
        key="name",
        value='"><script>alert(2)</script>',
        actor=Actor.for_user(alice),
    )
    memory_upsert(
        user=alice,
        key="fact:agent-note",
        value="<svg onload=alert(3)></svg>",
        actor=Actor.for_agent(alice_agent),
    )
    page = signed_in_page(alice)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto("/?tab=entries")

    page.get_by_label("Kind", exact=True).select_option("fact")
    page.get_by_text("More", exact=True).click()
    page.get_by_label("Key", exact=True).fill("html")
    page.get_by_label("Text", exact=True).fill(payload)
    page.get_by_role("button", name="Add entry").click()
    expect(page.locator("#entry-add").get_by_role("status")).to_have_text(
        f"Added “{payload}” as a fact."
    )
    memory = Memory.objects.get(user=alice, key="fact:html")
    row = page.locator(f"#memory-{memory.pk}")
    expect(row.locator(".value")).to_have_text(payload)
    # The block fences each value as data (memory/block_format.py); the page shows it as text.
    expect(preview(page)).to_contain_text("img src=x onerror=alert(1)>")
    assert_preview_is(page, alice, build_working_memory(user=alice).text)
    expect(preview(page)).to_contain_text('"><script>alert(2)</script>')
    expect(preview(page)).to_contain_text("svg onload=alert(3)></svg>")
    expect(page.get_by_text("noted by agent assistant")).to_be_visible()
    # Nothing was parsed as markup: no such elements exist, so no handler could run.
    expect(page.locator("#main img, #main svg, #main script")).to_have_count(0)

    page.get_by_role("link", name=f"History of “{payload}”").click()
    expect(page.locator("#history-timeline .current .value")).to_have_text(payload)
    expect(page.locator("#main img")).to_have_count(0)
    assert dialogs == []


def test_bob_cannot_open_alices_entry_or_history(signed_in_page, alice, bob):
    actor = Actor.for_user(alice)
    memory_upsert(user=alice, key="fact:secret", value="alice's secret", actor=actor)
    memory = Memory.objects.get(user=alice, key="fact:secret")
    history = MemoryHistory.objects.get(user=alice, key="fact:secret")
    page = signed_in_page(bob)

    for path in (
        f"/memories/{memory.pk}/history/",
        f"/memories/{memory.pk}/edit/",
        f"/history/{history.pk}/",
    ):
        response = page.goto(path)
        assert response is not None
        assert response.status == 404, path
        expect(page.locator("body")).not_to_contain_text("alice's secret")

    page.goto("/?tab=entries")
    expect(page.locator("#main")).not_to_contain_text("alice's secret")
    assert values(alice) == {"fact:secret": "alice's secret"}


def test_adding_and_deleting_an_entry_works_without_javascript(signed_in_page, alice):
    page = signed_in_page(alice, java_script_enabled=False)
    page.goto("/?tab=entries")

    page.get_by_label("Kind", exact=True).select_option("instruction")
    page.get_by_text("More", exact=True).click()  # a <details>: opens without JavaScript
    page.get_by_label("Key", exact=True).fill("tldr")
    page.get_by_label("Text", exact=True).fill("Always include a TL;DR")
    page.get_by_role("button", name="Add entry").click()

    expect(page.locator("#flash")).to_have_text("Added “Always include a TL;DR” as an instruction.")
    memory = Memory.objects.get(user=alice, key="instruction:tldr")
    expect(page).to_have_url(re.compile(rf"/\?tab=entries#memory-{memory.pk}$"))
    expect(page.locator(f"#memory-{memory.pk} .value")).to_have_text("Always include a TL;DR")
    expect(preview(page)).to_have_text("### What you've told me - Note: Always include a TL;DR")

    page.get_by_role("button", name="Delete “Always include a TL;DR”").click()
    expect(page.locator("#flash")).to_have_text("Deleted “Always include a TL;DR”.")
    expect(page.locator(f"#memory-{memory.pk}")).to_have_count(0)
    expect(preview(page)).to_have_text("")
    assert values(alice) == {}

    page.get_by_role("button", name="Undo").click()
    expect(page.locator("#flash")).to_have_text("Restored instruction:tldr.")
    restored = Memory.objects.get(user=alice, key="instruction:tldr")
    expect(page.locator(f"#memory-{restored.pk} .value")).to_have_text("Always include a TL;DR")
    expect(preview(page)).to_have_text("### What you've told me - Note: Always include a TL;DR")
    assert values(alice) == {"instruction:tldr": "Always include a TL;DR"}


def test_screenshot_of_the_context_page(signed_in_page, alice, alice_agent, artifacts):
    me, agent = Actor.for_user(alice), Actor.for_agent(alice_agent)
    for key, value, actor in [
        ("name", "Alice", me),
        ("role", "Head of Growth", me),
        ("company", "YARNNN", me),
        ("timezone", "Asia/Singapore", me),
        ("tone_slack", "casual", me),
        ("verbosity_slack", "brief", me),
        ("verbosity_gmail", "detailed", me),
        ("instruction:tldr", "always include a TL;DR", me),
        ("preference:reports", "bullet points in reports", agent),
    ]:
        memory_upsert(user=alice, key=key, value=value, actor=actor)
    page = signed_in_page(alice)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/?tab=entries")
    expect(preview(page)).to_contain_text("### About you")
    assert_preview_is(
        page,
        alice,
        "### About you\n"
        "Alice (Head of Growth) at YARNNN\n"
        "Timezone: Asia/Singapore\n"
        "\n"
        "### Your preferences\n"
        "- slack: tone: casual, verbosity: brief\n"
        "- gmail: verbosity: detailed\n"
        "\n"
        "### What you've told me\n"
        "- Note: always include a TL;DR\n"
        "\n"
        "### What I've noticed\n"
        "- Prefers: bullet points in reports\n",
    )

    path = artifacts / "context-page.png"
    path.unlink(missing_ok=True)
    page.screenshot(path=path, full_page=True)
    assert path.is_file()
    assert path.stat().st_size > 0
