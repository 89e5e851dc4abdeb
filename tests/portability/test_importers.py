"""Importers from other tools (portability/importers.py), each on a fixture written from
the tool's public description of its export."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from activity.actors import ActorKind
from memory.models import Memory, MemoryHistory, MemoryProposal, Source
from portability.importers import parse_chatgpt, parse_claude, parse_mem0
from portability.importing import import_job_create, import_job_run
from portability.models import ImportJob, ImportStatus
from profiles.services import profile_update

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _imports_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path


def run(user, kind: str, name: str) -> ImportJob:
    upload = SimpleUploadedFile(name, (FIXTURES / name).read_bytes())
    job = import_job_create(user=user, kind=kind, mode="merge", upload=upload)
    import_job_run(job.pk)
    job.refresh_from_db()
    return job


def test_chatgpt_lines_become_entries_without_bullets():
    entries = parse_chatgpt((FIXTURES / "chatgpt_memories.txt").read_text())
    assert [e.text for e in entries] == [
        "Is a backend engineer at a logistics startup in Lyon.",
        "Prefers answers with code examples in Python.",
        "Has a dog named Biscuit.",
        "Is learning Japanese and practices on weekends.",
        "Is a backend engineer at a logistics startup in Lyon.",
    ]
    assert [e.kind for e in entries] == ["fact", "preference", "fact", "fact", "fact"]
    assert entries[0].tags == ["imported", "chatgpt"]


@pytest.mark.django_db
def test_chatgpt_import_stores_system_notes_and_dedupes(alice):
    job = run(alice, "chatgpt", "chatgpt_memories.txt")

    assert job.status == ImportStatus.DONE
    assert (job.total, job.created, job.skipped, job.refused) == (5, 4, 1, 0)
    rows = Memory.objects.filter(user=alice).order_by("key")
    assert {m.value for m in rows} == {
        "Is a backend engineer at a logistics startup in Lyon.",
        "Prefers answers with code examples in Python.",
        "Has a dog named Biscuit.",
        "Is learning Japanese and practices on weekends.",
    }
    assert {m.source for m in rows} == {Source.TP_EXTRACTED}
    assert {m.confidence for m in rows} == {0.8}
    assert Memory.objects.get(user=alice, key__startswith="preference:").tags == [
        "chatgpt",
        "imported",
    ]
    history = MemoryHistory.objects.filter(user=alice)
    assert history.count() == 4
    assert {h.actor_type for h in history} == {ActorKind.SYSTEM}
    assert job.items[-1]["outcome"] == "skipped"
    assert "already" in job.items[-1]["reason"]


def test_claude_sections_become_tags():
    entries = parse_claude((FIXTURES / "claude_memory.md").read_text())
    assert [(e.text, e.tags) for e in entries] == [
        ("Leads the data platform team at Acme.", ["imported", "claude", "work-context"]),
        (
            "Migrating the warehouse from Redshift to BigQuery this quarter.",
            ["imported", "claude", "work-context"],
        ),
        ("Lives in Lisbon with two children.", ["imported", "claude", "personal-context"]),
        ("Prefers concise answers without preamble.", ["imported", "claude", "personal-context"]),
    ]


@pytest.mark.django_db
def test_claude_import_waits_for_review_when_the_user_reviews(alice):
    profile_update(user=alice, review_agent_memories=True)

    job = run(alice, "claude", "claude_memory.md")

    assert (job.status, job.pending, job.created) == (ImportStatus.DONE, 4, 0)
    assert not Memory.objects.filter(user=alice).exists()
    proposals = MemoryProposal.objects.filter(user=alice)
    assert proposals.count() == 4
    assert {p.reason for p in proposals} == {"Imported from Claude"}
    assert "review inbox" in job.items[0]["reason"]


def test_mem0_keeps_text_time_and_categories():
    import json

    entries = parse_mem0(json.loads((FIXTURES / "mem0_export.json").read_text()))
    assert [e.text for e in entries] == [
        "Is vegetarian and allergic to nuts",
        "Prefers window seats on long flights",
        "Works remotely from Porto",
        "",
    ]
    assert entries[0].tags == ["imported", "mem0", "food", "health"]
    assert entries[1].tags == ["imported", "mem0", "travel", "user-preferences"]
    assert entries[0].created_at == datetime(2024, 7, 20, 8, 30, 0, 123456, tzinfo=UTC)
    assert parse_mem0([{"memory": "x"}])[0].text == "x"  # a bare list too


@pytest.mark.django_db
def test_mem0_import_keeps_created_time_and_refuses_empty(alice, bob):
    job = run(alice, "mem0", "mem0_export.json")

    assert (job.status, job.created, job.refused) == (ImportStatus.DONE, 3, 1)
    veg = Memory.objects.get(user=alice, value="Is vegetarian and allergic to nuts")
    assert veg.tags == ["food", "health", "imported", "mem0"]
    assert veg.created_at == datetime(2024, 7, 20, 8, 30, 0, 123456, tzinfo=UTC)
    refused = [item for item in job.items if item["outcome"] == "refused"]
    assert refused == [
        {"section": "memories", "item": "4", "outcome": "refused", "reason": "No memory text."}
    ]
    assert not Memory.objects.filter(user=bob).exists()


@pytest.mark.django_db
def test_not_a_mem0_export_fails_with_a_reason(alice):
    job = import_job_create(
        user=alice,
        kind="mem0",
        mode="merge",
        upload=SimpleUploadedFile("x.json", b'{"hello": 1}'),
    )
    import_job_run(job.pk)
    job.refresh_from_db()
    assert job.status == ImportStatus.FAILED
    assert job.error.startswith("Not a mem0 export")
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_a_paused_account_refuses_imported_notes(alice):
    profile_update(user=alice, memory_paused=True)
    job = run(alice, "chatgpt", "chatgpt_memories.txt")
    assert (job.refused, job.created) == (5, 0)
    assert "paused" in job.items[0]["reason"]
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_an_imported_credential_is_refused_and_reported_without_it(alice):
    """Other tools' memories are the system's notes: one that looks like a credential is
    skipped, said in the report with the secret left out, and the others are stored."""
    text = "- Likes green tea.\n- Wi-Fi password: GuestNet2024\n- Has a dog named Biscuit.\n"
    upload = SimpleUploadedFile("memories.txt", text.encode())
    job = import_job_create(user=alice, kind="chatgpt", mode="merge", upload=upload)
    import_job_run(job.pk)
    job.refresh_from_db()

    assert (job.status, job.created, job.refused) == (ImportStatus.DONE, 2, 1)
    assert [item for item in job.items if item["outcome"] == "refused"] == [
        {
            "section": "memories",
            "item": "2. Wi-Fi password: [removed: a password]",
            "outcome": "refused",
            "reason": "This looks like a password; Mnemo does not store credentials as memories.",
        }
    ]
    assert sorted(Memory.objects.filter(user=alice).values_list("value", flat=True)) == [
        "Has a dog named Biscuit.",
        "Likes green tea.",
    ]
    assert "GuestNet2024" not in str(ImportJob.objects.filter(pk=job.pk).values().get())
