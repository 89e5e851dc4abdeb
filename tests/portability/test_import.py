"""Import of a Mnemo export (portability/importing.py, portability/applying.py): the round
trip, merge and replace, refusals of bad input item by item, isolation, the job and its
page."""

from __future__ import annotations

import hashlib
import io
import json
import tracemalloc
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent
from context.models import Document
from memory.models import Memory, MemoryHistory
from memory.services import memory_upsert
from portability import format as fmt
from portability.export import write_export
from portability.importing import import_job_create, import_job_run
from portability.models import ImportJob, ImportStatus
from portability.validation.reading import MAX_LINE_BYTES, jsonl_records, member_digest
from tests.factories import UserFactory
from work.models import WorkItem


def export_bytes(user) -> bytes:
    buffer = io.BytesIO()
    write_export(user, buffer)
    return buffer.getvalue()


def run_import(user, data: bytes, mode: str = "merge") -> ImportJob:
    upload = SimpleUploadedFile("export.zip", data, content_type="application/zip")
    job = import_job_create(user=user, kind="mnemo", mode=mode, upload=upload)
    import_job_run(job.pk)
    job.refresh_from_db()
    return job


def make_archive(
    files: dict[str, bytes], *, manifest: dict | None = None, hashes: dict | None = None
) -> bytes:
    """A hand-made archive: `files` plus a manifest hashing them (overridable)."""
    entries = {
        name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        for name, data in files.items()
    }
    entries.update(hashes or {})
    body = {
        "format": fmt.FORMAT,
        "format_version": fmt.FORMAT_VERSION,
        "exported_at": "2025-01-01T00:00:00+00:00",
        "user": "someone",
        "counts": {},
        "files": entries,
        **(manifest or {}),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(fmt.MANIFEST, json.dumps(body))
    return buffer.getvalue()


def memory_line(key: str, value: str, updated_at: str = "2030-01-01T00:00:00+00:00") -> bytes:
    record = {
        "key": key,
        "value": value,
        "source": "user_stated",
        "confidence": 1.0,
        "tags": [],
        "pinned": False,
        "access_count": 0,
        "last_accessed_at": None,
        "created_at": updated_at,
        "updated_at": updated_at,
    }
    return json.dumps(record).encode() + b"\n"


def _archive_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _memories(members: dict[str, bytes]) -> list[dict]:
    fields = ("key", "value", "source", "confidence", "tags", "pinned")
    return [
        {name: record[name] for name in fields}
        for record in map(json.loads, members[fmt.MEMORIES].splitlines())
    ]


def _work(members: dict[str, bytes]) -> list[tuple[str, str]]:
    """Each work file's front matter without its times, and its body."""
    result = []
    for name in sorted(n for n in members if n.startswith(fmt.WORK_DIR)):
        text = members[name].decode()
        lines = [
            line for line in text.split("\n") if not line.startswith(("created_at:", "updated_at:"))
        ]
        result.append("\n".join(lines))
    return result


@pytest.mark.django_db
def test_round_trip_export_import_export(alices_account):
    first = export_bytes(alices_account)
    newcomer = UserFactory(username="newcomer")

    job = run_import(newcomer, first)

    assert job.status == ImportStatus.DONE, job.error
    assert job.refused == 0, job.items
    assert job.summary["sections"]["memories"]["created"] == 3
    again = _archive_members(export_bytes(newcomer))
    before = _archive_members(first)
    assert _memories(again) == _memories(before)
    documents = sorted(n for n in before if n.startswith(fmt.DOCUMENTS_DIR))
    assert documents == ["documents/agents/assistant/AGENT_MEMORY.md", "documents/projects/plan.md"]
    assert documents == sorted(n for n in again if n.startswith(fmt.DOCUMENTS_DIR))
    assert all(again[name] == before[name] for name in documents)
    assert _work(again) == _work(before)
    assert json.loads(again[fmt.PROFILE]) == json.loads(before[fmt.PROFILE])


@pytest.mark.django_db
def test_import_into_the_same_account_changes_nothing(alices_account):
    data = export_bytes(alices_account)
    history = MemoryHistory.objects.filter(user=alices_account).count()

    job = run_import(alices_account, data)

    assert (job.created, job.updated, job.refused) == (0, 0, 0)
    assert job.skipped == 3 + 2 + 1 + 1 + 1  # memories, documents, work, settings, agent
    assert MemoryHistory.objects.filter(user=alices_account).count() == history
    assert WorkItem.objects.filter(user=alices_account).count() == 1


@pytest.mark.django_db
def test_merge_newer_wins_and_history_is_kept(alice):
    user = Actor.for_user(alice)
    memory_upsert(user=alice, key="fact:city", value="Lives in Paris", actor=user)
    memory_upsert(user=alice, key="fact:job", value="Baker", actor=user)
    Memory.objects.filter(user=alice, key="fact:job").update(
        updated_at=timezone.now() + timedelta(days=3650 * 2)
    )
    lines = (
        memory_line("fact:city", "Lives in Lyon")  # 2030: newer than now
        + memory_line("fact:job", "Teacher")  # older than the row's (now + 20 years)
        + memory_line("fact:new", "Has a cat")
    )

    job = run_import(alice, make_archive({fmt.MEMORIES: lines}))

    values = dict(Memory.objects.filter(user=alice).values_list("key", "value"))
    assert values == {"fact:city": "Lives in Lyon", "fact:job": "Baker", "fact:new": "Has a cat"}
    assert (job.created, job.updated, job.skipped) == (1, 1, 1)
    city = MemoryHistory.objects.filter(user=alice, key="fact:city").order_by("created_at")
    assert [h.after["value"] for h in city] == ["Lives in Paris", "Lives in Lyon"]
    skipped = next(i for i in job.items if i["item"] == "fact:job")
    assert skipped["reason"].startswith("Yours is newer")


@pytest.mark.django_db
def test_replace_deletes_first_then_imports(alices_account, alice):
    data = make_archive({fmt.MEMORIES: memory_line("fact:only", "The only memory")})

    job = run_import(alice, data, mode="replace")

    assert job.status == ImportStatus.DONE
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == ["fact:only"]
    assert not Document.objects.filter(user=alice).exists()
    assert not WorkItem.objects.live().filter(user=alice).exists()
    # The work item waits in Recently deleted, restorable as it was.
    assert list(WorkItem.objects.deleted().filter(user=alice).values_list("title", flat=True)) == [
        "Weekly report"
    ]
    # Deleted through the write path: the history keeps what was there.
    assert MemoryHistory.objects.filter(user=alice, key="name", action="delete").count() == 1
    deleted = ActivityEvent.objects.filter(user=alice, event_type="work_deleted")
    assert [e.payload["title"] for e in deleted] == ["Weekly report"]
    assert job.percent == 100


@pytest.mark.django_db
def test_replace_does_not_delete_when_the_archive_is_refused(alices_account, alice):
    data = make_archive({}, manifest={"format_version": 2})

    job = run_import(alice, data, mode="replace")

    assert job.status == ImportStatus.FAILED
    assert "format_version is 2" in job.error
    assert Memory.objects.filter(user=alice).count() == 3
    assert Document.objects.filter(user=alice).count() == 2


@pytest.mark.django_db
def test_wrong_format_is_refused(alice):
    job = run_import(alice, make_archive({}, manifest={"format": "other-tool"}))
    assert job.status == ImportStatus.FAILED
    assert "not a Mnemo export" in job.error
    job = run_import(alice, b"not a zip at all")
    assert job.status == ImportStatus.FAILED
    assert job.error.startswith("The file is not a zip archive")


@pytest.mark.django_db
def test_bad_lines_and_keys_are_refused_one_by_one(alice):
    lines = (
        memory_line("fact:good", "Good one")
        + b"{not json\n"
        + memory_line("Fact:Bad Key", "Bad key")
        + b"[1, 2]\n"
        + memory_line("fact:empty", "   ")
        + memory_line("fact:also-good", "Another")
    )

    job = run_import(alice, make_archive({fmt.MEMORIES: lines}))

    keys = set(Memory.objects.filter(user=alice).values_list("key", flat=True))
    assert keys == {"fact:good", "fact:also-good"}
    refused = [(i["item"], i["reason"]) for i in job.items if i["outcome"] == "refused"]
    assert [item for item, _ in refused] == [
        "memories.jsonl line 2",
        "memories.jsonl line 3",
        "memories.jsonl line 4",
        "memories.jsonl line 5",
    ]
    assert refused[0][1].startswith("Line 2 is not JSON")
    assert "Unknown key" in refused[1][1] or "key" in refused[1][1].lower()
    assert refused[2][1] == "Line 4 is not a JSON object."
    assert refused[3][1] == "Value is empty."
    assert not MemoryHistory.objects.filter(user=alice, key="fact:empty").exists()


@pytest.mark.django_db
def test_a_member_whose_hash_does_not_match_is_refused_whole(alice):
    lines = memory_line("fact:a", "A") + memory_line("fact:b", "B")
    data = make_archive(
        {fmt.MEMORIES: lines}, hashes={fmt.MEMORIES: {"sha256": "0" * 64, "bytes": len(lines)}}
    )

    job = run_import(alice, data)

    assert not Memory.objects.filter(user=alice).exists()
    assert job.items[0]["item"] == fmt.MEMORIES
    assert "SHA-256" in job.items[0]["reason"]
    assert job.refused == 1


@pytest.mark.django_db
def test_a_zip_bomb_is_refused_before_extracting(alice):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(fmt.MEMORIES, b"\n" * (64 * 1024 * 1024))  # 64 MB → ~64 KB
        archive.writestr(fmt.MANIFEST, b"{}")

    job = run_import(alice, buffer.getvalue())

    assert job.status == ImportStatus.FAILED
    assert "zip bomb" in job.error
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_import_never_touches_another_user(alices_account, bob):
    user = Actor.for_user(bob)
    memory_upsert(user=bob, key="fact:likes-tea", value="Hates tea", actor=user)

    run_import(alices_account, export_bytes(alices_account), mode="replace")

    assert list(Memory.objects.filter(user=bob).values_list("value", flat=True)) == ["Hates tea"]
    assert Memory.objects.filter(user=alices_account).count() == 3


@pytest.mark.django_db
def test_a_job_runs_once(alice):
    upload = SimpleUploadedFile("e.zip", make_archive({fmt.MEMORIES: memory_line("fact:a", "A")}))
    job = import_job_create(user=alice, kind="mnemo", mode="merge", upload=upload)
    stored = job.file.path
    import_job_run(job.pk)
    import_job_run(job.pk)  # the message delivered again
    job.refresh_from_db()
    assert MemoryHistory.objects.filter(user=alice).count() == 1
    assert (job.status, job.created) == (ImportStatus.DONE, 1)
    assert not job.file  # the upload is deleted when the job ends
    assert not Path(stored).exists()


def test_members_are_read_in_bounded_memory(tmp_path):
    line = memory_line("fact:x", "y" * 200)
    path = tmp_path / "big.zip"
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open(fmt.MEMORIES, "w", force_zip64=True) as member,
    ):
        for _ in range(200_000):  # ~60 MB uncompressed
            member.write(line)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(fmt.MEMORIES)
        tracemalloc.start()
        count = sum(1 for _, record, _ in jsonl_records(archive, info) if record is not None)
        digest, size = member_digest(archive, info)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert count == 200_000
    assert size == info.file_size > 50 * 1024 * 1024
    assert len(digest) == 64
    assert peak < 8 * 1024 * 1024 < MAX_LINE_BYTES * 2


# --- the pages and the task ----------------------------------------------------------------


@pytest.mark.django_db
def test_the_upload_sends_the_task_on_commit(
    client, alice, monkeypatch, django_capture_on_commit_callbacks
):
    from portability import tasks

    sent: list[int] = []
    monkeypatch.setattr(tasks.run_import, "delay", sent.append)
    client.force_login(alice)
    upload = SimpleUploadedFile("m.txt", b"Likes jazz\n")

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/settings/import/", {"file": upload, "kind": "chatgpt", "mode": "merge"}
        )

    job = ImportJob.objects.get(user=alice)
    assert response.status_code == 302
    assert response["Location"] == f"/settings/import/{job.pk}/"
    assert sent == [job.pk]
    assert job.status == ImportStatus.PENDING


@pytest.mark.django_db
def test_replace_needs_the_confirmation(client, alice):
    client.force_login(alice)
    upload = SimpleUploadedFile("e.zip", make_archive({}))
    response = client.post(
        "/settings/import/", {"file": upload, "kind": "mnemo", "mode": "replace"}
    )
    assert response.status_code == 400
    assert "tick the box to confirm" in response.content.decode()
    assert not ImportJob.objects.exists()


@pytest.mark.django_db
def test_the_job_page_polls_then_shows_the_summary(client, alice, bob):
    job = import_job_create(
        user=alice,
        kind="chatgpt",
        mode="merge",
        upload=SimpleUploadedFile("m.txt", b"Likes jazz\n"),
    )
    client.force_login(alice)
    running = client.get(job.url(), headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every 1s"' in running
    assert "<html" not in running  # the partial only

    import_job_run(job.pk)
    done = client.get(job.url()).content.decode()
    assert 'hx-trigger="every 1s"' not in done
    assert 'value="100"' in done
    assert "preference:likes-jazz" in done

    client.force_login(bob)
    assert client.get(job.url()).status_code == 404
    assert client.get("/settings/").content.decode().count('href="/settings/import/"') == 1


@pytest.mark.django_db(transaction=True)
def test_the_web_door_lets_an_archive_through_to_the_import_page_only():
    """lib/asgi.py refuses bodies over MNEMO_API_MAX_BODY_BYTES (4 MiB) everywhere but the
    import page, which takes up to MNEMO_IMPORT_MAX_MB."""
    from tests.test_errors import asgi_call

    archive_sized = [(b"content-length", str(50 * 1024 * 1024).encode())]
    too_big = [(b"content-length", str(300 * 1024 * 1024).encode())]

    assert asgi_call("/settings/import/", archive_sized)[0] != 413
    assert asgi_call("/settings/import/", too_big)[0] == 413
    assert asgi_call("/settings/export/", archive_sized)[0] == 413
