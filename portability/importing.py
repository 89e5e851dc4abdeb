"""Import: a Mnemo export (portability/format.py) or another tool's memories
(portability/importers.py) applied to one account, as a Celery job (portability/tasks.py).

Every change goes through the layers' write paths, as the user: memories through
memory/services.py, documents through context/services.py, work through work/services.py,
settings and agents through profiles/services.py, so history, versions and activity are
recorded as for any other change. Each item (a memory line, a document, a work file, the
settings, an agent) is applied in its own transaction: an item refused leaves nothing
behind, and the items before it stay applied.

The archive is checked before anything is written: the member count, the total
uncompressed size and each member's compression ratio against the limits below (from the
zip's central directory, before extracting), the names (nothing absolute, no `..`, no
backslash), the manifest's format and version, and each member's SHA-256 and length
against the manifest (a member that does not match is refused as a whole). Members are
read as streams, a line or a document at a time, never whole.

Merge (the default) keeps what is there: for a memory key the newer `updated_at` wins; a
document is written when its body differs and its newest version in the archive is newer
than the account's document; a work item matching one by title and creation time (or by
title and body) is updated when the archive's is newer, else created. Replace first
deletes the account's memories, documents and work items through the same services, then
imports into the empty account. The archive's histories (memory_history.jsonl,
document_versions.jsonl), activity and proposals are checked but not replayed: the write
paths record the import's own history, versions and events.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from activity.actors import Actor
from context.models import Document
from context.services import MAX_BODY_BYTES, document_delete, document_write
from lib.errors import NotFound, ServiceError
from memory.keys import parse_key
from memory.models import Memory
from memory.services import memory_delete, memory_upsert
from portability import format as fmt
from portability.models import ImportJob, ImportKind, ImportMode, ImportStatus
from profiles.models import Agent, Profile
from profiles.services import (
    agent_get_or_create,
    agent_set_learning,
    profile_set_heartbeat,
    profile_update,
)
from work.models import WorkItem
from work.services import work_create, work_update

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)

# Limits, checked from the central directory before a byte is extracted.
MAX_UPLOAD_BYTES = 1024 * 1024 * 1024  # the zip itself
MAX_MEMBERS = 200_000
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024  # uncompressed, all members
MAX_MEMBER_BYTES = 1024 * 1024 * 1024  # uncompressed, one member
MAX_RATIO = 200  # uncompressed / compressed, for members above RATIO_FLOOR_BYTES
RATIO_FLOOR_BYTES = 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_PROFILE_BYTES = 1024 * 1024
# A line of JSON holding a 1 MB document version, every character escaped as \uXXXX.
MAX_LINE_BYTES = 8 * 1024 * 1024
READ_CHUNK = 1024 * 1024

MAX_SUMMARY_ITEMS = 1000  # items listed on the summary page; the counters count them all
PROGRESS_EVERY_SECONDS = 0.5

UNSAFE_NAME = re.compile(r"(^/|\\|^[A-Za-z]:|\x00)")


class ArchiveRefused(Exception):
    """The whole upload is refused (nothing was written): `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- the job ---------------------------------------------------------------------------


def import_job_create(
    *, user: AbstractBaseUser, kind: str, mode: str, upload: UploadedFile
) -> ImportJob:
    """Keep the upload and queue its import (sent when the transaction commits)."""
    if kind not in ImportKind.values:
        raise ServiceError(f"Unknown import format '{kind}'.", field="kind")
    if mode not in ImportMode.values:
        raise ServiceError(f"Unknown mode '{mode}'.", field="mode")
    if upload.size is not None and upload.size > MAX_UPLOAD_BYTES:
        raise ServiceError(
            f"The file is {upload.size:,} bytes; the largest accepted is {MAX_UPLOAD_BYTES:,}.",
            field="file",
        )
    with transaction.atomic():
        job = ImportJob(user=user, kind=kind, mode=mode, original_name=(upload.name or "")[:255])
        job.file.save(f"{user.pk}-{kind}.upload", upload, save=False)
        job.save()
        transaction.on_commit(lambda: _send(job.pk))
    return job


def _send(job_id: int) -> None:
    from portability import tasks

    tasks.run_import.delay(job_id)


def import_job_run(job_id: int) -> None:
    """Run one job: claim it (a job runs once, however often its message comes), import,
    record the summary, and delete the uploaded file."""
    claimed = ImportJob.objects.filter(pk=job_id, status=ImportStatus.PENDING).update(
        status=ImportStatus.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return
    job = ImportJob.objects.select_related("user").get(pk=job_id)
    report = Report(job)
    try:
        with job.file.open("rb") as upload:
            if job.kind == ImportKind.MNEMO:
                import_archive(user=job.user, fileobj=upload, mode=job.mode, report=report)
            else:
                from portability.importers import import_text

                import_text(user=job.user, kind=job.kind, fileobj=upload, report=report)
    except ArchiveRefused as refused:
        report.finish(status=ImportStatus.FAILED, error=refused.reason)
    except Exception:
        logger.exception("Import %s failed", job_id)
        report.finish(
            status=ImportStatus.FAILED,
            error="The import stopped on an unexpected error; what was applied before it stays.",
        )
        raise
    else:
        report.finish(status=ImportStatus.DONE)
    finally:
        job.file.delete(save=False)
        ImportJob.objects.filter(pk=job_id).update(file="")


@dataclass
class Report:
    """What the import did, item by item; saved on the job as it goes (the page polls it)."""

    job: ImportJob
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("created", "updated", "skipped", "refused", "pending"), 0
        )
    )
    sections: dict[str, dict[str, int]] = field(default_factory=dict)
    items: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    processed: int = 0
    total: int = 0
    _saved_at: float = 0.0

    def set_total(self, total: int) -> None:
        self.total = max(total, 0)
        ImportJob.objects.filter(pk=self.job.pk).update(total=self.total)

    def add(self, section: str, item: str, outcome: str, reason: str = "") -> None:
        self.counts[outcome] += 1
        per = self.sections.setdefault(section, dict.fromkeys(self.counts, 0))
        per[outcome] += 1
        # Refusals are always worth listing; the rest while there is room.
        if len(self.items) < MAX_SUMMARY_ITEMS or outcome == "refused":
            if len(self.items) >= MAX_SUMMARY_ITEMS:
                self._drop_one_unrefused()
            self.items.append(
                {"section": section, "item": item[:300], "outcome": outcome, "reason": reason}
            )
        self.step()

    def _drop_one_unrefused(self) -> None:
        for index in range(len(self.items) - 1, -1, -1):
            if self.items[index]["outcome"] != "refused":
                del self.items[index]
                return

    def step(self) -> None:
        self.processed += 1
        if time.monotonic() - self._saved_at >= PROGRESS_EVERY_SECONDS:
            self._save()

    def _save(self, **extra: Any) -> None:
        self._saved_at = time.monotonic()
        ImportJob.objects.filter(pk=self.job.pk).update(
            processed=self.processed,
            total=max(self.total, self.processed),
            **self.counts,
            **extra,
        )

    def finish(self, *, status: str, error: str = "") -> None:
        summary = {"sections": self.sections, "items": self.items, "notes": self.notes}
        self._save(status=status, error=error, summary=summary, finished_at=timezone.now())


# --- reading the archive safely ---------------------------------------------------------


def safe_member_name(name: str) -> str | None:
    """Why a member's name is refused (absolute, `..`, a backslash, a drive), or None."""
    if UNSAFE_NAME.search(name):
        return "its path is absolute or uses a backslash"
    parts = name.rstrip("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "its path leaves the archive or has an empty part ('..', '.', '//')"
    return None


def check_archive(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """The archive's file members by name, once the whole-archive limits hold.

    ArchiveRefused for too many members, too many bytes uncompressed in all, or one member
    too big or compressed more than MAX_RATIO times (a zip bomb). Read from the central
    directory: nothing is extracted. Members with unsafe names are not returned (the
    caller refuses them one by one)."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArchiveRefused(
            f"The archive has {len(infos):,} members; at most {MAX_MEMBERS:,} are accepted."
        )
    total = sum(info.file_size for info in infos)
    if total > MAX_TOTAL_BYTES:
        raise ArchiveRefused(
            f"The archive would unpack to {total:,} bytes; at most {MAX_TOTAL_BYTES:,} are "
            "accepted (refused as a possible zip bomb)."
        )
    for info in infos:
        if info.file_size > MAX_MEMBER_BYTES:
            raise ArchiveRefused(
                f"'{info.filename}' would unpack to {info.file_size:,} bytes; at most "
                f"{MAX_MEMBER_BYTES:,} per file are accepted."
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR_BYTES and ratio > MAX_RATIO:
            raise ArchiveRefused(
                f"'{info.filename}' is compressed {ratio:,.0f} times (at most {MAX_RATIO} "
                "is accepted): refused as a possible zip bomb."
            )
    return {info.filename: info for info in infos if not info.is_dir()}


class _Bounded:
    """A member opened for reading that refuses to yield more than it declared (zipfile
    stops at the declared size too; this holds even if that ever changes)."""

    def __init__(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        self._handle: IO[bytes] = archive.open(info)
        self._left = info.file_size

    def read(self, size: int) -> bytes:
        data = self._handle.read(min(size, self._left + 1))
        self._left -= len(data)
        if self._left < 0:
            raise ArchiveRefused("A member holds more bytes than the archive declares.")
        return data

    def readline(self, limit: int) -> bytes:
        data = self._handle.readline(limit)
        self._left -= len(data)
        if self._left < 0:
            raise ArchiveRefused("A member holds more bytes than the archive declares.")
        return data

    def close(self) -> None:
        self._handle.close()


def member_digest(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[str, int]:
    """The member's SHA-256 and length, read a chunk at a time."""
    digest = hashlib.sha256()
    size = 0
    handle = _Bounded(archive, info)
    try:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    finally:
        handle.close()
    return digest.hexdigest(), size


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes | None:
    """The member's bytes, or None when it is longer than `limit`."""
    if info.file_size > limit:
        return None
    handle = _Bounded(archive, info)
    try:
        return handle.read(limit + 1)
    finally:
        handle.close()


def jsonl_records(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo
) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """(line number, the object or None, why not) for each non-empty line, streamed."""
    handle = _Bounded(archive, info)
    try:
        number = 0
        while line := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
                yield number, None, f"longer than {MAX_LINE_BYTES:,} bytes"
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                yield number, None, f"not a line of JSON ({error})"
                continue
            if not isinstance(record, dict):
                yield number, None, "not a JSON object"
                continue
            yield number, record, ""
    finally:
        handle.close()


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time with its offset, or None (naive times are read as UTC)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, timezone.UTC)
    return parsed


# --- the archive ----------------------------------------------------------------------


@dataclass
class _Archive:
    archive: zipfile.ZipFile
    members: dict[str, zipfile.ZipInfo]
    manifest: dict[str, Any]
    verified: set[str]  # members whose hash and length match the manifest

    def info(self, name: str) -> zipfile.ZipInfo | None:
        return self.members.get(name) if name in self.verified else None


def import_archive(
    *, user: AbstractBaseUser, fileobj: IO[bytes], mode: str, report: Report
) -> None:
    """Import a Mnemo export into the user's account (see the module's docstring)."""
    try:
        archive = zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, OSError) as error:
        raise ArchiveRefused(f"The file is not a zip archive ({error}).") from error
    with archive:
        opened = _open_archive(archive, report)
        counts = (
            opened.manifest.get("counts") if isinstance(opened.manifest.get("counts"), dict) else {}
        )
        total = 1 + sum(
            value
            for name, value in counts.items()
            if name in (fmt.MEMORIES, fmt.DOCUMENTS_DIR, fmt.WORK_DIR) and isinstance(value, int)
        )
        actor = Actor.for_user(user)
        if mode == ImportMode.REPLACE:
            total += _replace_count(user)
            report.set_total(total)
            _delete_everything(user, actor, report)
        else:
            report.set_total(total)
        _import_profile(user, opened, report)
        _import_memories(user, actor, opened, mode, report)
        _import_documents(user, actor, opened, mode, report)
        _import_work(user, actor, opened, mode, report)
        report.notes.append(
            "Memory history, document versions, activity and proposals in the archive were "
            "checked but not replayed: this import's own history, versions and activity are "
            "recorded instead."
        )


def _open_archive(archive: zipfile.ZipFile, report: Report) -> _Archive:
    members = check_archive(archive)
    if fmt.MANIFEST not in members:
        raise ArchiveRefused(f"The archive has no {fmt.MANIFEST}: it is not a Mnemo export.")
    raw = read_member(archive, members[fmt.MANIFEST], MAX_MANIFEST_BYTES)
    if raw is None:
        raise ArchiveRefused(f"{fmt.MANIFEST} is larger than {MAX_MANIFEST_BYTES:,} bytes.")
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArchiveRefused(f"{fmt.MANIFEST} is not JSON ({error}).") from error
    if not isinstance(manifest, dict) or manifest.get("format") != fmt.FORMAT:
        raise ArchiveRefused(
            f"{fmt.MANIFEST} does not name the format '{fmt.FORMAT}': not a Mnemo export."
        )
    version = manifest.get("format_version")
    if version != fmt.FORMAT_VERSION or isinstance(version, bool):
        raise ArchiveRefused(
            f"The archive's format_version is {version!r}; this Mnemo reads version "
            f"{fmt.FORMAT_VERSION} only."
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise ArchiveRefused(f"{fmt.MANIFEST} has no 'files' object.")
    verified: set[str] = set()
    for name, info in members.items():
        if name == fmt.MANIFEST:
            continue
        unsafe = safe_member_name(name)
        if unsafe:
            report.add("archive", name, "refused", f"Not read: {unsafe}.")
            continue
        expected = files.get(name)
        if not isinstance(expected, dict):
            report.add("archive", name, "refused", "Not read: the manifest does not list it.")
            continue
        digest, size = member_digest(archive, info)
        if digest != expected.get("sha256") or size != expected.get("bytes"):
            report.add(
                "archive",
                name,
                "refused",
                "Not read: its SHA-256 or length does not match the manifest (damaged or "
                "changed after the export).",
            )
            continue
        verified.add(name)
    for name in files:
        if name not in members:
            report.notes.append(f"The manifest lists {name}, which is not in the archive.")
    return _Archive(archive=archive, members=members, manifest=manifest, verified=verified)


def _replace_count(user: AbstractBaseUser) -> int:
    return (
        Memory.objects.filter(user=user).count()
        + Document.objects.filter(user=user).count()
        + WorkItem.objects.filter(user=user).count()
    )


def _delete_everything(user: AbstractBaseUser, actor: Actor, report: Report) -> None:
    """Replace mode's first step: the account's memories, documents and work items go,
    each through its service (history, versions and events are written as for any delete;
    deleted memories and documents stay restorable from their history)."""
    from work.services import work_delete

    for key in Memory.objects.filter(user=user).order_by("key").values_list("key", flat=True):
        with contextlib.suppress(NotFound):
            memory_delete(user=user, key=key, actor=actor, reason="Replaced by an import")
        report.step()
    documents = Document.objects.filter(user=user).select_related("agent").order_by("pk")
    for document in documents.iterator():
        with contextlib.suppress(NotFound):
            document_delete(user=user, agent=document.agent, path=document.path, actor=actor)
        report.step()
    for pk in WorkItem.objects.filter(user=user).order_by("pk").values_list("pk", flat=True):
        with contextlib.suppress(NotFound):
            work_delete(user=user, pk=pk, actor=actor)
        report.step()


def _refuse(report: Report, section: str, item: str, reason: str) -> None:
    report.add(section, item, "refused", reason)


def _import_profile(user: AbstractBaseUser, opened: _Archive, report: Report) -> None:
    info = opened.info(fmt.PROFILE)
    if info is None:
        report.step()
        return
    raw = read_member(opened.archive, info, MAX_PROFILE_BYTES)
    try:
        data = json.loads(raw) if raw is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict):
        _refuse(report, "settings", fmt.PROFILE, "Not a JSON object (or too large).")
        return
    _import_settings(user, data, report)
    agents = data.get("agents")
    for agent in agents if isinstance(agents, list) else []:
        _import_agent(user, agent, report)


SETTING_TYPES: dict[str, type] = {
    "token_budget": int,
    "memory_paused": bool,
    "review_agent_memories": bool,
    "auto_learn": bool,
    "profile_budget": int,
    "llm_daily_tokens": int,
    "heartbeat_enabled": bool,
    "notify_webhook_url": str,
}


def _import_settings(user: AbstractBaseUser, data: dict[str, Any], report: Report) -> None:
    values = {name: data[name] for name in fmt.PROFILE_FIELDS if name in data}
    for name, value in values.items():
        wanted = SETTING_TYPES.get(name, object)
        if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
            _refuse(report, "settings", name, f"'{name}' must be {wanted.__name__}.")
            return
    profile = Profile.objects.filter(user=user).first()
    before = {name: getattr(profile, name) for name in values} if profile else {}
    if before and before == values:
        report.add("settings", "settings", "skipped", "The same settings are set already.")
        return
    heartbeat = {"heartbeat_enabled", "notify_webhook_url"}
    try:
        with transaction.atomic():  # both calls or neither
            profile_update(user=user, **{k: v for k, v in values.items() if k not in heartbeat})
            if heartbeat & values.keys():
                current = profile or Profile(user=user)
                profile_set_heartbeat(
                    user=user,
                    enabled=values.get("heartbeat_enabled", current.heartbeat_enabled),
                    webhook_url=values.get("notify_webhook_url", current.notify_webhook_url),
                )
    except ServiceError as error:
        _refuse(report, "settings", error.field or "settings", error.message)
        return
    changed = sorted(name for name in values if before.get(name) != values[name])
    report.add("settings", "settings", "updated", "Changed: " + ", ".join(changed))


def _import_agent(user: AbstractBaseUser, data: object, report: Report) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        _refuse(report, "agents", str(data)[:80], "An agent needs a name.")
        return
    name = data["name"]
    description = data.get("description") if isinstance(data.get("description"), str) else ""
    learns = data.get("learns_from_turns")
    existed = Agent.objects.filter(user=user, name=name).exists()
    try:
        with transaction.atomic():
            agent = agent_get_or_create(user=user, name=name, description=description)
            if isinstance(learns, bool) and agent.learns_from_turns != learns:
                agent_set_learning(agent=agent, learns_from_turns=learns)
    except ServiceError as error:
        _refuse(report, "agents", name, error.message)
        return
    if existed:
        report.add("agents", name, "skipped", "You have this agent already.")
    else:
        report.add("agents", name, "created")


# --- memories -------------------------------------------------------------------------


def _import_memories(
    user: AbstractBaseUser, actor: Actor, opened: _Archive, mode: str, report: Report
) -> None:
    info = opened.info(fmt.MEMORIES)
    if info is None:
        return
    for number, record, problem in jsonl_records(opened.archive, info):
        item = f"{fmt.MEMORIES} line {number}"
        if record is None:
            _refuse(report, "memories", item, f"Line {number} is {problem}.")
            continue
        _import_memory(user, actor, record, item, report)


def _import_memory(
    user: AbstractBaseUser, actor: Actor, record: dict[str, Any], item: str, report: Report
) -> None:
    key = record.get("key")
    try:
        parse_key(key)
    except ServiceError as error:
        _refuse(report, "memories", item, error.message)
        return
    item = str(key)
    wanted = {
        "value": record.get("value"),
        "source": record.get("source"),
        "confidence": record.get("confidence"),
        "tags": record.get("tags") if record.get("tags") is not None else [],
        "pinned": bool(record.get("pinned", False)),
    }
    updated_at = parse_time(record.get("updated_at"))
    try:
        with transaction.atomic():
            current = Memory.objects.select_for_update().filter(user=user, key=key).first()
            if current is not None:
                if all(getattr(current, name) == value for name, value in wanted.items()):
                    report.add("memories", item, "skipped", "The same memory is there already.")
                    return
                if updated_at is None or updated_at <= current.updated_at:
                    report.add(
                        "memories",
                        item,
                        "skipped",
                        f"Yours is newer (changed {current.updated_at:%Y-%m-%d %H:%M} UTC).",
                    )
                    return
            memory_upsert(user=user, key=key, actor=actor, reason="Imported", **wanted)
    except ServiceError as error:
        _refuse(report, "memories", item, error.message)
        return
    report.add("memories", item, "created" if current is None else "updated")


# --- documents ------------------------------------------------------------------------


def _document_entries(opened: _Archive, report: Report) -> Iterator[tuple[str, str | None, str]]:
    """(member name, agent name or None, path) of each document the manifest lists."""
    for name, entry in opened.manifest["files"].items():
        if not name.startswith(fmt.DOCUMENTS_DIR) or not isinstance(entry, dict):
            continue
        path, agent = entry.get("path"), entry.get("agent")
        if not isinstance(path, str) or not (agent is None or isinstance(agent, str)):
            _refuse(report, "documents", name, "The manifest does not name its path and agent.")
            continue
        if name not in opened.verified:
            report.step()  # refused already, as an archive member
            continue
        yield name, agent, path


def _latest_versions(opened: _Archive) -> dict[tuple[str | None, str], datetime]:
    """When each document (agent, path) last changed, from document_versions.jsonl."""
    latest: dict[tuple[str | None, str], datetime] = {}
    info = opened.info(fmt.DOCUMENT_VERSIONS)
    if info is None:
        return latest
    for _, record, _ in jsonl_records(opened.archive, info):
        if record is None or not isinstance(record.get("path"), str):
            continue
        when = parse_time(record.get("created_at"))
        where = (record.get("agent"), record["path"])
        if when is not None and (where not in latest or when > latest[where]):
            latest[where] = when
    return latest


def _import_documents(
    user: AbstractBaseUser, actor: Actor, opened: _Archive, mode: str, report: Report
) -> None:
    latest = _latest_versions(opened) if mode == ImportMode.MERGE else {}
    agents: dict[str, Agent] = {}
    for name, agent_name, path in _document_entries(opened, report):
        item = f"{agent_name}: {path}" if agent_name else path
        raw = read_member(opened.archive, opened.members[name], MAX_BODY_BYTES)
        if raw is None:
            _refuse(report, "documents", item, f"Larger than {MAX_BODY_BYTES:,} bytes.")
            continue
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            _refuse(report, "documents", item, "Not UTF-8 text.")
            continue
        try:
            agent = _agent(user, agent_name, agents) if agent_name else None
            with transaction.atomic():
                current = (
                    Document.objects.select_for_update()
                    .filter(user=user, agent=agent, shared_scope=None, path=path)
                    .first()
                )
                if current is not None:
                    if current.body == body:
                        report.add("documents", item, "skipped", "The same text is there already.")
                        continue
                    changed = latest.get((agent_name, path))
                    if changed is None or changed <= current.updated_at:
                        report.add("documents", item, "skipped", "Yours is newer.")
                        continue
                document_write(user=user, agent=agent, path=path, content=body, actor=actor)
        except ServiceError as error:
            _refuse(report, "documents", item, error.message)
            continue
        report.add("documents", item, "created" if current is None else "updated")


def _agent(user: AbstractBaseUser, name: str, known: dict[str, Agent]) -> Agent:
    if name not in known:
        known[name] = agent_get_or_create(user=user, name=name)
    return known[name]


# --- work -----------------------------------------------------------------------------


def parse_work_file(text: str) -> tuple[dict[str, Any], str]:
    """A work file's front matter (JSON values) and body; ValueError saying what is wrong."""
    fence = fmt.WORK_FRONT_MATTER_FENCE
    head, sep, rest = text.partition("\n")
    if head != fence or not sep:
        raise ValueError(f"it does not start with a '{fence}' line")
    values: dict[str, Any] = {}
    while True:
        line, sep, rest = rest.partition("\n")
        if line == fence:
            return values, rest
        if not sep:
            raise ValueError(f"its front matter has no closing '{fence}' line")
        name, colon, raw = line.partition(": ")
        if not colon or name not in fmt.WORK_FRONT_MATTER:
            raise ValueError(f"'{line[:60]}' is not a front matter line")
        try:
            values[name] = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ValueError(f"the value of '{name}' is not JSON") from error


def _import_work(
    user: AbstractBaseUser, actor: Actor, opened: _Archive, mode: str, report: Report
) -> None:
    agents: dict[str, Agent] = {}
    names = sorted(
        name for name in opened.verified if name.startswith(fmt.WORK_DIR) and name.endswith(".md")
    )
    for name in names:
        raw = read_member(opened.archive, opened.members[name], 4 * MAX_BODY_BYTES)
        try:
            if raw is None:
                raise ValueError("it is too large")
            values, body = parse_work_file(raw.decode("utf-8"))
            title = values.get("title")
            if not isinstance(title, str):
                raise ValueError("it has no title")
        except (ValueError, UnicodeDecodeError) as error:
            _refuse(report, "work", name, f"Not a work file: {error}.")
            continue
        _import_work_item(user, actor, values, body, title, agents, report)


def _import_work_item(
    user: AbstractBaseUser,
    actor: Actor,
    values: dict[str, Any],
    body: str,
    title: str,
    agents: dict[str, Agent],
    report: Report,
) -> None:
    created_at = parse_time(values.get("created_at"))
    updated_at = parse_time(values.get("updated_at"))
    tags = values.get("tags") if isinstance(values.get("tags"), list) else []
    kind, status = values.get("kind"), values.get("status")
    agent_name = values.get("agent")
    try:
        with transaction.atomic():
            mine = WorkItem.objects.select_for_update().filter(user=user, title=title.strip())
            current = (mine.filter(created_at=created_at).first() if created_at else None) or (
                mine.filter(body=body).first()
            )
            if current is None:
                agent = _agent(user, agent_name, agents) if isinstance(agent_name, str) else None
                metadata = (
                    values.get("metadata") if isinstance(values.get("metadata"), dict) else {}
                )
                work_create(
                    user=user,
                    title=title,
                    body=body,
                    actor=actor,
                    kind=kind,
                    status=status,
                    agent=agent,
                    metadata=metadata,
                    tags=tags,
                )
                report.add("work", title, "created")
                return
            same = (current.body, current.status, current.kind, sorted(current.tags)) == (
                body,
                status,
                kind,
                sorted(tags),
            )
            if same or updated_at is None or updated_at <= current.updated_at:
                reason = "The same item is there already." if same else "Yours is newer."
                report.add("work", title, "skipped", reason)
                return
            work_update(
                user=user,
                pk=current.pk,
                actor=actor,
                body=body,
                kind=kind,
                status=status,
                tags=tags,
            )
    except ServiceError as error:
        _refuse(report, "work", title, error.message)
        return
    except TypeError as error:  # a value of the wrong type for the service
        _refuse(report, "work", title, f"A front matter value has the wrong type ({error}).")
        return
    report.add("work", title, "updated")
