"""Shared scopes on the Documents tab in a real browser: each granted scope is its own
section, editable with a read_write grant and read-only with a read grant, and a user
without a grant sees none of it."""

import re

import pytest
from playwright.sync_api import Page, expect

from activity.actors import Actor
from context.models import Document
from context.services import document_write
from context.shared_scopes import scope_grant_set, shared_scope_create

pytestmark = pytest.mark.django_db(transaction=True)


def section(page: Page, heading: str):
    return page.locator("#doc-tree section").filter(
        has=page.get_by_role("heading", name=heading, exact=True)
    )


def test_granted_scopes_are_sections_editable_per_grant(
    signed_in_page, alice, bob, charlie, same_document
):
    team = shared_scope_create(slug="team", description="The platform team")
    ops = shared_scope_create(slug="ops")
    scope_grant_set(scope=team, user=alice, access="read_write")
    scope_grant_set(scope=ops, user=alice, access="read")
    for scope, text in [(team, "# Runbook\n\n- restart"), (ops, "# On call")]:
        document_write(
            user=None, shared_scope=scope, path="runbook.md", content=text, actor=Actor.system()
        )

    page = signed_in_page(alice)
    page.goto("/documents/")
    team_section = section(page, "Shared: team")
    ops_section = section(page, "Shared: ops (read-only)")
    expect(team_section).to_contain_text("The platform team")
    expect(ops_section).to_contain_text("you and they may only read them")

    with same_document(page):
        ops_section.get_by_role("link", name="runbook.md").click()
        expect(page.locator("#doc-body h1")).to_have_text("On call")
        expect(page.locator("#doc-panel").get_by_text("Read-only", exact=True)).to_be_visible()
        expect(page.get_by_role("link", name="Edit runbook.md")).to_have_count(0)

        team_section.get_by_role("link", name="runbook.md").click()
        expect(page).to_have_url(re.compile(r"/documents/shared/team/file/runbook\.md$"))
        page.get_by_role("link", name="Edit runbook.md").click()
        page.get_by_label("Content", exact=True).fill("# Runbook\n\n- restart\n- page the lead")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#doc-panel").get_by_role("status")).to_have_text("Saved.")
        expect(page.locator("#doc-body li")).to_have_text(["restart", "page the lead"])
    assert Document.objects.get(shared_scope=team).body == "# Runbook\n\n- restart\n- page the lead"
    assert Document.objects.get(shared_scope=ops).body == "# On call"

    other = signed_in_page(charlie)
    other.goto("/documents/")
    expect(other.locator("#doc-tree")).not_to_contain_text("Shared:")
    expect(other.locator("#doc-tree")).not_to_contain_text("runbook.md")
