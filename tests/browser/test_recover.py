"""Getting back what an agent deleted, in a real browser: the agent deletes a document through
the API; the user finds it in Recently deleted from the Documents tab and restores it in place;
from the Activity page the deletion's row opens the version it removed. Work items the same
way: deleted from their page (asked first), restored from Recently deleted work."""

import json
import urllib.request

import pytest
from playwright.sync_api import expect

from activity.actors import Actor
from context.models import Document
from context.services import document_write
from profiles.services import token_create
from work.models import WorkItem
from work.services import work_create

pytestmark = pytest.mark.django_db(transaction=True)


def call_api(live_server, token: str, tool: str, body: dict) -> tuple[int, dict]:
    """POST a tool call the way an agent does: outside the browser, with a bearer token."""
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/tools/{tool}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


def test_a_document_an_agent_deleted_comes_back_from_recently_deleted(
    signed_in_page, alice, alice_agent, live_server, same_document
):
    document_write(
        user=alice,
        path="projects/alpha.md",
        content="# Alpha\n\nShip the zebra release on Friday.",
        actor=Actor.for_user(alice),
    )
    token = token_create(agent=alice_agent).raw
    status, body = call_api(live_server, token, "memory_delete", {"path": "projects/alpha.md"})
    assert (status, body["deleted"]) == (200, True)
    version_id = body["version_id"]
    assert not Document.objects.filter(user=alice, path="projects/alpha.md").exists()

    page = signed_in_page(alice)
    page.get_by_role("navigation", name="Context sections").get_by_role(
        "link", name="Documents"
    ).click()
    expect(page.locator("#doc-tree")).not_to_contain_text("alpha.md")
    page.locator("#doc-tree").get_by_role("link", name="Recently deleted").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Recently deleted")
    row = page.locator(f"#deleted-doc-{version_id}")
    expect(row).to_contain_text("projects/alpha.md")
    expect(row).to_contain_text("Deleted by agent assistant")
    with same_document(page):
        row.get_by_role("button", name="Restore projects/alpha.md").click()
        expect(row.get_by_role("status")).to_have_text("Restored projects/alpha.md. Open it")
    assert Document.objects.get(user=alice, path="projects/alpha.md").body.startswith("# Alpha")

    row.get_by_role("link", name="Open it").click()
    expect(page.locator("#doc-body")).to_contain_text("Ship the zebra release on Friday.")
    expect(page.locator("#doc-tree")).to_contain_text("alpha.md")

    # The Activity row of the agent's deletion opens the version it removed.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Activity").click()
    deletion = page.locator("#activity-list tbody tr", has_text="Document deleted")
    expect(deletion).to_contain_text("assistant")
    deletion.get_by_role("link", name="projects/alpha.md").click()
    expect(page).to_have_url(f"{live_server.url}/documents/versions/{version_id}/")
    expect(page.locator("#doc-panel-title")).to_have_text("Version of projects/alpha.md")
    expect(page.locator(".doc-meta")).to_contain_text("Deleted by")
    expect(page.locator("#doc-body")).to_contain_text("Ship the zebra release on Friday.")


def test_a_work_item_deleted_from_its_page_comes_back(signed_in_page, alice, alice_agent):
    item = work_create(
        user=alice, title="Quarterly report", body="All green.", actor=Actor.for_agent(alice_agent)
    )
    page = signed_in_page(alice)
    page.goto(f"/work/{item.pk}/")

    delete = page.get_by_role("button", name="Delete Quarterly report")
    expect(delete).to_be_hidden()  # asked first: the button is inside the closed question
    page.get_by_text("Delete this item…").click()
    expect(page.locator("#work-delete")).to_contain_text("Delete “Quarterly report”?")
    delete.click()

    expect(page.locator("#work-deleted")).to_contain_text("This item is deleted.")
    expect(page.locator("#work-deleted")).to_contain_text("Deleted by you")
    assert WorkItem.objects.get(pk=item.pk).deleted_at is not None

    page.get_by_role("link", name="Recently deleted work").click()
    row = page.locator(f"#deleted-work-{item.pk}")
    expect(row).to_contain_text("Quarterly report")
    row.get_by_role("button", name="Restore Quarterly report").click()
    expect(row.get_by_role("status")).to_have_text("Restored Quarterly report.")
    assert WorkItem.objects.get(pk=item.pk).deleted_at is None

    row.get_by_role("link", name="Quarterly report").click()
    expect(page.locator("#work-title")).to_have_text("Quarterly report")
    expect(page.locator("#work-deleted")).to_have_count(0)
