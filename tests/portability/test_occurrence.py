"""A memory's time and session in export and import (issue 26): the archive carries them,
the import checks and keeps them, history lines carry them, and mem0's run and creation
time fill them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from activity.actors import Actor
from memory.models import Memory, MemoryHistory
from memory.services import memory_update, memory_upsert
from portability import format as fmt
from portability.importers import parse_chatgpt, parse_mem0
from portability.importing import import_job_create, import_job_run
from portability.models import ImportStatus
from tests.factories import UserFactory
from tests.portability.test_import import (
    _archive_members,
    export_bytes,
    make_archive,
    memory_line,
    run_import,
)

pytestmark = pytest.mark.django_db

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _lines(data: bytes, name: str) -> list[dict]:
    return [json.loads(line) for line in _archive_members(data)[name].splitlines()]


@pytest.fixture
def dated(alice):
    you = Actor.for_user(alice)
    memory_upsert(
        user=alice,
        key="fact:moved",
        value="Moved to Lisbon",
        actor=you,
        occurred_at=MAY_8,
        session="chat-42",
    )
    memory_update(user=alice, key="fact:moved", actor=you, value="Moved to Lisbon in May")
    memory_upsert(user=alice, key="fact:tea", value="Likes tea", actor=you)
    return alice


def test_the_export_carries_them_per_memory_and_in_history(dated):
    data = export_bytes(dated)

    memories = {line["key"]: line for line in _lines(data, fmt.MEMORIES)}
    assert (memories["fact:moved"]["occurred_at"], memories["fact:moved"]["session"]) == (
        "2023-05-08T13:56:00+00:00",
        "chat-42",
    )
    assert memories["fact:tea"]["session"] == ""
    history = [line for line in _lines(data, fmt.MEMORY_HISTORY) if line["key"] == "fact:moved"]
    assert [line["after"]["session"] for line in history] == ["chat-42", "chat-42"]
    assert history[0]["after"]["occurred_at"] == "2023-05-08T13:56:00+00:00"


def test_export_then_import_into_a_new_user_keeps_them(dated):
    newcomer = UserFactory(username="newcomer")

    job = run_import(newcomer, export_bytes(dated))

    assert (job.status, job.refused) == (ImportStatus.DONE, 0), job.items
    for key in ("fact:moved", "fact:tea"):
        original = Memory.objects.get(user=dated, key=key)
        imported = Memory.objects.get(user=newcomer, key=key)
        assert (imported.occurred_at, imported.session) == (
            original.occurred_at,
            original.session,
        )
    replayed = MemoryHistory.objects.filter(user=newcomer, key="fact:moved").order_by("id")
    assert [row.after["session"] for row in replayed] == ["chat-42", "chat-42", "chat-42"]
    # Importing it again into the same account changes nothing.
    again = run_import(newcomer, export_bytes(dated))
    assert (again.created, again.updated, again.refused) == (0, 0, 0)


def _line(key: str, **fields) -> bytes:
    record = json.loads(memory_line(key, "Likes tea"))
    return json.dumps(record | fields).encode() + b"\n"


def test_bad_times_and_sessions_are_refused_with_a_reason(alice):
    lines = (
        _line("fact:good", occurred_at="2023-05-08T13:56:00Z", session="chat-1")
        + _line("fact:word", occurred_at="yesterday")
        + _line("fact:number", occurred_at=20230508)
        + _line("fact:old", occurred_at="1492-10-12")
        + _line("fact:lines", session="a\nb")
        + _line("fact:long", session="x" * 101)
        + _line("fact:null", occurred_at=None, session=None)
    )

    job = run_import(alice, make_archive({fmt.MEMORIES: lines}))

    assert job.status == ImportStatus.DONE
    refused = {i["item"]: i["reason"] for i in job.items if i["outcome"] == "refused"}
    assert refused == {
        "memories.jsonl line 2": "occurred_at 'yesterday' is not an ISO 8601 date or date-time "
        "(e.g. 2023-05-08, 2023-05-08T13:56:00 or 2023-05-08T13:56:00+02:00).",
        "memories.jsonl line 3": "Refused: its 'occurred_at' is not text or null.",
        "memories.jsonl line 4": "occurred_at must fall between the years 1900 and 2200.",
        "memories.jsonl line 5": "session must be one line, without control characters.",
        "memories.jsonl line 6": "session is 101 characters long; the longest allowed is 100.",
    }
    good = Memory.objects.get(user=alice, key="fact:good")
    assert (good.occurred_at, good.session) == (datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "chat-1")
    assert set(Memory.objects.filter(user=alice).values_list("key", flat=True)) == {
        "fact:good",
        "fact:null",
    }


def test_an_archive_from_before_them_imports_as_said_now(alice):
    before = timezone.now()

    run_import(alice, make_archive({fmt.MEMORIES: memory_line("fact:tea", "Likes tea")}))

    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert before <= memory.occurred_at <= timezone.now()
    assert memory.session == ""


def test_a_history_line_with_a_bad_time_is_refused_alone(alice):
    state = {"value": "Has a cat", "source": "user_stated", "confidence": 1.0, "tags": []}
    state["pinned"] = False

    def history_line(**after) -> bytes:
        record = {
            "key": "fact:cat",
            "action": "create",
            "source": "user_stated",
            "before": None,
            "after": state | after,
            "actor": {"type": "user", "agent": None},
            "created_at": "2024-01-01T00:00:00+00:00",
        }
        return json.dumps(record).encode() + b"\n"

    data = make_archive(
        {
            fmt.MEMORIES: memory_line("fact:cat", "Has a cat"),
            fmt.MEMORY_HISTORY: history_line(occurred_at="2023-05-08T00:00:00Z", session="s")
            + history_line(occurred_at="last spring")
            + history_line(),  # an older archive's state
        }
    )

    job = run_import(alice, data)

    refused = {i["item"]: i["reason"] for i in job.items if i["outcome"] == "refused"}
    assert list(refused) == ["memory_history.jsonl line 2"]
    assert "its occurred_at is not an ISO 8601 date-time" in refused["memory_history.jsonl line 2"]
    kept = MemoryHistory.objects.filter(user=alice, key="fact:cat").order_by("created_at", "id")
    assert [row.after.get("session") for row in kept] == ["s", None, ""]


def test_mem0s_run_and_creation_time_become_session_and_occurred_at(alice):
    export = [
        {
            "memory": "Is vegetarian",
            "run_id": "onboarding-chat",
            "created_at": "2024-07-20T01:30:00-07:00",
        },
        {"memory": "Walks to work", "run_id": "x" * 101, "created_at": "2350-01-01T00:00:00Z"},
        {"memory": "Has a bike", "run_id": 42},
    ]
    upload = SimpleUploadedFile("mem0.json", json.dumps(export).encode())
    job = import_job_create(user=alice, kind="mem0", mode="merge", upload=upload)

    import_job_run(job.pk)

    job.refresh_from_db()
    assert (job.status, job.created, job.refused) == (ImportStatus.DONE, 3, 0), job.items
    veg = Memory.objects.get(user=alice, value="Is vegetarian")
    assert (veg.occurred_at, veg.session) == (
        datetime(2024, 7, 20, 8, 30, tzinfo=UTC),
        "onboarding-chat",
    )
    # A run id that is no session's name and a time no memory may have are left out.
    walks = Memory.objects.get(user=alice, value="Walks to work")
    assert walks.session == ""
    assert walks.occurred_at.year == timezone.now().year
    assert Memory.objects.get(user=alice, value="Has a bike").session == "42"
    assert [entry.session for entry in parse_mem0(export)] == ["onboarding-chat", "", "42"]


def test_chatgpt_says_neither():
    [entry] = parse_chatgpt("- Has a dog named Biscuit.")

    assert (entry.created_at, entry.session) == (None, "")
