"""Deleted documents come back: the deletion keeps the body in a version, Recently deleted
lists what was deleted and not restored since (context/selectors.py deleted_document_list),
and its Restore (document_restore with create_only) never overwrites a document written at
the path since."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from context.history import document_restore
from context.models import Document, DocumentChunk, DocumentVersion, VersionAction
from context.selectors import deleted_document_list, version_states
from context.services import document_delete, document_write
from context.shared_scopes import scope_grant_set, shared_scope_create
from lib.errors import NotFound, VersionConflict
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

SINCE = timedelta(days=30)


def you(user):
    return Actor.for_user(user)


def deleted(user):
    return deleted_document_list(user=user, since=timezone.now() - SINCE)


def snapshot():
    return (
        list(Document.objects.order_by("pk").values_list("pk", "path", "body")),
        DocumentVersion.objects.count(),
        ActivityEvent.objects.count(),
        DocumentChunk.objects.count(),
    )


def test_a_deletion_keeps_the_body_who_and_its_event(alice, alice_agent):
    document_write(user=alice, path="notes.md", content="Keep me", actor=you(alice))

    version = document_delete(user=alice, path="notes.md", actor=Actor.for_agent(alice_agent))

    assert not Document.objects.filter(user=alice, path="notes.md").exists()
    assert (version.action, version.body, version.document_id) == ("delete", "Keep me", None)
    assert (version.actor_type, version.actor_agent) == ("agent", alice_agent)
    event = ActivityEvent.objects.filter(event_type=EventType.DOCUMENT_DELETED).get()
    assert event.payload["version_id"] == version.pk
    assert event.actor_agent == alice_agent


def test_create_only_restore_brings_back_a_deleted_document_with_its_version_and_event(alice):
    document_write(user=alice, path="notes.md", content="Keep me", actor=you(alice))
    version = document_delete(user=alice, path="notes.md", actor=you(alice))

    document = document_restore(
        user=alice, version_id=version.pk, actor=you(alice), create_only=True
    )

    assert (document.path, document.body) == ("notes.md", "Keep me")
    newest = DocumentVersion.objects.filter(document=document).latest("id")
    assert (newest.action, newest.body) == (VersionAction.RESTORE, "Keep me")
    event = ActivityEvent.objects.latest("id")
    assert (event.event_type, event.payload["action"], event.payload["version_id"]) == (
        EventType.DOCUMENT_WRITTEN,
        "restore",
        newest.pk,
    )
    assert list(DocumentChunk.objects.filter(document=document).values_list("text", flat=True)) == [
        "Keep me"
    ]


def test_create_only_restore_never_overwrites_a_document_written_there_since(alice):
    document_write(user=alice, path="notes.md", content="Old text", actor=you(alice))
    version = document_delete(user=alice, path="notes.md", actor=you(alice))
    document_write(user=alice, path="notes.md", content="New text", actor=you(alice))
    before = snapshot()

    with pytest.raises(VersionConflict) as conflict:
        document_restore(user=alice, version_id=version.pk, actor=you(alice), create_only=True)

    assert conflict.value.field == "path"
    assert "A document exists at 'notes.md' now" in conflict.value.message
    assert snapshot() == before
    # Without create_only (the version page's Restore) it is a deliberate overwrite.
    document = document_restore(user=alice, version_id=version.pk, actor=you(alice))
    assert document.body == "Old text"


def test_a_restore_whose_event_fails_leaves_nothing_behind(alice, monkeypatch):
    document_write(user=alice, path="notes.md", content="Keep me", actor=you(alice))
    version = document_delete(user=alice, path="notes.md", actor=you(alice))
    before = snapshot()

    def fail(**kwargs):
        raise RuntimeError("the log is down")

    monkeypatch.setattr("context.services.events.document_written", fail)
    with pytest.raises(RuntimeError):
        document_restore(user=alice, version_id=version.pk, actor=you(alice), create_only=True)

    assert snapshot() == before


def test_an_agents_document_comes_back_in_the_agents_folder(alice, alice_agent):
    agent = Actor.for_agent(alice_agent)
    document_write(user=alice, agent=alice_agent, path="todo.md", content="- a", actor=agent)
    version = document_delete(user=alice, agent=alice_agent, path="todo.md", actor=agent)

    document = document_restore(
        user=alice, version_id=version.pk, actor=you(alice), create_only=True
    )

    assert (document.user, document.agent, document.path) == (alice, alice_agent, "todo.md")


def test_nobody_restores_another_users_deletion(alice, bob):
    document_write(user=alice, path="notes.md", content="Alice's", actor=you(alice))
    version = document_delete(user=alice, path="notes.md", actor=you(alice))
    before = snapshot()

    with pytest.raises(NotFound):
        document_restore(user=bob, version_id=version.pk, actor=you(bob), create_only=True)

    assert snapshot() == before
    assert deleted(bob) == []


# ---------------------------------------------------------------- Recently deleted's list


def test_the_list_holds_the_users_and_their_agents_deletions_newest_first(alice, bob, alice_agent):
    agent = Actor.for_agent(alice_agent)
    document_write(user=alice, path="a.md", content="A", actor=you(alice))
    document_write(user=alice, agent=alice_agent, path="b.md", content="B", actor=agent)
    document_write(user=alice, path="kept.md", content="K", actor=you(alice))
    document_write(user=bob, path="bobs.md", content="Bob", actor=you(bob))
    first = document_delete(user=alice, path="a.md", actor=agent)
    second = document_delete(user=alice, agent=alice_agent, path="b.md", actor=agent)
    document_delete(user=bob, path="bobs.md", actor=you(bob))

    rows = deleted(alice)

    assert [row.version.pk for row in rows] == [second.pk, first.pk]
    assert [(row.scope.key, row.current) for row in rows] == [
        ("agents/assistant", None),
        ("mine", None),
    ]
    assert rows[1].version.actor_agent == alice_agent


def test_a_restored_document_leaves_the_list_and_the_latest_deletion_stands(alice):
    document_write(user=alice, path="a.md", content="one", actor=you(alice))
    early = document_delete(user=alice, path="a.md", actor=you(alice))
    document_restore(user=alice, version_id=early.pk, actor=you(alice))
    assert deleted(alice) == []

    document_write(user=alice, path="a.md", content="two", actor=you(alice))
    late = document_delete(user=alice, path="a.md", actor=you(alice))

    assert [(row.version.pk, row.version.body) for row in deleted(alice)] == [(late.pk, "two")]


def test_a_document_written_at_the_path_since_is_named(alice):
    document_write(user=alice, path="a.md", content="old", actor=you(alice))
    document_delete(user=alice, path="a.md", actor=you(alice))
    now = document_write(user=alice, path="a.md", content="new", actor=you(alice))

    [row] = deleted(alice)

    assert row.version.body == "old"
    assert row.current.pk == now.pk


def test_old_deletions_are_left_out(alice):
    document_write(user=alice, path="a.md", content="old", actor=you(alice))
    version = document_delete(user=alice, path="a.md", actor=you(alice))
    DocumentVersion.objects.filter(pk=version.pk).update(
        created_at=timezone.now() - SINCE - timedelta(minutes=1)
    )

    assert deleted(alice) == []


def test_shared_scopes_count_only_where_the_user_may_write(alice, bob):
    team = shared_scope_create(slug="team")
    scope_grant_set(scope=team, user=alice, access="read_write")
    scope_grant_set(scope=team, user=bob, access="read")
    document_write(user=None, shared_scope=team, path="runbook.md", content="R", actor=you(alice))
    version = document_delete(user=None, shared_scope=team, path="runbook.md", actor=you(alice))

    [row] = deleted(alice)
    assert (row.version.pk, row.scope.key, row.scope.writable) == (version.pk, "shared/team", True)
    assert deleted(bob) == []

    document = document_restore(
        user=alice, shared_scope=team, version_id=version.pk, actor=you(alice), create_only=True
    )
    assert (document.shared_scope, document.body) == (team, "R")


def test_the_list_costs_the_same_queries_for_one_row_or_many(alice):
    agents = [AgentFactory(user=alice, name=f"agent-{n}") for n in range(3)]

    def delete_some(count, prefix):
        for n in range(count):
            agent = agents[n % 3]
            actor = Actor.for_agent(agent)
            path = f"{prefix}-{n}.md"
            document_write(user=alice, agent=agent, path=path, content="x", actor=actor)
            document_delete(user=alice, agent=agent, path=path, actor=actor)

    delete_some(1, "one")
    with CaptureQueriesContext(connection) as few:
        assert len(deleted(alice)) == 1
    delete_some(12, "many")
    with CaptureQueriesContext(connection) as many:
        rows = deleted(alice)
        assert len(rows) == 13
        assert {row.scope.key for row in rows} == {f"agents/agent-{n}" for n in range(3)}
    assert len(many) == len(few)


def test_version_states_say_which_versions_are_there_and_whether_their_document_is(alice, bob):
    kept = document_write(user=alice, path="kept.md", content="K", actor=you(alice))
    document_write(user=alice, path="gone.md", content="G", actor=you(alice))
    deletion = document_delete(user=alice, path="gone.md", actor=you(alice))
    bobs = document_write(user=bob, path="b.md", content="B", actor=you(bob))

    states = version_states(
        user=alice,
        ids=[kept.written_version.pk, deletion.pk, bobs.written_version.pk, 999_999, True],
    )

    assert states == {kept.written_version.pk: True, deletion.pk: False}
