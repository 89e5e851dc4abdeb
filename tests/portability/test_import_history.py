"""What an import keeps besides the current state (portability/importing.py,
portability/replaying.py): the earlier history of the memories and documents it creates,
agents' descriptions, and jobs whose worker stopped (beat's sweep sends them again, up to
three attempts)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.admin.sites import site
from django.urls import reverse
from django.utils import timezone

from activity.actors import Actor
from context.models import DocumentVersion
from context.services import document_write
from memory.models import MemoryHistory
from memory.outcomes import DuplicateMemory
from memory.services import memory_upsert
from portability import format as fmt
from portability import importing, tasks
from portability.models import ImportJob, ImportStatus
from profiles.models import Agent
from profiles.services import agent_get_or_create
from tests.factories import UserFactory
from tests.portability.test_import import (
    _archive_members,
    export_bytes,
    make_archive,
    memory_line,
    run_import,
)


def _lines(members: dict[str, bytes], name: str) -> list[dict]:
    return [json.loads(line) for line in members[name].splitlines()]


@pytest.fixture
def alice_with_history(alices_account):
    """Alice's account, where her agent also changed a memory and a document."""
    agent = Agent.objects.get(user=alices_account, name="assistant")
    by_agent = Actor.for_agent(agent)
    memory_upsert(
        user=alices_account,
        key="fact:likes-tea",
        value="Drinks green tea, never after six",
        actor=by_agent,
        confidence=0.7,
    )
    document_write(
        user=alices_account,
        path="projects/plan.md",
        content="# Plan\n\nShip it on Friday.\n",
        actor=by_agent,
    )
    return alices_account


@pytest.mark.django_db
def test_the_history_of_what_the_import_created_comes_along(alice_with_history):
    first = _archive_members(export_bytes(alice_with_history))
    newcomer = UserFactory(username="newcomer")
    started = timezone.now()

    job = run_import(newcomer, export_bytes(alice_with_history))

    assert job.status == ImportStatus.DONE, job.error
    assert job.refused == 0, job.items
    again = _archive_members(export_bytes(newcomer))
    for name in (fmt.MEMORY_HISTORY, fmt.DOCUMENT_VERSIONS):
        original = _lines(first, name)
        kept = [row for row in _lines(again, name) if row["created_at"] < started.isoformat()]
        own = [row for row in _lines(again, name) if row["created_at"] >= started.isoformat()]
        # Every earlier row, with its own actor and time, in order; then the import's own.
        assert kept == original
        assert {row["actor"]["type"] for row in own} == {"user"}
        assert len(own) == (3 if name == fmt.MEMORY_HISTORY else 2)
    sections = job.summary["sections"]
    assert sections["memory history"]["created"] == len(_lines(first, fmt.MEMORY_HISTORY))
    assert sections["document versions"]["created"] == len(_lines(first, fmt.DOCUMENT_VERSIONS))
    # The agent's change is the agent's in the new account too, linked to the memory.
    tea = MemoryHistory.objects.filter(user=newcomer, key="fact:likes-tea").order_by("created_at")
    assert [(h.actor_type, h.actor_agent.name if h.actor_agent else None) for h in tea] == [
        ("user", None),
        ("agent", "assistant"),
        ("user", None),
    ]
    assert all(h.memory is not None for h in tea)
    plan = DocumentVersion.objects.filter(user=newcomer, path="projects/plan.md")
    assert list(plan.order_by("created_at").values_list("body", flat=True)) == [
        "# Plan\n\nShip it.\n",
        "# Plan\n\nShip it on Friday.\n",
        "# Plan\n\nShip it on Friday.\n",
    ]


@pytest.mark.django_db
def test_history_is_not_replayed_into_memories_the_account_had(alice_with_history):
    data = export_bytes(alice_with_history)
    rows = MemoryHistory.objects.filter(user=alice_with_history).count()
    versions = DocumentVersion.objects.filter(user=alice_with_history).count()

    job = run_import(alice_with_history, data)

    assert job.created == 0
    assert MemoryHistory.objects.filter(user=alice_with_history).count() == rows
    assert DocumentVersion.objects.filter(user=alice_with_history).count() == versions
    assert "memory history" not in job.summary["sections"]


CAT = {
    "value": "Has a cat",
    "source": "user_stated",
    "confidence": 1.0,
    "tags": [],
    "pinned": False,
}


def _history_line(key: str, **changes) -> bytes:
    record = {
        "key": key,
        "action": "create",
        "source": "user_stated",
        "before": None,
        "after": CAT,
        "actor": {"type": "user", "agent": None},
        "created_at": "2024-05-01T10:00:00+00:00",
        **changes,
    }
    return json.dumps(record).encode() + b"\n"


@pytest.mark.django_db
def test_a_history_line_that_cannot_be_kept_is_refused_alone(alice):
    future = (timezone.now() + timedelta(days=2)).isoformat()
    history = (
        _history_line("fact:cat")
        + _history_line("fact:cat", action="explode")
        + _history_line("fact:cat", action="delete")  # a delete holds a state before
        + _history_line("fact:cat", created_at=future)
        + _history_line("fact:cat", actor={"type": "robot"})
        + _history_line("fact:cat", action="update", before=CAT)
    )
    data = make_archive(
        {fmt.MEMORIES: memory_line("fact:cat", "Has a cat"), fmt.MEMORY_HISTORY: history}
    )

    job = run_import(alice, data)

    refused = {i["item"]: i["reason"] for i in job.items if i["outcome"] == "refused"}
    assert refused == {
        "memory_history.jsonl line 2": "'explode' is not a history action.",
        "memory_history.jsonl line 3": "A 'delete' change with these states cannot have happened.",
        "memory_history.jsonl line 4": "It is dated in the future.",
        "memory_history.jsonl line 5": "Refused: its actor's type is not user, agent or system.",
    }
    kept = MemoryHistory.objects.filter(user=alice, key="fact:cat").order_by("created_at", "id")
    assert [h.action for h in kept] == ["create", "update", "create"]
    assert kept[0].created_at.year == 2024
    assert job.summary["sections"]["memory history"]["created"] == 2


@pytest.mark.django_db
def test_agents_descriptions_merge_fills_and_replace_takes(alice):
    agent_get_or_create(user=alice, name="assistant", description="")
    agent_get_or_create(user=alice, name="coder", description="Mine")
    profile = {
        "agents": [
            {
                "name": "assistant",
                "display_name": "Desk Assistant",
                "description": "Desk helper",
                "learns_from_turns": True,
            },
            {"name": "coder", "description": "Writes code", "learns_from_turns": True},
        ]
    }
    # Replace starts only on an archive bringing a memory, document or work item.
    memories = memory_line("fact:cat", "Has a cat")
    data = make_archive({fmt.PROFILE: json.dumps(profile).encode(), fmt.MEMORIES: memories})

    merged = run_import(alice, data)

    agents = {a.name: a for a in Agent.objects.filter(user=alice)}
    assert agents["assistant"].description == "Desk helper"  # it had none
    assert agents["assistant"].display_name == "Desk Assistant"
    assert agents["coder"].description == "Mine"  # the user's own is kept
    # Learning from turns is a consent: a merge never switches it on for an existing agent.
    assert not agents["assistant"].learns_from_turns
    outcomes = {i["item"]: i["outcome"] for i in merged.items if i["section"] == "agents"}
    assert outcomes == {"assistant": "updated", "coder": "skipped"}

    run_import(alice, data, mode="replace")

    agents = {a.name: a for a in Agent.objects.filter(user=alice)}
    assert agents["coder"].description == "Writes code"
    assert agents["coder"].learns_from_turns


# --- jobs whose worker stopped ---------------------------------------------------------


def _job(user, **fields) -> ImportJob:
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("mine.txt", b"Likes green tea\n", content_type="text/plain")
    job = importing.import_job_create(user=user, kind="chatgpt", mode="merge", upload=upload)
    ImportJob.objects.filter(pk=job.pk).update(**fields)
    job.refresh_from_db()
    return job


@pytest.mark.django_db
def test_a_job_whose_worker_stopped_is_sent_again_and_finishes(alice, monkeypatch):
    long_ago = timezone.now() - importing.IMPORT_LEASE - timedelta(seconds=1)
    stopped = _job(alice, status=ImportStatus.RUNNING, attempts=1, progressed_at=long_ago)
    working = _job(alice, status=ImportStatus.RUNNING, attempts=1, progressed_at=timezone.now())
    lost = _job(alice, created_at=timezone.now() - importing.UNSENT_GRACE * 2)
    fresh = _job(alice)
    sent: list[int] = []
    monkeypatch.setattr(tasks.run_import, "delay", sent.append)

    importing.import_job_run(working.pk)  # its worker is alive: not taken from it
    tasks.sweep_imports()

    assert ImportJob.objects.get(pk=working.pk).attempts == 1
    assert sorted(sent) == [stopped.pk, lost.pk]
    for job_id in sent:  # what the worker does with each message
        tasks.run_import(job_id)
    stopped.refresh_from_db()
    assert (stopped.status, stopped.attempts, stopped.file.name) == (ImportStatus.DONE, 2, "")
    assert stopped.summary["notes"][0].startswith("Attempt 2: an earlier attempt stopped")
    lost.refresh_from_db()
    assert lost.status == ImportStatus.DONE
    assert stopped.created + lost.created == 1  # the same line: the second finds it there
    assert ImportJob.objects.get(pk=fresh.pk).status == ImportStatus.PENDING
    sent.clear()
    tasks.sweep_imports()
    assert sent == []  # nothing is sent twice once done


@pytest.mark.django_db
def test_a_job_that_stopped_on_its_last_attempt_fails_and_drops_its_file(alice):
    long_ago = timezone.now() - importing.IMPORT_LEASE - timedelta(seconds=1)
    job = _job(alice, status=ImportStatus.RUNNING, attempts=3, progressed_at=long_ago)
    path = job.file.path

    assert importing.stalled_import_ids() == []
    importing.import_job_run(job.pk)  # no attempts left: not run
    assert importing.fail_exhausted_imports() == 1

    job.refresh_from_db()
    assert job.status == ImportStatus.FAILED
    assert job.error.startswith("The import stopped 3 times without finishing")
    assert job.file.name == ""
    assert not Path(path).exists()


@pytest.mark.django_db
def test_the_admin_shows_jobs_read_only(admin_client, alice):
    job = _job(alice)
    assert ImportJob in site._registry

    listing = admin_client.get(reverse("admin:portability_importjob_changelist"))
    page = admin_client.get(reverse("admin:portability_importjob_change", args=[job.pk]))

    assert listing.status_code == page.status_code == 200
    assert b"mine.txt" in page.content
    assert b'name="_save"' not in page.content
    add = admin_client.get(reverse("admin:portability_importjob_add"))
    assert add.status_code == 403


@pytest.mark.django_db
def test_a_note_merged_into_a_memory_comes_along_in_its_history(alice_with_history):
    agent = Agent.objects.get(user=alice_with_history, name="assistant")
    with pytest.raises(DuplicateMemory):  # adds nothing to fact:likes-tea: merged (issue 26)
        memory_upsert(
            user=alice_with_history,
            key="fact:green-tea",
            value="Drinks green tea",
            actor=Actor.for_agent(agent),
        )
    newcomer = UserFactory(username="newcomer")

    job = run_import(newcomer, export_bytes(alice_with_history))

    assert job.status == ImportStatus.DONE, job.error
    assert job.refused == 0, job.items
    merge = MemoryHistory.objects.get(user=newcomer, action="merge")
    assert (merge.key, merge.after["merged"], merge.actor_agent.name) == (
        "fact:likes-tea",
        {"value": "Drinks green tea"},
        "assistant",
    )
    assert merge.memory.value == "Drinks green tea, never after six"


@pytest.mark.django_db
def test_an_agents_display_name_in_any_script_goes_out_and_comes_back(alice):
    from profiles.services import agent_create

    agent_create(user=alice, display_name="Асистент", description="Помогает")
    data = export_bytes(alice)
    Agent.objects.filter(user=alice).delete()
    # An older archive has no display name: its agent still comes in, named by its name.
    older = {"agents": [{"name": "coder", "description": "", "learns_from_turns": False}]}
    memories = memory_line("fact:cat", "Has a cat")

    run_import(alice, data)
    run_import(
        alice, make_archive({fmt.PROFILE: json.dumps(older).encode(), fmt.MEMORIES: memories})
    )

    agents = {a.name: a for a in Agent.objects.filter(user=alice)}
    assert (agents["asistent"].display_name, agents["asistent"].description) == (
        "Асистент",
        "Помогает",
    )
    assert (agents["coder"].display_name, agents["coder"].label) == ("", "coder")
