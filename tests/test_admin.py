import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils.html import escape

from activity.actors import Actor
from activity.models import ActivityEvent
from context.models import Document, DocumentChunk, DocumentVersion
from context.services import document_write
from lib.errors import InvalidInput
from memory.keys import parse_key
from memory.models import Memory, MemoryHistory
from memory.search import search_memory
from memory.services import memory_upsert
from profiles.models import AgentToken, SystemToken
from profiles.services import hash_token, profile_for_user, system_token_create, token_create
from search.models import SearchLog
from work.models import WorkItem
from work.services import work_create

RAW_TOKEN = re.compile(r"mnemo_[A-Za-z0-9_-]{40,}")  # the full secret, not the prefix


def admin_url(obj_or_model, view, *args):
    opts = obj_or_model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


@pytest.fixture
def root(client, superuser):
    client.force_login(superuser)
    return client


@pytest.fixture
def objects(alice, alice_agent):
    """One real row of every model, made through the services."""
    write = memory_upsert(
        user=alice, key="fact:likes-tea", value="Likes green tea", actor=Actor.for_user(alice)
    )
    work = work_create(
        user=alice, title="Weekly report", body="# Week", actor=Actor.for_agent(alice_agent)
    )
    return {
        "profile": profile_for_user(alice),
        "agent": alice_agent,
        "token": token_create(agent=alice_agent, label="laptop").token,
        "memory": write.memory,
        "history": write.history,
        "activity": ActivityEvent.objects.get(event_type="memory_written"),
        "work": work,
        "document": document_write(
            user=alice, path="MEMORY.md", content="Notes", actor=Actor.for_user(alice)
        ),
        "system_token": system_token_create(label="wiki sync").token,
    } | _search_objects(alice)


def _search_objects(alice):
    search_memory(user=alice, query="tea")
    return {
        "document_version": DocumentVersion.objects.get(path="MEMORY.md"),
        "chunk": DocumentChunk.objects.get(document__path="MEMORY.md"),
        "search_log": SearchLog.objects.get(user=alice),
    }


def memory_form(**fields):
    data = {"value": "", "source": "user_stated", "confidence": "", "tags": "", "_save": "Save"}
    return data | fields


MODELS = [
    "profile",
    "agent",
    "token",
    "system_token",
    "memory",
    "history",
    "activity",
    "work",
    "document",
    "document_version",
    "chunk",
    "search_log",
]


@pytest.mark.parametrize("name", MODELS)
def test_changelist_and_change_page_open(root, objects, name):
    obj = objects[name]

    changelist = root.get(admin_url(obj, "changelist"))
    change = root.get(admin_url(obj, "change", obj.pk))

    assert (changelist.status_code, change.status_code) == (200, 200)
    assert obj in changelist.context["cl"].result_list


@pytest.mark.parametrize(
    ("name", "query"),
    [
        *((name, "alice") for name in MODELS if name not in ("activity", "system_token")),
        ("activity", "likes-tea"),
        ("system_token", "wiki"),
    ],
)
def test_changelist_search_finds_the_row(root, objects, name, query):
    obj = objects[name]

    response = root.get(admin_url(obj, "changelist"), {"q": query})

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [obj]


def test_add_memory_writes_row_history_and_activity(root, superuser, alice):
    response = root.post(
        admin_url(Memory, "add"),
        memory_form(
            user=alice.pk,
            key="preference:bullets",
            value="  Bullet points in reports ",
            source="tp_extracted",
            tags="Reports, format",
            pinned="on",
            occurred_at_0="2023-05-08",
            occurred_at_1="13:56:00",
            session=" chat-42 ",
        ),
    )

    assert response.status_code == 302
    memory = Memory.objects.get()
    assert (memory.user, memory.key, memory.value) == (
        alice,
        "preference:bullets",
        "Bullet points in reports",
    )
    assert (memory.source, memory.confidence, memory.tags, memory.pinned) == (
        "tp_extracted",
        0.8,
        ["format", "reports"],
        True,
    )
    history = MemoryHistory.objects.get()
    assert (history.user, history.key, history.memory, history.action) == (
        alice,
        "preference:bullets",
        memory,
        "create",
    )
    assert (history.actor_type, history.actor_user, history.source) == (
        "user",
        superuser,
        "tp_extracted",
    )
    assert history.before is None
    assert history.after == {
        "value": "Bullet points in reports",
        "source": "tp_extracted",
        "confidence": 0.8,
        "tags": ["format", "reports"],
        "pinned": True,
        # The admin's times are UTC (no timezone memory for the superuser's pages).
        "occurred_at": "2023-05-08T13:56:00+00:00",
        "session": "chat-42",
    }
    event = ActivityEvent.objects.get()
    assert (event.event_type, event.user, event.actor_type, event.actor_user) == (
        "memory_written",
        alice,
        "user",
        superuser,
    )
    assert event.payload == {
        "key": "preference:bullets",
        "action": "create",
        "source": "tp_extracted",
        "history_id": history.pk,
    }


def test_add_memory_without_a_time_was_said_now_and_a_bad_session_is_a_field_error(root, alice):
    refused = root.post(
        admin_url(Memory, "add"),
        memory_form(user=alice.pk, key="fact:tea", value="tea", session="a\x07b"),
    )
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors == {
        "session": ["session must be one line, without control characters."]
    }
    assert Memory.objects.count() == 0

    response = root.post(
        admin_url(Memory, "add"), memory_form(user=alice.pk, key="fact:tea", value="tea")
    )
    assert response.status_code == 302
    memory = Memory.objects.get()
    assert abs(memory.occurred_at - memory.created_at).total_seconds() < 1
    assert memory.session == ""


def test_add_memory_with_bad_key_shows_grammar_error_and_writes_nothing(root, alice):
    with pytest.raises(InvalidInput) as grammar:
        parse_key("fact:Bad Slug")

    response = root.post(
        admin_url(Memory, "add"), memory_form(user=alice.pk, key="fact:Bad Slug", value="x")
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"key": [grammar.value.message]}
    assert escape(grammar.value.message) in response.text
    assert Memory.objects.count() == 0
    assert MemoryHistory.objects.count() == 0
    assert ActivityEvent.objects.count() == 0


def test_add_memory_with_bad_confidence_shows_field_error(root, alice):
    response = root.post(
        admin_url(Memory, "add"),
        memory_form(user=alice.pk, key="timezone", value="Asia/Singapore", confidence="0.5"),
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "confidence": ["A 'user_stated' memory has confidence exactly 1.0."],
    }
    assert Memory.objects.count() == 0


def test_add_memory_with_bad_timezone_shows_field_error(root, alice):
    response = root.post(
        admin_url(Memory, "add"),
        memory_form(user=alice.pk, key="timezone", value="Mars/Olympus"),
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "value": [
            "'Mars/Olympus' is not an IANA time zone. Type one such as Europe/Paris, "
            "Asia/Singapore or UTC."
        ],
    }
    assert Memory.objects.count() == 0


def test_add_memory_with_existing_key_is_refused(root, alice, objects):
    response = root.post(
        admin_url(Memory, "add"), memory_form(user=alice.pk, key="fact:likes-tea", value="Coffee")
    )

    assert response.status_code == 200
    assert Memory.objects.get(user=alice, key="fact:likes-tea").value == "Likes green tea"
    assert MemoryHistory.objects.count() == 1


def test_change_memory_records_update_and_keeps_key_and_user(root, superuser, alice, bob, objects):
    memory = objects["memory"]

    response = root.post(
        admin_url(memory, "change", memory.pk),
        memory_form(user=bob.pk, key="fact:other", value="Likes black tea", tags="drinks"),
    )

    assert response.status_code == 302
    memory.refresh_from_db()
    assert (memory.user, memory.key, memory.value, memory.tags) == (
        alice,
        "fact:likes-tea",
        "Likes black tea",
        ["drinks"],
    )
    update = MemoryHistory.objects.get(action="update")
    assert (update.key, update.actor_user) == ("fact:likes-tea", superuser)
    assert (update.before["value"], update.after["value"]) == ("Likes green tea", "Likes black tea")
    assert ActivityEvent.objects.filter(event_type="memory_written").count() == 2


def test_saving_an_unchanged_memory_records_nothing(root, objects):
    memory = objects["memory"]

    response = root.post(
        admin_url(memory, "change", memory.pk),
        memory_form(value="Likes green tea", confidence="1.0"),
    )

    assert response.status_code == 302
    assert MemoryHistory.objects.count() == 1
    assert ActivityEvent.objects.filter(event_type="memory_written").count() == 1


def test_memory_change_page_lists_its_history(root, objects):
    memory, history = objects["memory"], objects["history"]

    response = root.get(admin_url(memory, "change", memory.pk))

    assert admin_url(history, "change", history.pk) in response.text
    assert f"user__id__exact={memory.user_id}&amp;key=fact%3Alikes-tea" in response.text


def test_delete_memory_records_delete_history(root, superuser, alice, objects):
    memory = objects["memory"]

    response = root.post(admin_url(memory, "delete", memory.pk), {"post": "yes"})

    assert response.status_code == 302
    assert not Memory.objects.exists()
    deleted = MemoryHistory.objects.get(action="delete")
    # The row keeps naming the deleted memory, so a restore brings back that same memory.
    assert (deleted.user, deleted.key, deleted.memory_id, deleted.actor_user) == (
        alice,
        "fact:likes-tea",
        memory.pk,
        superuser,
    )
    assert deleted.memory_created_at == memory.created_at
    # Its admin page shows the gone memory as empty rather than failing.
    assert root.get(admin_url(deleted, "change", deleted.pk)).status_code == 200
    assert deleted.before["value"] == "Likes green tea"
    assert deleted.after is None
    event = ActivityEvent.objects.get(event_type="memory_deleted")
    assert event.payload == {"key": "fact:likes-tea", "history_id": deleted.pk}


def test_bulk_delete_memories_goes_through_the_service(root, alice, objects):
    other = memory_upsert(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))
    ids = [objects["memory"].pk, other.memory.pk]

    response = root.post(
        admin_url(Memory, "changelist"),
        {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
    )

    assert response.status_code == 302
    assert not Memory.objects.exists()
    assert sorted(MemoryHistory.objects.filter(action="delete").values_list("key", flat=True)) == [
        "fact:likes-tea",
        "name",
    ]
    assert ActivityEvent.objects.filter(event_type="memory_deleted").count() == 2


@pytest.mark.parametrize("name", ["history", "activity", "document_version", "chunk", "search_log"])
def test_logs_are_read_only(root, objects, name):
    obj = objects[name]
    row = type(obj).objects.filter(pk=obj.pk).values()
    before = row.get()

    changelist = root.get(admin_url(obj, "changelist"))
    add = root.get(admin_url(obj, "add"))
    change = root.post(admin_url(obj, "change", obj.pk), {"key": "fact:hacked", "payload": "{}"})
    delete = root.post(admin_url(obj, "delete", obj.pk), {"post": "yes"})

    assert admin_url(obj, "add") not in changelist.text
    assert (add.status_code, change.status_code, delete.status_code) == (403, 403, 403)
    assert row.get() == before


def test_token_hash_never_shown(root, objects):
    token = objects["token"]

    pages = [
        root.get(admin_url(token, "changelist")),
        root.get(admin_url(token, "change", token.pk)),
        root.get(admin_url(token.agent, "delete", token.agent.pk)),
    ]

    for page in pages:
        assert page.status_code == 200
        assert token.token_hash not in page.text
        assert "token_hash" not in page.text
        assert token.prefix in page.text


def test_add_token_shows_raw_token_once_and_stores_its_hash(root, alice_agent):
    response = root.post(
        admin_url(AgentToken, "add"),
        {"agent": alice_agent.pk, "label": "ci", "_save": "Save"},
        follow=True,
    )

    shown = [RAW_TOKEN.search(str(message)) for message in response.context["messages"]]
    (raw,) = [match.group() for match in shown if match]
    token = AgentToken.objects.get()
    assert (token.agent, token.label, token.prefix) == (alice_agent, "ci", raw[:12])
    assert token.token_hash == hash_token(raw)
    assert raw not in str(AgentToken.objects.values().get())
    assert raw not in str(list(LogEntry.objects.values()))
    assert raw not in root.get(admin_url(token, "changelist")).text


def test_add_system_token_shows_raw_token_once_and_it_works_for_global_documents(root, call_tool):
    response = root.post(
        admin_url(SystemToken, "add"), {"label": "wiki sync", "_save": "Save"}, follow=True
    )

    shown = [RAW_TOKEN.search(str(message)) for message in response.context["messages"]]
    (raw,) = [match.group() for match in shown if match]
    token = SystemToken.objects.get()
    assert (token.label, token.token_hash) == ("wiki sync", hash_token(raw))
    assert raw.startswith("mnemo_sys_")
    assert raw not in root.get(admin_url(token, "changelist")).text
    assert raw not in root.get(admin_url(token, "change", token.pk)).text
    written = call_tool(raw, "memory_write", {"path": "handbook.md", "content": "Be kind."})
    assert written.status_code == 200, written.content
    assert Document.objects.get(path="handbook.md").user is None


def test_revoke_system_token_action(root, objects, call_tool):
    token = objects["system_token"]

    root.post(
        admin_url(token, "changelist"),
        {"action": "revoke_selected", "_selected_action": [token.pk]},
    )

    token.refresh_from_db()
    assert token.revoked_at is not None


def test_revoke_tokens_action(root, objects):
    token = objects["token"]

    response = root.post(
        admin_url(token, "changelist"),
        {"action": "revoke_selected", "_selected_action": [token.pk]},
    )

    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_add_work_item_records_activity(root, superuser, alice, alice_agent):
    response = root.post(
        admin_url(WorkItem, "add"),
        {
            "user": alice.pk,
            "agent": alice_agent.pk,
            "title": "  Launch plan ",
            "kind": "draft",
            "status": "in_progress",
            "body": "# Plan",
            "metadata": "{}",
            "_save": "Save",
        },
    )

    assert response.status_code == 302
    item = WorkItem.objects.get()
    assert (item.user, item.agent, item.title, item.kind, item.status) == (
        alice,
        alice_agent,
        "Launch plan",
        "draft",
        "in_progress",
    )
    event = ActivityEvent.objects.get()
    assert (event.event_type, event.user, event.actor_user) == ("work_created", alice, superuser)
    assert event.payload == {"work_id": item.pk, "title": "Launch plan", "kind": "draft"}


def test_add_work_item_with_another_users_agent_is_refused(root, bob, alice_agent):
    response = root.post(
        admin_url(WorkItem, "add"),
        {"user": bob.pk, "agent": alice_agent.pk, "title": "X", "kind": "report", "status": "done"},
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "agent": ["That agent belongs to another user."]
    }
    assert not WorkItem.objects.exists()
    assert not ActivityEvent.objects.exists()


@pytest.mark.parametrize("owner", ["bob", "global"])
def test_add_document_private_to_another_users_agent_is_refused(root, bob, alice_agent, owner):
    form = {"agent": alice_agent.pk, "path": "notes.md", "body": "x"}
    if owner == "bob":
        form["user"] = bob.pk

    response = root.post(admin_url(Document, "add"), form)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "agent": ["That agent belongs to another user."]
    }
    assert not Document.objects.exists()


def test_document_scope_column_and_filter(root, alice, alice_agent, objects):
    Document.objects.create(path="handbook.md", body="Global")
    Document.objects.create(user=alice, agent=alice_agent, path="AGENT_MEMORY.md", body="Mine")

    response = root.get(admin_url(Document, "changelist"), {"scope": "agent"})
    everything = root.get(admin_url(Document, "changelist"))

    assert [doc.path for doc in response.context["cl"].result_list] == ["AGENT_MEMORY.md"]
    scopes = {
        doc.path: everything.context["cl"].model_admin.scope(doc)
        for doc in everything.context["cl"].result_list
    }
    assert scopes == {"AGENT_MEMORY.md": "agent", "MEMORY.md": "user", "handbook.md": "global"}


def test_add_document_with_bad_path_shows_error(root, alice):
    response = root.post(admin_url(Document, "add"), {"user": alice.pk, "path": "../etc/passwd"})

    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["path"]
    assert not Document.objects.exists()


def test_document_admin_writes_through_the_services(root, superuser, alice):
    from context.models import DocumentVersion

    added = root.post(
        admin_url(Document, "add"), {"user": alice.pk, "path": "notes/plan.md", "body": "v1"}
    )
    assert added.status_code == 302
    document = Document.objects.get(user=alice, path="notes/plan.md")

    changed = root.post(admin_url(document, "change", document.pk), {"body": "v2"})
    assert changed.status_code == 302
    document.refresh_from_db()
    assert document.body == "v2"

    deleted = root.post(admin_url(document, "delete", document.pk), {"post": "yes"})
    assert deleted.status_code == 302
    assert not Document.objects.filter(user=alice).exists()
    versions = DocumentVersion.objects.filter(user=alice, path="notes/plan.md").order_by("id")
    assert [(v.action, v.body, v.actor_user_id) for v in versions] == [
        ("write", "v1", superuser.pk),
        ("write", "v2", superuser.pk),
        ("delete", "v2", superuser.pk),
    ]
    events = ActivityEvent.objects.filter(user=alice, event_type__startswith="document_")
    assert [e.event_type for e in events.order_by("id")] == [
        "document_written",
        "document_written",
        "document_deleted",
    ]


def test_the_admin_changes_and_deletes_an_agents_note_as_that_note(root, alice, alice_agent):
    """An agent's own note (issue 27) stays the agent's when the admin edits it, and its
    deletion deletes the note, not the user's memory under the same key."""
    mine = memory_upsert(user=alice, key="fact:arm", value="Mine", actor=Actor.for_user(alice))
    note = memory_upsert(
        user=alice,
        key="fact:arm",
        value="Builds on ARM",
        actor=Actor.for_agent(alice_agent),
        owner_agent=alice_agent,
    ).memory

    changed = root.post(
        admin_url(note, "change", note.pk),
        memory_form(user=alice.pk, key="fact:arm", value="Builds on ARM64"),
    )
    page = root.get(admin_url(note, "change", note.pk)).content.decode()
    deleted = root.post(admin_url(note, "delete", note.pk), {"post": "yes"})

    assert changed.status_code == 302
    assert "Audience (empty: the user&#x27;s memory)" in page
    assert deleted.status_code == 302
    assert list(Memory.objects.filter(user=alice).values_list("pk", "value")) == [
        (mine.memory.pk, "Mine")
    ]
    history = MemoryHistory.objects.filter(owner_agent=alice_agent).order_by("pk")
    assert [(row.action, row.after and row.after["value"]) for row in history] == [
        ("create", "Builds on ARM"),
        ("update", "Builds on ARM64"),
        ("delete", None),
    ]
