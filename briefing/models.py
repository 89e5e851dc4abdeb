"""The heartbeat's record: one row per run of a user's HEARTBEAT.md checklist
(briefing/heartbeat.py writes them; the Settings page and the navigation read them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

# Tries of a finding's webhook POST the database accepts; the setting stays below it.
MAX_WEBHOOK_ATTEMPTS = 10


class RunOutcome(models.TextChoices):
    RUNNING = "running", "Running"
    OK = "ok", "Nothing to report"
    FINDING = "finding", "Finding"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"


class RunTrigger(models.TextChoices):
    SCHEDULE = "schedule", "Schedule"
    MANUAL = "manual", "Run now"


class WebhookStatus(models.TextChoices):
    NONE = "", "No webhook"
    PENDING = "pending", "Sending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class HeartbeatRun(models.Model):
    """One run of a user's heartbeat checklist, from its claim to its outcome.

    A row is inserted `running` before the model is asked (the claim) and finished once;
    `next_due_at` is when the schedule may run this user's checklist again, so the latest
    finished run is the whole schedule. A run whose worker died is finished `failed` by the
    next tick (briefing/heartbeat.py RUN_LEASE).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="heartbeat_runs"
    )
    trigger = models.CharField(
        max_length=16, choices=RunTrigger.choices, default=RunTrigger.SCHEDULE
    )
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=16, choices=RunOutcome.choices, default=RunOutcome.RUNNING
    )
    reason = models.TextField(blank=True, help_text="Why it was skipped or failed.")
    next_due_at = models.DateTimeField(
        null=True, blank=True, help_text="When the schedule may run the checklist again."
    )
    work_item = models.ForeignKey(
        "work.WorkItem",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="heartbeat_runs",
        help_text="The finding, when the model reported one.",
    )
    finding_seen_at = models.DateTimeField(
        null=True, blank=True, help_text="When the user opened the findings (the nav count)."
    )
    webhook_status = models.CharField(
        max_length=16, choices=WebhookStatus.choices, default=WebhookStatus.NONE, blank=True
    )
    webhook_attempts = models.PositiveSmallIntegerField(default=0)
    webhook_last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        # The table it had in learning/ (briefing/migrations/0001_heartbeat_run_from_learning.py
        # took the model over without moving a row).
        db_table = "learning_heartbeatrun"
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["user", "-started_at"], name="heartbeat_user_recent")]
        constraints = [
            # Never two heartbeats for one user at once: the claim's insert fails instead.
            models.UniqueConstraint(
                fields=["user"],
                condition=Q(outcome=RunOutcome.RUNNING),
                name="heartbeat_one_running_per_user",
                violation_error_message="A heartbeat is already running for this user.",
            ),
            models.CheckConstraint(
                condition=Q(outcome__in=RunOutcome.values), name="heartbeat_outcome"
            ),
            models.CheckConstraint(
                condition=Q(trigger__in=RunTrigger.values), name="heartbeat_trigger"
            ),
            models.CheckConstraint(
                condition=Q(webhook_status__in=WebhookStatus.values), name="heartbeat_webhook"
            ),
            # A running run has no end and no next run yet; a finished one has both.
            models.CheckConstraint(
                condition=(
                    Q(
                        outcome=RunOutcome.RUNNING,
                        finished_at__isnull=True,
                        next_due_at__isnull=True,
                    )
                    | (
                        ~Q(outcome=RunOutcome.RUNNING)
                        & Q(finished_at__isnull=False, next_due_at__isnull=False)
                    )
                ),
                name="heartbeat_finished_consistent",
            ),
            models.CheckConstraint(
                condition=Q(work_item__isnull=True) | Q(outcome=RunOutcome.FINDING),
                name="heartbeat_work_item_is_finding",
            ),
            models.CheckConstraint(
                condition=Q(webhook_attempts__lte=MAX_WEBHOOK_ATTEMPTS),
                name="heartbeat_webhook_attempts_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"Heartbeat of {self.user} at {self.started_at:%Y-%m-%d %H:%M} ({self.outcome})"
