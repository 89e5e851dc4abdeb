"""An import: one uploaded file (a Mnemo export, or another tool's memories) applied to one
account by a Celery job (portability/tasks.py), with its progress and its summary."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.db import models
from django.urls import reverse
from django.utils import timezone


def import_storage() -> FileSystemStorage:
    """Uploads wait for their job under MNEMO_DATA_DIR/imports, never under a served folder;
    the job deletes its file when it ends."""
    return FileSystemStorage(location=settings.DATA_DIR / "imports")


STALLED_AFTER = timedelta(minutes=1)


class ImportKind(models.TextChoices):
    MNEMO = "mnemo", "A Mnemo export (.zip)"
    CHATGPT = "chatgpt", "ChatGPT memories (copied text)"
    CLAUDE = "claude", "Claude memory (exported text)"
    MEM0 = "mem0", "mem0 export (JSON)"


class ImportMode(models.TextChoices):
    MERGE = "merge", "Merge"
    REPLACE = "replace", "Replace"


class ImportStatus(models.TextChoices):
    PENDING = "pending", "Waiting"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ImportJob(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_jobs"
    )
    kind = models.CharField(max_length=8, choices=ImportKind.choices, default=ImportKind.MNEMO)
    mode = models.CharField(max_length=8, choices=ImportMode.choices, default=ImportMode.MERGE)
    status = models.CharField(
        max_length=8, choices=ImportStatus.choices, default=ImportStatus.PENDING
    )
    file = models.FileField(storage=import_storage, upload_to="%Y/%m", max_length=255, blank=True)
    original_name = models.CharField(max_length=255, blank=True)
    total = models.PositiveIntegerField(default=0, help_text="Items to go through.")
    processed = models.PositiveIntegerField(default=0)
    created = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0)
    pending = models.PositiveIntegerField(default=0, help_text="Sent to the review inbox.")
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, help_text="Why the whole import failed, if it did.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    progressed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the running job last saved its progress."
    )
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Times a worker took the job (more than one: a worker stopped)."
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="import_user_recent")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=ImportKind.values), name="import_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(mode__in=ImportMode.values), name="import_mode_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=ImportStatus.values), name="import_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Import {self.pk} ({self.kind}, {self.mode}) of {self.user}: {self.status}"

    def url(self) -> str:
        return reverse("import_job", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (ImportStatus.DONE, ImportStatus.FAILED)

    @property
    def percent(self) -> int:
        if self.finished:
            return 100
        if not self.total:
            return 0
        return min(100, self.processed * 100 // self.total)

    @property
    def stalled(self) -> bool:
        """Running, and no progress saved for a minute (a running job saves it twice a
        second): its page then polls slowly until beat's sweep sends it again or fails it."""
        return (
            self.status == ImportStatus.RUNNING
            and self.progressed_at is not None
            and self.progressed_at < timezone.now() - STALLED_AFTER
        )

    @property
    def items(self) -> list[dict[str, Any]]:
        items = self.summary.get("items", []) if isinstance(self.summary, dict) else []
        return list(items) if isinstance(items, list) else []


def export_storage() -> FileSystemStorage:
    """Prepared exports wait under MNEMO_DATA_DIR/exports (never a served folder) until
    they are downloaded through the owner's session, and are deleted when they expire."""
    return FileSystemStorage(location=settings.DATA_DIR / "exports")


class ExportJob(models.Model):
    """An export prepared in the background, so its page can show the progress and large
    accounts download a finished file (portability/exporting.py)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="export_jobs"
    )
    status = models.CharField(
        max_length=8, choices=ImportStatus.choices, default=ImportStatus.PENDING
    )
    file = models.FileField(storage=export_storage, max_length=255, blank=True)
    filename = models.CharField(max_length=255, blank=True, help_text="The download's name.")
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes of the finished zip.")
    total = models.PositiveIntegerField(default=0, help_text="Rows and files to write.")
    processed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    progressed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="When the finished file is deleted."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="export_user_recent")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=ImportStatus.values), name="export_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Export {self.pk} of {self.user}: {self.status}"

    def url(self) -> str:
        return reverse("export_job", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (ImportStatus.DONE, ImportStatus.FAILED)

    @property
    def downloadable(self) -> bool:
        return self.status == ImportStatus.DONE and bool(self.file)

    @property
    def percent(self) -> int:
        if self.finished:
            return 100
        if not self.total:
            return 0
        return min(99, self.processed * 100 // self.total)
