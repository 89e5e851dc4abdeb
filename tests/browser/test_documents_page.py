"""The Documents tab in a real browser: create, read, edit and save in place, delete with
undo, restore an older version, today's log, and the same flow without JavaScript."""

import re
import zoneinfo

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from activity.actors import Actor
from context.models import Document, DocumentVersion
from context.services import document_write
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db(transaction=True)

NOTES = "projects/alpha/notes.md"


def panel(page: Page):
    return page.locator("#doc-panel")


def status(page: Page):
    return panel(page).get_by_role("status")


def body_of(user, path):
    document = Document.objects.filter(user=user, agent=None, path=path).first()
    return document.body if document else None


def open_documents_tab(page: Page) -> None:
    page.get_by_role("link", name="Documents", exact=True).click()
    expect(page.get_by_role("link", name="Documents", exact=True)).to_have_attribute(
        "aria-current", "page"
    )


def test_create_edit_delete_and_undo_without_reloading(signed_in_page, alice, same_document):
    page = signed_in_page(alice)
    open_documents_tab(page)
    expect(panel(page)).to_contain_text("Documents are longer notes")

    with same_document(page):
        page.get_by_role("link", name="New document").click()
        page.get_by_label("Path", exact=True).fill("/notes.md")
        page.get_by_label("Content", exact=True).fill("# Alpha")
        page.get_by_role("button", name="Create document").click()
        expect(panel(page).locator(".field-error")).to_have_text(
            "Path is absolute; write it relative, without a leading '/'."
        )
        expect(page.get_by_label("Content", exact=True)).to_have_value("# Alpha")

        page.get_by_label("Path", exact=True).fill(NOTES)
        page.get_by_label("Content", exact=True).fill("# Alpha\n\n- first point")
        page.get_by_role("button", name="Create document").click()
        expect(status(page)).to_have_text(f"Created {NOTES}.")
        expect(page.locator("#doc-body h1")).to_have_text("Alpha")
        expect(page).to_have_url(re.compile(rf"/documents/mine/file/{re.escape(NOTES)}$"))
        expect(page.locator("#doc-tree").get_by_role("link", name="notes.md")).to_be_visible()

        page.get_by_role("link", name=f"Edit {NOTES}").click()
        content = page.get_by_label("Content", exact=True)
        expect(content).to_have_value("# Alpha\n\n- first point")
        content.fill("# Alpha\n\n- first point\n- second point")
        page.get_by_role("button", name="Save").click()
        expect(status(page)).to_have_text("Saved.")
        expect(page.locator("#doc-body li")).to_have_text(["first point", "second point"])
        assert body_of(alice, NOTES) == "# Alpha\n\n- first point\n- second point"

        page.get_by_role("button", name=f"Delete {NOTES}").click()
        expect(panel(page)).to_contain_text(f"Deleted {NOTES}.")
        expect(page.locator("#doc-tree")).not_to_contain_text("notes.md")
        assert body_of(alice, NOTES) is None

        page.get_by_role("button", name="Undo").click()
        expect(status(page)).to_have_text(f"Restored {NOTES}.")
        expect(page.locator("#doc-body li")).to_have_text(["first point", "second point"])
        expect(page.locator("#doc-tree").get_by_role("link", name="notes.md")).to_be_visible()
        expect(page).to_have_url(re.compile(rf"/documents/mine/file/{re.escape(NOTES)}$"))

    assert body_of(alice, NOTES) == "# Alpha\n\n- first point\n- second point"


def test_a_conflicting_save_keeps_the_text(signed_in_page, alice, alice_agent, same_document, url):
    document_write(user=alice, path="plan.md", content="v1", actor=Actor.for_user(alice))
    page = signed_in_page(alice)
    page.goto(url("pages:document", "mine", "plan.md"))

    with same_document(page):
        page.get_by_role("link", name="Edit plan.md").click()
        page.get_by_label("Content", exact=True).fill("my edit")
        document_write(
            user=alice, path="plan.md", content="agent's v2", actor=Actor.for_agent(alice_agent)
        )
        page.get_by_role("button", name="Save").click()
        expect(panel(page).get_by_role("alert")).to_contain_text("Not saved")
        expect(page.locator(".newer-version")).to_have_text("agent's v2")
        expect(page.get_by_label("Content", exact=True)).to_have_value("my edit")
        assert body_of(alice, "plan.md") == "agent's v2"

        page.get_by_role("button", name="Save").click()
        expect(status(page)).to_have_text("Saved.")
    assert body_of(alice, "plan.md") == "my edit"


def test_restore_an_older_version_from_the_history(
    signed_in_page, alice, alice_agent, same_document, url
):
    document_write(user=alice, path="plan.md", content="# Plan A", actor=Actor.for_user(alice))
    document_write(
        user=alice, path="plan.md", content="# Plan B", actor=Actor.for_agent(alice_agent)
    )
    first = DocumentVersion.objects.filter(path="plan.md").order_by("id").first()
    page = signed_in_page(alice)
    page.goto(url("pages:document", "mine", "plan.md"))
    expect(page.locator("#doc-body h1")).to_have_text("Plan B")

    with same_document(page):
        page.get_by_role("link", name="History of plan.md").click()
        expect(page.locator(".timeline-item")).to_have_count(2)
        expect(page.locator(".timeline-item").first).to_contain_text("agent assistant")
        page.locator(f"#version-{first.pk}").get_by_role("link", name="View this version").click()
        expect(page.locator("#doc-body h1")).to_have_text("Plan A")
        page.get_by_role("button", name="Restore this version").click()
        expect(status(page)).to_have_text("Restored plan.md.")
        expect(page.locator("#doc-body h1")).to_have_text("Plan A")
        expect(page).to_have_url(re.compile(r"/documents/mine/file/plan\.md$"))

    assert body_of(alice, "plan.md") == "# Plan A"


def test_todays_log_is_one_click_from_the_tab(signed_in_page, alice, same_document):
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_user(alice))
    local = timezone.now().astimezone(zoneinfo.ZoneInfo("Asia/Singapore"))
    path = f"daily/{local:%Y-%m-%d}.md"
    page = signed_in_page(alice)
    open_documents_tab(page)

    with same_document(page):
        page.get_by_role("link", name="Today's log").click()
        expect(panel(page)).to_contain_text("Nothing logged today yet")
        expect(panel(page)).to_contain_text(path)
        page.get_by_label("Add a line to today's log").fill("Reviewed the documents tab")
        page.get_by_role("button", name="Add line").click()
        expect(status(page)).to_have_text("Added to today's log.")
        expect(page.locator("#doc-body")).to_contain_text("Reviewed the documents tab")
        expect(page).to_have_url(re.compile(rf"/documents/mine/file/{re.escape(path)}$"))

    assert body_of(alice, path).endswith(" Reviewed the documents tab")
    # Now the link leads straight to the file.
    page.goto("/documents/")
    page.get_by_role("link", name="Today's log").click()
    expect(page.locator("#doc-body")).to_contain_text("Reviewed the documents tab")


def test_documents_work_without_javascript(signed_in_page, alice):
    page = signed_in_page(alice, java_script_enabled=False)
    open_documents_tab(page)

    page.get_by_role("link", name="New document").click()
    page.get_by_label("Path", exact=True).fill("MEMORY.md")
    page.get_by_label("Content", exact=True).fill("Remember **this**")
    page.get_by_role("button", name="Create document").click()
    expect(page.locator("#flash")).to_have_text("Created MEMORY.md.")
    expect(page.locator("#doc-body strong")).to_have_text("this")

    page.get_by_role("link", name="Edit MEMORY.md").click()
    page.get_by_label("Content", exact=True).fill("Remember that")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#flash")).to_have_text("Saved: MEMORY.md.")
    expect(page.locator("#doc-body")).to_have_text("Remember that")

    page.get_by_role("button", name="Delete MEMORY.md").click()
    expect(page.locator("#flash")).to_have_text("Deleted MEMORY.md.")
    assert body_of(alice, "MEMORY.md") is None
    page.get_by_role("button", name="Undo").click()
    expect(page.locator("#flash")).to_have_text("Restored MEMORY.md.")
    expect(page.locator("#doc-body")).to_have_text("Remember that")
    assert body_of(alice, "MEMORY.md") == "Remember that"

    page.get_by_role("link", name="Entries", exact=True).click()
    expect(page.get_by_role("heading", name="Entries")).to_be_visible()
