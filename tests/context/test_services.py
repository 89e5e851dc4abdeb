import datetime
import threading

import pytest
from django.db import connection

from activity.actors import Actor
from activity.models import ActivityEvent, AppendOnlyError
from context.history import document_restore, document_versions
from context.models import Document, DocumentChunk, DocumentVersion
from context.services import (
    MAX_BODY_BYTES,
    document_append,
    document_delete,
    document_list,
    document_read,
    document_write,
)
from context.tree import TreeEntry, document_tree
from context.versions import document_latest_version_id
from context.well_known import (
    agent_memory_get,
    append_agent_memory,
    append_daily_memory,
    append_memory,
)
from lib.errors import Conflict, InvalidInput, MemoryPaused, NotFound, VersionConflict
from memory.services import memory_upsert
from profiles.services import profile_update
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def as_user(user):
    return Actor.for_user(user)


def versions_of(user, path, agent=None):
    return list(
        DocumentVersion.objects.filter(user=user, agent=agent, path=path)
        .order_by("id")
        .values_list("action", "body")
    )


def versions_ids(user, path, agent=None):
    return list(
        DocumentVersion.objects.filter(user=user, agent=agent, path=path)
        .order_by("id")
        .values_list("pk", flat=True)
    )


# write / read / replace


def test_write_with_a_stale_base_version_is_a_conflict_and_writes_nothing(alice):
    document = document_write(user=alice, path="plan.md", content="v1", actor=as_user(alice))
    opened = document_latest_version_id(document)
    document_write(user=alice, path="plan.md", content="v2 by agent", actor=as_user(alice))

    with pytest.raises(Conflict, match="changed since you opened it"):
        document_write(
            user=alice, path="plan.md", content="my edit", actor=as_user(alice), base_version=opened
        )

    assert document_read(user=alice, path="plan.md").body == "v2 by agent"
    assert [body for _, body in versions_of(alice, "plan.md")] == ["v1", "v2 by agent"]


def test_create_only_refuses_an_existing_document_and_writes_nothing(alice):
    document_write(user=alice, path="plan.md", content="first", actor=as_user(alice))

    with pytest.raises(VersionConflict, match=r"'plan\.md' already exists") as raised:
        document_write(
            user=alice, path="plan.md", content="second", actor=as_user(alice), create_only=True
        )

    assert raised.value.field == "path"
    assert raised.value.current_version == versions_ids(alice, "plan.md")[-1]
    assert document_read(user=alice, path="plan.md").body == "first"
    assert len(versions_of(alice, "plan.md")) == 1
    created = document_write(
        user=alice, path="new.md", content="x", actor=as_user(alice), create_only=True
    )
    assert created.body == "x"


def test_write_with_the_current_base_version_saves(alice):
    document = document_write(user=alice, path="plan.md", content="v1", actor=as_user(alice))
    saved = document_write(
        user=alice,
        path="plan.md",
        content="v2",
        actor=as_user(alice),
        base_version=document_latest_version_id(document),
    )
    assert saved.body == "v2"


def test_write_with_a_base_version_after_the_document_was_deleted_is_a_conflict(alice):
    document = document_write(user=alice, path="plan.md", content="v1", actor=as_user(alice))
    opened = document_latest_version_id(document)
    document_delete(user=alice, path="plan.md", actor=as_user(alice))

    with pytest.raises(Conflict):
        document_write(
            user=alice, path="plan.md", content="edit", actor=as_user(alice), base_version=opened
        )
    assert not Document.objects.filter(user=alice, path="plan.md").exists()


def test_a_stale_base_version_is_a_version_conflict_on_the_base_version(alice):
    document = document_write(user=alice, path="plan.md", content="v1", actor=as_user(alice))
    opened = document_latest_version_id(document)
    appended = document_append(user=alice, path="plan.md", content="appended", actor=as_user(alice))
    newest = appended.written_version.pk

    with pytest.raises(VersionConflict) as raised:
        document_write(
            user=alice, path="plan.md", content="edit", actor=as_user(alice), base_version=opened
        )

    assert (raised.value.code, raised.value.field) == ("version_conflict", "base_version")
    assert raised.value.current_version == newest
    assert raised.value.message == (
        f"'plan.md' changed since you opened it: you started from version {opened}, and it is "
        f"now version {newest}. Reload it and apply your edit again."
    )
    assert document_read(user=alice, path="plan.md").body == "v1\nappended"


def test_a_base_version_of_a_document_that_never_existed_is_a_version_conflict(alice):
    with pytest.raises(VersionConflict) as raised:
        document_write(user=alice, path="new.md", content="x", actor=as_user(alice), base_version=1)

    assert (
        raised.value.message
        == "'new.md' does not exist (any more): there is no version 1 of it to change."
    )
    assert raised.value.current_version is None
    assert not Document.objects.exists()
    assert not DocumentVersion.objects.exists()
    assert not ActivityEvent.objects.exists()


def test_delete_with_a_stale_base_version_deletes_nothing(alice):
    document = document_write(user=alice, path="plan.md", content="v1", actor=as_user(alice))
    opened = document_latest_version_id(document)
    document_write(user=alice, path="plan.md", content="v2", actor=as_user(alice))

    with pytest.raises(VersionConflict, match="changed since you opened it"):
        document_delete(user=alice, path="plan.md", actor=as_user(alice), base_version=opened)

    assert document_read(user=alice, path="plan.md").body == "v2"
    assert [action for action, _ in versions_of(alice, "plan.md")] == ["write", "write"]
    assert not ActivityEvent.objects.filter(event_type="document_deleted").exists()


def test_delete_with_the_current_base_version_deletes(alice):
    document = document_write(user=alice, path="plan.md", content="v1", actor=as_user(alice))

    version = document_delete(
        user=alice,
        path="plan.md",
        actor=as_user(alice),
        base_version=document_latest_version_id(document),
    )

    assert (version.action, version.body) == ("delete", "v1")
    assert not Document.objects.filter(user=alice).exists()


def test_delete_with_a_base_version_of_a_missing_document_is_not_found(alice):
    with pytest.raises(NotFound):
        document_delete(user=alice, path="gone.md", actor=as_user(alice), base_version=1)


def test_paused_memory_refuses_agent_document_writes_but_not_the_users(alice, alice_agent):
    document_write(user=alice, path="notes.md", content="mine", actor=as_user(alice))
    profile_update(user=alice, memory_paused=True)
    agent = Actor.for_agent(alice_agent)

    for write in (
        lambda: document_write(user=alice, path="notes.md", content="x", actor=agent),
        lambda: document_append(user=alice, path="notes.md", content="x", actor=agent),
        lambda: document_delete(user=alice, path="notes.md", actor=agent),
        lambda: append_agent_memory(agent=alice_agent, content="x", actor=agent),
    ):
        with pytest.raises(MemoryPaused):
            write()

    assert document_read(user=alice, path="notes.md").body == "mine"
    assert not Document.objects.filter(agent=alice_agent).exists()
    document_append(user=alice, path="notes.md", content="still mine", actor=as_user(alice))
    assert document_read(user=alice, path="notes.md").body == "mine\nstill mine"


def test_write_creates_then_replaces(alice):
    created = document_write(user=alice, path="notes/a.md", content="one", actor=as_user(alice))
    replaced = document_write(user=alice, path="notes/a.md", content="two", actor=as_user(alice))

    assert replaced.pk == created.pk
    assert document_read(user=alice, path="notes/a.md").body == "two"
    assert Document.objects.filter(user=alice).count() == 1
    assert versions_of(alice, "notes/a.md") == [("write", "one"), ("write", "two")]


def test_write_normalizes_the_path(alice):
    document = document_write(
        user=alice, path="notes/cafe\u0301.md", content="x", actor=as_user(alice)
    )

    assert document.path == "notes/café.md"
    assert document_read(user=alice, path="notes/café.md").pk == document.pk


def test_read_missing_document_is_not_found(alice):
    with pytest.raises(NotFound) as raised:
        document_read(user=alice, path="nope.md")

    assert raised.value.message == "No document at 'nope.md'."
    assert raised.value.field == "path"


def test_write_records_actor_and_activity(alice, alice_agent):
    document = document_write(
        user=alice, path="MEMORY.md", content="hi", actor=Actor.for_agent(alice_agent)
    )

    version = DocumentVersion.objects.get()
    assert version.document == document
    assert (version.actor_type, version.actor_agent, version.actor_user) == (
        "agent",
        alice_agent,
        None,
    )
    event = ActivityEvent.objects.get()
    assert event.user == alice
    assert event.event_type == "document_written"
    assert event.actor_agent == alice_agent
    assert event.payload == {
        "path": "MEMORY.md",
        "scope": "user",
        "agent_id": None,
        "action": "write",
        "version_id": version.pk,
    }


def _fail(**_kwargs):
    raise RuntimeError("the activity log is unavailable")


def test_a_write_whose_event_fails_leaves_nothing_behind(alice, monkeypatch):
    document_write(user=alice, path="a.md", content="first", actor=as_user(alice))
    before = (DocumentVersion.objects.count(), ActivityEvent.objects.count())
    monkeypatch.setattr("context.services.events.document_written", _fail)

    with pytest.raises(RuntimeError):
        document_write(user=alice, path="a.md", content="second", actor=as_user(alice))
    with pytest.raises(RuntimeError):
        document_write(user=alice, path="b.md", content="new words", actor=as_user(alice))

    # The row, its version and its chunks went back together.
    assert dict(Document.objects.values_list("path", "body")) == {"a.md": "first"}
    assert (DocumentVersion.objects.count(), ActivityEvent.objects.count()) == before
    assert list(DocumentChunk.objects.values_list("text", flat=True)) == ["first"]


def test_a_delete_whose_event_fails_keeps_the_document(alice, monkeypatch):
    document_write(user=alice, path="a.md", content="kept", actor=as_user(alice))
    monkeypatch.setattr("context.services.events.document_deleted", _fail)

    with pytest.raises(RuntimeError):
        document_delete(user=alice, path="a.md", actor=as_user(alice))

    assert Document.objects.get(user=alice, path="a.md").body == "kept"
    assert not DocumentVersion.objects.filter(action="delete").exists()


def test_versions_are_append_only(alice):
    document_write(user=alice, path="a.md", content="x", actor=as_user(alice))
    version = DocumentVersion.objects.get()
    version.body = "changed"

    with pytest.raises(AppendOnlyError):
        version.save()


# append


def test_append_creates_then_adds_lines(alice):
    document_append(user=alice, path="log.md", content="first", actor=as_user(alice))
    document_append(user=alice, path="log.md", content="second", actor=as_user(alice))
    document = document_append(user=alice, path="log.md", content="third", actor=as_user(alice))

    assert document.body == "first\nsecond\nthird"
    assert versions_of(alice, "log.md") == [
        ("append", "first"),
        ("append", "first\nsecond"),
        ("append", "first\nsecond\nthird"),
    ]
    assert list(
        ActivityEvent.objects.filter(user=alice).order_by("id").values_list("payload__action")
    ) == [("append",), ("append",), ("append",)]


def test_append_after_a_trailing_newline_adds_no_blank_line(alice):
    document_write(user=alice, path="log.md", content="first\n", actor=as_user(alice))
    document = document_append(user=alice, path="log.md", content="second", actor=as_user(alice))

    assert document.body == "first\nsecond"


def test_append_refuses_empty_content(alice):
    with pytest.raises(InvalidInput) as raised:
        document_append(user=alice, path="log.md", content="", actor=as_user(alice))

    assert raised.value.field == "content"
    assert not Document.objects.exists()


def test_append_past_the_size_limit_is_refused_and_changes_nothing(alice):
    document_write(
        user=alice, path="big.md", content="x" * (MAX_BODY_BYTES - 2), actor=as_user(alice)
    )

    with pytest.raises(InvalidInput) as raised:
        document_append(user=alice, path="big.md", content="yy", actor=as_user(alice))

    assert raised.value.field == "content"
    assert raised.value.message == (
        f"Content is {MAX_BODY_BYTES + 1} bytes long; the largest document allowed is "
        f"{MAX_BODY_BYTES} bytes (1 MB)."
    )
    assert document_read(user=alice, path="big.md").body == "x" * (MAX_BODY_BYTES - 2)
    assert DocumentVersion.objects.count() == 1


# content validation


def test_body_of_exactly_one_megabyte_is_accepted(alice):
    document = document_write(
        user=alice, path="big.md", content="é" * (MAX_BODY_BYTES // 2), actor=as_user(alice)
    )

    assert len(document.body.encode()) == MAX_BODY_BYTES


def test_body_over_one_megabyte_is_refused(alice):
    with pytest.raises(InvalidInput) as raised:
        document_write(
            user=alice, path="big.md", content="é" * (MAX_BODY_BYTES // 2) + "x",
            actor=as_user(alice),
        )  # fmt: skip

    assert raised.value.field == "content"
    assert raised.value.message.startswith(f"Content is {MAX_BODY_BYTES + 1} bytes long")
    assert not Document.objects.exists()
    assert not ActivityEvent.objects.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"bytes", "Content must be text."),
        (None, "Content must be text."),
        ("a\x00b", "Content contains a NUL character (U+0000)."),
        ("bad \ud800 surrogate", "Content is not valid UTF-8 text."),
    ],
)
def test_bad_content_is_refused(alice, content, message):
    with pytest.raises(InvalidInput) as raised:
        document_write(user=alice, path="a.md", content=content, actor=as_user(alice))

    assert (raised.value.field, raised.value.message) == ("content", message)
    assert not Document.objects.exists()


# path attacks


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("../x", "dot_segment"),
        ("/etc/passwd", "absolute"),
        ("a/../../b", "dot_segment"),
        ("a//b", "empty_segment"),
        ("a\\b", "backslash"),
        ("..\\..\\windows", "backslash"),
        ("a\x00b", "control_character"),
        ("a\nb", "control_character"),
        ("a\x1bb", "control_character"),
        ("a\u202eb", "control_character"),
        ("a" * 1000, "too_long"),
        ("\uff0e\uff0e/secret", "dot_segment"),
        ("a/\u2025/b", "dot_segment"),
        ("\uff0fetc/passwd", "absolute"),
        ("", "empty"),
    ],
)
def test_path_attacks_are_refused_naming_the_rule(alice, path, rule):
    for call in (
        lambda: document_write(user=alice, path=path, content="x", actor=as_user(alice)),
        lambda: document_append(user=alice, path=path, content="x", actor=as_user(alice)),
        lambda: document_read(user=alice, path=path),
        lambda: document_delete(user=alice, path=path, actor=as_user(alice)),
    ):
        with pytest.raises(InvalidInput) as raised:
            call()
        assert raised.value.field == "path"
        assert raised.value.rule == rule

    assert not Document.objects.exists()
    assert not DocumentVersion.objects.exists()
    assert not ActivityEvent.objects.exists()


# list / tree


@pytest.fixture
def tree_docs(alice):
    for path in (
        "MEMORY.md",
        "daily/2026-11-20.md",
        "daily/2026-11-21.md",
        "projects/alpha/notes.md",
        "projects/alpha/specs/api.md",
        "projects/beta.md",
    ):
        document_write(user=alice, path=path, content=path, actor=as_user(alice))


def test_list_by_prefix(alice, tree_docs):
    assert list(document_list(user=alice, prefix="projects/").values_list("path", flat=True)) == [
        "projects/alpha/notes.md",
        "projects/alpha/specs/api.md",
        "projects/beta.md",
    ]
    assert document_list(user=alice).count() == 6
    assert list(document_list(user=alice, prefix="daily/2026-11-21").values_list("path")) == [
        ("daily/2026-11-21.md",)
    ]


def test_tree_top_level(alice, tree_docs):
    entries = document_tree(user=alice)

    assert [(e.path, e.kind, e.depth) for e in entries] == [
        ("MEMORY.md", "file", 1),
        ("daily", "folder", 1),
        ("projects", "folder", 1),
    ]
    memory = entries[0]
    assert memory.name == "MEMORY.md"
    assert memory.size == len("MEMORY.md")
    assert memory.document_id == Document.objects.get(path="MEMORY.md").pk


def test_tree_under_a_folder_to_depth_two(alice, tree_docs):
    entries = document_tree(user=alice, path="projects", depth=2)

    assert [(e.path, e.name, e.kind, e.depth) for e in entries] == [
        ("projects/alpha", "alpha", "folder", 1),
        ("projects/alpha/notes.md", "notes.md", "file", 2),
        ("projects/alpha/specs", "specs", "folder", 2),
        ("projects/beta.md", "beta.md", "file", 1),
    ]
    assert document_tree(user=alice, path="projects/", depth=2) == entries


def test_tree_of_a_missing_folder_is_not_found(alice, tree_docs):
    with pytest.raises(NotFound) as raised:
        document_tree(user=alice, path="nowhere")

    assert raised.value.message == "No folder 'nowhere'."


def test_tree_refuses_bad_depth_and_bad_path(alice):
    with pytest.raises(InvalidInput) as raised:
        document_tree(user=alice, depth=0)
    assert raised.value.field == "depth"

    with pytest.raises(InvalidInput) as raised:
        document_tree(user=alice, path="../etc")
    assert raised.value.rule == "dot_segment"


def test_tree_lists_a_file_and_a_folder_of_the_same_name(alice):
    document_write(user=alice, path="a", content="file", actor=as_user(alice))
    document_write(user=alice, path="a/b.md", content="inside", actor=as_user(alice))

    entries = document_tree(user=alice, path="", depth=2)

    assert [(entry.path, entry.kind) for entry in entries] == [
        ("a", "file"),
        ("a", "folder"),
        ("a/b.md", "file"),
    ]


def test_tree_of_an_empty_scope(alice):
    assert document_tree(user=alice) == []
    assert TreeEntry(path="a", name="a", kind="folder", depth=1).size is None


# delete / restore


def test_delete_keeps_the_content_in_a_version(alice):
    document_write(user=alice, path="a.md", content="keep me", actor=as_user(alice))

    version = document_delete(user=alice, path="a.md", actor=as_user(alice))

    assert (version.action, version.body, version.path, version.document) == (
        "delete",
        "keep me",
        "a.md",
        None,
    )
    assert not Document.objects.exists()
    assert versions_of(alice, "a.md") == [("write", "keep me"), ("delete", "keep me")]
    event = ActivityEvent.objects.filter(event_type="document_deleted").get()
    assert event.payload == {
        "path": "a.md",
        "scope": "user",
        "agent_id": None,
        "action": "delete",
        "version_id": version.pk,
    }


def test_delete_missing_document_is_not_found(alice):
    with pytest.raises(NotFound):
        document_delete(user=alice, path="a.md", actor=as_user(alice))

    assert not DocumentVersion.objects.exists()


def test_overwrite_is_undone_by_restore(alice):
    document_write(user=alice, path="a.md", content="original", actor=as_user(alice))
    first = DocumentVersion.objects.get()
    document_write(user=alice, path="a.md", content="clobbered", actor=as_user(alice))

    document = document_restore(user=alice, version_id=first.pk, actor=as_user(alice))

    assert document.body == "original"
    assert document_read(user=alice, path="a.md").body == "original"
    assert versions_of(alice, "a.md") == [
        ("write", "original"),
        ("write", "clobbered"),
        ("restore", "original"),
    ]
    assert ActivityEvent.objects.order_by("-id").first().payload["action"] == "restore"


def test_restore_brings_back_a_deleted_document(alice):
    document_write(user=alice, path="a.md", content="gone soon", actor=as_user(alice))
    version = document_delete(user=alice, path="a.md", actor=as_user(alice))

    document = document_restore(user=alice, version_id=version.pk, actor=as_user(alice))

    assert document_read(user=alice, path="a.md").body == "gone soon"
    assert document.scope == "user"
    assert [v.action for v in document_versions(user=alice, path="a.md")] == [
        "restore",
        "delete",
        "write",
    ]
    # The old versions keep the scope and path even though their document was deleted.
    assert DocumentVersion.objects.filter(user=alice, path="a.md", document=None).count() == 2


def test_restore_of_another_users_version_is_not_found(alice, bob):
    document_write(user=alice, path="a.md", content="alice's", actor=as_user(alice))
    version = DocumentVersion.objects.get()

    with pytest.raises(NotFound):
        document_restore(user=bob, version_id=version.pk, actor=as_user(bob))

    assert not Document.objects.filter(user=bob).exists()
    assert DocumentVersion.objects.count() == 1


# well-known files


def test_append_memory(alice):
    append_memory(user=alice, content="likes tea", actor=as_user(alice))
    append_memory(user=alice, content="lives in Lyon", actor=as_user(alice))

    assert document_read(user=alice, path="MEMORY.md").body == "likes tea\nlives in Lyon"


def test_daily_file_uses_the_users_timezone(alice):
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=as_user(alice))
    now = datetime.datetime(2026, 11, 21, 16, 30, tzinfo=datetime.UTC)

    document = append_daily_memory(user=alice, content="late call", actor=as_user(alice), now=now)

    assert document.path == "daily/2026-11-22.md"
    assert document.body == "- 00:30 late call"


def test_daily_file_in_utc_when_no_timezone(alice, bob):
    now = datetime.datetime(2026, 11, 21, 16, 30, tzinfo=datetime.UTC)

    document = append_daily_memory(user=bob, content="standup", actor=as_user(bob), now=now)
    append_daily_memory(user=bob, content="  lunch  ", actor=as_user(bob), now=now)

    assert document.path == "daily/2026-11-21.md"
    assert document_read(user=bob, path="daily/2026-11-21.md").body == (
        "- 16:30 standup\n- 16:30 lunch"
    )


def test_daily_file_for_the_global_scope_is_utc():
    now = datetime.datetime(2026, 11, 21, 23, 59, tzinfo=datetime.UTC)

    document = append_daily_memory(user=None, content="release", actor=Actor.system(), now=now)

    assert (document.path, document.body, document.scope) == (
        "daily/2026-11-21.md",
        "- 23:59 release",
        "global",
    )


def test_agent_memory_is_private_to_the_agent(alice, alice_agent):
    other = AgentFactory(user=alice, name="researcher")
    append_agent_memory(agent=alice_agent, content="A's note", actor=Actor.for_agent(alice_agent))

    assert agent_memory_get(agent=alice_agent).body == "A's note"
    assert agent_memory_get(agent=other) is None
    with pytest.raises(NotFound):
        document_read(user=alice, agent=other, path="AGENT_MEMORY.md")
    # The user's own scope does not include agent-private documents...
    assert list(document_list(user=alice)) == []
    assert document_tree(user=alice) == []
    with pytest.raises(NotFound):
        document_read(user=alice, path="AGENT_MEMORY.md")
    # ...unless asked with that agent.
    assert list(document_list(user=alice, agent=alice_agent).values_list("path", "body")) == [
        ("AGENT_MEMORY.md", "A's note")
    ]
    event = ActivityEvent.objects.get()
    assert (event.user, event.payload["scope"], event.payload["agent_id"]) == (
        alice,
        "agent",
        alice_agent.pk,
    )


def test_the_global_agent_memory_is_apart_from_every_agents(alice, alice_agent):
    append_agent_memory(agent=alice_agent, content="A's note", actor=Actor.for_agent(alice_agent))
    assert agent_memory_get(agent=None) is None

    append_agent_memory(agent=None, content="company note", actor=Actor.system())

    company = agent_memory_get(agent=None)
    assert (company.user, company.agent, company.shared_scope, company.body) == (
        None,
        None,
        None,
        "company note",
    )
    assert agent_memory_get(agent=alice_agent).body == "A's note"
    assert document_read(user=None, path="AGENT_MEMORY.md").pk == company.pk


def test_another_users_agent_cannot_be_used_as_a_scope(alice, bob_agent):
    with pytest.raises(InvalidInput) as raised:
        document_write(user=alice, agent=bob_agent, path="a.md", content="x", actor=as_user(alice))

    assert raised.value.field == "agent"
    assert not Document.objects.exists()


def test_users_are_isolated(alice, bob):
    document_write(user=alice, path="MEMORY.md", content="alice", actor=as_user(alice))
    document_write(user=bob, path="MEMORY.md", content="bob", actor=as_user(bob))

    assert document_read(user=alice, path="MEMORY.md").body == "alice"
    assert document_read(user=bob, path="MEMORY.md").body == "bob"
    document_delete(user=bob, path="MEMORY.md", actor=as_user(bob))
    assert document_read(user=alice, path="MEMORY.md").body == "alice"
    assert list(document_list(user=bob)) == []
    with pytest.raises(NotFound):
        document_delete(user=bob, path="MEMORY.md", actor=as_user(bob))


def test_global_scope_is_separate_from_users(alice):
    document_write(user=None, path="policy.md", content="company", actor=as_user(alice))
    document_write(user=alice, path="policy.md", content="mine", actor=as_user(alice))

    assert document_read(user=None, path="policy.md").body == "company"
    assert document_read(user=alice, path="policy.md").body == "mine"
    assert list(document_list(user=None).values_list("path", "body")) == [("policy.md", "company")]
    event = ActivityEvent.objects.order_by("id").first()
    assert (event.user, event.payload["scope"]) == (None, "global")

    version = document_delete(user=None, path="policy.md", actor=as_user(alice))
    assert version.user is None
    document_restore(user=None, version_id=version.pk, actor=as_user(alice))
    assert document_read(user=None, path="policy.md").body == "company"
    # A user cannot restore a global version as if it were theirs.
    with pytest.raises(NotFound):
        document_restore(user=alice, version_id=version.pk, actor=as_user(alice))


def test_an_agent_needs_a_user_scope(alice_agent):
    with pytest.raises(InvalidInput) as raised:
        document_write(user=None, agent=alice_agent, path="a.md", content="x", actor=Actor.system())

    assert raised.value.field == "agent"


# concurrency

APPENDERS = 20


NOON = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)


def _append_to_log(user, n):
    return document_append(user=user, path="log.md", content=f"line {n}", actor=as_user(user))


def _append_to_daily_log(user, n):
    return append_daily_memory(user=user, content=f"line {n}", actor=as_user(user), now=NOON)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("appender", "path", "line_prefix"),
    [(_append_to_log, "log.md", ""), (_append_to_daily_log, "daily/2026-11-21.md", "- 12:00 ")],
    ids=["document_append", "append_daily_memory"],
)
@pytest.mark.parametrize("existing", [False, True])
def test_concurrent_appends_lose_no_line(alice, appender, path, line_prefix, existing):
    if existing:
        document_write(user=alice, path=path, content="start", actor=as_user(alice))
    barrier = threading.Barrier(APPENDERS)
    errors: list[BaseException] = []
    written: dict[int, int] = {}

    def append(n: int) -> None:
        try:
            barrier.wait()
            written[n] = appender(alice, n).written_version.pk
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=append, args=(n,)) for n in range(APPENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    lines = Document.objects.get(user=alice, path=path).body.split("\n")
    expected = {f"{line_prefix}line {n}" for n in range(APPENDERS)}
    assert sorted(lines) == sorted(expected | ({"start"} if existing else set()))
    appends = DocumentVersion.objects.filter(user=alice, action="append")
    assert appends.count() == APPENDERS
    # Each append saw the body the previous one left: every version has one line more.
    lengths = [body.count("\n") for body in appends.order_by("id").values_list("body", flat=True)]
    assert lengths == list(range(int(existing), APPENDERS + int(existing)))
    assert ActivityEvent.objects.filter(event_type="document_written").count() == APPENDERS + int(
        existing
    )
    # Each caller is told its own version (the one its line ended), not a neighbour's.
    assert len(set(written.values())) == APPENDERS
    bodies = dict(appends.values_list("pk", "body"))
    for n, version_id in written.items():
        assert bodies[version_id].endswith(f"{line_prefix}line {n}")


WRITERS = 8


@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_from_one_base_version_let_exactly_one_through(alice):
    document = document_write(user=alice, path="plan.md", content="v1", actor=as_user(alice))
    opened = document_latest_version_id(document)
    barrier = threading.Barrier(WRITERS)
    outcomes: dict[int, str] = {}

    def write(n: int) -> None:
        try:
            barrier.wait()
            document_write(
                user=alice,
                path="plan.md",
                content=f"edit {n}",
                actor=as_user(alice),
                base_version=opened,
            )
            outcomes[n] = "written"
        except VersionConflict:
            outcomes[n] = "conflict"
        except BaseException as error:
            outcomes[n] = repr(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [n for n, outcome in outcomes.items() if outcome == "written"]
    assert sorted(outcomes.values()) == ["conflict"] * (WRITERS - 1) + ["written"]
    assert document_read(user=alice, path="plan.md").body == f"edit {winners[0]}"
    assert [body for _, body in versions_of(alice, "plan.md")] == ["v1", f"edit {winners[0]}"]
