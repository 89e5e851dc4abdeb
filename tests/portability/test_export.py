"""Export: every file of a seeded account, the manifest, no secrets, who may export,
isolation, and streaming in bounded memory."""

import hashlib
import io
import json
import random
import tracemalloc
import zipfile
from datetime import timedelta

import pytest
from django.http import StreamingHttpResponse
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from context.models import Document, DocumentVersion
from context.services import document_write
from context.well_known import append_agent_memory
from memory.models import Memory, MemoryHistory, MemoryProposal, Source
from memory.services import memory_upsert
from portability import export as export_module
from portability import format as fmt
from portability.export import export_chunks, work_markdown, write_export
from profiles.models import Profile
from profiles.services import profile_set_heartbeat
from work.models import WorkItem
from work.services import work_create

pytestmark = pytest.mark.django_db

EXPORT_URL = "/api/v1/export"
PAGE_URL = "/settings/export/"


@pytest.fixture
def seeded(alice, alice_agent, alice_token, bob, bob_agent):
    """alice: settings with a webhook, memories by her and her agent, her own document and
    her agent's private one, a work item, a pending proposal. bob: a memory and a document."""
    profile_set_heartbeat(user=alice, enabled=True, webhook_url="https://hooks.example.com/m")
    Profile.objects.filter(user=alice).update(token_budget=3000, review_agent_memories=True)
    alice_agent.description = "Research helper"
    alice_agent.learns_from_turns = True
    alice_agent.save()
    you, agent = Actor.for_user(alice), Actor.for_agent(alice_agent)
    memory_upsert(user=alice, key="fact:tea", value="green tea", actor=you, tags=["drinks"])
    memory_upsert(user=alice, key="fact:tea", value="oolong", actor=you, tags=["drinks"])
    memory_upsert(user=alice, key="fact:city", value="Lisbon", actor=you, source=Source.USER_STATED)
    document_write(user=alice, path="notes/plan.md", content="# Plan\n\nShip it.\n", actor=you)
    append_agent_memory(agent=alice_agent, content="Prefers short answers", actor=agent)
    work_create(
        user=alice,
        title="Weekly: report — Q3",
        body="# Findings\n\n- one\n",
        actor=agent,
        agent=alice_agent,
        tags=["q3", "weekly"],
        metadata={"source": "heartbeat"},
    )
    MemoryProposal.objects.create(
        user=alice,
        key="fact:dog",
        action="create",
        trigger="new_memory",
        after={"value": "a beagle", "source": "tp_extracted", "confidence": 0.7},
        reason="mentioned twice",
        expires_at=timezone.now() + timedelta(days=7),
        **agent.as_fields(),
    )
    bob_actor = Actor.for_user(bob)
    memory_upsert(user=bob, key="fact:bobs-secret", value="bob-only-value", actor=bob_actor)
    document_write(user=bob, path="notes/plan.md", content="bob-only-document", actor=bob_actor)
    return {"token": alice_token, "secret": Profile.objects.get(user=alice).webhook_secret}


def download(client, user, url=EXPORT_URL) -> zipfile.ZipFile:
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].startswith('attachment; filename="mnemo-export-')
    raw = b"".join(response.streaming_content)
    download.raw = raw
    return zipfile.ZipFile(io.BytesIO(raw))


def lines(archive: zipfile.ZipFile, name: str) -> list[dict]:
    text = archive.read(name).decode()
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def test_every_file_is_present_with_the_accounts_content(client, alice, alice_agent, seeded):
    archive = download(client, alice)
    work = WorkItem.objects.get(user=alice)
    assert sorted(archive.namelist()) == sorted(
        [
            "profile.json",
            "memories.jsonl",
            "memory_history.jsonl",
            "documents/notes/plan.md",
            "documents/agents/assistant/AGENT_MEMORY.md",
            "document_versions.jsonl",
            f"work/{work.id}-weekly-report-q3.md",
            "activity.jsonl",
            "proposals.jsonl",
            "manifest.json",
        ]
    )
    assert archive.namelist()[-1] == "manifest.json"

    profile = json.loads(archive.read("profile.json"))
    assert profile == {
        "token_budget": 3000,
        "memory_paused": False,
        "review_agent_memories": True,
        "auto_learn": False,
        "profile_budget": 2000,
        "llm_daily_tokens": 200_000,
        "heartbeat_enabled": True,
        "notify_webhook_url": "https://hooks.example.com/m",
        "agents": [
            {
                "name": "assistant",
                "display_name": "",
                "description": "Research helper",
                "learns_from_turns": True,
            }
        ],
    }

    tea = Memory.objects.get(user=alice, key="fact:tea")
    memories = lines(archive, "memories.jsonl")
    assert [m["key"] for m in memories] == ["fact:city", "fact:tea"]
    assert memories[1] == {
        "key": "fact:tea",
        "value": "oolong",
        "source": "user_stated",
        "confidence": 1.0,
        "tags": ["drinks"],
        "pinned": False,
        "access_count": 0,
        "last_accessed_at": None,
        "occurred_at": iso(tea.occurred_at),
        "session": "",
        "created_at": iso(tea.created_at),
        "updated_at": iso(tea.updated_at),
        "audience": "user",
    }

    history = lines(archive, "memory_history.jsonl")
    stored = list(MemoryHistory.objects.filter(user=alice).order_by("created_at", "id"))
    assert [(h["key"], h["action"]) for h in history] == [
        ("fact:tea", "create"),
        ("fact:tea", "update"),
        ("fact:city", "create"),
    ]
    assert history[1] == {
        "key": "fact:tea",
        "action": "update",
        "source": "user_stated",
        "before": stored[1].before,
        "after": stored[1].after,
        "actor": {"type": "user", "agent": None},
        "created_at": iso(stored[1].created_at),
        "audience": "user",
    }
    assert history[1]["after"]["value"] == "oolong"

    assert archive.read("documents/notes/plan.md") == b"# Plan\n\nShip it.\n"
    agent_doc = Document.objects.get(user=alice, agent=alice_agent)
    assert archive.read("documents/agents/assistant/AGENT_MEMORY.md") == agent_doc.body.encode()
    assert "Prefers short answers" in agent_doc.body

    versions = lines(archive, "document_versions.jsonl")
    assert [(v["path"], v["agent"], v["action"]) for v in versions] == [
        ("notes/plan.md", None, "write"),
        ("AGENT_MEMORY.md", "assistant", "append"),
    ]
    assert versions[1]["actor"] == {"type": "agent", "agent": "assistant"}
    assert versions[1]["body"] == agent_doc.body
    first_version = DocumentVersion.objects.filter(user=alice).earliest("created_at")
    assert versions[0]["created_at"] == iso(first_version.created_at)

    work_text = archive.read(f"work/{work.id}-weekly-report-q3.md").decode()
    assert work_text == (
        "---\n"
        'title: "Weekly: report — Q3"\n'
        'kind: "report"\n'
        'status: "done"\n'
        'tags: ["q3", "weekly"]\n'
        'agent: "assistant"\n'
        'metadata: {"source": "heartbeat"}\n'
        f'created_at: "{iso(work.created_at)}"\n'
        f'updated_at: "{iso(work.updated_at)}"\n'
        "---\n"
        "# Findings\n\n- one\n"
    )

    activity = lines(archive, "activity.jsonl")
    stored_events = list(ActivityEvent.objects.filter(user=alice).order_by("created_at", "id"))
    assert [a["event_type"] for a in activity] == [e.event_type for e in stored_events]
    assert EventType.WORK_CREATED in [a["event_type"] for a in activity]
    assert activity[-1] == {
        "event_type": stored_events[-1].event_type,
        "payload": stored_events[-1].payload,
        "actor": {"type": stored_events[-1].actor_type, "agent": "assistant"},
        "created_at": iso(stored_events[-1].created_at),
    }

    proposal = MemoryProposal.objects.get(user=alice)
    assert lines(archive, "proposals.jsonl") == [
        {
            "key": "fact:dog",
            "action": "create",
            "trigger": "new_memory",
            "status": "pending_review",
            "before": None,
            "after": {"value": "a beagle", "source": "tp_extracted", "confidence": 0.7},
            "reason": "mentioned twice",
            "requested_key": "",
            "actor": {"type": "agent", "agent": "assistant"},
            "created_at": iso(proposal.created_at),
            "expires_at": iso(proposal.expires_at),
            "decided_at": None,
        }
    ]


def test_manifest_counts_and_digests_match_the_files(client, alice, seeded):
    archive = download(client, alice)
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["format"] == "mnemo-export"
    assert manifest["format_version"] == fmt.FORMAT_VERSION == 1
    assert manifest["user"] == "alice"
    assert abs(timezone.datetime.fromisoformat(manifest["exported_at"]) - timezone.now()) < (
        timedelta(minutes=1)
    )
    assert set(manifest["files"]) == set(archive.namelist()) - {"manifest.json"}
    for name, entry in manifest["files"].items():
        data = archive.read(name)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest(), name
        assert entry["bytes"] == len(data), name
    assert manifest["files"]["documents/agents/assistant/AGENT_MEMORY.md"]["agent"] == "assistant"
    assert manifest["files"]["documents/agents/assistant/AGENT_MEMORY.md"]["path"] == (
        "AGENT_MEMORY.md"
    )
    assert manifest["files"]["documents/notes/plan.md"]["agent"] is None
    assert manifest["counts"] == {
        "memories.jsonl": 2,
        "memory_history.jsonl": 3,
        "documents/": 2,
        "document_versions.jsonl": 2,
        "work/": 1,
        "activity.jsonl": ActivityEvent.objects.filter(user=alice).count(),
        "proposals.jsonl": 1,
    }
    for name in ("memories.jsonl", "memory_history.jsonl", "activity.jsonl"):
        assert manifest["counts"][name] == len(lines(archive, name))


def test_no_token_or_secret_is_anywhere_in_the_archive(client, alice, seeded):
    archive = download(client, alice)
    from profiles.models import AgentToken

    token_hash = AgentToken.objects.get(agent__user=alice).token_hash
    password_hash = alice.password
    assert len(seeded["secret"]) == 64
    for name in archive.namelist():
        data = archive.read(name)
        for secret in (seeded["token"], token_hash, seeded["secret"], password_hash):
            assert secret.encode() not in data, name
    # Nor in the compressed bytes as sent.
    for secret in (seeded["token"], token_hash, seeded["secret"]):
        assert secret.encode() not in download.raw


def test_another_users_data_is_absent(client, alice, bob, seeded):
    archive = download(client, alice)
    for name in archive.namelist():
        data = archive.read(name)
        assert b"bob-only" not in data, name
        assert b"bobs-secret" not in data, name
    bob_archive = download(client, bob)
    assert bob_archive.read("documents/notes/plan.md") == b"bob-only-document"
    assert [m["key"] for m in lines(bob_archive, "memories.jsonl")] == ["fact:bobs-secret"]
    assert lines(bob_archive, "proposals.jsonl") == []


def test_an_agent_token_is_refused(client, alice, seeded):
    response = client.get(EXPORT_URL, headers={"Authorization": f"Bearer {seeded['token']}"})
    assert response.status_code == 403
    assert response.json() == {
        "error": {
            "code": "forbidden",
            "message": response.json()["error"]["message"],
            "field": None,
        }
    }
    assert response.json()["error"]["message"].startswith("Agents may not export")
    assert not isinstance(response, StreamingHttpResponse)


def test_an_agent_token_is_refused_even_beside_a_session(client, alice, seeded):
    client.force_login(alice)
    response = client.get(EXPORT_URL, headers={"Authorization": f"Bearer {seeded['token']}"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


def test_anonymous_gets_401_from_the_api_and_the_sign_in_page_from_settings(client, seeded):
    response = client.get(EXPORT_URL)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    page = client.get(PAGE_URL)
    assert page.status_code == 302
    assert page["Location"] == f"/login/?next={PAGE_URL}"


def test_settings_download_gives_the_same_files(client, alice, seeded):
    from_page = download(client, alice, PAGE_URL)
    from_api = download(client, alice, EXPORT_URL)
    for name in from_api.namelist():
        if name != "manifest.json":
            assert from_page.read(name) == from_api.read(name), name


def test_settings_page_offers_the_download_with_the_counts(client, alice, seeded):
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert f'href="{PAGE_URL}"' in html
    assert "Download everything" in html
    assert "<strong>2</strong> memories" in html
    assert "<strong>1</strong> work item," in html


def test_only_get_is_allowed(client, alice, seeded):
    client.force_login(alice)
    assert client.post(PAGE_URL).status_code == 405


def test_a_document_clashing_with_an_agent_folder_keeps_both(alice, alice_agent, seeded):
    # context/services.py keeps "agents/" for agents' folders; a row from before that rule
    # (or written by hand) must still come out, beside the agent's own document.
    Document.objects.create(user=alice, path="agents/assistant/AGENT_MEMORY.md", body="mine")
    sink = io.BytesIO()
    write_export(alice, sink)
    archive = zipfile.ZipFile(sink)
    manifest = json.loads(archive.read("manifest.json"))
    documents = {
        name: (entry["agent"], entry["path"], archive.read(name))
        for name, entry in manifest["files"].items()
        if name.startswith("documents/")
    }
    assert sorted(documents.values(), key=str) == sorted(
        [
            (None, "notes/plan.md", b"# Plan\n\nShip it.\n"),
            (None, "agents/assistant/AGENT_MEMORY.md", b"mine"),
            (
                "assistant",
                "AGENT_MEMORY.md",
                Document.objects.get(agent=alice_agent).body.encode(),
            ),
        ],
        key=str,
    )
    assert len(archive.namelist()) == len(set(archive.namelist()))


def test_work_front_matter_values_are_json():
    item = {
        "title": 'A "quoted"\ntitle',
        "kind": "draft",
        "status": "in_progress",
        "tags": [],
        "agent__name": None,
        "metadata": {},
        "created_at": None,
        "updated_at": None,
        "body": "---\nnot front matter\n",
    }
    text = work_markdown(item)
    head, body = text.split("\n---\n", 1)
    assert body == "---\nnot front matter\n"
    parsed = dict(line.split(": ", 1) for line in head.splitlines()[1:])
    assert json.loads(parsed["title"]) == 'A "quoted"\ntitle'
    assert json.loads(parsed["agent"]) is None
    assert list(parsed) == list(fmt.WORK_FRONT_MATTER)


def test_a_large_account_streams_in_bounded_memory(alice, monkeypatch):
    """3,000 memories of ~1,900 incompressible characters: several MB of archive, made
    while holding only a page of rows and a chunk of output."""
    monkeypatch.setattr(export_module, "PAGE_SIZE", 100)
    hexes = [random.Random(n).randbytes(950).hex() for n in range(3000)]
    Memory.objects.bulk_create(
        Memory(
            user=alice,
            key=f"fact:item-{n:05d}",
            value=hexes[n][:1900],
            source=Source.USER_STATED,
            confidence=1.0,
        )
        for n in range(3000)
    )
    ActivityEvent.objects.bulk_create(
        ActivityEvent(
            user=alice,
            event_type=EventType.MEMORY_WRITTEN,
            payload={"key": f"fact:item-{n:05d}", "note": hexes[n][:500]},
            actor_type="user",
            actor_user=alice,
        )
        for n in range(3000)
    )
    del hexes
    total = chunks = 0
    digest = hashlib.sha256()
    tracemalloc.start()
    try:
        for chunk in export_chunks(alice, chunk_bytes=64 * 1024):
            total += len(chunk)
            chunks += 1
            digest.update(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 2_500_000  # the archive is large…
    assert chunks > 20  # …it went out in many pieces…
    assert peak < 2_000_000, peak  # …and never sat in memory whole
    sink = io.BytesIO()
    write_export(alice, sink)
    archive = zipfile.ZipFile(sink)
    assert len(lines(archive, "memories.jsonl")) == 3000
    assert len(lines(archive, "activity.jsonl")) == 3000
