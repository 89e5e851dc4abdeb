"""Recently deleted documents (pages/views/documents_deleted.py): reached from the Documents
tab and from the memories' and the work items' Recently deleted; lists what was deleted with
who and when; Restore brings it back through the context service, or, when a document was
written at the path since, says so and links to it instead of overwriting it."""

import re

import pytest

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from context.models import Document, DocumentVersion
from context.services import document_delete, document_write
from context.shared_scopes import scope_grant_set, shared_scope_create

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
PAGE = "/documents/deleted/"


def restore_url(version):
    return f"/documents/deleted/{version.pk}/restore/"


def row_of(html, version):
    found = re.search(
        rf'<li id="deleted-doc-{version.pk}" class="deleted-item">.*?</li>', html, re.S
    )
    assert found, f"no row for version {version.pk}"
    return found.group(0)


def snapshot():
    return (
        list(Document.objects.order_by("pk").values_list("pk", "path", "body")),
        DocumentVersion.objects.count(),
        ActivityEvent.objects.count(),
    )


@pytest.fixture
def agent_deleted(alice, alice_agent):
    """alice's notes.md, deleted by her agent."""
    document_write(
        user=alice, path="notes.md", content="# Notes\nKeep me.", actor=Actor.for_user(alice)
    )
    return document_delete(user=alice, path="notes.md", actor=Actor.for_agent(alice_agent))


def test_login_required(client, agent_deleted):
    for response in (client.get(PAGE), client.post(restore_url(agent_deleted))):
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=/documents/deleted/")


def test_reached_from_the_documents_tab_and_the_other_recently_deleted_pages(client, alice):
    client.force_login(alice)

    documents = client.get("/documents/").content.decode()
    assert '<a href="/documents/deleted/" id="recently-deleted-documents">Recently deleted</a>' in (
        documents
    )
    memories = client.get("/deleted/").content.decode()
    assert '<a href="/documents/deleted/">Documents</a>' in memories
    assert '<a href="/deleted/" aria-current="page">Memories</a>' in memories
    work = client.get("/work/deleted/").content.decode()
    assert '<a href="/documents/deleted/">Documents</a>' in work
    page = client.get(PAGE).content.decode()
    assert '<a href="/documents/deleted/" aria-current="page">Documents</a>' in page
    assert "No documents deleted in the last 30 days." in page


def test_lists_who_deleted_it_with_restore_and_its_versions(client, alice, agent_deleted):
    client.force_login(alice)

    row = row_of(client.get(PAGE).content.decode(), agent_deleted)

    assert '<code class="path" dir="auto">notes.md</code>' in row
    assert '<span class="badge user" dir="auto">Your documents</span>' in row
    assert 'Deleted by <span class="badge agent" dir="auto">agent assistant</span>' in row
    assert f'hx-post="{restore_url(agent_deleted)}"' in row
    assert f'<a href="/documents/versions/{agent_deleted.pk}/">What was deleted' in row
    assert '<a href="/documents/mine/history/notes.md">Versions' in row


def test_restore_in_place_brings_the_document_back_with_its_version_and_event(
    client, alice, agent_deleted
):
    client.force_login(alice)

    response = client.post(restore_url(agent_deleted), headers=HX)

    part = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in part
    assert part.strip().startswith(f'<li id="deleted-doc-{agent_deleted.pk}"')
    assert (
        'Restored <code>notes.md</code>. <a href="/documents/mine/file/notes.md">Open it</a>'
        in part
    )
    document = Document.objects.get(user=alice, path="notes.md")
    assert document.body == "# Notes\nKeep me."
    restore = DocumentVersion.objects.filter(document=document).latest("id")
    assert (restore.action, restore.actor_type, restore.actor_user) == ("restore", "user", alice)
    event = ActivityEvent.objects.latest("id")
    assert (event.event_type, event.payload["action"]) == (EventType.DOCUMENT_WRITTEN, "restore")
    assert "No documents deleted" in client.get(PAGE).content.decode()


def test_restore_without_javascript_opens_the_document(client, alice, agent_deleted):
    client.force_login(alice)

    response = client.post(restore_url(agent_deleted), follow=True)

    assert response.redirect_chain == [("/documents/mine/file/notes.md", 302)]
    assert "Restored notes.md." in response.content.decode()


def test_a_document_written_there_since_is_offered_not_overwritten(client, alice, agent_deleted):
    document_write(user=alice, path="notes.md", content="A new start", actor=Actor.for_user(alice))
    client.force_login(alice)

    row = row_of(client.get(PAGE).content.decode(), agent_deleted)
    assert "A document exists at this path now, so restoring here would overwrite it." in row
    assert '<a href="/documents/mine/file/notes.md">Open the document there now</a>' in row
    assert "hx-post" not in row

    # A Restore sent anyway (a page left open) overwrites nothing.
    before = snapshot()
    part = client.post(restore_url(agent_deleted), headers=HX).content.decode()
    assert '<p class="notice exists-now" role="alert">Not restored: a document exists' in part
    assert '<a href="/documents/mine/file/notes.md">Open the document there now</a>' in part
    plain = client.post(restore_url(agent_deleted), follow=True)
    assert plain.redirect_chain == [(PAGE, 302)]
    assert "A document exists at &#x27;notes.md&#x27; now" in plain.content.decode()
    assert snapshot() == before
    assert Document.objects.get(user=alice, path="notes.md").body == "A new start"


def test_an_agents_notes_come_back_in_its_folder(client, alice, alice_agent):
    agent = Actor.for_agent(alice_agent)
    document_write(user=alice, agent=alice_agent, path="todo.md", content="- call", actor=agent)
    version = document_delete(user=alice, agent=alice_agent, path="todo.md", actor=agent)
    client.force_login(alice)

    row = row_of(client.get(PAGE).content.decode(), version)
    assert '<span class="badge agent" dir="auto">Notes of agent assistant</span>' in row

    response = client.post(restore_url(version))

    assert response["Location"] == "/documents/agents/assistant/file/todo.md"
    assert Document.objects.get(user=alice, agent=alice_agent, path="todo.md").body == "- call"


def test_bob_neither_sees_nor_restores_alices_deletion(client, bob, agent_deleted):
    client.force_login(bob)
    before = snapshot()

    assert "notes.md" not in client.get(PAGE).content.decode()
    assert client.post(restore_url(agent_deleted)).status_code == 404
    assert client.post(restore_url(agent_deleted), headers=HX).status_code == 404
    assert snapshot() == before


def test_a_read_only_shared_scope_is_not_listed_nor_restorable(client, alice, bob):
    team = shared_scope_create(slug="team")
    scope_grant_set(scope=team, user=alice, access="read")
    scope_grant_set(scope=team, user=bob, access="read_write")
    document_write(
        user=None, shared_scope=team, path="runbook.md", content="R", actor=Actor.for_user(bob)
    )
    version = document_delete(
        user=None, shared_scope=team, path="runbook.md", actor=Actor.for_user(bob)
    )
    client.force_login(alice)
    before = snapshot()

    assert "runbook.md" not in client.get(PAGE).content.decode()
    assert client.post(restore_url(version)).status_code == 403
    assert snapshot() == before

    client.force_login(bob)
    row = row_of(client.get(PAGE).content.decode(), version)
    assert '<span class="badge shared" dir="auto">Shared: team</span>' in row
    assert client.post(restore_url(version))["Location"] == "/documents/shared/team/file/runbook.md"


def test_the_deleted_panel_and_the_deletions_version_point_to_recently_deleted(
    client, alice, agent_deleted
):
    client.force_login(alice)

    undo = client.get(f"/documents/?undo={agent_deleted.pk}").content.decode()
    assert 'restore it later from <a href="/documents/deleted/">Recently deleted</a>' in undo
    version = client.get(f"/documents/versions/{agent_deleted.pk}/").content.decode()
    assert 'The document is in <a href="/documents/deleted/">Recently deleted</a>.' in version


def test_get_is_not_a_restore(client, alice, agent_deleted):
    client.force_login(alice)
    assert client.get(restore_url(agent_deleted)).status_code == 405
    assert client.post(PAGE).status_code == 405
