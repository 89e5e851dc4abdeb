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
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from activity.actors import Actor, ActorKind
from context.models import Document
from context.services import (
    MAX_BODY_BYTES,
    PastVersion,
    document_delete,
    document_versions_replay,
    document_write,
    past_version_problem,
)
from lib.errors import NotFound, ServiceError
from memory.keys import parse_key
from memory.models import Memory
from memory.services import (
    PastChange,
    memory_delete,
    memory_history_replay,
    memory_upsert,
    past_change_problem,
)
from portability import format as fmt
from portability.models import ImportJob, ImportKind, ImportMode, ImportStatus
from profiles.models import Agent, Profile
from profiles.services import (
    agent_get_or_create,
    agent_set_details,
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

# An archive line without a time is older than anything in the account.
NEVER_NEWER = datetime.max.replace(tzinfo=UTC)

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
    """Queue the job. A broker that is down must not fail the request that made it: the
    job stays pending and the sweep sends it again after UNSENT_GRACE."""
    from portability import tasks

    try:
        tasks.run_import.delay(job_id)
    except Exception as error:
        logger.warning("Could not queue import job %s (the sweep will): %r", job_id, error)


# A running job saves its progress at least every PROGRESS_EVERY_SECONDS; one silent this
# long lost its worker. A job whose message was lost waits UNSENT_GRACE before it is sent again.
IMPORT_LEASE = timedelta(minutes=10)
UNSENT_GRACE = timedelta(minutes=2)
MAX_ATTEMPTS = 3


def import_job_run(job_id: int) -> None:
    """Run one job: claim it (a job runs once at a time, however often its message comes),
    import, record the summary, and delete the uploaded file.

    A job whose worker stopped (its progress went silent for IMPORT_LEASE) may be claimed
    again: merging again skips what the stopped run applied; replacing again deletes it
    and imports anew. Either way the account ends as one whole run would leave it."""
    now = timezone.now()
    claimable = Q(status=ImportStatus.PENDING) | Q(
        status=ImportStatus.RUNNING, progressed_at__lt=now - IMPORT_LEASE
    )
    claimed = (
        ImportJob.objects.filter(claimable, pk=job_id, attempts__lt=MAX_ATTEMPTS)
        .exclude(file="")
        .update(
            status=ImportStatus.RUNNING,
            started_at=now,
            progressed_at=now,
            attempts=F("attempts") + 1,
        )
    )
    if not claimed:
        return
    job = ImportJob.objects.select_related("user").get(pk=job_id)
    report = Report(job)
    if job.attempts > 1:
        report.notes.append(
            f"Attempt {job.attempts}: an earlier attempt stopped without finishing (its "
            "worker ended). What it applied was checked again by this one."
        )
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
        _drop_upload(job)


def _drop_upload(job: ImportJob) -> None:
    job.file.delete(save=False)
    ImportJob.objects.filter(pk=job.pk).update(file="")


def stalled_import_ids(now: datetime | None = None) -> list[int]:
    """Jobs to send again (beat's sweep): waiting ones whose message was lost, running ones
    whose worker stopped, while they have attempts left."""
    now = now or timezone.now()
    return list(
        ImportJob.objects.filter(
            Q(status=ImportStatus.PENDING, created_at__lt=now - UNSENT_GRACE)
            | Q(status=ImportStatus.RUNNING, progressed_at__lt=now - IMPORT_LEASE),
            attempts__lt=MAX_ATTEMPTS,
        )
        .exclude(file="")
        .order_by("created_at")
        .values_list("pk", flat=True)[:100]
    )


def fail_exhausted_imports(now: datetime | None = None) -> int:
    """Mark failed the running jobs whose last allowed attempt's worker stopped too, and
    delete their uploads."""
    now = now or timezone.now()
    exhausted = ImportJob.objects.filter(
        status=ImportStatus.RUNNING,
        attempts__gte=MAX_ATTEMPTS,
        progressed_at__lt=now - IMPORT_LEASE,
    )
    count = 0
    for job in exhausted:
        failed = ImportJob.objects.filter(pk=job.pk, status=ImportStatus.RUNNING).update(
            status=ImportStatus.FAILED,
            finished_at=now,
            error=(
                f"The import stopped {job.attempts} times without finishing (its worker "
                "ended each time); what was applied stays. Try a smaller archive, or ask "
                "the administrator to look at the worker's log."
            ),
        )
        if failed:
            _drop_upload(job)
            count += 1
    return count


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

    def count(self, section: str, outcome: str, number: int) -> None:
        """Count `number` rows of a section without listing each, nor adding them to the
        job's item counters (a history's rows are not items of the account)."""
        if not number:
            return
        per = self.sections.setdefault(section, dict.fromkeys(self.counts, 0))
        per[outcome] += number
        self.step()

    def step(self) -> None:
        self.processed += 1
        if time.monotonic() - self._saved_at >= PROGRESS_EVERY_SECONDS:
            self._save()

    def _save(self, **extra: Any) -> None:
        self._saved_at = time.monotonic()
        ImportJob.objects.filter(pk=self.job.pk).update(
            progressed_at=timezone.now(),
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
        counted = (fmt.MEMORIES, fmt.DOCUMENTS_DIR, fmt.WORK_DIR)
        total = 1 + sum(
            value for name, value in counts.items() if name in counted and isinstance(value, int)
        )
        actor = Actor.for_user(user)
        if mode == ImportMode.REPLACE:
            total += _replace_count(user)
            report.set_total(total)
            _delete_everything(user, actor, report)
        else:
            report.set_total(total)
        _import_profile(user, opened, mode, report)
        created_keys = _import_memories(user, actor, opened, mode, report)
        _replay_memory_history(user, opened, created_keys, report)
        created_documents = _import_documents(user, actor, opened, mode, report)
        _replay_document_versions(user, opened, created_documents, report)
        _import_work(user, actor, opened, mode, report)
        report.notes.append(
            "The earlier history of each memory and document this import created was kept "
            "before the import's own change. Activity and review proposals in the archive "
            "were checked but not replayed: this account's activity records the import."
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
        + WorkItem.objects.live().filter(user=user).count()
    )


def _delete_everything(user: AbstractBaseUser, actor: Actor, report: Report) -> None:
    """Replace mode's first step: the account's memories, documents and work items go,
    each through its service (history, versions and events are written as for any delete;
    deleted memories and documents stay restorable from their history, work items from
    Recently deleted work)."""
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
    work = WorkItem.objects.live().filter(user=user).order_by("pk").values_list("pk", flat=True)
    for pk in work:
        with contextlib.suppress(NotFound):
            work_delete(user=user, pk=pk, actor=actor)
        report.step()


def _refuse(report: Report, section: str, item: str, reason: str) -> None:
    report.add(section, item, "refused", reason)


def _import_profile(user: AbstractBaseUser, opened: _Archive, mode: str, report: Report) -> None:
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
        _import_agent(user, agent, mode, report)


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


def _import_agent(user: AbstractBaseUser, data: object, mode: str, report: Report) -> None:
    """Create the agent, or bring an existing one's display name, description and learning
    switch to the archive's: always on replace; on merge only the texts it has none of."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        _refuse(report, "agents", str(data)[:80], "An agent needs a name.")
        return
    name = data["name"]
    texts = {
        field: data[field]
        for field in ("display_name", "description")
        if isinstance(data.get(field), str)
    }
    learns = data.get("learns_from_turns")
    existing = Agent.objects.filter(user=user, name=name).first()
    changed = []
    try:
        with transaction.atomic():
            agent = existing or agent_get_or_create(user=user, name=name, **texts)
            if existing:
                taken = {
                    field: value
                    for field, value in texts.items()
                    if value != getattr(agent, field)
                    and (mode == ImportMode.REPLACE or not getattr(agent, field))
                }
                agent_set_details(agent=agent, **taken)
                changed += [field.replace("_", " ") for field in taken]
            takes_switch = existing is None or mode == ImportMode.REPLACE
            if isinstance(learns, bool) and agent.learns_from_turns != learns and takes_switch:
                agent_set_learning(agent=agent, learns_from_turns=learns)
                changed.append("learning from turns")
    except ServiceError as error:
        _refuse(report, "agents", name, error.message)
        return
    if existing is None:
        report.add("agents", name, "created")
    elif changed:
        report.add("agents", name, "updated", "Changed: " + ", ".join(changed))
    else:
        report.add("agents", name, "skipped", "You have this agent already.")


# --- memories -------------------------------------------------------------------------


def _import_memories(
    user: AbstractBaseUser, actor: Actor, opened: _Archive, mode: str, report: Report
) -> set[str]:
    """The keys of the memories the import created."""
    created: set[str] = set()
    info = opened.info(fmt.MEMORIES)
    if info is None:
        return created
    for number, record, problem in jsonl_records(opened.archive, info):
        item = f"{fmt.MEMORIES} line {number}"
        if record is None:
            _refuse(report, "memories", item, f"Line {number} is {problem}.")
        elif _import_memory(user, actor, record, item, report):
            created.add(record["key"])
    return created


def _import_memory(
    user: AbstractBaseUser, actor: Actor, record: dict[str, Any], item: str, report: Report
) -> bool:
    """Whether the memory was created."""
    key = record.get("key")
    try:
        parse_key(key)
    except ServiceError as error:
        _refuse(report, "memories", item, error.message)
        return False
    item = str(key)
    wanted = {
        "value": record.get("value"),
        "source": record.get("source"),
        "confidence": record.get("confidence"),
        "tags": record.get("tags") if record.get("tags") is not None else [],
        "pinned": bool(record.get("pinned", False)),
    }
    # The newer change wins; a line without a time never replaces what is there.
    changed_at = parse_time(record.get("updated_at")) or NEVER_NEWER
    try:
        write = memory_upsert(
            user=user,
            key=key,
            actor=actor,
            reason="Imported",
            unless_changed_since=changed_at,
            **wanted,
        )
    except ServiceError as error:
        _refuse(report, "memories", item, error.message)
        return False
    if write.created:
        report.add("memories", item, "created")
    elif write.changed:
        report.add("memories", item, "updated")
    elif write.memory.snapshot() == {**write.memory.snapshot(), **wanted}:
        report.add("memories", item, "skipped", "The same memory is there already.")
    else:
        when = write.memory.updated_at
        reason = f"Yours is newer (changed {when:%Y-%m-%d %H:%M} UTC)."
        report.add("memories", item, "skipped", reason)
    return write.created


# --- the history of what the import created ---------------------------------------------

REPLAY_BATCH = 1000


class _PastActors:
    """Actors of an archive's history in this account: the user, the system, or the
    account's agent of that name (an agent it does not have stays a nameless agent)."""

    def __init__(self, user: AbstractBaseUser) -> None:
        self.user = user
        self.agents: dict[str, Agent | None] = {}

    def __call__(self, data: object) -> Actor | None:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == ActorKind.USER:
            return Actor.for_user(self.user)
        if kind == ActorKind.SYSTEM:
            return Actor.system()
        if kind != ActorKind.AGENT:
            return None
        name = data.get("agent")
        if not isinstance(name, str):
            return Actor(ActorKind.AGENT)
        if name not in self.agents:
            self.agents[name] = Agent.objects.filter(user=self.user, name=name).first()
        return Actor(ActorKind.AGENT, agent=self.agents[name])


def _replay_memory_history(
    user: AbstractBaseUser, opened: _Archive, created: set[str], report: Report
) -> None:
    """Keep the archive's history of each memory the import created."""
    info = opened.info(fmt.MEMORY_HISTORY)
    if info is None or not created:
        return
    actors = _PastActors(user)
    batch: list[PastChange] = []
    for number, record, problem in jsonl_records(opened.archive, info):
        if record is None or record.get("key") not in created:
            continue  # a malformed line, or history of a memory the import did not create
        item = f"{fmt.MEMORY_HISTORY} line {number}"
        actor = actors(record.get("actor"))
        when = parse_time(record.get("created_at"))
        if actor is None or when is None:
            _refuse(report, "memory history", item, "It has no actor or no time.")
            continue
        change = PastChange(
            key=record["key"],
            action=record.get("action"),
            source=record.get("source"),
            before=record.get("before"),
            after=record.get("after"),
            actor=actor,
            created_at=when,
        )
        if problem := past_change_problem(change):
            _refuse(report, "memory history", item, problem)
            continue
        batch.append(change)
        if len(batch) >= REPLAY_BATCH:
            _keep_history(user, batch, report)
    _keep_history(user, batch, report)


def _keep_history(user: AbstractBaseUser, batch: list[PastChange], report: Report) -> None:
    with transaction.atomic():
        memory_history_replay(user=user, changes=batch)
    report.count("memory history", "created", len(batch))
    batch.clear()


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
) -> dict[tuple[str | None, str], Document]:
    """The documents the import created, by (agent name, path)."""
    created: dict[tuple[str | None, str], Document] = {}
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
                written = document_write(
                    user=user, agent=agent, path=path, content=body, actor=actor
                )
        except ServiceError as error:
            _refuse(report, "documents", item, error.message)
            continue
        if current is None:
            created[(agent_name, written.path)] = written
        report.add("documents", item, "created" if current is None else "updated")
    return created


def _replay_document_versions(
    user: AbstractBaseUser,
    opened: _Archive,
    created: dict[tuple[str | None, str], Document],
    report: Report,
) -> None:
    """Keep the archive's earlier versions of each document the import created."""
    info = opened.info(fmt.DOCUMENT_VERSIONS)
    if info is None or not created:
        return
    actors = _PastActors(user)
    batch: list[tuple[Document, PastVersion]] = []
    for number, record, _ in jsonl_records(opened.archive, info):
        document = created.get((record.get("agent"), record.get("path"))) if record else None
        if document is None:
            continue  # a malformed line, or a version of a document the import did not create
        item = f"{fmt.DOCUMENT_VERSIONS} line {number}"
        actor = actors(record.get("actor"))
        when = parse_time(record.get("created_at"))
        if actor is None or when is None:
            _refuse(report, "document versions", item, "It has no actor or no time.")
            continue
        version = PastVersion(
            action=record.get("action"), body=record.get("body"), actor=actor, created_at=when
        )
        if problem := past_version_problem(version):
            _refuse(report, "document versions", item, problem)
            continue
        batch.append((document, version))
        if len(batch) >= REPLAY_BATCH:
            _keep_versions(batch, report)
    _keep_versions(batch, report)


def _keep_versions(batch: list[tuple[Document, PastVersion]], report: Report) -> None:
    with transaction.atomic():
        document_versions_replay(versions=batch)
    report.count("document versions", "created", len(batch))
    batch.clear()


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
            mine = (
                WorkItem.objects.live().select_for_update().filter(user=user, title=title.strip())
            )
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
