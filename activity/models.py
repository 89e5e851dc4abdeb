from django.conf import settings
from django.db import models

from activity.actors import ActorMixin


class EventType(models.TextChoices):
    MEMORY_WRITTEN = "memory_written", "Memory written"
    MEMORY_DELETED = "memory_deleted", "Memory deleted"
    WORK_CREATED = "work_created", "Work created"
    DOCUMENT_WRITTEN = "document_written", "Document written"
    DOCUMENT_DELETED = "document_deleted", "Document deleted"
    PROPOSAL_CREATED = "proposal_created", "Change proposed for review"
    PROPOSAL_ACCEPTED = "proposal_accepted", "Proposal accepted"
    PROPOSAL_REJECTED = "proposal_rejected", "Proposal rejected"
    PROPOSAL_EXPIRED = "proposal_expired", "Proposal expired"
    TURN_REPORTED = "turn_reported", "Turn reported"
    TURN_PROCESSED = "turn_processed", "Turn processed"
    CONSOLIDATION_APPLIED = "consolidation_applied", "Consolidation applied"
    CONSOLIDATION_FAILED = "consolidation_failed", "Consolidation failed"
    CAPTURE_FAILED = "capture_failed", "Capture failed"
    LLM_BUDGET_REACHED = "llm_budget_reached", "Daily LLM budget reached"
    HEARTBEAT_OK = "heartbeat_ok", "Heartbeat OK"
    HEARTBEAT_FINDING = "heartbeat_finding", "Heartbeat finding"
    HEARTBEAT_FAILED = "heartbeat_failed", "Heartbeat failed"
    WORK_UPDATED = "work_updated", "Work updated"
    BOOTSTRAP_COMPLETED = "bootstrap_completed", "Bootstrap completed"
    WORK_DELETED = "work_deleted", "Work deleted"
    WORK_RESTORED = "work_restored", "Work restored"


class AppendOnlyError(Exception):
    pass


class ActivityEvent(ActorMixin):
    """One thing that happened. Append-only: written by activity.events, never changed."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="activity_events",
        help_text="Whose activity this is; empty for the global scope.",
    )
    event_type = models.CharField(max_length=32, choices=EventType.choices)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "activity_log"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="activity_user_recent")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(event_type__in=EventType.values), name="activity_event_type"
            ),
            ActorMixin.actor_constraint("activity_actor_consistent"),
        ]

    def __str__(self) -> str:
        return f"{self.get_event_type_display()} by {self.actor_label}"

    def save(self, *args: object, **kwargs: object) -> None:
        if not self._state.adding:
            raise AppendOnlyError("Activity events are append-only.")
        super().save(*args, **kwargs)
