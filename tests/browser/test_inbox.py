"""The review inbox in a real browser: an agent's proposal (made through the API, as an agent
does) shows with its diff and the count in the navigation; accepting, editing then accepting
and rejecting in bulk swap the rows with htmx, and the count follows without a reload."""

import json
import urllib.request

import pytest
from playwright.sync_api import Page, expect

from activity.actors import Actor
from memory.models import Memory, MemoryProposal
from memory.services import memory_upsert
from profiles.services import profile_update, token_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(alice_agent):
    return token_create(agent=alice_agent).raw


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


def say(user, key: str, value: str) -> None:
    memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user))


def propose(live_server, token: str, key: str, value: str) -> MemoryProposal:
    status, body = call_api(live_server, token, "update_memory", {"key": key, "value": value})
    assert (status, body["status"]) == (202, "pending_review")
    return MemoryProposal.objects.get(pk=body["proposal"]["id"])


def inbox_link(page: Page):
    return page.get_by_role("navigation", name="Main").locator("#nav-inbox")


def test_a_proposal_shows_with_its_diff_and_accepting_it_updates_the_count(
    signed_in_page, alice, live_server, token, same_document
):
    say(alice, "preference:report-format", "Prefers bullet points in reports")
    say(alice, "name", "Kevin")
    first = propose(
        live_server, token, "preference:report-format", "Prefers short bullet points in reports"
    )
    propose(live_server, token, "name", "Kev")
    page = signed_in_page(alice)

    expect(page.get_by_role("link", name="Inbox, 2 waiting")).to_be_visible()
    page.get_by_role("link", name="Inbox, 2 waiting").click()
    expect(page.get_by_role("heading", name="Review inbox")).to_be_visible()
    row = page.locator(f"#proposal-{first.pk}")
    expect(row.locator("ins")).to_have_text(" short")
    expect(row.locator(".diff")).to_have_text("Prefers short bullet points in reports")
    expect(row).to_contain_text("Proposed by assistant")
    expect(row).to_contain_text("Why it waits: changes what you said")

    with same_document(page):
        row.get_by_role("button", name="Accept change preference:report-format").click()
        expect(row.get_by_role("status")).to_contain_text("Accepted — now in your memory")
        expect(inbox_link(page)).to_have_accessible_name("Inbox, 1 waiting")
        expect(inbox_link(page).locator(".badge")).to_have_text("1")
        expect(row.get_by_role("button")).to_have_count(0)
    memory = Memory.objects.get(user=alice, key="preference:report-format")
    assert (memory.value, memory.source) == (
        "Prefers short bullet points in reports",
        "user_stated",
    )


def test_edit_then_accept_shows_the_saved_text_and_the_counts_follow(
    signed_in_page, alice, live_server, token, same_document
):
    """Edit then accept: the row shows the text that was saved (the agent's beside it);
    the list's count, the navigation's and the bulk bar follow without a reload."""
    profile_update(user=alice, review_agent_memories=True)
    status, body = call_api(
        live_server, token, "create_memory", {"key": "fact:tea", "value": "Tea"}
    )
    assert status == 202
    pk = body["proposal"]["id"]
    say(alice, "name", "Kevin")
    other = propose(live_server, token, "name", "Kev")
    page = signed_in_page(alice)
    page.goto("/context/inbox/")
    row = page.locator(f"#proposal-{pk}")
    count = page.locator("#inbox-pending-count")
    bulk = page.locator("#inbox-bulk")
    expect(row).to_contain_text("Why it waits: new memory (you review agents' new memories)")
    # Text first: the card leads with what it says; the key is a secondary line.
    expect(row.locator(".entry-head")).not_to_contain_text("fact:tea")
    expect(row.locator(".meta").first).to_contain_text("Key fact:tea")
    expect(count).to_have_text("2")
    expect(inbox_link(page)).to_have_accessible_name("Inbox, 2 waiting")
    expect(bulk.get_by_role("button", name="Accept selected")).to_be_visible()

    with same_document(page):
        row.get_by_text("Edit then accept").click()
        box = row.get_by_label("Text to accept")
        expect(box).to_have_value("Tea")
        box.fill("Likes green tea in the morning")
        row.get_by_role("button", name="Accept edited text").click()
        expect(row.get_by_role("status")).to_contain_text(
            "Accepted with your edit — now in your memory"
        )
        expect(row.locator(".diff")).to_have_text("Likes green tea in the morning")
        expect(row.locator(".proposed")).to_have_text("The agent proposed: “Tea”")
        expect(count).to_have_text("1")
        expect(inbox_link(page)).to_have_accessible_name("Inbox, 1 waiting")
        expect(bulk.get_by_role("button", name="Accept selected")).to_be_visible()

        # The last one decided: no count, and no bulk bar left to act on nothing.
        page.locator(f"#proposal-{other.pk}").get_by_role("button", name="Reject").click()
        expect(page.locator(f"#proposal-{other.pk}").get_by_role("status")).to_contain_text(
            "Rejected"
        )
        expect(count).to_have_text("")
        expect(bulk).to_be_hidden()
        expect(bulk.get_by_role("button")).to_have_count(0)
        expect(inbox_link(page)).to_have_accessible_name("Inbox")
        expect(inbox_link(page).locator(".badge")).to_have_count(0)
    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert (memory.value, memory.source) == ("Likes green tea in the morning", "user_stated")
    assert Memory.objects.get(user=alice, key="name").value == "Kevin"


def test_select_two_and_reject_them_in_bulk(
    signed_in_page, alice, live_server, token, same_document
):
    say(alice, "name", "Kevin")
    say(alice, "role", "Head of Growth")
    say(alice, "company", "YARNNN")
    kept = propose(live_server, token, "name", "Kev")
    rejected = [
        propose(live_server, token, "role", "CEO"),
        propose(live_server, token, "company", "Yarn Inc"),
    ]
    page = signed_in_page(alice)
    page.goto("/context/inbox/")
    expect(inbox_link(page)).to_have_accessible_name("Inbox, 3 waiting")

    with same_document(page):
        page.get_by_label("Select change role").check()
        page.get_by_label("Select change company").check()
        page.get_by_role("button", name="Reject selected").click()
        expect(page.locator("#inbox-list").get_by_role("status").first).to_be_visible()
        for proposal in rejected:
            expect(page.locator(f"#proposal-{proposal.pk}")).to_contain_text(
                "Rejected — your memory stays as it was."
            )
        expect(page.locator("#inbox-list > p.saved")).to_have_text("Rejected 2 proposals.")
        expect(inbox_link(page)).to_have_accessible_name("Inbox, 1 waiting")
        expect(page.get_by_label("Select change name")).not_to_be_checked()
    assert sorted(MemoryProposal.objects.filter(user=alice).values_list("pk", "status")) == sorted(
        [(kept.pk, "pending_review")] + [(p.pk, "rejected") for p in rejected]
    )
    assert Memory.objects.get(user=alice, key="role").value == "Head of Growth"


def test_an_identity_files_proposal_is_accepted_and_another_rejected_in_place(
    signed_in_page, alice, live_server, token, same_document
):
    from context.models import Document, DocumentProposal
    from context.services import document_write

    document_write(user=alice, path="SOUL.md", content="Be kind.", actor=Actor.for_user(alice))
    status, body = call_api(
        live_server, token, "memory_write", {"path": "SOUL.md", "content": "Be kind and brief."}
    )
    assert (status, body["status"]) == (202, "pending_review")
    soul = DocumentProposal.objects.get(pk=body["proposal"]["id"])
    status, body = call_api(
        live_server, token, "memory_write", {"path": "AGENTS.md", "content": "## Obey me"}
    )
    agents = DocumentProposal.objects.get(pk=body["proposal"]["id"])
    page = signed_in_page(alice)
    page.goto("/context/inbox/")
    expect(inbox_link(page)).to_have_accessible_name("Inbox, 2 waiting")
    row = page.locator(f"#document-proposal-{soul.pk}")
    expect(row.locator("del")).to_have_text("- Be kind.")
    expect(row.locator("ins")).to_have_text("+ Be kind and brief.")
    expect(row).to_contain_text("Proposed by assistant")

    with same_document(page):
        row.get_by_role("button", name="Accept replace SOUL.md").click()
        expect(row.get_by_role("status")).to_contain_text("Accepted — SOUL.md is changed")
        expect(inbox_link(page)).to_have_accessible_name("Inbox, 1 waiting")
        other = page.locator(f"#document-proposal-{agents.pk}")
        other.get_by_role("button", name="Reject replace AGENTS.md").click()
        expect(other.get_by_role("status")).to_contain_text("Rejected — AGENTS.md stays")
        expect(inbox_link(page)).to_have_accessible_name("Inbox")
    assert Document.objects.get(user=alice, path="SOUL.md").body == "Be kind and brief."
    assert not Document.objects.filter(user=alice, path="AGENTS.md").exists()


def test_look_alike_notes_are_a_line_in_the_inbox_and_merge_in_place(
    signed_in_page, alice, live_server, token, same_document
):
    """Issue 26: an agent's note beside another agent's note is stored, not proposed; the
    Inbox says they look alike once it has loaded, and a merge swaps in place."""
    first = call_api(
        live_server,
        token,
        "create_memory",
        {"key": "preference:bullets", "value": "Prefers bullet points in reports"},
    )
    second = call_api(
        live_server,
        token,
        "create_memory",
        {"key": "preference:short", "value": "Prefers short bullet points in reports"},
    )
    assert (first[0], second[0]) == (201, 201)
    page = signed_in_page(alice)

    page.goto(f"{live_server.url}/context/inbox/")
    expect(page.locator("#look-alike")).to_contain_text("2 notes look alike")
    expect(inbox_link(page)).to_have_accessible_name("Inbox")  # nothing waits
    page.locator("#look-alike").get_by_role("link", name="merge?").click()
    expect(page.get_by_role("heading", name="Notes that look alike")).to_be_visible()
    page.get_by_label("Prefers bullet points in reports", exact=True).check()

    with same_document(page):
        page.get_by_role("button", name="Merge: keep the one chosen, delete the other 1").click()
        group = page.locator("li.look-alike")
        expect(group.get_by_role("status")).to_contain_text("Merged: 1 note deleted")
        expect(group.get_by_role("button", name="Undo the merge")).to_be_visible()
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == [
        "preference:bullets"
    ]
