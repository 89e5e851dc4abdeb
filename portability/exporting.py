"""Export as a background job: the archive of portability/export.py written to a file by
the worker (portability/tasks.py), with its progress saved as it goes so the job's page
can show a bar, then downloaded through the owner's session until it expires.

The streamed download (Settings' "Download now", GET /api/v1/export) stays: it needs no
worker, but a browser can show only the bytes received, not how far along it is.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from lib.errors import Conflict
from portability.export import export_chunks, export_counts, export_filename
from portability.models import ExportJob, ImportStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)

KEEP_FOR = timedelta(hours=24)  # a finished file waits this long for its download
EXPORT_LEASE = timedelta(minutes=10)  # progress saved less often than this: the worker died
UNSENT_GRACE = timedelta(minutes=2)
MAX_ATTEMPTS = 3
PROGRESS_EVERY_SECONDS = 0.5


def export_job_create(*, user: AbstractBaseUser) -> ExportJob:
    """Queue an export of the user's account (sent when the transaction commits).

    Conflict while another of the user's exports is waiting or running: one at a time."""
    with transaction.atomic():
        running = ExportJob.objects.select_for_update().filter(
            user=user, status__in=(ImportStatus.PENDING, ImportStatus.RUNNING)
        )
        if running.exists():
            raise Conflict("An export of your account is being prepared already.")
        job = ExportJob.objects.create(user=user, total=sum(export_counts(user).values()))
        transaction.on_commit(lambda: _send(job.pk))
    return job


def _send(job_id: int) -> None:
    """Queue the job. A broker that is down must not fail the request that made it: the
    job stays pending and the sweep sends it again after UNSENT_GRACE."""
    from portability import tasks

    try:
        tasks.run_export.delay(job_id)
    except Exception as error:
        logger.warning("Could not queue export job %s (the sweep will): %r", job_id, error)


def export_job_run(job_id: int) -> None:
    """Write the archive once (a job is claimed; a worker that died leaves a claim the
    sweep gives to another attempt), saving progress as it goes."""
    now = timezone.now()
    claimable = Q(status=ImportStatus.PENDING) | Q(
        status=ImportStatus.RUNNING, progressed_at__lt=now - EXPORT_LEASE
    )
    claimed = ExportJob.objects.filter(claimable, pk=job_id, attempts__lt=MAX_ATTEMPTS).update(
        status=ImportStatus.RUNNING,
        started_at=now,
        progressed_at=now,
        processed=0,
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return
    job = ExportJob.objects.select_related("user").get(pk=job_id)
    progress = _Progress(job.pk)
    name = export_filename(job.user, now)
    storage = job.file.storage
    stored = f"{job.user_id}-{job.pk}.zip"
    try:
        storage.delete(stored)  # what an earlier attempt left
        Path(storage.path(stored)).parent.mkdir(parents=True, exist_ok=True)
        with storage.open(stored, "wb") as handle:
            for chunk in export_chunks(job.user, on_item=progress.step):
                handle.write(chunk)
    except Exception:
        logger.exception("Export %s failed", job_id)
        storage.delete(stored)
        ExportJob.objects.filter(pk=job_id).update(
            status=ImportStatus.FAILED,
            finished_at=timezone.now(),
            error="The export stopped on an unexpected error; start it again.",
        )
        raise
    ExportJob.objects.filter(pk=job_id).update(
        status=ImportStatus.DONE,
        file=stored,
        filename=name,
        size=storage.size(stored),
        processed=progress.processed,
        total=max(job.total, progress.processed),
        progressed_at=timezone.now(),
        finished_at=timezone.now(),
        expires_at=timezone.now() + KEEP_FOR,
    )


class _Progress:
    """Counts what was written; saves it on the job at most every PROGRESS_EVERY_SECONDS
    (the saves are also the running job's sign of life)."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.processed = 0
        self._saved_at = time.monotonic()

    def step(self) -> None:
        self.processed += 1
        if time.monotonic() - self._saved_at >= PROGRESS_EVERY_SECONDS:
            self._saved_at = time.monotonic()
            ExportJob.objects.filter(pk=self.job_id).update(
                processed=self.processed, progressed_at=timezone.now()
            )


def stalled_export_ids(now: datetime | None = None) -> list[int]:
    """Jobs to send again (beat's sweep): a lost message, or a worker that stopped."""
    now = now or timezone.now()
    return list(
        ExportJob.objects.filter(
            Q(status=ImportStatus.PENDING, created_at__lt=now - UNSENT_GRACE)
            | Q(status=ImportStatus.RUNNING, progressed_at__lt=now - EXPORT_LEASE),
            attempts__lt=MAX_ATTEMPTS,
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:100]
    )


def expire_exports(now: datetime | None = None) -> int:
    """Delete the files of finished exports past their time, and fail the jobs whose
    worker stopped on their last attempt. How many files were deleted."""
    now = now or timezone.now()
    ExportJob.objects.filter(
        status=ImportStatus.RUNNING,
        attempts__gte=MAX_ATTEMPTS,
        progressed_at__lt=now - EXPORT_LEASE,
    ).update(
        status=ImportStatus.FAILED,
        finished_at=now,
        error="The export stopped three times without finishing; start it again.",
    )
    deleted = 0
    for job in ExportJob.objects.filter(expires_at__lt=now).exclude(file=""):
        job.file.delete(save=False)
        ExportJob.objects.filter(pk=job.pk).update(file="")
        deleted += 1
    return deleted
