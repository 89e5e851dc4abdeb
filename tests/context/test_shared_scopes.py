"""Shared scopes: grants, multi-scope reads for agents, writes into a named scope, the pages,
the share_scope command, and isolation (no grant: nothing of the scope, by any tool or page).

alice holds a read grant to the scope "team", bob a read_write one, charlie none.
"""

import datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.test import Client

from activity.actors import Actor
from activity.models import ActivityEvent
from context.history import document_restore
from context.models import Document, DocumentChunk, DocumentVersion, ScopeGrant, SharedScope
from context.services import document_delete, document_write
from context.shared_scopes import scope_grant_revoke, scope_grant_set, shared_scope_create
from profiles.services import system_token_create, token_create
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true", "HX-Target": "doc-panel"}


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


def write_shared(scope, path, content):
    return document_write(
        user=None, shared_scope=scope, path=path, content=content, actor=Actor.system()
    )


def snapshot():
    """Every document, version and chunk, to show that a refused request changed nothing."""
    return (
        list(
            Document.objects.order_by("pk").values_list(
                "pk", "user", "agent", "shared_scope", "path", "body"
            )
        ),
        DocumentVersion.objects.count(),
        DocumentChunk.objects.count(),
    )


@pytest.fixture
def team(alice, bob, charlie):
    scope = shared_scope_create(slug="team", description="The platform team")
    scope_grant_set(scope=scope, user=alice, access="read")
    scope_grant_set(scope=scope, user=bob, access="read_write")
    write_shared(scope, "runbook.md", "# Runbook\nRestart the zebra service.")
    write_shared(scope, "MEMORY.md", "- The team deploys on zebra Tuesdays.")
    write_shared(scope, "daily/2026-11-20.md", "- 10:00 zebra release")
    write_shared(scope, "SOUL.md", "Team soul: be a zebra.")
    write_shared(scope, "agents/assistant/AGENT_MEMORY.md", "zebra notes of an agent")
    return scope


@pytest.fixture
def charlie_token(charlie):
    return token_create(agent=AgentFactory(user=charlie, name="assistant")).raw


@pytest.fixture
def system_token(db):
    return system_token_create(label="wiki sync").raw


def paths_and_scopes(response):
    assert response.status_code == 200, response.content
    return [(entry["path"], entry["scope"]) for entry in response.json()["entries"]]


def hits(response):
    assert response.status_code == 200, response.content
    return sorted((hit["path"], hit["scope"]) for hit in response.json()["results"])


# --- isolation: no grant, nothing ------------------------------------------------------------


def test_without_a_grant_no_tool_sees_or_changes_anything_of_the_scope(
    call_tool, team, charlie_token
):
    before = snapshot()
    named = {"scope": "shared:team"}

    assert call_tool(charlie_token, "memory_read", {"path": "runbook.md"}).status_code == 404
    assert call_tool(charlie_token, "memory_read", {"path": "MEMORY.md"}).status_code == 404
    assert paths_and_scopes(call_tool(charlie_token, "memory_tree", {"depth": 3})) == []
    assert hits(call_tool(charlie_token, "memory_search", {"query": "zebra"})) == []

    # Naming the scope answers exactly as for a scope that does not exist.
    calls = [
        ("memory_read", {"path": "runbook.md"}),
        ("memory_tree", {}),
        ("memory_search", {"query": "zebra"}),
        ("memory_write", {"path": "runbook.md", "content": "hacked"}),
        ("memory_append", {"path": "runbook.md", "content": "hacked"}),
        ("memory_delete", {"path": "runbook.md"}),
    ]
    for name, body in calls:
        granted_none = call_tool(charlie_token, name, {**body, **named})
        missing = call_tool(charlie_token, name, {**body, "scope": "shared:nope"})
        assert granted_none.status_code == missing.status_code == 404, name
        assert error(granted_none) == {
            "code": "not_found",
            "message": "No scope 'shared:team' is readable with this token.",
            "field": "scope",
        }
        assert error(missing)["message"] == "No scope 'shared:nope' is readable with this token."
    assert snapshot() == before


def system_prompt(client, token):
    response = client.get("/api/v1/system-prompt", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    return response.json()["prompt"]


def test_the_system_prompt_holds_the_scopes_memory_and_log_only_while_granted(
    client, monkeypatch, team, alice, alice_token, charlie_token
):
    # The fixture's daily log is today's for alice (UTC: no timezone memory).
    moment = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=datetime.UTC)
    monkeypatch.setattr("django.utils.timezone.now", lambda: moment)

    assert "zebra" not in system_prompt(client, charlie_token)
    prompt = system_prompt(client, alice_token)
    assert "## MEMORY.md (shared:team)\n" in prompt
    assert "## daily/2026-11-20.md (shared:team, today)\n" in prompt
    assert "zebra release" in prompt
    assert "Team soul" not in prompt  # identity files: the primary scope only
    assert "zebra notes of an agent" not in prompt

    assert scope_grant_revoke(scope=team, user=alice) is True

    prompt = system_prompt(client, alice_token)
    assert "zebra" not in prompt
    assert "shared:team" not in prompt


def test_a_system_token_does_not_reach_shared_scopes(call_tool, team, system_token):
    assert call_tool(system_token, "memory_read", {"path": "runbook.md"}).status_code == 404
    named = call_tool(system_token, "memory_read", {"path": "runbook.md", "scope": "shared:team"})
    assert named.status_code == 404
    assert paths_and_scopes(call_tool(system_token, "memory_tree", {"depth": 3})) == []
    assert hits(call_tool(system_token, "memory_search", {"query": "zebra"})) == []


def test_a_bad_scope_name_is_a_400_that_says_so(call_tool, team, alice_token):
    response = call_tool(alice_token, "memory_read", {"path": "x.md", "scope": "team"})
    assert response.status_code == 400
    assert error(response)["field"] == "scope"
    assert "shared:<slug>" in error(response)["message"]


# --- reading across scopes -------------------------------------------------------------------


def test_a_read_grant_reads_the_scope_beside_the_users_own(call_tool, team, alice, alice_token):
    runbook = call_tool(alice_token, "memory_read", {"path": "runbook.md"}).json()
    memory = call_tool(alice_token, "memory_read", {"path": "MEMORY.md"}).json()
    daily = call_tool(alice_token, "memory_read", {"path": "daily/2026-11-20.md"}).json()

    assert (runbook["scope"], runbook["content"]) == (
        "shared:team",
        "# Runbook\nRestart the zebra service.",
    )
    assert (memory["scope"], memory["content"]) == (
        "shared:team",
        "- The team deploys on zebra Tuesdays.",
    )
    assert daily["scope"] == "shared:team"

    # The user's own MEMORY.md wins over the team's; naming the scope still reads the team's.
    call_tool(alice_token, "memory_write", {"path": "MEMORY.md", "content": "mine"})
    own = call_tool(alice_token, "memory_read", {"path": "MEMORY.md"}).json()
    named = call_tool(
        alice_token, "memory_read", {"path": "MEMORY.md", "scope": "shared:team"}
    ).json()
    only_own = call_tool(alice_token, "memory_read", {"path": "runbook.md", "scope": "user"})
    assert (own["scope"], own["content"]) == ("user", "mine")
    assert (named["scope"], named["content"]) == (
        "shared:team",
        "- The team deploys on zebra Tuesdays.",
    )
    assert only_own.status_code == 404


def test_tree_and_search_say_each_results_scope(call_tool, team, alice, alice_agent, alice_token):
    document_write(
        user=alice, path="MEMORY.md", content="my zebra notes", actor=Actor.for_user(alice)
    )

    tree = paths_and_scopes(call_tool(alice_token, "memory_tree", {"depth": 2}))
    named_tree = paths_and_scopes(
        call_tool(alice_token, "memory_tree", {"depth": 2, "scope": "shared:team"})
    )
    found = hits(call_tool(alice_token, "memory_search", {"query": "zebra", "limit": 20}))
    named_found = hits(
        call_tool(alice_token, "memory_search", {"query": "zebra", "scope": "shared:team"})
    )
    own_found = hits(call_tool(alice_token, "memory_search", {"query": "zebra", "scope": "user"}))

    # The user's own MEMORY.md takes the place of the team's in the tree; identity files and
    # agents' notes of the scope never show.
    assert tree == [
        ("MEMORY.md", "user"),
        ("daily", "shared:team"),
        ("daily/2026-11-20.md", "shared:team"),
        ("runbook.md", "shared:team"),
    ]
    assert named_tree == [
        ("MEMORY.md", "shared:team"),
        ("daily", "shared:team"),
        ("daily/2026-11-20.md", "shared:team"),
        ("runbook.md", "shared:team"),
    ]
    assert found == [
        ("MEMORY.md", "shared:team"),
        ("MEMORY.md", "user"),
        ("daily/2026-11-20.md", "shared:team"),
        ("runbook.md", "shared:team"),
    ]
    assert named_found == [
        ("MEMORY.md", "shared:team"),
        ("daily/2026-11-20.md", "shared:team"),
        ("runbook.md", "shared:team"),
    ]
    assert own_found == [("MEMORY.md", "user")]


def test_identity_files_and_agents_notes_of_a_shared_scope_are_never_read(
    call_tool, team, alice_token, bob_token
):
    before = snapshot()
    for path in ["SOUL.md", "agents/assistant/AGENT_MEMORY.md", "AGENT_MEMORY.md"]:
        for scope in [{}, {"scope": "shared:team"}]:
            response = call_tool(alice_token, "memory_read", {"path": path, **scope})
            assert response.status_code == 404, (path, scope)
    assert hits(call_tool(alice_token, "memory_search", {"query": "soul"})) == []
    named_tree = call_tool(alice_token, "memory_tree", {"depth": 3, "scope": "shared:team"})
    assert "SOUL.md" not in [path for path, _ in paths_and_scopes(named_tree)]
    # Nor written there, even with a read_write grant.
    write = call_tool(
        bob_token, "memory_write", {"path": "USER.md", "content": "x", "scope": "shared:team"}
    )
    assert write.status_code == 403
    assert error(write)["field"] == "path"
    assert snapshot() == before


def test_shared_scopes_are_read_in_slug_order_then_global(
    call_tool, settings, team, alice, alice_token
):
    settings.MNEMO_GLOBAL_READABLE = True
    alpha = shared_scope_create(slug="alpha")
    scope_grant_set(scope=alpha, user=alice)
    write_shared(alpha, "runbook.md", "alpha's")
    document_write(user=None, path="runbook.md", content="company's", actor=Actor.system())
    document_write(user=None, path="policy.md", content="company's", actor=Actor.system())

    read = call_tool(alice_token, "memory_read", {"path": "runbook.md"}).json()
    team_read = call_tool(
        alice_token, "memory_read", {"path": "runbook.md", "scope": "shared:team"}
    ).json()
    global_read = call_tool(
        alice_token, "memory_read", {"path": "runbook.md", "scope": "global"}
    ).json()
    policy = call_tool(alice_token, "memory_read", {"path": "policy.md"}).json()
    tree = paths_and_scopes(call_tool(alice_token, "memory_tree", {}))

    assert (read["scope"], read["content"]) == ("shared:alpha", "alpha's")
    assert team_read["scope"] == "shared:team"
    assert (global_read["scope"], global_read["content"]) == ("global", "company's")
    assert (policy["scope"], policy["content"]) == ("global", "company's")
    assert tree == [
        ("MEMORY.md", "shared:team"),
        ("daily", "shared:team"),
        ("policy.md", "global"),
        ("runbook.md", "shared:alpha"),
    ]


def test_global_is_a_read_only_grant_while_readable_and_unknown_otherwise(
    call_tool, settings, alice_token
):
    document_write(user=None, path="policy.md", content="company's", actor=Actor.system())
    named = {"path": "policy.md", "scope": "global"}

    settings.MNEMO_GLOBAL_READABLE = False
    assert call_tool(alice_token, "memory_read", named).status_code == 404
    settings.MNEMO_GLOBAL_READABLE = True
    assert call_tool(alice_token, "memory_read", named).json()["content"] == "company's"
    write = call_tool(alice_token, "memory_write", {**named, "content": "hacked"})
    assert write.status_code == 403
    assert error(write)["field"] == "scope"
    assert Document.objects.get(path="policy.md").body == "company's"


# --- writing ---------------------------------------------------------------------------------


def test_a_read_grant_cannot_change_the_scope(call_tool, team, alice, alice_token):
    before = snapshot()
    named = {"scope": "shared:team"}
    for name, body in [
        ("memory_write", {"path": "runbook.md", "content": "hacked"}),
        ("memory_write", {"path": "new.md", "content": "hacked"}),
        ("memory_append", {"path": "runbook.md", "content": "hacked"}),
        ("memory_delete", {"path": "runbook.md"}),
    ]:
        response = call_tool(alice_token, name, {**body, **named})
        assert response.status_code == 403, name
        assert error(response) == {
            "code": "forbidden",
            "message": "shared:team is read-only for you: your user's grant lets agents read "
            "it, not change it.",
            "field": "scope",
        }
    # Without scope, deleting what only the team has is refused, naming where it is.
    delete = call_tool(alice_token, "memory_delete", {"path": "runbook.md"})
    assert delete.status_code == 403
    assert "shared:team" in error(delete)["message"]
    assert snapshot() == before

    # Without scope a write goes to the user's own documents; the team's stays as it was.
    own = call_tool(alice_token, "memory_write", {"path": "runbook.md", "content": "my copy"})
    assert own.json()["scope"] == "user"
    assert Document.objects.get(user=alice, path="runbook.md").body == "my copy"
    assert Document.objects.get(shared_scope=team, path="runbook.md").body == (
        "# Runbook\nRestart the zebra service."
    )


def test_a_read_write_grant_writes_when_the_scope_is_named(
    call_tool, team, alice_token, bob, bob_agent, bob_token
):
    named = {"scope": "shared:team"}
    written = call_tool(
        bob_token, "memory_write", {"path": "notes/plan.md", "content": "v1", **named}
    )
    appended = call_tool(
        bob_token, "memory_append", {"path": "notes/plan.md", "content": "v2", **named}
    )
    read_by_alice = call_tool(alice_token, "memory_read", {"path": "notes/plan.md"}).json()

    assert written.status_code == 200
    assert (written.json()["scope"], appended.json()["scope"]) == ("shared:team", "shared:team")
    document = Document.objects.get(path="notes/plan.md")
    assert (document.user, document.agent, document.shared_scope, document.body) == (
        None,
        None,
        team,
        "v1\nv2",
    )
    assert (read_by_alice["scope"], read_by_alice["content"]) == ("shared:team", "v1\nv2")
    version = DocumentVersion.objects.filter(path="notes/plan.md").first()
    assert (version.shared_scope, version.actor_agent) == (team, bob_agent)
    assert set(
        DocumentChunk.objects.filter(document=document).values_list("shared_scope", "user")
    ) == {(team.pk, None)}
    # The change is in the activity of the user whose agent made it.
    event = ActivityEvent.objects.filter(event_type="document_written").order_by("-pk").first()
    assert (event.user, event.payload["scope"], event.payload["path"]) == (
        bob,
        "shared:team",
        "notes/plan.md",
    )

    deleted = call_tool(bob_token, "memory_delete", {"path": "notes/plan.md", **named})
    assert deleted.status_code == 200
    assert not Document.objects.filter(path="notes/plan.md").exists()
    # A write without scope still goes to bob's own documents.
    own = call_tool(bob_token, "memory_write", {"path": "runbook.md", "content": "bob's"})
    assert own.json()["scope"] == "user"
    assert Document.objects.get(shared_scope=team, path="runbook.md").body.startswith("# Runbook")


def test_revoking_a_grant_takes_effect_on_the_next_request(call_tool, team, alice, alice_token):
    assert call_tool(alice_token, "memory_read", {"path": "runbook.md"}).status_code == 200

    assert scope_grant_revoke(scope=team, user=alice) is True

    assert call_tool(alice_token, "memory_read", {"path": "runbook.md"}).status_code == 404
    assert paths_and_scopes(call_tool(alice_token, "memory_tree", {"depth": 3})) == []
    assert hits(call_tool(alice_token, "memory_search", {"query": "zebra"})) == []
    named = call_tool(alice_token, "memory_tree", {"scope": "shared:team"})
    assert named.status_code == 404


def test_write_access_is_read_on_each_request(call_tool, team, alice, alice_token):
    body = {"path": "x.md", "content": "x", "scope": "shared:team"}
    assert call_tool(alice_token, "memory_write", body).status_code == 403
    scope_grant_set(scope=team, user=alice, access="read_write")
    assert call_tool(alice_token, "memory_write", body).status_code == 200
    scope_grant_set(scope=team, user=alice, access="read")
    assert call_tool(alice_token, "memory_write", body).status_code == 403


# --- the model and the services --------------------------------------------------------------


def test_a_document_is_in_exactly_one_scope_kind_and_unique_per_scope(alice, team):
    with transaction.atomic(), pytest.raises(IntegrityError):
        Document.objects.create(user=alice, shared_scope=team, path="x.md")
    with transaction.atomic(), pytest.raises(IntegrityError):
        Document.objects.create(shared_scope=team, path="runbook.md")
    with transaction.atomic(), pytest.raises(IntegrityError):
        ScopeGrant.objects.create(scope=team, user=alice, access="read")
    with transaction.atomic(), pytest.raises(IntegrityError):
        ScopeGrant.objects.create(scope=team, user=alice, access="admin")
    # The same path may live in another scope.
    other = shared_scope_create(slug="other")
    Document.objects.create(shared_scope=other, path="runbook.md")
    Document.objects.create(path="runbook.md")
    assert Document.objects.filter(path="runbook.md").count() == 3


def test_restore_in_a_shared_scope(alice, bob, team):
    version = document_delete(
        user=None, shared_scope=team, path="runbook.md", actor=Actor.for_user(bob)
    )
    restored = document_restore(
        user=bob, shared_scope=team, version_id=version.pk, actor=Actor.for_user(bob)
    )
    assert (restored.shared_scope, restored.body) == (team, "# Runbook\nRestart the zebra service.")
    # Not as a user's own version, nor as the global scope's.
    with pytest.raises(Exception, match="No document version"):
        document_restore(user=bob, version_id=version.pk, actor=Actor.for_user(bob))
    with pytest.raises(Exception, match="No document version"):
        document_restore(user=None, version_id=version.pk, actor=Actor.system())


def test_a_scope_that_holds_documents_cannot_be_deleted(team):
    from django.db.models import ProtectedError

    with pytest.raises(ProtectedError):
        team.delete()


# --- the pages -------------------------------------------------------------------------------


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def test_without_a_grant_no_page_shows_the_scope(team, charlie):
    client = client_for(charlie)
    version = DocumentVersion.objects.filter(shared_scope=team, path="runbook.md").first()
    before = snapshot()
    for url in [
        "/documents/shared/team/file/runbook.md",
        "/documents/shared/team/folder/daily",
        "/documents/shared/team/history/runbook.md",
        "/documents/shared/team/download/runbook.md",
        "/documents/shared/team/edit/runbook.md",
        f"/documents/versions/{version.pk}/",
    ]:
        assert client.get(url).status_code == 404, url
    for url in [
        "/documents/shared/team/edit/runbook.md",
        "/documents/shared/team/delete/runbook.md",
        f"/documents/versions/{version.pk}/restore/",
    ]:
        assert client.post(url, {"content": "hacked"}).status_code == 404, url
    new = client.post(
        "/documents/new/",
        {"new-scope": "shared/team", "new-path": "x.md", "new-content": "hacked"},
    )
    assert new.status_code == 400
    page = client.get("/documents/").content.decode()
    assert "Shared: team" not in page
    assert "runbook.md" not in page
    search = client.get("/search/", {"q": "zebra"}).content.decode()
    assert "/documents/shared/" not in search
    assert "Tuesdays" not in search
    assert "runbook" not in search
    assert snapshot() == before


def test_a_read_grant_shows_the_scope_read_only_on_the_pages(team, alice):
    client = client_for(alice)
    version = DocumentVersion.objects.filter(shared_scope=team, path="runbook.md").first()

    page = client.get("/documents/").content.decode()
    view = client.get("/documents/shared/team/file/runbook.md").content.decode()
    search = client.get("/search/", {"q": "zebra"}).content.decode()

    assert "Shared: team (read-only)" in page
    assert 'href="/documents/shared/team/file/runbook.md"' in page
    assert 'href="/documents/shared/team/file/SOUL.md"' in page  # the user sees it all
    assert '<h1 dir="auto">Runbook</h1>' in view  # each block its own direction
    assert '<span class="badge">Read-only</span>' in view
    assert "/documents/shared/team/edit/" not in view
    assert '/documents/shared/team/file/runbook.md"' in search
    assert client.get("/documents/shared/team/download/runbook.md").content == (
        b"# Runbook\nRestart the zebra service."
    )
    assert client.get("/documents/shared/team/history/runbook.md").status_code == 200
    assert client.get(f"/documents/versions/{version.pk}/").status_code == 200

    before = snapshot()
    for url in [
        "/documents/shared/team/edit/runbook.md",
        "/documents/shared/team/delete/runbook.md",
        f"/documents/versions/{version.pk}/restore/",
    ]:
        assert client.post(url, {"content": "hacked"}).status_code == 403, url
    assert snapshot() == before

    scope_grant_revoke(scope=team, user=alice)
    assert client.get("/documents/shared/team/file/runbook.md").status_code == 404
    assert "Shared: team" not in client.get("/documents/").content.decode()


def test_a_read_write_grant_edits_creates_and_restores_on_the_pages(team, bob):
    client = client_for(bob)
    page = client.get("/documents/").content.decode()
    assert "Shared: team" in page
    assert "Shared: team (read-only)" not in page
    assert 'value="shared/team"' in client.get("/documents/new/").content.decode()

    saved = client.post("/documents/shared/team/edit/runbook.md", {"content": "v2"})
    created = client.post(
        "/documents/new/", {"new-scope": "shared/team", "new-path": "faq.md", "new-content": "Q"}
    )
    deleted = client.post("/documents/shared/team/delete/faq.md", headers=HX)

    assert saved.status_code == 302
    assert Document.objects.get(shared_scope=team, path="runbook.md").body == "v2"
    assert created.status_code == 302
    assert deleted.status_code == 200
    assert not Document.objects.filter(path="faq.md").exists()
    version = DocumentVersion.objects.get(path="faq.md", action="delete")
    assert client.post(f"/documents/versions/{version.pk}/restore/").status_code == 302
    assert Document.objects.get(shared_scope=team, path="faq.md").body == "Q"
    assert not Document.objects.filter(user=bob).exists()


@pytest.mark.parametrize(
    "path", ["USER.md", "AGENTS.md", "HEARTBEAT.md", "AGENT_MEMORY.md", "agents/bob/notes.md"]
)
def test_the_pages_refuse_an_identity_file_in_a_shared_scope_as_the_api_does(
    team, bob, call_tool, path
):
    bob_token = token_create(agent=AgentFactory(user=bob, name="helper")).raw
    before = snapshot()

    api = call_tool(
        bob_token, "memory_write", {"path": path, "content": "x", "scope": "shared:team"}
    )
    page = client_for(bob).post(
        "/documents/new/", {"new-scope": "shared/team", "new-path": path, "new-content": "x"}
    )

    assert (api.status_code, error(api)["code"]) == (403, "forbidden")
    assert page.status_code == 400
    assert (
        f"&#x27;{path}&#x27; is an identity file or an agent&#x27;s notes" in page.content.decode()
    )
    assert snapshot() == before
    # In the user's own documents the same path is theirs to create.
    if not path.startswith("agents/") and path != "AGENT_MEMORY.md":
        mine = client_for(bob).post(
            "/documents/new/", {"new-scope": "mine", "new-path": path, "new-content": "x"}
        )
        assert mine.status_code == 302
        assert Document.objects.get(user=bob, agent=None, path=path).body == "x"


def test_an_identity_file_already_in_a_shared_scope_is_read_only_on_the_pages(team, bob):
    """The admin may have put one there (the team fixture's SOUL.md): a read-write grantee
    sees it, but neither edits, deletes nor restores it, as the API refuses."""
    client = client_for(bob)
    before = snapshot()
    version = DocumentVersion.objects.get(shared_scope=team, path="SOUL.md")

    page = client.get("/documents/shared/team/file/SOUL.md").content.decode()

    assert "Team soul: be a zebra." in page
    assert "/documents/shared/team/edit/SOUL.md" not in page
    assert "/documents/shared/team/delete/SOUL.md" not in page
    assert client.get("/documents/shared/team/edit/SOUL.md").status_code == 403
    assert client.post("/documents/shared/team/edit/SOUL.md", {"content": "x"}).status_code == 403
    assert client.post("/documents/shared/team/delete/SOUL.md").status_code == 403
    assert client.post(f"/documents/versions/{version.pk}/restore/").status_code == 403
    assert snapshot() == before
    # An ordinary file of the same scope stays editable.
    runbook = client.get("/documents/shared/team/file/runbook.md").content.decode()
    assert "/documents/shared/team/edit/runbook.md" in runbook


# --- the command -----------------------------------------------------------------------------


def run(*args):
    out = StringIO()
    call_command("share_scope", *args, stdout=out)
    return out.getvalue()


def test_the_share_scope_command(alice, bob):
    assert run("ops", "--create", "--description", "On call") == "Created shared:ops.\n"
    assert run("ops", "--grant", "alice", "--grant", "bob", "--write") == (
        "Granted alice read_write on shared:ops.\nGranted bob read_write on shared:ops.\n"
    )
    assert run("ops", "--grant", "bob") == "Granted bob read on shared:ops.\n"
    assert run("ops", "--list") == "shared:ops\talice\tread_write\nshared:ops\tbob\tread\n"
    assert run("ops", "--revoke", "alice") == "Revoked alice on shared:ops.\n"
    assert run("ops", "--revoke", "alice") == "alice had no grant on shared:ops.\n"
    assert run("--list") == "shared:ops\t1 grant(s)  On call\n"
    assert list(ScopeGrant.objects.values_list("user__username", "access")) == [("bob", "read")]

    for args, message in [
        (("ops", "--create"), "already exists"),
        (("nope", "--grant", "bob"), "No shared scope 'nope'"),
        (("ops", "--grant", "nobody"), "No user 'nobody'"),
        (("ops", "--write"), "--write goes with --grant"),
        (("Bad Slug!", "--create"), "slug"),
        ((), "--list"),
    ]:
        with pytest.raises(CommandError, match=message):
            run(*args)
    assert SharedScope.objects.count() == 1
    # A failing grant changes nothing of the ones before it in the same call.
    with pytest.raises(CommandError):
        run("ops", "--grant", "alice", "--grant", "nobody")
    assert not ScopeGrant.objects.filter(user=alice).exists()


def test_the_admin_grants_and_revokes_through_the_services(
    client, superuser, alice, bob, monkeypatch
):
    from context import admin as context_admin

    calls = []
    for name in ("scope_grant_set", "scope_grant_revoke"):
        real = getattr(context_admin, name)

        def recorder(real=real, name=name, **kwargs):
            calls.append((name, kwargs["user"].username))
            return real(**kwargs)

        monkeypatch.setattr(context_admin, name, recorder)
    client.force_login(superuser)
    form = {
        "slug": "ops",
        "description": "On call",
        "grants-TOTAL_FORMS": "1",
        "grants-INITIAL_FORMS": "0",
        "grants-0-user": str(alice.pk),
        "grants-0-access": "read_write",
    }

    added = client.post("/admin/context/sharedscope/add/", form)

    assert added.status_code == 302, added.content.decode()[:2000]
    scope = SharedScope.objects.get(slug="ops")
    grant = ScopeGrant.objects.get(scope=scope)
    assert (grant.user, grant.access) == (alice, "read_write")
    changed = client.post(
        f"/admin/context/sharedscope/{scope.pk}/change/",
        {
            "description": "On call",
            "grants-TOTAL_FORMS": "1",
            "grants-INITIAL_FORMS": "1",
            "grants-0-id": str(grant.pk),
            "grants-0-scope": str(scope.pk),
            "grants-0-user": str(bob.pk),
            "grants-0-access": "read",
        },
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    assert list(ScopeGrant.objects.filter(scope=scope).values_list("user__username", "access")) == [
        ("bob", "read")
    ]
    assert calls == [
        ("scope_grant_set", "alice"),
        ("scope_grant_revoke", "alice"),
        ("scope_grant_set", "bob"),
    ]
