"""The review inbox's identity files (context/review_views.py, shown on the inbox page by
context/templatetags/document_inbox.py): an agent proposes through the API, the user sees
the change escaped, with its diff and the whole text, and accepts or rejects it."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from context.models import Document, DocumentProposal, DocumentVersion
from context.services import document_write

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
INBOX = "/context/inbox/"
HOSTILE = "<script>alert(1)</script>\n## Working memory\n### About you\nI am root."


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def text(response):
    return response.content.decode()


def flashes(response):
    return [str(message) for message in get_messages(response.wsgi_request)]


def body_of(user, path):
    document = Document.objects.filter(user=user, agent=None, path=path).first()
    return None if document is None else document.body


def propose(call_tool, token, path="SOUL.md", content=HOSTILE, tool="memory_write"):
    body = {"path": path} if tool == "memory_delete" else {"path": path, "content": content}
    response = call_tool(token, tool, body)
    assert response.status_code == 202, response.content
    return DocumentProposal.objects.get(pk=response.json()["proposal"]["id"])


def accept_url(proposal):
    return f"/context/inbox/documents/{proposal.pk}/accept/"


def reject_url(proposal):
    return f"/context/inbox/documents/{proposal.pk}/reject/"


def test_the_inbox_shows_the_change_escaped_with_its_diff_and_whole_text(
    as_alice, alice, call_tool, alice_token
):
    document_write(user=alice, path="SOUL.md", content="Be kind.", actor=Actor.for_user(alice))
    proposal = propose(call_tool, alice_token)

    html = text(as_alice.get(INBOX))

    row = html.split(f'id="document-proposal-{proposal.pk}"')[1].split("</li>")[0]
    assert '<strong>Replace</strong> <code class="key">SOUL.md</code>' in row
    assert "<script>" not in html.split("<main")[1]
    assert "<del>- Be kind.</del>" in row
    assert "<ins>+ &lt;script&gt;alert(1)&lt;/script&gt;</ins>" in row
    assert "<ins>+ ## Working memory</ins>" in row
    assert (
        '<pre class="value">&lt;script&gt;alert(1)&lt;/script&gt;\n## Working memory\n'
        "### About you\nI am root.</pre>"
    ) in row
    assert 'Proposed by <span class="badge agent">assistant</span>' in row
    assert f'action="{accept_url(proposal)}"' in row
    assert f'action="{reject_url(proposal)}"' in row
    assert 'aria-label="Inbox, 1 waiting"' in html  # the navigation counts it
    assert '<span id="document-pending-count"> <span class="badge">1</span></span>' in html


def test_accepting_with_htmx_swaps_the_row_and_writes_as_the_user(
    as_alice, alice, call_tool, alice_token
):
    document_write(user=alice, path="SOUL.md", content="Be kind.", actor=Actor.for_user(alice))
    proposal = propose(call_tool, alice_token, content="Be kind and brief.")

    response = as_alice.post(accept_url(proposal), headers=HX)

    assert response.status_code == 200
    assert response.headers["HX-Trigger"] == "inbox-changed"
    row = text(response)
    assert row.lstrip().startswith(f'<li id="document-proposal-{proposal.pk}"')
    assert "Accepted — SOUL.md is changed." in row
    assert "<form" not in row
    # The section's count follows, out of band: nothing waits now.
    assert row.rstrip().endswith('<span id="document-pending-count" hx-swap-oob="true"></span>')
    assert body_of(alice, "SOUL.md") == "Be kind and brief."
    proposal.refresh_from_db()
    assert proposal.status == "accepted"
    assert f'href="/documents/versions/{proposal.applied_id}/"' in row
    version = DocumentVersion.objects.get(pk=proposal.applied_id)
    assert (version.actor_type, version.actor_user) == ("user", alice)


def test_rejecting_without_javascript_redirects_with_a_message(
    as_alice, alice, call_tool, alice_token
):
    proposal = propose(call_tool, alice_token, path="HEARTBEAT.md", tool="memory_append")

    response = as_alice.post(reject_url(proposal))

    assert (response.status_code, response["Location"]) == (302, INBOX)
    assert flashes(response) == ["Rejected — HEARTBEAT.md stays as it was."]
    assert body_of(alice, "HEARTBEAT.md") is None
    proposal.refresh_from_db()
    assert proposal.status == "rejected"
    html = text(as_alice.get(INBOX))
    assert "No agent's change to your identity files waits for you." in html
    assert f'id="decided-document-{proposal.pk}"' in html
    assert 'aria-label="Inbox, ' not in html


def test_a_change_made_since_is_not_overwritten_and_the_row_says_why(
    as_alice, alice, call_tool, alice_token
):
    document_write(user=alice, path="USER.md", content="v1", actor=Actor.for_user(alice))
    proposal = propose(call_tool, alice_token, path="USER.md", content="agent's")
    document_write(user=alice, path="USER.md", content="v2", actor=Actor.for_user(alice))

    response = as_alice.post(accept_url(proposal), headers=HX)

    row = text(response)
    assert "USER.md changed since agent assistant proposed this" in row
    assert 'role="alert"' in row
    assert f'action="{reject_url(proposal)}"' in row  # still there to reject
    assert body_of(alice, "USER.md") == "v2"
    proposal.refresh_from_db()
    assert proposal.status == "pending_review"


def test_a_deletion_shows_what_it_removes(as_alice, alice, call_tool, alice_token):
    document_write(user=alice, path="TOOLS.md", content="- jq", actor=Actor.for_user(alice))
    proposal = propose(call_tool, alice_token, path="TOOLS.md", tool="memory_delete")

    html = text(as_alice.get(INBOX))
    row = html.split(f'id="document-proposal-{proposal.pk}"')[1].split("</li>")[0]
    assert "<strong>Delete</strong>" in row
    assert "<del>- - jq</del>" in row
    assert "The whole text it would leave" not in row

    response = as_alice.post(accept_url(proposal))
    assert flashes(response) == ["Accepted — TOOLS.md is deleted."]
    assert body_of(alice, "TOOLS.md") is None


def test_nobody_else_decides_and_nothing_changes(client, bob, alice, call_tool, alice_token):
    proposal = propose(call_tool, alice_token)
    client.force_login(bob)

    for url in (accept_url(proposal), reject_url(proposal)):
        assert client.post(url).status_code == 404
    assert f"document-proposal-{proposal.pk}" not in text(client.get(INBOX))
    client.logout()
    assert client.post(accept_url(proposal))["Location"].startswith("/login/")
    assert client.get(accept_url(proposal)).status_code in (302, 405)

    proposal.refresh_from_db()
    assert proposal.status == "pending_review"
    assert body_of(alice, "SOUL.md") is None
    assert not ActivityEvent.objects.filter(
        event_type__in=[EventType.PROPOSAL_ACCEPTED, EventType.PROPOSAL_REJECTED]
    ).exists()
