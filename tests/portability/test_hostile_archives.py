"""Hostile archives (issue 25, "Imports that cannot hurt"): each ends, within a deadline,
`failed` or `done` with its refusals and a clear reason; nothing is half-applied (an
archive refused whole leaves the account exactly as it was, replace included); and the
pages that read what an import writes answer afterwards (the job page, the working memory
now and as of a past time, the preview, the history pages, the document versions).
Archives are made by tests/portability/zips.py."""

from __future__ import annotations

import importlib
import io
import json
import os
import stat
import time
import warnings
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DataError, connection
from django.urls import reverse
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent
from context.models import Document, DocumentVersion
from context.services import document_write
from memory.models import Memory, MemoryHistory
from memory.services import memory_upsert
from portability import applying, importing
from portability import format as fmt
from portability.importing import import_job_create, import_job_run
from portability.models import ImportJob, ImportStatus
from portability.report import MAX_LISTED_REFUSALS, Report
from portability.validation.archive import MAX_RATIO, RATIO_FLOOR_BYTES
from portability.validation.reading import MAX_LINE_BYTES
from profiles.models import Agent, Profile
from profiles.services import agent_get_or_create, token_create
from tests.portability import zips
from work.models import WorkItem

DEADLINE_SECONDS = 10
GOOD = {
    "key": "fact:smuggled",
    "value": "Came with a hostile archive",
    "source": "user_stated",
    "confidence": 1.0,
    "tags": [],
    "pinned": False,
    "access_count": 0,
    "last_accessed_at": None,
    "created_at": "2030-01-01T00:00:00+00:00",
    "updated_at": "2030-01-01T00:00:00+00:00",
}
STATE = {
    "value": "Has a cat",
    "source": "user_stated",
    "confidence": 1.0,
    "tags": [],
    "pinned": False,
}
USER = {"type": "user", "agent": None}


def line(record: dict) -> bytes:
    return json.dumps(record).encode() + b"\n"


def memory(**changes: object) -> bytes:
    return line({**GOOD, **changes})


def history(**changes: object) -> bytes:
    record = {
        "key": "fact:smuggled",
        "action": "create",
        "source": "user_stated",
        "before": None,
        "after": {**STATE, "value": "Came with a hostile archive"},
        "actor": USER,
        "created_at": "2024-05-01T10:00:00+00:00",
    }
    return line({**record, **changes})


def run(user, data: bytes, mode: str = "merge", kind: str = "mnemo") -> ImportJob:
    """Import `data` as the Celery task would, and hold it to the deadline."""
    upload = SimpleUploadedFile("hostile.zip", data)
    job = import_job_create(user=user, kind=kind, mode=mode, upload=upload)
    started = time.monotonic()
    import_job_run(job.pk)
    elapsed = time.monotonic() - started
    job.refresh_from_db()
    assert elapsed < DEADLINE_SECONDS, f"the job took {elapsed:.1f} s"
    assert job.finished, job.status
    assert not job.file  # the upload is gone either way
    return job


def account_state(user) -> dict:
    """Everything of the account an import could write."""
    profile = Profile.objects.filter(user=user).values().first() or {}
    return {
        "memories": sorted(
            Memory.objects.filter(user=user).values_list(
                "key", "value", "source", "confidence", "tags", "pinned"
            )
        ),
        "documents": sorted(
            Document.objects.filter(user=user).values_list("agent__name", "path", "body"),
            key=str,
        ),
        "work": sorted(WorkItem.objects.live().filter(user=user).values_list("title", "body")),
        "history": MemoryHistory.objects.filter(user=user).count(),
        "versions": DocumentVersion.objects.filter(user=user).count(),
        "events": ActivityEvent.objects.filter(user=user).count(),
        "agents": sorted(
            Agent.objects.filter(user=user).values_list("name", "description", "display_name")
        ),
        "profile": {name: value for name, value in profile.items() if name != "updated_at"},
    }


@pytest.fixture
def account(alices_account):
    """Alice's account of every kind, with some history to read as of a past time."""
    user = Actor.for_user(alices_account)
    memory_upsert(user=alices_account, key="fact:city", value="Lives in Lyon", actor=user)
    document_write(
        user=alices_account, path="projects/plan.md", content="# Plan\n\nShip.\n", actor=user
    )
    return alices_account


@pytest.fixture
def pages(client):
    """pages(user, job): the pages that read what imports write answer, without a 500."""

    def check(user, job: ImportJob | None = None) -> None:
        token = _token(user)
        client.force_login(user)
        if job is not None:
            page = client.get(job.url())
            assert page.status_code == 200
            assert len(page.content) < 300_000
            assert 'hx-trigger="every' not in page.content.decode()  # it stopped polling
        preview = reverse("pages:context_preview")
        for as_of in ("2024-06-01T00:00", timezone.now().isoformat()[:16]):
            answer = client.get(preview, {"as_of": as_of}, headers={"HX-Request": "true"})
            assert answer.status_code == 200, as_of
        for as_of in ({}, {"as_of": "2024-06-01T00:00:00Z"}):
            api = client.get(
                "/api/v1/working-memory", as_of, headers={"Authorization": f"Bearer {token}"}
            )
            assert api.status_code == 200, api.content
        for row in MemoryHistory.objects.filter(user=user).order_by("-id")[:3]:
            assert client.get(reverse("pages:history_detail", args=[row.pk])).status_code == 200
        for version in DocumentVersion.objects.filter(user=user).order_by("-id")[:3]:
            page = reverse("pages:document_version", args=[version.pk])
            assert client.get(page).status_code == 200

    return check


def _bomb(size: int) -> bytes:
    return b"a" * size


def _noise(size: int) -> bytes:
    """Bytes that hardly compress, as hex text (so valid UTF-8)."""
    return os.urandom(size // 2).hex().encode()


def _quiet_build(**kwargs) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate it writes
        return zips.build(**kwargs)


def _good(**more: bytes) -> dict[str, bytes]:
    return {fmt.MEMORIES: memory(), **more}


def _truncated_in_the_middle() -> bytes:
    data = zips.build(_good(**{"documents/a.md": _noise(4000)}))
    return data[:200] + data[1200:]


def _manifest_deep() -> bytes:
    """Stored, so the ratio check lets it through to the parser."""
    deep = b"[" * 50_000 + b"]" * 50_000
    body = b'{"format": "mnemo-export", "format_version": 1, "files": {}, "x": ' + deep + b"}"
    return zips.build(_good(), manifest_bytes=body, compression=zipfile.ZIP_STORED)


WHOLE_ARCHIVE_REFUSALS = {
    # names
    "traversal": (lambda: zips.build(_good(), unlisted={"documents/../../up.md": b"x"}), "leaves"),
    "dot-dot": (lambda: zips.build(_good(), unlisted={"../evil.md": b"x"}), "leaves"),
    "absolute": (lambda: zips.build(_good(), unlisted={"/etc/passwd": b"x"}), "absolute"),
    "backslash": (lambda: zips.build(_good(), unlisted={"documents\\w.md": b"x"}), "backslash"),
    "drive": (lambda: zips.build(_good(), unlisted={"C:/w.md": b"x"}), "absolute"),
    "nul-in-name": (
        lambda: zips.rename(
            zips.build(_good(**{"documents/aXb.md": b"x"})), "documents/aXb.md", "documents/a\0b.md"
        ),
        "control character",
    ),
    "escape-in-name": (
        lambda: zips.build(_good(**{"documents/a\x1bb.md": b"x"})),
        "control character",
    ),
    "bidi-in-name": (
        lambda: zips.build(_good(**{"documents/a\u202eb.md": b"x"})),
        "control character",
    ),
    # member kinds
    "symlink": (
        lambda: zips.build(_good(), infos=[(zips.symlink("documents/l.md"), b"/etc/passwd")]),
        "symbolic link",
    ),
    "fifo": (
        lambda: zips.build(_good(), infos=[(zips.member("documents/f", mode=stat.S_IFIFO), b"")]),
        "not a regular file",
    ),
    "duplicate-names": (
        lambda: _quiet_build(
            files=_good(), infos=[(zips.member(fmt.MEMORIES), memory(value="Second copy"))]
        ),
        "more than one member named 'memories.jsonl'",
    ),
    "encrypted": (
        lambda: zips.patch_central(zips.build(_good()), fmt.MEMORIES, flag_bits=0x1),
        "encrypted",
    ),
    "bzip2": (
        lambda: zips.build(_good(), compression=zipfile.ZIP_BZIP2),
        "stored or deflated",
    ),
    "folder-outside-the-listing": (
        lambda: zips.build(
            _good(), infos=[(zips.member("elsewhere/", mode=stat.S_IFDIR | 0o755), b"")]
        ),
        "does not list ('elsewhere/')",
    ),
    # zip bombs
    "ratio-member-at-the-floor": (
        lambda: zips.build(_good(**{"documents/bomb.md": _bomb(RATIO_FLOOR_BYTES)})),
        "zip bomb",
    ),
    "ratio-member-of-1-mib": (
        lambda: zips.build(_good(**{"documents/bomb.md": _bomb(1024 * 1024)})),
        "zip bomb",
    ),
    "ratio-many-small-members": (
        lambda: zips.build(
            _good(**{f"documents/b{n}.md": _bomb(RATIO_FLOOR_BYTES - 1) for n in range(40)})
        ),
        "zip bomb",
    ),
    # damaged or lying
    "truncated": (lambda: zips.build(_good())[:-40], "not a zip archive"),
    "truncated-in-the-middle": (_truncated_in_the_middle, ""),
    "lying-size": (
        lambda: zips.patch_central(zips.build(_good()), fmt.MEMORIES, file_size=len(memory()) - 1),
        "damaged",
    ),
    "lying-crc": (lambda: zips.patch_central(zips.build(_good()), fmt.MEMORIES, crc=0), "damaged"),
    "lying-compressed-size": (
        lambda: zips.patch_central(zips.build(_good()), fmt.MEMORIES, compress_size=10**9),
        "claims more compressed bytes",
    ),
    # not what the format holds
    "unlisted-member": (
        lambda: zips.build(_good(), unlisted={"notes.txt": b"hi"}),
        "does not list",
    ),
    "not-a-format-member": (
        lambda: zips.build(_good(**{"run.sh": b"rm -rf /"})),
        "not a file of the Mnemo export format",
    ),
    "no-manifest": (lambda: _without_manifest(), "no manifest.json"),
    "manifest-deep": (_manifest_deep, "nested more than 100 levels"),
    "manifest-nan": (
        lambda: zips.build(_good(), manifest_bytes=b'{"format": NaN}'),
        "NaN is not a JSON number",
    ),
    "manifest-not-utf8": (lambda: zips.build(_good(), manifest_bytes=b"\xff\xfe{}"), "not UTF-8"),
    "manifest-files-a-list": (
        lambda: zips.build(
            _good(), manifest_bytes=json.dumps({**zips.manifest({}), "files": []}).encode()
        ),
        "no 'files' object",
    ),
    "manifest-path-nul": (
        lambda: zips.build(
            _good(**{"documents/n.md": b"x"}),
            listed={
                "documents/n.md": {
                    **zips.manifest({"documents/n.md": b"x"})["files"]["documents/n.md"],
                    "path": "a\u0000b.md",
                }
            },
        ),
        "manifest.json is holding a NUL character",
    ),
    "manifest-other-version": (
        lambda: zips.build(
            _good(), manifest_bytes=json.dumps(zips.manifest({}, format_version=2)).encode()
        ),
        "format_version is 2",
    ),
}


def _without_manifest() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(fmt.MEMORIES, memory())
    return buffer.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(WHOLE_ARCHIVE_REFUSALS))
def test_an_archive_refused_whole_changes_nothing(account, pages, case):
    make, phrase = WHOLE_ARCHIVE_REFUSALS[case]
    before = account_state(account)

    job = run(account, make(), mode="replace")

    assert job.status == ImportStatus.FAILED
    assert phrase in job.error, job.error
    assert account_state(account) == before
    pages(account, job)


@pytest.mark.django_db
def test_the_total_unpacked_size_is_bounded_per_account(account, settings):
    settings.MNEMO_IMPORT_MAX_UNPACKED_BYTES = 256 * 1024
    before = account_state(account)
    data = zips.build(_good(**{"documents/big.md": _noise(300 * 1024)}))  # not a bomb

    job = run(account, data)

    assert job.status == ImportStatus.FAILED
    assert "MNEMO_IMPORT_MAX_UNPACKED_MB" in job.error
    assert account_state(account) == before


@pytest.mark.django_db
def test_a_real_export_passes_the_ratio_check(account):
    """Markdown and JSON deflate 3-10 times: far below MAX_RATIO."""
    words = " ".join(f"word{n % 997} and more text" for n in range(40_000)).encode()
    data = zips.build(_good(**{"documents/long.md": words}))
    member = zipfile.ZipFile(io.BytesIO(data)).getinfo("documents/long.md")
    assert member.file_size >= RATIO_FLOOR_BYTES
    assert member.file_size < MAX_RATIO * member.compress_size

    job = run(account, data)

    assert (job.status, job.refused) == (ImportStatus.DONE, 0), job.items
    assert Document.objects.get(user=account, path="long.md").body.encode() == words


@pytest.mark.django_db
def test_a_damaged_last_member_stops_the_job_before_anything_is_written(account):
    """The check reads every member before the first write: a lying directory entry of the
    last work file refuses an archive whose memories and documents came first."""
    work = b'---\ntitle: "A report"\nkind: "report"\nstatus: "done"\n---\nBody\n'
    files = _good(**{"documents/new.md": b"# New\n", "work/1-a-report.md": work})
    data = zips.patch_central(zips.build(files), "work/1-a-report.md", crc=1)
    before = account_state(account)

    job = run(account, data)

    assert job.status == ImportStatus.FAILED
    assert "damaged" in job.error
    assert "work/1-a-report.md" in job.error
    assert account_state(account) == before


@pytest.mark.django_db
def test_100000_unlisted_members_are_refused_early(account, pages):
    data = zips.many_members(100_000, files=_good())
    before = account_state(account)
    started = time.monotonic()

    job = run(account, data)

    assert time.monotonic() - started < 5
    assert job.status == ImportStatus.FAILED
    assert "100,000 files its manifest does not list ('junk/000000'" in job.error
    assert len(json.dumps(job.summary)) < 10_000
    assert account_state(account) == before
    pages(account, job)


# --- refused item by item -----------------------------------------------------------------


def _deep_line() -> bytes:
    return b'{"key": "fact:deep", "value": ' + b"[" * 200 + b"]" * 200 + b"}\n"


def _bad_memories() -> dict[str, bytes]:
    """memories.jsonl: one good line and every kind of bad one, by line number."""
    return {
        "good": memory(),
        "key-a-number": memory(key=5),
        "value-a-list": memory(key="fact:b", value=["x"]),
        "pinned-text": memory(key="fact:c", pinned="yes"),
        "tags-text": memory(key="fact:d", tags="x"),
        "confidence-text": memory(key="fact:e", source="tp_extracted", confidence="0.5"),
        "nan": b'{"key": "fact:f", "value": "x", "source": "tp_extracted", "confidence": NaN}\n',
        "nul": memory(key="fact:g", value="a\u0000b"),
        "surrogate": memory(key="fact:h", value="a\ud800b"),
        "deep": _deep_line(),
        "huge": b'{"key": "fact:huge", "value": "' + _noise(MAX_LINE_BYTES) + b'"}\n',
        "too-long": memory(key="fact:long", value="x" * 2001),
        "bad-key": memory(key="Fact:Bad Key"),
        "stated-not-one": memory(key="fact:i", source="user_stated", confidence=0.5),
        "year-one": memory(key="fact:j", updated_at="0001-01-01T00:00:00+14:00"),
        "same-key": memory(value="Second line, same key"),
    }


BAD_MEMORY_REASONS = {
    "key-a-number": "its 'key' is not text",
    "value-a-list": "its 'value' is not text",
    "pinned-text": "its 'pinned' is not true or false",
    "tags-text": "its 'tags' is not a list",
    "confidence-text": "its 'confidence' is not a number",
    "nan": "NaN is not a JSON number",
    "nul": "NUL character or an unpaired surrogate",
    "surrogate": "NUL character or an unpaired surrogate",
    "deep": "nested more than 100 levels",
    "huge": f"longer than {MAX_LINE_BYTES:,} bytes",
    "too-long": "the longest allowed is 2000",
    "bad-key": "Unknown entry kind 'Fact'",
    "stated-not-one": "confidence exactly 1.0",
    "year-one": "between 1970 and 9999",
    "same-key": "An earlier line has the same key",
}


def _bad_history() -> list[bytes]:
    return [
        history(),  # good
        history(after={"value": "No source nor confidence"}),
        history(after={**STATE, "value": _noise(5 * 1024 * 1024).decode()}),
        history(after={**STATE, "confidence": 0.5}),
        history(after={**STATE, "tags": "x"}),
        history(actor="me"),
        history(actor={"type": "agent", "agent": "Bad Name!"}),
        history(created_at=12),
        history(created_at="0001-01-01T00:00:00+14:00"),
        history(before=[1], action="update"),
        history(source="tp_extracted"),  # not the source of the state it records
    ]


def _bad_versions() -> list[bytes]:
    version = {
        "path": "notes/new.md",
        "agent": None,
        "action": "write",
        "body": "# Earlier\n",
        "actor": USER,
        "created_at": "2024-05-01T10:00:00+00:00",
    }
    return [
        line(version),  # good
        line({**version, "body": 5}),
        line({**version, "path": None}),
        line({**version, "path": "../up.md"}),
        line({**version, "agent": "Bad Name!"}),
        line({**version, "body": "a\u0000b"}),
        line({**version, "action": "explode"}),
    ]


@pytest.mark.django_db
def test_bad_items_in_every_file_are_refused_alone(account, pages):
    memories = _bad_memories()
    work_good = b'---\ntitle: "Good report"\nkind: "report"\nstatus: "done"\n---\nFine\n'
    work_bad = (
        b'---\ntitle: 5\nkind: "report"\nstatus: "done"\n---\nx\n',
        b'---\ntitle: "Tags"\nkind: "report"\nstatus: "done"\ntags: "x"\n---\nx\n',
        b'---\ntitle: "Deep"\nkind: "report"\nstatus: "done"\nmetadata: '
        + b"[" * 200
        + b"]" * 200
        + b"\n---\nx\n",
        b"no front matter",
    )
    profile = {"token_budget": "3000", "agents": [{"name": "ok-agent"}, {"name": 5}, "x"]}
    files = {
        fmt.MEMORIES: b"".join(memories.values()),
        fmt.MEMORY_HISTORY: b"".join(_bad_history()),
        fmt.DOCUMENT_VERSIONS: b"".join(_bad_versions()),
        fmt.ACTIVITY: line({"event_type": 5, "payload": [], "actor": USER, "created_at": "x"}),
        fmt.PROPOSALS: line({"key": "fact:x", "action": "create", "actor": None}),
        fmt.PROFILE: json.dumps(profile).encode(),
        "documents/notes/new.md": b"# Now\n",
        "documents/esc.md": b"x",
        "documents/wrong.md": b"x",
        "documents/latin1.md": "caf\xe9".encode("latin-1"),
        "work/1-good-report.md": work_good,
        **{f"work/{n}-bad.md": data for n, data in enumerate(work_bad, start=2)},
    }
    listed = {
        "documents/esc.md": {**zips.manifest({"d": b"x"})["files"]["d"], "path": "a\u001bb.md"},
        "documents/wrong.md": {**zips.manifest({"d": b"x"})["files"]["d"], "path": 5},
        "documents/missing.md": {"sha256": "0" * 64, "bytes": 1, "path": "m.md", "agent": None},
    }
    data = zips.build(files, listed=listed)
    before = account_state(account)

    job = run(account, data)

    assert job.status == ImportStatus.DONE, job.error
    refused = {
        (i["section"], i["item"]): i["reason"] for i in job.items if i["outcome"] == "refused"
    }
    for number, name in enumerate(memories, start=1):
        if name == "good":
            continue
        reason = refused[("memories", f"memories.jsonl line {number}")]
        assert BAD_MEMORY_REASONS[name] in reason, (name, reason)
    history_reasons = [r for (s, _), r in refused.items() if s == "memory history"]
    assert len(history_reasons) == len(_bad_history()) - 1
    assert any("has no source, confidence" in r for r in history_reasons)
    assert any("5,242,880 characters long" in r for r in history_reasons)
    assert len([1 for s, _ in refused if s == "document versions"]) == len(_bad_versions()) - 1
    assert [s for s, _ in refused].count("activity") == 1
    assert [s for s, _ in refused].count("proposals") == 1
    assert [s for s, _ in refused].count("work") == 4
    assert refused[("settings", "settings")] == "Refused: its 'token_budget' is not a number."
    assert refused[("agents", "agent 2")] == "Refused: its 'name' is not text."
    assert "control character U+001B" in refused[("documents", "documents/esc.md")]
    assert refused[("documents", "documents/wrong.md")].startswith("The manifest does not")
    assert refused[("documents", "latin1.md")] == "Not UTF-8 text."
    assert refused[("archive", "documents/missing.md")].startswith("Listed in the manifest")
    # What was good came in, with its history and versions.
    now = account_state(account)
    assert [row for row in now["memories"] if row not in before["memories"]] == [
        ("fact:smuggled", "Came with a hostile archive", "user_stated", 1.0, [], False)
    ]
    kept = MemoryHistory.objects.filter(user=account, key="fact:smuggled").order_by("created_at")
    assert [row.created_at.year for row in kept] == [2024, timezone.now().year]
    new = Document.objects.get(user=account, path="notes/new.md")
    assert [v.body for v in new.versions.order_by("created_at")] == ["# Earlier\n", "# Now\n"]
    assert WorkItem.objects.live().filter(user=account, title="Good report").exists()
    assert Agent.objects.filter(user=account, name="ok-agent").exists()
    assert Profile.objects.get(user=account).token_budget == 3000  # unchanged
    assert job.refused == len(refused)
    pages(account, job)

    # Replace does not start on it: nothing deleted, nothing added.
    before = account_state(account)
    job = run(account, data, mode="replace")
    assert job.status == ImportStatus.FAILED
    assert f"the check refused {len(refused)} items" in job.error
    assert account_state(account) == before
    pages(account, job)


@pytest.mark.django_db
def test_a_replace_whose_every_item_is_refused_changes_nothing(account, pages):
    """The issue's (a): 35 memories and 18 documents became 0."""
    for n in range(35):
        memory_upsert(
            user=account, key=f"fact:m{n}", value=f"Memory {n}", actor=Actor.for_user(account)
        )
    lines = b"".join(memory(key=f"Bad Key {n}") for n in range(20))
    before = account_state(account)

    job = run(account, zips.build({fmt.MEMORIES: lines}), mode="replace")

    assert job.status == ImportStatus.FAILED
    assert "Replace did not start, and nothing was changed" in job.error
    assert job.refused == 20
    assert account_state(account) == before
    pages(account, job)


@pytest.mark.django_db
def test_a_replace_with_nothing_to_import_changes_nothing(account):
    before = account_state(account)
    data = zips.build({fmt.PROFILE: json.dumps({"token_budget": 4000}).encode()})

    job = run(account, data, mode="replace")

    assert job.status == ImportStatus.FAILED
    assert "holds no memory, document or work item" in job.error
    assert account_state(account) == before


@pytest.mark.django_db
def test_the_summary_is_bounded_whatever_the_archive_holds(account):
    lines = b"".join(memory(key=f"Bad Key {n}") for n in range(3000))

    job = run(account, zips.build({fmt.MEMORIES: lines}))

    assert (job.status, job.refused) == (ImportStatus.DONE, 3000)
    assert len(job.items) == MAX_LISTED_REFUSALS
    assert job.summary["unlisted"]["refused"] == 3000 - MAX_LISTED_REFUSALS
    assert job.summary["sections"]["memories"]["refused"] == 3000
    assert len(json.dumps(job.summary)) < 100_000


# --- the job ends whatever happens ---------------------------------------------------------


@pytest.mark.django_db
def test_a_worker_that_fails_ends_the_job_failed_with_the_reason(account, pages, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(applying, "document_write", broken)
    data = zips.build(_good(**{"documents/new.md": b"# New\n"}))

    job = run(account, data)

    assert job.status == ImportStatus.FAILED
    assert job.error.startswith("The import stopped on an unexpected error (RuntimeError)")
    assert "what was applied before it stays" in job.error
    assert Memory.objects.filter(user=account, key="fact:smuggled").exists()  # before it
    pages(account, job)


@pytest.mark.django_db
def test_a_summary_that_cannot_be_saved_still_ends_the_job(account):
    job = import_job_create(
        user=account, kind="mnemo", mode="merge", upload=SimpleUploadedFile("a.zip", b"x")
    )
    ImportJob.objects.filter(pk=job.pk).update(status=ImportStatus.RUNNING)
    report = Report(job)
    report.sections["x"] = {"bad": "\u0000"}  # jsonb refuses NUL

    report.finish(status=ImportStatus.DONE)

    job.refresh_from_db()
    assert job.status == ImportStatus.DONE
    assert job.error == "The import's summary could not be saved."


@pytest.mark.django_db
def test_a_running_job_whose_upload_is_gone_is_failed_by_the_sweep(account, client):
    job = import_job_create(
        user=account, kind="mnemo", mode="merge", upload=SimpleUploadedFile("a.zip", b"x")
    )
    long_ago = timezone.now() - importing.IMPORT_LEASE - timedelta(seconds=1)
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportStatus.RUNNING, progressed_at=long_ago, attempts=1, file=""
    )
    client.force_login(account)
    stalled = client.get(job.url()).content.decode()
    assert 'hx-trigger="every 10s"' in stalled

    assert importing.fail_exhausted_imports() == 1

    job.refresh_from_db()
    assert job.status == ImportStatus.FAILED
    assert 'hx-trigger="every' not in client.get(job.url()).content.decode()


@pytest.mark.django_db
def test_other_tools_files_that_would_hurt_are_refused(account):
    deep = b'{"results": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    job = run(account, deep, kind="mem0")
    assert job.status == ImportStatus.FAILED
    assert "nested more than 100 levels" in job.error

    job = run(account, b"Likes tea\nHas a \x00 in it\n", kind="chatgpt")
    assert (job.status, job.created + job.pending, job.refused) == (ImportStatus.DONE, 1, 1)


# --- the readers of history trust no stored shape -----------------------------------------


@pytest.mark.django_db
def test_history_an_older_import_stored_badly_is_read_without_a_500(account, pages, client):
    """Rows as the import before issue 25 stored them: states without source or confidence,
    a 5 MiB value, not even an object. The readers name them damaged and go on."""
    cat = Memory.objects.get(user=account, key="fact:likes-tea")
    then = datetime(2024, 5, 1, tzinfo=UTC)
    bad = [
        {"value": "No source nor confidence"},
        {**STATE, "value": "v" * (5 * 1024 * 1024)},
        ["not", "an", "object"],
    ]
    keys = ["fact:likes-tea", "fact:huge", "fact:list"]
    rows = MemoryHistory.objects.bulk_create(
        MemoryHistory(
            user=account,
            key=key,
            memory=cat if key == cat.key else None,
            action="create",
            source="user_stated",
            after=after,
            created_at=then + timedelta(minutes=n),
            actor_type="user",
            actor_user=account,
        )
        for n, (key, after) in enumerate(zip(keys, bad, strict=True))
    )

    block = client.get(
        "/api/v1/working-memory",
        {"as_of": "2024-06-01T00:00:00Z", "format": "json"},
        headers={"Authorization": f"Bearer {_token(account)}"},
    )
    assert block.status_code == 200
    omitted = {item["key"]: item["reason"] for item in block.json()["omitted"]}
    assert omitted == dict.fromkeys(["fact:huge", "fact:likes-tea", "fact:list"], "damaged")

    client.force_login(account)
    preview = client.get(
        reverse("pages:context_preview"),
        {"as_of": "2024-06-01T00:00"},
        headers={"HX-Request": "true"},
    ).content.decode()
    assert "its history then is damaged" in preview

    page = client.get(reverse("pages:memory_history", args=[cat.pk])).content.decode()
    assert "The state after this change is damaged: the stored state has no source" in page
    assert len(page) < 100_000

    restore = client.post(reverse("pages:history_restore", args=[rows[0].pk]), follow=True)
    assert restore.status_code == 200
    assert "cannot be restored: the stored state has no source" in restore.content.decode()
    assert Memory.objects.get(pk=cat.pk).value == "Drinks green tea in the afternoon"
    for row in rows[1:]:
        answer = client.post(reverse("pages:history_restore", args=[row.pk]))
        assert answer.status_code == 302
    assert not Memory.objects.filter(user=account, key__in=["fact:huge", "fact:list"]).exists()
    pages(account)


def _token(user) -> str:
    return token_create(agent=agent_get_or_create(user=user, name="reader")).raw


@pytest.mark.django_db
def test_a_version_page_with_a_huge_repetitive_change_answers_quickly(account, client):
    """difflib on two 1 MiB bodies of repeated lines took minutes; the changed lines past
    DIFF_EXACT_LINES now show as one block."""
    user = Actor.for_user(account)
    document_write(user=account, path="big.md", content="a\n" * 300_000 + "x\n", actor=user)
    document_write(user=account, path="big.md", content="b\na\n" * 150_000 + "y\n", actor=user)
    version = DocumentVersion.objects.filter(user=account, path="big.md").latest("created_at")
    client.force_login(account)
    started = time.monotonic()

    page = client.get(reverse("pages:document_version", args=[version.pk]))

    assert page.status_code == 200
    assert time.monotonic() - started < 5
    assert "more lines" in page.content.decode()


@pytest.mark.django_db
def test_times_an_older_import_stored_unreadable_are_repaired(account, pages):
    """portability/migrations/0004: a time before the year 1 in UTC (or past 9999) could be
    stored, and then no page could read its row."""
    repair = importlib.import_module("portability.migrations.0004_repair_imported_times")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE user_context_history SET created_at = '0001-01-01 00:00:00+14' "
            "WHERE user_id = %s AND key = 'name'",
            [account.pk],
        )
        cursor.execute(
            "UPDATE user_context SET created_at = '9999-12-31 23:00:00-14' "
            "WHERE user_id = %s AND key = 'name'",
            [account.pk],
        )
    with pytest.raises(DataError):
        list(MemoryHistory.objects.filter(user=account).values_list("created_at"))

    with connection.cursor() as cursor:
        cursor.execute(repair.REPAIR)

    times = MemoryHistory.objects.filter(user=account, key="name").values_list("created_at")
    assert [when for (when,) in times] == [datetime(1970, 1, 1, tzinfo=UTC)]
    assert Memory.objects.get(user=account, key="name").created_at <= timezone.now()
    pages(account)


@pytest.mark.django_db
def test_a_manifest_of_many_small_values_is_refused_before_parsing(account):
    """`[]` is 2 bytes of text and 56 of memory once parsed: the manifest's values are
    counted first, against the members the archive holds."""
    body = b'{"format": "mnemo-export", "format_version": 1, "files": {}, "x": ['
    body += b"[]," * 200_000 + b"[]]}"
    before = account_state(account)

    job = run(account, zips.build(_good(), manifest_bytes=body, compression=zipfile.ZIP_STORED))

    assert job.status == ImportStatus.FAILED
    assert "manifest.json is holding more than 1,040 values (the archive holds 2)" in job.error
    assert account_state(account) == before
