"""Import: a Mnemo export (portability/format.py) or another tool's memories
(portability/importers.py) applied to one account, as a Celery job (portability/tasks.py).

A Mnemo export is checked whole before anything is written (portability/checking.py): the
zip's directory and limits, the manifest, and every member, line, document and work file
against the rules of the write paths. An archive that fails the check as a whole is refused
and nothing is written; an item that fails alone is refused and listed with its reason.

Every change then goes through the layers' write paths, as the user: memories through
memory/services.py, documents through context/services.py, work through work/services.py,
settings and agents through profiles/services.py, so history, versions and activity are
recorded as for any other change. Each item (a memory line, a document, a work file, the
settings, an agent) is applied in its own transaction: an item a write path still refuses
leaves nothing behind, and the items before it stay applied.

Merge (the default) keeps what is there: for a memory key the newer `updated_at` wins; a
document is written when its body differs and its newest version in the archive is newer
than the account's document; a work item matching one by title and creation time (or by
title and body) is updated when the archive's is newer, else created; items the check
refused are skipped. Replace deletes the account's memories, documents and work items
through the same services, then imports into the empty account; it starts only when the
check refused nothing and the archive holds at least one memory, document or work item,
so a refused or empty archive changes nothing. The archive's histories
(memory_history.jsonl, document_versions.jsonl) are kept for the memories and documents the
import creates; activity and proposals are checked but not replayed: the write paths record
the import's own history, versions and events.

A job ends `done` or `failed` whatever happens in it (a refusal, a bug, an error of the
archive library): the reason is saved and its page stops polling. Its summary is bounded:
counts by kind, the first MAX_LISTED_REFUSALS refusals and MAX_LISTED_OTHERS other items,
and how many more there were.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from activity.actors import Actor, ActorKind
from context.models import Document
from context.paths import normalize_path
from context.services import (
    MAX_BODY_BYTES,
    PastVersion,
    document_delete,
    document_versions_replay,
    document_write,
    past_version_problem,
)
from lib.errors import NotFound, ServiceError
from memory.models import Memory
from memory.replay import PastChange, memory_history_replay, past_change_problem
from memory.services import memory_delete, memory_upsert
from memory.snapshots import same_state
from portability import format as fmt
from portability.checking import (
    MAX_WORK_FILE_BYTES,
    ArchiveRefused,
    CheckedArchive,
    DocumentEntry,
    VersionLines,
    audience_agent,
    check_archive,
    checked_lines,
    document_body,
    line_checks,
    parse_time,
    past_change,
    past_version,
    read_member,
    read_work_file,
    shown,
)
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

MAX_UPLOAD_BYTES = 1024 * 1024 * 1024  # the zip itself

# What a job's summary lists, whatever the archive holds; the counters count everything.
MAX_LISTED_REFUSALS = 200
MAX_LISTED_OTHERS = 300
MAX_NOTES = 20
ITEM_CHARS = 200
REASON_CHARS = 400
PROGRESS_EVERY_SECONDS = 0.5

# An archive line without a time is older than anything in the account.
NEVER_NEWER = datetime.max.replace(tzinfo=UTC)


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
        job = ImportJob(
            user=user, kind=kind, mode=mode, original_name=shown(upload.name or "", 255)
        )
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
        report.note(
            f"Attempt {job.attempts}: an earlier attempt stopped without finishing (its "
            "worker ended). What it applied was checked again by this one."
        )
    status, error = ImportStatus.DONE, ""
    try:
        with job.file.open("rb") as upload:
            if job.kind == ImportKind.MNEMO:
                import_archive(user=job.user, fileobj=upload, mode=job.mode, report=report)
            else:
                from portability.importers import import_text

                import_text(user=job.user, kind=job.kind, fileobj=upload, report=report)
    except ArchiveRefused as refused:
        status, error = ImportStatus.FAILED, refused.reason
    except Exception as failure:  # whatever it is, the job ends and says so
        logger.exception("Import %s failed", job_id)
        status = ImportStatus.FAILED
        error = f"The import stopped on an unexpected error ({type(failure).__name__}): " + (
            "nothing was written."
            if not report.writing
            else "what was applied before it stays (what Replace deleted stays restorable "
            "from history and Recently deleted); the rest was not imported."
            if job.mode == ImportMode.REPLACE
            else "what was applied before it stays; the rest was not imported."
        )
    # Not in a `finally`: a worker stopped mid-job (a shutdown) leaves the job running with
    # its upload, for beat's sweep to send again.
    report.finish(status=status, error=error)
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
    """Mark failed the running jobs whose worker stopped and that cannot be sent again
    (their last allowed attempt, or their upload gone), and delete their uploads."""
    now = now or timezone.now()
    exhausted = ImportJob.objects.filter(
        Q(attempts__gte=MAX_ATTEMPTS) | Q(file=""),
        status=ImportStatus.RUNNING,
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
    """What the import did, item by item; saved on the job as it goes (the page polls it).

    Bounded whatever the archive holds: every item is counted, the first
    MAX_LISTED_REFUSALS refusals and MAX_LISTED_OTHERS other items are listed, and text from
    the archive is stored as `shown` makes it (escaped, cut)."""

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
    writing: bool = False  # whether the import has started writing to the account
    listed: dict[str, int] = field(default_factory=lambda: {"refused": 0, "other": 0})
    unlisted: dict[str, int] = field(default_factory=lambda: {"refused": 0, "other": 0})
    _saved_at: float = 0.0

    def set_total(self, total: int) -> None:
        self.total = max(total, self.processed, 0)
        ImportJob.objects.filter(pk=self.job.pk).update(total=self.total)

    def add(self, section: str, item: str, outcome: str, reason: str = "") -> None:
        self.counts[outcome] += 1
        per = self.sections.setdefault(section, dict.fromkeys(self.counts, 0))
        per[outcome] += 1
        kind = "refused" if outcome == "refused" else "other"
        room = MAX_LISTED_REFUSALS if kind == "refused" else MAX_LISTED_OTHERS
        if self.listed[kind] < room:
            self.listed[kind] += 1
            self.items.append(
                {
                    "section": section,
                    "item": shown(item, ITEM_CHARS),
                    "outcome": outcome,
                    "reason": shown(reason, REASON_CHARS),
                }
            )
        else:
            self.unlisted[kind] += 1
        self.step()

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(shown(text, REASON_CHARS))

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
        self.alive()

    def alive(self) -> None:
        """Save the progress if it is due: the page shows it, and beat's sweep takes a job
        silent for IMPORT_LEASE for one whose worker stopped."""
        if time.monotonic() - self._saved_at >= PROGRESS_EVERY_SECONDS:
            self._save()

    def _save(self, **extra: Any) -> None:
        self._saved_at = time.monotonic()
        ImportJob.objects.filter(pk=self.job.pk).update(
            progressed_at=timezone.now(),
            processed=self.processed,
            # While the archive is checked the total is not known yet (0: "checking").
            total=max(self.total, self.processed) if self.total else 0,
            **self.counts,
            **extra,
        )

    def finish(self, *, status: str, error: str = "") -> None:
        """Save the outcome. Never raises: should the summary not save, the outcome is
        saved without it, so the job ends and its page stops polling either way."""
        if status == ImportStatus.DONE:
            self.total = max(self.total, self.processed)
        summary = {
            "sections": self.sections,
            "items": self.items,
            "notes": self.notes,
            "unlisted": self.unlisted,
        }
        done = {"status": status, "finished_at": timezone.now()}
        for saved in (
            {**done, "error": shown(error, 2000), "summary": summary},
            {**done, "error": shown(error or "The import's summary could not be saved.", 2000)},
        ):
            try:
                with transaction.atomic():
                    self._save(**saved)
            except Exception:
                logger.exception("Import %s: its outcome did not save", self.job.pk)
            else:
                return


# --- the archive ----------------------------------------------------------------------


def import_archive(
    *, user: AbstractBaseUser, fileobj: IO[bytes], mode: str, report: Report
) -> None:
    """Import a Mnemo export into the user's account (see the module's docstring)."""
    checked = check_archive(user=user, fileobj=fileobj, report=report)
    with checked.archive:
        if mode == ImportMode.REPLACE:
            _may_replace(checked, report)
        actor = Actor.for_user(user)
        report.writing = True
        # Settings and agents are one item each; every item refused so far is counted in.
        total = report.processed + 1 + len(checked.agents) + checked.items
        if mode == ImportMode.REPLACE:
            report.set_total(total + _replace_count(user))
            _delete_everything(user, actor, report)
        else:
            report.set_total(total)
        _import_profile(user, checked, mode, report)
        created_keys = _import_memories(user, actor, checked, report)
        _replay_memory_history(user, checked, created_keys, report)
        created_documents = _import_documents(user, actor, checked, mode, report)
        _replay_document_versions(user, checked, created_documents, report)
        _import_work(user, actor, checked, report)
        report.note(
            "The earlier history of each memory and document this import created was kept "
            "before the import's own change. Activity and review proposals in the archive "
            "were checked but not replayed: this account's activity records the import."
        )


def _may_replace(checked: CheckedArchive, report: Report) -> None:
    """Replace deletes first, so it starts only on an archive the check accepted whole and
    that brings something in its place; otherwise nothing is changed."""
    refused = report.counts["refused"]
    if refused:
        raise ArchiveRefused(
            f"Replace did not start, and nothing was changed: the check refused {refused:,} "
            f"item{'s' if refused > 1 else ''} of the archive (listed below). Replace deletes "
            "your memories, documents and work items first, so it runs only on an archive "
            "with nothing refused; Merge would import the rest."
        )
    if not checked.items:
        raise ArchiveRefused(
            "Replace did not start, and nothing was changed: the archive holds no memory, "
            "document or work item to import in place of yours."
        )


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

    memories = Memory.objects.filter(user=user).select_related("owner_agent").order_by("key", "pk")
    for memory in memories.only("key", "owner_agent").iterator():
        with contextlib.suppress(NotFound):
            memory_delete(
                user=user,
                key=memory.key,
                actor=actor,
                reason="Replaced by an import",
                owner_agent=memory.owner_agent,
            )
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


def _import_profile(
    user: AbstractBaseUser, checked: CheckedArchive, mode: str, report: Report
) -> None:
    if checked.profile is not None:
        _import_settings(user, checked.profile, report)
    else:
        report.step()
    for agent in checked.agents:
        _import_agent(user, agent, mode, report)


def _import_settings(user: AbstractBaseUser, data: dict[str, Any], report: Report) -> None:
    values = {name: data[name] for name in fmt.PROFILE_FIELDS if name in data}
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


def _import_agent(user: AbstractBaseUser, data: dict[str, Any], mode: str, report: Report) -> None:
    """Create the agent, or bring an existing one's display name, description and learning
    switch to the archive's: always on replace; on merge only the texts it has none of."""
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
    user: AbstractBaseUser, actor: Actor, checked: CheckedArchive, report: Report
) -> set[tuple[str | None, str]]:
    """The memories the import created, as (the agent whose note it is or None, key);
    lines the check refused are skipped. A note goes back under the agent of its name,
    made as the import makes agents (agent_get_or_create) when the account has none."""
    created: set[tuple[str | None, str]] = set()
    info = checked.info(fmt.MEMORIES)
    if info is None:
        return created
    check = line_checks(user)[fmt.MEMORIES]
    agents: dict[str, Agent] = {}
    for _, record, _ in checked_lines(checked.archive, info, check):
        if record is None:
            continue
        name = audience_agent(record)
        owner = _agent(user, name, agents) if name is not None else None
        if _import_memory(user, actor, record, report, owner):
            created.add((name, record["key"]))
    return created


def _import_memory(
    user: AbstractBaseUser,
    actor: Actor,
    record: dict[str, Any],
    report: Report,
    owner_agent: Agent | None = None,
) -> bool:
    """Whether the memory was created (`owner_agent`: as that agent's own note)."""
    key = record["key"]
    item = key if owner_agent is None else f"{owner_agent.name}'s note {key}"
    wanted = {
        "value": record["value"],
        "source": record.get("source"),
        "confidence": record.get("confidence"),
        "tags": record.get("tags") or [],
        "pinned": record.get("pinned") or False,
    }
    # An archive from before issue 26 has neither: the memory is said when imported.
    when = {
        name: record[name] for name in ("occurred_at", "session") if record.get(name) is not None
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
            owner_agent=owner_agent,
            **wanted,
            **when,
        )
    except ServiceError as error:
        _refuse(report, "memories", item, error.message)
        return False
    if write.created:
        report.add("memories", item, "created")
    elif write.changed:
        report.add("memories", item, "updated")
    elif same_state(write.memory.snapshot(), {**write.memory.snapshot(), **wanted, **when}):
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

    def __call__(self, data: dict[str, Any]) -> Actor:
        """`data` passed portability/checking.py actor_problem."""
        kind = data["type"]
        if kind == ActorKind.USER:
            return Actor.for_user(self.user)
        if kind == ActorKind.SYSTEM:
            return Actor.system()
        name = data.get("agent")
        if not isinstance(name, str):
            return Actor(ActorKind.AGENT)
        if name not in self.agents:
            self.agents[name] = Agent.objects.filter(user=self.user, name=name).first()
        return Actor(ActorKind.AGENT, agent=self.agents[name])


def _replay_memory_history(
    user: AbstractBaseUser,
    checked: CheckedArchive,
    created: set[tuple[str | None, str]],
    report: Report,
) -> None:
    """Keep the archive's history of each memory the import created (lines the check
    refused are skipped), in its audience."""
    info = checked.info(fmt.MEMORY_HISTORY)
    if info is None or not created:
        return
    actors = _PastActors(user)
    owners: dict[str, Agent] = {}  # the agents of the notes created, made by then
    batch: list[PastChange] = []
    check = line_checks(user)[fmt.MEMORY_HISTORY]
    for _, record, _ in checked_lines(checked.archive, info, check):
        if record is None:
            continue
        name = audience_agent(record)
        if (name, record["key"]) not in created:
            continue  # history of a memory the import did not create
        owner = _agent(user, name, owners) if name is not None else None
        change = past_change(record, actors(record["actor"]), owner)
        if past_change_problem(change):  # the replay's own rule; the check passed it
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


def _import_documents(
    user: AbstractBaseUser, actor: Actor, checked: CheckedArchive, mode: str, report: Report
) -> dict[tuple[str | None, str], Document]:
    """The documents the import created, by (agent name, path)."""
    created: dict[tuple[str | None, str], Document] = {}
    latest = checked.latest_versions if mode == ImportMode.MERGE else {}
    agents: dict[str, Agent] = {}
    for entry in checked.documents:
        raw = read_member(checked.archive, checked.members[entry.member], MAX_BODY_BYTES)
        body, problem = document_body(raw)
        if problem:  # the check read the same bytes; never here but for a changed file
            _refuse(report, "documents", entry.item, problem)
            continue
        _import_document(user, actor, entry, body, latest, agents, created, report)
    return created


def _import_document(
    user: AbstractBaseUser,
    actor: Actor,
    entry: DocumentEntry,
    body: str,
    latest: dict[tuple[str | None, str], datetime],
    agents: dict[str, Agent],
    created: dict[tuple[str | None, str], Document],
    report: Report,
) -> None:
    item, path = entry.item, entry.path
    try:
        agent = _agent(user, entry.agent, agents) if entry.agent else None
        with transaction.atomic():
            current = (
                Document.objects.select_for_update()
                .filter(user=user, agent=agent, shared_scope=None, path=path)
                .first()
            )
            if current is not None:
                if current.body == body:
                    report.add("documents", item, "skipped", "The same text is there already.")
                    return
                changed = latest.get((entry.agent, path))
                if changed is None or changed <= current.updated_at:
                    report.add("documents", item, "skipped", "Yours is newer.")
                    return
            written = document_write(user=user, agent=agent, path=path, content=body, actor=actor)
    except ServiceError as error:
        _refuse(report, "documents", item, error.message)
        return
    if current is None:
        created[(entry.agent, written.path)] = written
    report.add("documents", item, "created" if current is None else "updated")


def _replay_document_versions(
    user: AbstractBaseUser,
    checked: CheckedArchive,
    created: dict[tuple[str | None, str], Document],
    report: Report,
) -> None:
    """Keep the archive's earlier versions of each document the import created (lines the
    check refused are skipped)."""
    info = checked.info(fmt.DOCUMENT_VERSIONS)
    if info is None or not created:
        return
    actors = _PastActors(user)
    batch: list[tuple[Document, PastVersion]] = []
    check = VersionLines()
    for _, record, _ in checked_lines(checked.archive, info, check):
        if record is None:
            continue
        document = created.get((record["agent"], normalize_path(record["path"])))
        if document is None:
            continue  # a version of a document the import did not create
        version = past_version(record, actors(record["actor"]))
        if past_version_problem(version):  # the replay's own rule; the check passed it
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


def _import_work(
    user: AbstractBaseUser, actor: Actor, checked: CheckedArchive, report: Report
) -> None:
    agents: dict[str, Agent] = {}
    for name in checked.work:
        raw = read_member(checked.archive, checked.members[name], MAX_WORK_FILE_BYTES)
        values, body, problem = read_work_file(raw)
        if problem:  # the check read the same bytes; never here but for a changed file
            _refuse(report, "work", name, problem)
            continue
        _import_work_item(user, actor, values, body, values["title"], agents, report)


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
