"""Import: a Mnemo export (portability/format.py) or another tool's memories
(portability/importers.py) applied to one account, as a Celery job (portability/tasks.py).

A Mnemo export is checked whole before anything is written (portability/validation/): the
zip's directory and limits, the manifest, and every member, line, document and work file
against the rules of the write paths. An archive that fails the check as a whole is refused
and nothing is written; an item that fails alone is refused and listed with its reason.
What the check accepted is then applied through the layers' write paths, merged or in place
of the account's (portability/applying.py), and the archive's earlier history of what the
import created is kept (portability/replaying.py).

A job ends `done` or `failed` whatever happens in it (a refusal, a bug, an error of the
archive library): the reason is saved and its page stops polling. Its summary is bounded
(portability/report.py): counts by kind, the first MAX_LISTED_REFUSALS refusals and
MAX_LISTED_OTHERS other items, and how many more there were.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import IO, TYPE_CHECKING

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from activity.actors import Actor
from lib.errors import ServiceError
from portability import applying, replaying
from portability.importers import import_text
from portability.models import ImportJob, ImportKind, ImportMode, ImportStatus
from portability.report import Report
from portability.validation.archive import check_archive
from portability.validation.reading import ArchiveRefused, shown

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)


MAX_UPLOAD_BYTES = 1024 * 1024 * 1024  # the zip itself


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


# --- the archive ----------------------------------------------------------------------


def import_archive(
    *, user: AbstractBaseUser, fileobj: IO[bytes], mode: str, report: Report
) -> None:
    """Import a Mnemo export into the user's account (see the module's docstring)."""
    checked = check_archive(user=user, fileobj=fileobj, report=report)
    with checked.archive:
        if mode == ImportMode.REPLACE:
            applying.may_replace(checked, report)
        actor = Actor.for_user(user)
        report.writing = True
        # Settings and agents are one item each; every item refused so far is counted in.
        total = report.processed + 1 + len(checked.agents) + checked.items
        if mode == ImportMode.REPLACE:
            report.set_total(total + applying.replace_count(user))
            applying.delete_everything(user, actor, report)
        else:
            report.set_total(total)
        applying.import_profile(user, checked, mode, report)
        created_keys = applying.import_memories(user, actor, checked, report)
        replaying.replay_memory_history(user, checked, created_keys, report)
        created_documents = applying.import_documents(user, actor, checked, mode, report)
        replaying.replay_document_versions(user, checked, created_documents, report)
        applying.import_work(user, actor, checked, report)
        report.note(
            "The earlier history of each memory and document this import created was kept "
            "before the import's own change. Activity and review proposals in the archive "
            "were checked but not replayed: this account's activity records the import."
        )
