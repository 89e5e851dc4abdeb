"""The Documents tab: the tree, every view and write (htmx partial and plain POST), conflicts,
undo, restore, download, today's log, escaping, and isolation between users and scopes."""

import datetime
import zoneinfo

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from activity.actors import Actor
from context.models import Document, DocumentVersion
from context.services import document_delete, document_write
from context.versions import document_latest_version_id
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true", "HX-Target": "doc-panel"}
NOTES = "projects/alpha/notes.md"


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def as_bob(alice, bob):
    client = Client()
    client.force_login(bob)
    return client


def write(user, path, content, agent=None, actor=None):
    actor = actor or (Actor.for_agent(agent) if agent else Actor.for_user(user))
    return document_write(user=user, agent=agent, path=path, content=content, actor=actor)


def write_global(path, content):
    return document_write(user=None, path=path, content=content, actor=Actor.system())


def body_of(user, path, agent=None):
    document = Document.objects.filter(user=user, agent=agent, path=path).first()
    return document.body if document else None


def text(response):
    return response.content.decode()


def flashes(response):
    return [str(message) for message in get_messages(response.wsgi_request)]


def snapshot():
    """Every document and version, to show that a refused request changed nothing."""
    return (
        list(Document.objects.order_by("pk").values_list("pk", "user", "agent", "path", "body")),
        DocumentVersion.objects.count(),
    )


def singapore_today_path():
    local = timezone.now().astimezone(zoneinfo.ZoneInfo("Asia/Singapore"))
    return f"daily/{local:%Y-%m-%d}.md"


# ---------------------------------------------------------------- the tab and the tree


def test_every_page_needs_sign_in(client, alice):
    write(alice, NOTES, "secret")
    for url in [
        "/documents/",
        "/documents/new/",
        "/documents/today/",
        f"/documents/mine/file/{NOTES}",
        f"/documents/mine/download/{NOTES}",
    ]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/login/")
    before = snapshot()
    response = client.post("/documents/new/", {"new-scope": "mine", "new-path": "x.md"})
    assert response.status_code == 302
    assert client.post(f"/documents/mine/delete/{NOTES}").status_code == 302
    assert snapshot() == before


def test_context_page_has_a_documents_tab_that_links_here(as_alice):
    body = text(as_alice.get("/?tab=entries"))
    assert '<a id="tab-documents" href="/documents/">Documents</a>' in body
    assert 'data-confirm-unsaved aria-current="page">Entries</a>' in body


def test_documents_page_shows_the_same_tabs_with_documents_selected(as_alice):
    response = as_alice.get("/documents/")
    body = text(response)
    assert response.status_code == 200
    assert '<a id="tab-documents" href="/documents/" aria-current="page">Documents</a>' in body
    for tab in ("profile", "styles", "entries"):
        assert f'<a id="tab-{tab}" href="/?tab={tab}">{tab.title()}</a>' in body
    assert "aria-selected" not in body
    assert '<a href="/" aria-current="page">Context</a>' in body


def test_new_user_sees_what_documents_are_for_and_how_to_make_one(as_alice):
    body = text(as_alice.get("/documents/"))
    assert "Documents are longer notes your assistant can read and search" in body
    assert "Create your first document" in body
    assert 'href="/documents/new/"' in body
    assert 'href="/documents/today/"' in body
    assert "No documents yet." in body


def test_tree_has_a_section_per_scope_with_nested_folders(as_alice, alice, alice_agent):
    write(alice, NOTES, "alpha")
    write(alice, "MEMORY.md", "long-term")
    write(alice, "AGENT_MEMORY.md", "agent's own notes", agent=alice_agent)
    write_global("handbook.md", "company handbook")
    body = text(as_alice.get("/documents/"))
    assert '<h2 id="scope-1" dir="auto">Your documents</h2>' in body
    assert '<h2 id="scope-2" dir="auto">Notes of agent assistant</h2>' in body
    assert "Company (read-only)" not in body
    assert "handbook.md" not in body
    assert '<bdi class="folder-name" dir="auto">projects</bdi>/' in body
    assert '<bdi class="folder-name" dir="auto">alpha</bdi>/' in body
    assert f'href="/documents/mine/file/{NOTES}"' in body
    assert 'href="/documents/mine/file/MEMORY.md"' in body
    assert 'href="/documents/agents/assistant/file/AGENT_MEMORY.md"' in body
    assert "Open a document from the list, or create a new one." in body


def test_folders_holding_the_open_document_start_open(as_alice, alice):
    write(alice, NOTES, "alpha")
    write(alice, "other/x.md", "x")
    body = text(as_alice.get(f"/documents/mine/file/{NOTES}"))
    assert (
        '<details open>\n      <summary><bdi class="folder-name" dir="auto">projects</bdi>/' in body
    )
    assert '<details>\n      <summary><bdi class="folder-name" dir="auto">other</bdi>/' in body


def test_folder_page_lists_what_is_inside(as_alice, alice):
    write(alice, NOTES, "alpha")
    write(alice, "projects/readme.md", "hello")
    response = as_alice.get("/documents/mine/folder/projects", headers=HX)
    body = text(response)
    assert response.status_code == 200
    assert "<html" not in body
    assert body.lstrip().startswith('<section id="doc-panel"')
    assert 'href="/documents/mine/folder/projects/alpha"' in body
    assert 'href="/documents/mine/file/projects/readme.md"' in body
    assert "5 characters" in body
    assert as_alice.get("/documents/mine/folder/nothing-here").status_code == 404
    assert as_alice.get("/documents/mine/folder/..").status_code == 404


# ---------------------------------------------------------------- viewing


def test_document_renders_markdown_full_page_and_partial(as_alice, alice):
    write(alice, NOTES, "# Plan\n\n- **ship** it\n")
    page = as_alice.get(f"/documents/mine/file/{NOTES}")
    body = text(page)
    assert page.status_code == 200
    assert "<html" in body
    assert '<h1 dir="auto">Plan</h1>' in body
    assert '<li dir="auto"><strong>ship</strong> it</li>' in body
    assert '<h2 id="doc-panel-title" class="doc-title" dir="auto">notes.md</h2>' in body
    assert 'href="/documents/mine/folder/projects/alpha"' in body  # breadcrumbs
    partial = as_alice.get(f"/documents/mine/file/{NOTES}", headers=HX)
    assert "<html" not in text(partial)
    assert text(partial).lstrip().startswith('<section id="doc-panel"')
    assert '<h1 dir="auto">Plan</h1>' in text(partial)
    assert 'id="doc-tree"' not in text(partial)


def test_htmx_history_restore_gets_the_whole_page(as_alice, alice):
    write(alice, NOTES, "# Plan")
    headers = {**HX, "HX-History-Restore-Request": "true"}
    assert "<html" in text(as_alice.get(f"/documents/mine/file/{NOTES}", headers=headers))


def test_missing_or_malformed_paths_are_404(as_alice, alice):
    write(alice, NOTES, "x")
    for url in [
        "/documents/mine/file/nope.md",
        "/documents/mine/file/projects/alpha",
        "/documents/mine/file/projects/../notes.md",
        "/documents/mine/edit/nope.md",
        "/documents/mine/history/nope.md",
        "/documents/mine/download/nope.md",
        "/documents/agents/nobody/file/x.md",
        "/documents/elsewhere/file/x.md",
        "/documents/versions/999999/",
        "/documents/mine/folder//",
        "/documents/mine/folder/%2F",
        "/documents/mine/folder/projects//",
    ]:
        assert as_alice.get(url).status_code == 404, url
    folder = as_alice.get("/documents/mine/folder/projects/alpha/")
    assert (folder.status_code, folder.context["current"]) == (200, ("mine", "projects/alpha/"))


def test_script_and_javascript_links_do_not_survive(as_alice, alice, alice_agent):
    evil = (
        "<script>alert(1)</script>\n\n[click](javascript:alert(2))\n\n"
        '<img src=x onerror="alert(3)">\n\n<a href="javascript:alert(4)">raw</a>'
    )
    write(alice, "<b>odd</b>.md", evil)
    write(alice, "AGENT_MEMORY.md", evil, agent=alice_agent)
    urls = [
        "/documents/",
        "/documents/mine/file/%3Cb%3Eodd%3C/b%3E.md",
        "/documents/agents/assistant/file/AGENT_MEMORY.md",
        "/documents/mine/history/%3Cb%3Eodd%3C/b%3E.md",
        f"/documents/versions/{document_latest_version_id(Document.objects.get(path='AGENT_MEMORY.md'))}/",
    ]
    for url in urls:
        response = as_alice.get(url)
        body = text(response)
        assert response.status_code == 200, url
        assert "<script>alert" not in body, url
        assert "javascript:" not in body, url
        assert "onerror" not in body, url
        assert "<b>odd</b>" not in body, url
    page = text(as_alice.get("/documents/mine/file/%3Cb%3Eodd%3C/b%3E.md"))
    assert "&lt;b&gt;odd&lt;/b&gt;.md" in page
    # The link text stays; its javascript: target is gone.
    assert '<a rel="noopener noreferrer nofollow">click</a>' in page


def test_the_edit_form_escapes_the_body(as_alice, alice):
    write(alice, "raw.md", "</textarea><script>alert(1)</script>")
    body = text(as_alice.get("/documents/mine/edit/raw.md"))
    assert "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;</textarea>" in body
    assert "<script>alert" not in body


# ---------------------------------------------------------------- creating


def test_create_without_javascript_redirects_to_the_new_document(as_alice, alice):
    form = as_alice.get("/documents/new/")
    assert form.status_code == 200
    assert 'name="new-path"' in text(form)
    assert 'type="hidden" name="new-scope" value="mine"' in text(form)  # no agents: no choice
    response = as_alice.post(
        "/documents/new/",
        {"new-scope": "mine", "new-path": "ideas/first.md", "new-content": "# One\r\nline\r\n"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/documents/mine/file/ideas/first.md"
    assert flashes(response) == ["Created ideas/first.md."]
    assert body_of(alice, "ideas/first.md") == "# One\nline\n"
    version = DocumentVersion.objects.get(user=alice, path="ideas/first.md")
    assert (version.action, version.actor_type, version.actor_user) == ("write", "user", alice)


def test_create_with_htmx_swaps_the_panel_and_the_tree(as_alice, alice):
    response = as_alice.post(
        "/documents/new/",
        {"new-scope": "mine", "new-path": "MEMORY.md", "new-content": "Remember **this**"},
        headers=HX,
    )
    body = text(response)
    assert response.status_code == 200
    assert response["HX-Push-Url"] == "/documents/mine/file/MEMORY.md"
    assert body.lstrip().startswith('<section id="doc-panel"')
    assert '<span class="saved" role="status">Created MEMORY.md.</span>' in body
    assert "Remember <strong>this</strong>" in body
    assert (
        '<nav id="doc-tree" class="card doc-tree" aria-label="Documents" hx-swap-oob="true"' in body
    )
    assert 'href="/documents/mine/file/MEMORY.md"' in body
    assert "<html" not in body
    assert body_of(alice, "MEMORY.md") == "Remember **this**"


def test_create_in_an_agents_notes(as_alice, alice, alice_agent):
    form = text(as_alice.get("/documents/new/"))
    assert '<option value="agents/assistant">Notes of agent assistant</option>' in form
    response = as_alice.post(
        "/documents/new/",
        {"new-scope": "agents/assistant", "new-path": "todo.md", "new-content": "- call"},
    )
    assert response["Location"] == "/documents/agents/assistant/file/todo.md"
    assert body_of(alice, "todo.md", agent=alice_agent) == "- call"
    assert body_of(alice, "todo.md") is None


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/passwd", "Path is absolute; write it relative, without a leading &#x27;/&#x27;."),
        ("notes/../secret.md", "Path contains a &#x27;..&#x27; segment; name folders directly."),
        ("notes//a.md", "Path has an empty segment (&#x27;//&#x27; or a trailing &#x27;/&#x27;)."),
        ("notes\\a.md", "Path contains a backslash; use &#x27;/&#x27; between folders."),
        ("a\x07b.md", "Path contains the control character U+0007 at position 1."),
        ("", "Give the document a path."),
        (
            "agents/assistant/todo.md",
            "&#x27;agents/&#x27; is where your agents keep their private documents; to write "
            "there, choose that agent&#x27;s notes as the place, or use another folder.",
        ),
    ],
)
def test_bad_paths_show_the_rule_next_to_the_field_and_keep_the_input(
    as_alice, alice, path, message
):
    data = {"new-scope": "mine", "new-path": path, "new-content": "my long text"}
    plain = as_alice.post("/documents/new/", data)
    assert plain.status_code == 400
    assert f'<p class="field-error" id="id_new-path_error">{message}</p>' in text(plain)
    assert "my long text</textarea>" in text(plain)
    partial = as_alice.post("/documents/new/", data, headers=HX)
    assert partial.status_code == 200
    assert message in text(partial)
    assert "my long text</textarea>" in text(partial)
    assert Document.objects.count() == 0


def test_creating_over_an_existing_path_is_refused(as_alice, alice):
    write(alice, "MEMORY.md", "keep me")
    response = as_alice.post(
        "/documents/new/", {"new-scope": "mine", "new-path": "MEMORY.md", "new-content": "new"}
    )
    assert response.status_code == 400
    assert "&#x27;MEMORY.md&#x27; already exists in Your documents" in text(response)
    assert body_of(alice, "MEMORY.md") == "keep me"


def test_create_refuses_another_users_agent_and_the_company_scope(as_alice, alice, bob_agent):
    for scope in ("agents/other", "company"):
        response = as_alice.post(
            "/documents/new/", {"new-scope": scope, "new-path": "x.md", "new-content": "x"}
        )
        assert response.status_code == 400
        assert "Select a valid choice." in text(response)
    assert Document.objects.count() == 0


def test_oversized_content_is_refused(as_alice):
    response = as_alice.post(
        "/documents/new/",
        {"new-scope": "mine", "new-path": "big.md", "new-content": "x" * 1_048_577},
    )
    assert response.status_code == 400
    assert "Content is 1048577 bytes long" in text(response)
    assert Document.objects.count() == 0


# ---------------------------------------------------------------- editing


def test_edit_form_carries_the_base_version(as_alice, alice):
    document = write(alice, NOTES, "v1")
    latest = document_latest_version_id(document)
    full = as_alice.get(f"/documents/mine/edit/{NOTES}")
    assert "<html" in text(full)
    partial = as_alice.get(f"/documents/mine/edit/{NOTES}", headers=HX)
    body = text(partial)
    assert "<html" not in body
    assert f'<input type="hidden" name="base_version" value="{latest}">' in body
    assert ">\nv1</textarea>" in body


def test_save_with_htmx_shows_the_document_again(as_alice, alice):
    document = write(alice, NOTES, "v1")
    base = document_latest_version_id(document)
    response = as_alice.post(
        f"/documents/mine/edit/{NOTES}",
        {"content": "# v2\r\n\r\nmore", "base_version": base},
        headers=HX,
    )
    body = text(response)
    assert response.status_code == 200
    assert response["HX-Push-Url"] == f"/documents/mine/file/{NOTES}"
    assert '<span class="saved" role="status">Saved.</span>' in body
    assert '<h1 dir="auto">v2</h1>' in body
    assert 'hx-swap-oob="true"' in body
    assert body_of(alice, NOTES) == "# v2\n\nmore"


def test_save_without_javascript_redirects(as_alice, alice):
    document = write(alice, NOTES, "v1")
    base = document_latest_version_id(document)
    response = as_alice.post(
        f"/documents/mine/edit/{NOTES}", {"content": "v2", "base_version": base}
    )
    assert response.status_code == 302
    assert response["Location"] == f"/documents/mine/file/{NOTES}"
    assert flashes(response) == [f"Saved: {NOTES}."]
    assert body_of(alice, NOTES) == "v2"


def test_saving_the_same_text_writes_nothing(as_alice, alice):
    document = write(alice, NOTES, "v1")
    base = document_latest_version_id(document)
    response = as_alice.post(
        f"/documents/mine/edit/{NOTES}", {"content": "v1", "base_version": base}, headers=HX
    )
    assert "No change." in text(response)
    assert DocumentVersion.objects.filter(path=NOTES).count() == 1


def test_conflict_keeps_the_users_text_and_writes_nothing(as_alice, alice, alice_agent):
    document = write(alice, NOTES, "v1")
    opened = document_latest_version_id(document)
    write(alice, NOTES, "the agent's v2", actor=Actor.for_agent(alice_agent))
    newest = document_latest_version_id(document)
    before = snapshot()

    for headers, status in (({}, 409), (HX, 200)):
        response = as_alice.post(
            f"/documents/mine/edit/{NOTES}",
            {"content": "my careful edit", "base_version": opened},
            headers=headers,
        )
        body = text(response)
        assert response.status_code == status
        assert f"Not saved: <code>{NOTES}</code> changed since you opened it." in body
        assert "Reload it and apply your edit again" not in body  # one message, not two
        assert "Your text is still in the box above, so nothing is lost." in body
        assert ">\nmy careful edit</textarea>" in body
        assert '<p dir="auto">the agent\'s v2</p>' in body  # the newer version, shown beside it
        assert f'name="base_version" value="{newest}"' in body
        assert snapshot() == before

    # Saving again is a deliberate choice: it replaces the newer version.
    response = as_alice.post(
        f"/documents/mine/edit/{NOTES}", {"content": "my careful edit", "base_version": newest}
    )
    assert response.status_code == 302
    assert body_of(alice, NOTES) == "my careful edit"


def test_a_document_deleted_while_editing_keeps_the_text_and_can_come_back(as_alice, alice):
    document = write(alice, NOTES, "v1")
    opened = document_latest_version_id(document)
    document_delete(user=alice, path=NOTES, actor=Actor.for_user(alice))
    response = as_alice.post(
        f"/documents/mine/edit/{NOTES}", {"content": "mine", "base_version": opened}, headers=HX
    )
    body = text(response)
    assert f"Not saved: <code>{NOTES}</code> was deleted since you opened it." in body
    assert ">\nmine</textarea>" in body
    assert 'name="base_version" value=""' in body
    assert body_of(alice, NOTES) is None
    response = as_alice.post(f"/documents/mine/edit/{NOTES}", {"content": "mine"})
    assert response.status_code == 302
    assert body_of(alice, NOTES) == "mine"


def test_edit_errors_show_next_to_the_field(as_alice, alice):
    document = write(alice, NOTES, "v1")
    base = document_latest_version_id(document)
    response = as_alice.post(
        f"/documents/mine/edit/{NOTES}", {"content": "a\x00b", "base_version": base}
    )
    assert response.status_code == 400
    assert (
        '<p class="field-error" id="id_content_error">Null characters are not allowed.</p>'
        in text(response)
    )
    assert f'name="base_version" value="{base}"' in text(response)
    assert body_of(alice, NOTES) == "v1"


def test_user_may_edit_and_delete_their_agents_notes(as_alice, alice, alice_agent):
    document = write(alice, "AGENT_MEMORY.md", "agent v1", agent=alice_agent)
    url = "/documents/agents/assistant/edit/AGENT_MEMORY.md"
    base = document_latest_version_id(document)
    response = as_alice.post(url, {"content": "fixed by alice", "base_version": base})
    assert response["Location"] == "/documents/agents/assistant/file/AGENT_MEMORY.md"
    assert body_of(alice, "AGENT_MEMORY.md", agent=alice_agent) == "fixed by alice"
    response = as_alice.post("/documents/agents/assistant/delete/AGENT_MEMORY.md")
    assert response.status_code == 302
    assert body_of(alice, "AGENT_MEMORY.md", agent=alice_agent) is None


# ---------------------------------------------------------------- delete and undo


def test_delete_with_htmx_offers_undo_and_undo_restores(as_alice, alice):
    write(alice, NOTES, "precious")
    response = as_alice.post(f"/documents/mine/delete/{NOTES}", headers=HX)
    body = text(response)
    deleted = DocumentVersion.objects.get(path=NOTES, action="delete")
    assert response.status_code == 200
    assert response["HX-Push-Url"] == f"/documents/?undo={deleted.pk}"
    assert f'Deleted <code dir="auto">{NOTES}</code>.' in body
    assert f'hx-post="/documents/versions/{deleted.pk}/restore/"' in body
    assert 'hx-swap-oob="true"' in body
    assert f'href="/documents/mine/file/{NOTES}"' not in body  # gone from the tree
    assert body_of(alice, NOTES) is None

    response = as_alice.post(f"/documents/versions/{deleted.pk}/restore/", headers=HX)
    assert response.status_code == 200
    assert response["HX-Push-Url"] == f"/documents/mine/file/{NOTES}"
    assert f"Restored {NOTES}." in text(response)
    assert '<p dir="auto">precious</p>' in text(response)
    assert body_of(alice, NOTES) == "precious"


def test_delete_and_undo_without_javascript(as_alice, alice):
    write(alice, NOTES, "precious")
    response = as_alice.post(f"/documents/mine/delete/{NOTES}")
    deleted = DocumentVersion.objects.get(path=NOTES, action="delete")
    assert response.status_code == 302
    assert response["Location"] == f"/documents/?undo={deleted.pk}"
    assert flashes(response) == [f"Deleted {NOTES}."]
    page = text(as_alice.get(response["Location"]))
    assert (
        f'<form class="inline" method="post" action="/documents/versions/{deleted.pk}/restore/"'
        in page
    )
    response = as_alice.post(f"/documents/versions/{deleted.pk}/restore/")
    assert response["Location"] == f"/documents/mine/file/{NOTES}"
    assert flashes(response) == [f"Restored {NOTES}."]
    assert body_of(alice, NOTES) == "precious"
    # Once restored, the undo offer is gone.
    assert "Undo" not in text(as_alice.get(f"/documents/?undo={deleted.pk}"))


# ---------------------------------------------------------------- history and restore


def test_history_lists_who_did_what_and_restores_an_older_version(as_alice, alice, alice_agent):
    write(alice, NOTES, "first")
    write(alice, NOTES, "second", actor=Actor.for_agent(alice_agent))
    first, second = DocumentVersion.objects.filter(path=NOTES).order_by("id")
    response = as_alice.get(f"/documents/mine/history/{NOTES}", headers=HX)
    body = text(response)
    assert response.status_code == 200
    assert body.index(f'id="version-{second.pk}"') < body.index(f'id="version-{first.pk}"')
    assert 'by <span class="badge agent" dir="auto">agent assistant</span>' in body
    assert 'by <span class="badge user" dir="auto">you</span>' in body
    assert f'hx-post="/documents/versions/{first.pk}/restore/"' in body
    assert f'hx-post="/documents/versions/{second.pk}/restore/"' not in body  # current already

    version = as_alice.get(f"/documents/versions/{first.pk}/")
    assert version.status_code == 200
    assert '<p dir="auto">first</p>' in text(version)
    assert "Restore this version" in text(version)

    response = as_alice.post(f"/documents/versions/{first.pk}/restore/", headers=HX)
    assert "Restored projects/alpha/notes.md." in text(response)
    assert body_of(alice, NOTES) == "first"
    assert list(
        DocumentVersion.objects.filter(path=NOTES).order_by("id").values_list("action", "body")
    ) == [("write", "first"), ("write", "second"), ("restore", "first")]


def test_a_version_shows_what_it_changed_escaped(as_alice, alice):
    lines = [f"- line {n}" for n in range(10)]
    write(alice, NOTES, "\n".join(lines))
    changed = [*lines[:5], "- <b>new</b> line", *lines[6:]]
    write(alice, NOTES, "\n".join(changed))
    first, second = DocumentVersion.objects.filter(path=NOTES).order_by("id")

    body = text(as_alice.get(f"/documents/versions/{second.pk}/"))

    assert "What this version changed" in body
    assert '<del>- <bdi dir="auto">- line 5</bdi></del>' in body
    assert '<ins>+ <bdi dir="auto">- &lt;b&gt;new&lt;/b&gt; line</bdi></ins>' in body
    assert "- line 3" in body  # context around the change
    assert "- line 0" not in body.split("What this version changed")[1]  # far lines fold
    first_page = text(as_alice.get(f"/documents/versions/{first.pk}/"))
    assert "What this version changed" not in first_page  # nothing before it


def test_a_deleted_documents_history_still_opens(as_alice, alice):
    write(alice, NOTES, "gone")
    document_delete(user=alice, path=NOTES, actor=Actor.for_user(alice))
    body = text(as_alice.get(f"/documents/mine/history/{NOTES}"))
    assert "This document is deleted. Restore a version to bring it back." in body
    assert "Delete" in body


# ---------------------------------------------------------------- download


def test_download_is_the_markdown_as_an_attachment(as_alice, alice):
    write(alice, NOTES, "# Plan\n\nünïcode ✓\n")
    response = as_alice.get(f"/documents/mine/download/{NOTES}")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="notes.md"'
    assert response.content == "# Plan\n\nünïcode ✓\n".encode()


def test_download_names_odd_files_safely(as_alice, alice):
    write(alice, 'weird "name"', "x")
    response = as_alice.get("/documents/mine/download/weird%20%22name%22")
    assert response["Content-Disposition"] == 'attachment; filename="weird \\"name\\".md"'
    write(alice, "résumé.md", "x")
    response = as_alice.get("/documents/mine/download/r%C3%A9sum%C3%A9.md")
    assert response["Content-Disposition"] == "attachment; filename*=utf-8''r%C3%A9sum%C3%A9.md"


# ---------------------------------------------------------------- today's log


def test_todays_log_in_the_users_timezone(as_alice, alice):
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_user(alice))
    path = singapore_today_path()

    missing = as_alice.get("/documents/today/")
    body = text(missing)
    assert missing.status_code == 200
    assert f"Nothing logged today yet: <code>{path}</code>" in body
    assert "Asia/Singapore" in body
    assert 'name="daily-line"' in body

    response = as_alice.post(
        "/documents/today/", {"daily-line": "Shipped the docs tab"}, headers=HX
    )
    assert response.status_code == 200
    assert response["HX-Push-Url"] == f"/documents/mine/file/{path}"
    assert "Added to today&#x27;s log." in text(response)
    assert 'name="daily-line"' in text(response)  # another line can follow
    now_sg = timezone.now().astimezone(zoneinfo.ZoneInfo("Asia/Singapore"))
    assert body_of(alice, path).startswith("- ")
    assert body_of(alice, path).endswith(" Shipped the docs tab")
    stamp = datetime.datetime.strptime(body_of(alice, path)[2:7], "%H:%M").time()
    assert abs(stamp.hour * 60 + stamp.minute - (now_sg.hour * 60 + now_sg.minute)) <= 1

    existing = as_alice.get("/documents/today/")
    assert existing.status_code == 302
    assert existing["Location"] == f"/documents/mine/file/{path}"
    assert f'href="/documents/mine/file/{path}"' in text(as_alice.get("/documents/"))


def test_todays_log_without_javascript_and_empty_lines(as_alice, alice):
    response = as_alice.post("/documents/today/", {"daily-line": "   "})
    assert response.status_code == 400
    assert "Write what happened first." in text(response)
    assert Document.objects.count() == 0
    response = as_alice.post("/documents/today/", {"daily-line": "done\n## Working memory"})
    assert response.status_code == 400
    assert "A daily log entry is one line" in text(response)
    assert Document.objects.count() == 0
    response = as_alice.post("/documents/today/", {"daily-line": "standup done"})
    path = f"daily/{timezone.now():%Y-%m-%d}.md"  # no timezone memory: UTC
    assert response["Location"] == f"/documents/mine/file/{path}"
    assert flashes(response) == ["Added to today's log."]
    assert body_of(alice, path).endswith(" standup done")


# ---------------------------------------------------------------- isolation


def test_bob_gets_404_for_alices_documents_notes_and_versions(
    as_bob, alice, alice_agent, bob, bob_agent
):
    write(alice, NOTES, "alice's secret")
    write(alice, "AGENT_MEMORY.md", "alice's agent secret", agent=alice_agent)
    write(alice, "drafts/plan.md", "alice's agent draft secret", agent=alice_agent)
    # bob has an agent named "assistant" too: alice's agent of that name stays alice's.
    assert bob_agent.name == alice_agent.name
    # alice's agent with a name bob has no agent with.
    other = type(alice_agent).objects.create(user=alice, name="private-helper")
    write(alice, "plans.md", "helper secret", agent=other)
    version = DocumentVersion.objects.filter(user=alice).first()
    before = snapshot()
    gets = [
        f"/documents/mine/file/{NOTES}",
        f"/documents/mine/edit/{NOTES}",
        f"/documents/mine/history/{NOTES}",
        f"/documents/mine/download/{NOTES}",
        "/documents/mine/folder/projects",
        "/documents/agents/private-helper/file/plans.md",
        "/documents/agents/private-helper/history/plans.md",
        "/documents/agents/private-helper/download/plans.md",
        "/documents/agents/assistant/file/AGENT_MEMORY.md",
        "/documents/agents/assistant/edit/AGENT_MEMORY.md",
        "/documents/agents/assistant/download/AGENT_MEMORY.md",
        "/documents/agents/assistant/history/drafts/plan.md",
        "/documents/agents/assistant/folder/drafts",
        f"/documents/versions/{version.pk}/",
    ]
    for url in gets:
        response = as_bob.get(url)
        assert response.status_code == 404, url
        assert "secret" not in text(response)
    posts = [
        f"/documents/mine/edit/{NOTES}",
        f"/documents/mine/delete/{NOTES}",
        "/documents/agents/private-helper/edit/plans.md",
        "/documents/agents/private-helper/delete/plans.md",
        "/documents/agents/assistant/edit/AGENT_MEMORY.md",
        "/documents/agents/assistant/delete/drafts/plan.md",
        f"/documents/versions/{version.pk}/restore/",
    ]
    for url in posts:
        assert as_bob.post(url, {"content": "bob was here"}).status_code == 404, url
    assert as_bob.get(f"/documents/?undo={version.pk}").status_code == 200
    assert "secret" not in text(as_bob.get("/documents/"))
    assert snapshot() == before


def test_company_documents_are_hidden_while_not_readable(as_alice, alice):
    write_global("handbook.md", "company secret")
    version = DocumentVersion.objects.get(user=None)
    for url in [
        "/documents/company/file/handbook.md",
        "/documents/company/history/handbook.md",
        "/documents/company/download/handbook.md",
        f"/documents/versions/{version.pk}/",
    ]:
        assert as_alice.get(url).status_code == 404, url
    assert "company secret" not in text(as_alice.get("/documents/"))
    assert "handbook.md" not in text(as_alice.get("/documents/"))


def test_company_documents_are_read_only_when_readable(as_alice, alice, settings):
    settings.MNEMO_GLOBAL_READABLE = True
    write_global("handbook.md", "# Handbook")
    version = DocumentVersion.objects.get(user=None)
    page = text(as_alice.get("/documents/"))
    assert "Company (read-only)" in page
    assert 'href="/documents/company/file/handbook.md"' in page
    view = text(as_alice.get("/documents/company/file/handbook.md"))
    assert '<h1 dir="auto">Handbook</h1>' in view
    assert '<span class="badge">Read-only</span>' in view
    assert "/documents/company/edit/" not in view
    assert "/documents/company/delete/" not in view
    assert as_alice.get("/documents/company/download/handbook.md").status_code == 200
    history = text(as_alice.get("/documents/company/history/handbook.md"))
    assert "/restore/" not in history
    assert "Restore this version" not in text(as_alice.get(f"/documents/versions/{version.pk}/"))

    before = snapshot()
    assert as_alice.get("/documents/company/edit/handbook.md").status_code == 403
    for url in [
        "/documents/company/edit/handbook.md",
        "/documents/company/delete/handbook.md",
        f"/documents/versions/{version.pk}/restore/",
    ]:
        assert as_alice.post(url, {"content": "hacked"}).status_code == 403, url
        assert as_alice.post(url, {"content": "hacked"}, headers=HX).status_code == 403, url
    response = as_alice.post(
        "/documents/new/", {"new-scope": "company", "new-path": "new.md", "new-content": "x"}
    )
    assert response.status_code == 400
    assert snapshot() == before


# ---------------------------------------------------------------- safety


def test_posts_need_the_csrf_token(alice):
    write(alice, NOTES, "v1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    before = snapshot()
    for url in ["/documents/new/", f"/documents/mine/delete/{NOTES}", "/documents/today/"]:
        assert client.post(url, {"new-path": "x.md", "daily-line": "x"}).status_code == 403
    assert snapshot() == before


def test_writes_refuse_get(as_alice, alice):
    write(alice, NOTES, "v1")
    version = DocumentVersion.objects.get(path=NOTES)
    for url in [f"/documents/mine/delete/{NOTES}", f"/documents/versions/{version.pk}/restore/"]:
        assert as_alice.get(url).status_code == 405, url
    assert body_of(alice, NOTES) == "v1"


def test_pages_leak_no_template_syntax(as_alice, alice, alice_agent, settings):
    settings.MNEMO_GLOBAL_READABLE = True
    write(alice, NOTES, "# x")
    write(alice, "AGENT_MEMORY.md", "y", agent=alice_agent)
    write_global("handbook.md", "z")
    document_delete(
        user=alice, path="AGENT_MEMORY.md", agent=alice_agent, actor=Actor.for_user(alice)
    )
    version = DocumentVersion.objects.filter(path=NOTES).first()
    deleted = DocumentVersion.objects.get(action="delete")
    for url in [
        "/documents/",
        f"/documents/?undo={deleted.pk}",
        "/documents/new/",
        "/documents/today/",
        f"/documents/mine/file/{NOTES}",
        f"/documents/mine/edit/{NOTES}",
        f"/documents/mine/history/{NOTES}",
        "/documents/mine/folder/projects",
        "/documents/agents/assistant/history/AGENT_MEMORY.md",
        "/documents/company/file/handbook.md",
        f"/documents/versions/{version.pk}/",
    ]:
        html = text(as_alice.get(url))
        for marker in ("{#", "#}", "{%", "%}", "{{", "}}"):
            assert marker not in html, (url, marker)
