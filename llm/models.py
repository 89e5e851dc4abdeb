"""The turns agents report and the LLM calls made about them (and, later, for anything
else: the purpose says what for). Both are below the memory and context layers so that a
memory, a proposal or a document version can link back to the turn it came from."""

from django.conf import settings
from django.db import models
from django.db.models import Q

MAX_CLIENT_TURN_ID = 128


class TurnStatus(models.TextChoices):
    SKIPPED = "skipped", "Not learned from (learning is off)"
    QUEUED = "queued", "Waiting to be processed"
    DONE = "done", "Processed"
    FAILED = "failed", "Processing failed"


class Turn(models.Model):
    """One conversation turn an agent reported (`POST /api/v1/turns`), and what came of it.

    `client_turn_id` is the agent's own id for the turn: reporting it again finds this row,
    so the work is done once. `outcome` is the summary learning/pipeline.py writes when
    the turn is processed (the profile's fate, observations, tokens)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        "profiles.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="turns"
    )
    client_turn_id = models.CharField(max_length=MAX_CLIENT_TURN_ID, blank=True)
    # The conversation the turn was part of ("" when the agent did not say): what capture
    # learns from it carries it as the memories' session (memory/models.py).
    session = models.CharField(max_length=100, blank=True, default="")
    user_message = models.TextField()
    assistant_reply = models.TextField()
    tool_outputs = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=8, choices=TurnStatus.choices)
    # Why nothing is learned from a skipped turn, in words the agent can pass on.
    skipped_reason = models.CharField(max_length=200, blank=True)
    # Processing claims the turn (attempts + 1, claimed_at now); a claim older than the
    # lease is a worker that died, and beat's sweep sends the turn again (learning/tasks.py).
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.JSONField(default=dict, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-received_at"], name="turn_user_recent"),
            models.Index(fields=["received_at"], name="turn_queued", condition=Q(status="queued")),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "agent", "client_turn_id"],
                condition=~Q(client_turn_id=""),
                name="turn_unique_client_id_per_agent",
            ),
            models.CheckConstraint(
                condition=Q(status__in=TurnStatus.values), name="turn_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="skipped") | Q(skipped_reason=""),
                name="turn_skipped_reason_only_when_skipped",
            ),
        ]

    def __str__(self) -> str:
        return f"turn {self.pk} of {self.user}"


class CallOutcome(models.TextChoices):
    OK = "ok", "Answered"
    TIMEOUT = "timeout", "Timed out"
    ERROR = "error", "Failed"


class LLMCall(models.Model):
    """One chat completion (its tries included), counted against the user's daily budget."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey(
        Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_calls"
    )
    purpose = models.CharField(max_length=32)  # consolidation, capture, …
    model = models.CharField(max_length=200)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=8, choices=CallOutcome.choices)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "created_at"], name="llmcall_user_time")]
        constraints = [
            models.CheckConstraint(
                condition=Q(outcome__in=CallOutcome.values), name="llmcall_outcome_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} by {self.model} ({self.total_tokens} tokens)"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
