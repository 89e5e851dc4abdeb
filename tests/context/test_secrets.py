"""Secrets never become memories, documents included: an agent's (or a system token's)
write of a document that looks like a credential is refused with 422 secret_refused, and
nothing is written (no document, version, chunk or event). A credential the user put in a
document stays when an agent rewrites the rest of it; a new one does not get in."""

from __future__ import annotations

import pytest

from activity.actors import Actor
from activity.models import ActivityEvent
from context.models import Document, DocumentChunk, DocumentVersion
from context.services import document_write
from lib.credentials import find_credential
from lib.errors import SecretRefused
from profiles.services import system_token_create
from tests.lib.test_credentials import NEGATIVES, POSITIVES, token

pytestmark = pytest.mark.django_db

ONE_OF_EACH = list(dict(reversed(POSITIVES)).items())[::-1]
GITHUB = "gh" + f"p_{token(36)}"


def state() -> tuple:
    """Everything a document write could leave behind, for everyone."""
    return (
        sorted(Document.objects.values_list("path", "body")),
        DocumentVersion.objects.count(),
        DocumentChunk.objects.count(),
        ActivityEvent.objects.count(),
    )


def assert_refused(response, text: str, field: str = "content"):
    assert response.status_code == 422, response.content
    label = find_credential(text).label
    assert response.json() == {
        "error": {
            "code": "secret_refused",
            "message": f"This looks like {label}; Mnemo does not store credentials in documents.",
            "field": field,
        }
    }


@pytest.fixture
def notes(alice):
    return document_write(
        user=alice,
        path="notes/ideas.md",
        content="# Ideas\n- digest\n",
        actor=Actor.for_user(alice),
    )


@pytest.mark.parametrize(("kind", "text"), ONE_OF_EACH)
def test_memory_write_refuses_each_kind(call_tool, alice, alice_token, notes, kind, text):
    before = state()

    new = call_tool(alice_token, "memory_write", {"path": "notes/keys.md", "content": text})
    replaced = call_tool(
        alice_token, "memory_write", {"path": "notes/ideas.md", "content": f"# Ideas\n{text}\n"}
    )

    assert_refused(new, text)
    assert_refused(replaced, text)
    assert state() == before


@pytest.mark.parametrize(
    ("tool", "body"),
    [
        ("memory_append", {"path": "notes/ideas.md", "content": "- wifi password: GuestNet2024"}),
        ("memory_append", {"path": "MEMORY.md", "content": f"- deploy token {GITHUB}"}),
        ("append_daily_memory", {"content": "Paid with 4111 1111 1111 1111"}),
        ("append_agent_memory", {"content": f"Use {GITHUB} to push"}),
    ],
)
def test_appends_are_refused(call_tool, alice, alice_token, notes, tool, body):
    before = state()

    response = call_tool(alice_token, tool, body)

    assert_refused(response, body["content"])
    assert state() == before


def test_a_path_is_checked_too(call_tool, alice, alice_token):
    path = f"keys/{GITHUB}.md"

    response = call_tool(alice_token, "memory_write", {"path": path, "content": "a note"})

    assert_refused(response, path, field="path")
    assert state() == ([], 0, 0, 0)


def test_a_system_token_is_refused_too(call_tool, db):
    system = system_token_create(label="wiki sync").raw

    response = call_tool(
        system, "memory_write", {"path": "handbook.md", "content": "VPN password: Corp2024!"}
    )

    assert_refused(response, "VPN password: Corp2024!")
    assert state() == ([], 0, 0, 0)


NOTES = "projects/deploy.md"


def test_a_credential_the_user_put_there_survives_an_agents_rewrite(call_tool, alice, alice_token):
    # Not an identity file: an agent's rewrite of one waits in the Inbox (202) anyway.
    body = f"# Tools\n- deploy token {GITHUB}\n"
    document_write(user=alice, path=NOTES, content=body, actor=Actor.for_user(alice))

    kept = call_tool(
        alice_token, "memory_write", {"path": NOTES, "content": body + "- uses make\n"}
    )
    added = call_tool(
        alice_token,
        "memory_write",
        {"path": NOTES, "content": body + "- uses make\n- db password: Tr0ub4dor&3\n"},
    )

    assert kept.status_code == 200, kept.content
    assert_refused(added, "db password: Tr0ub4dor&3")
    assert Document.objects.get(user=alice, path=NOTES).body == body + "- uses make\n"


def test_the_consolidation_and_other_system_writes_are_refused(alice):
    with pytest.raises(SecretRefused) as refused:
        document_write(
            user=alice,
            path="USER_MEMORY.md",
            content="Card 4111 1111 1111 1111",
            actor=Actor.system(),
        )

    assert (refused.value.kind, refused.value.field) == ("card_number", "content")
    assert state() == ([], 0, 0, 0)


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_documents_are_written(call_tool, alice, alice_token, text):
    response = call_tool(alice_token, "memory_write", {"path": "notes/a.md", "content": text})

    assert response.status_code == 200, response.content
    assert Document.objects.get(user=alice, path="notes/a.md").body == text


def test_the_user_may_write_one_and_the_document_says_what_it_looks_like(alice):
    document = document_write(
        user=alice, path="notes/keys.md", content=f"deploy: {GITHUB}", actor=Actor.for_user(alice)
    )
    plain = document_write(
        user=alice, path="notes/tea.md", content="green tea", actor=Actor.for_user(alice)
    )

    assert Document.objects.get(pk=document.pk).body == f"deploy: {GITHUB}"
    assert (document.credential.kind, document.credential.label) == (
        "github_token",
        "a GitHub token",
    )
    assert plain.credential is None
