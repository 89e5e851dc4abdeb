from datetime import UTC

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Func, Q
from django.db.models.functions import Length, Now
from django.db.models.lookups import Range
from django.utils import timezone

from activity.actors import ActorMixin
from memory.keys import KEY_PATTERN, MAX_KEY_LENGTH
from search.fields import EmbeddingFields

MAX_VALUE_LENGTH = 2000
MAX_TAGS = 20
MAX_REASON_LENGTH = 500
MAX_SESSION_LENGTH = 100
# The unique (user, audience, key) of Memory: the write path tells a lost race to insert a
# key (IntegrityError naming it) from any other failure (memory/write_sql.py).
UNIQUE_KEY_CONSTRAINT = "user_context_unique_key"


class Source(models.TextChoices):
    USER_STATED = "user_stated", "Stated by the user"
    TP_EXTRACTED = "tp_extracted", "Noted by an agent"
    DOCUMENT = "document", "Promoted from a document"


class Memory(EmbeddingFields):
    """What the assistant knows about the user: one key/value row per (user, audience, key).

    The audience is the user's memory (`owner_agent` empty: read by the agents the user
    lets read it) or one agent's own note (`owner_agent` set: read only by that agent and
    the user). A key names one row in each audience."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memories"
    )
    key = models.CharField(max_length=MAX_KEY_LENGTH)
    value = models.TextField()
    source = models.CharField(max_length=16, choices=Source.choices)
    confidence = models.FloatField()
    tags = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    pinned = models.BooleanField(default=False)
    # The agent whose own note this is; empty for the user's memory. An agent's notes go
    # with the agent when the admin deletes it (no page deletes agents).
    owner_agent = models.ForeignKey(
        "profiles.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="own_notes",
    )
    access_count = models.PositiveIntegerField(default=0)
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    # The reported turn this came from, when learning captured it (learning/capture.py).
    turn = models.ForeignKey(
        "llm.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # When what the memory says happened or was said (default: when it was written), and
    # the conversation it came from ("" when none): search favours a period the query
    # names and lifts memories said together with a strong hit (memory/search.py).
    occurred_at = models.DateTimeField(default=timezone.now, db_default=Now())
    session = models.CharField(max_length=MAX_SESSION_LENGTH, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The words of the key and the tags (weight A) and of the value (weight D): a tag or
    # a key word matches like a word of the text, and counts more (search/ranking.py).
    # The function is SQL in memory/migrations/0005_search_key_and_tags.py.
    search_vector = models.GeneratedField(
        expression=Func(
            "key",
            "tags",
            "value",
            function="mnemo_memory_tsvector",
            output_field=SearchVectorField(),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        db_table = "user_context"
        # No GIN index on search_vector: every search is one user's, and a filter over that
        # user's rows (through this index) is cheaper than ANDing the user's rows with a
        # GIN lookup whose common words match across all users. At 100 users x 1,000
        # entries the keyword side went from 3.8 to 1.9 ms mean, 7.6 to 2.7 ms p95
        # (bench/README.md).
        indexes = [
            models.Index(fields=["user", "embedding_model"], name="user_context_embedding"),
            models.Index(
                fields=["user", "session"],
                name="user_context_session",
                condition=~Q(session=""),
            ),
        ]
        verbose_name = "memory"
        verbose_name_plural = "memories"
        ordering = ["user_id", "key"]
        constraints = [
            # One row per key in the user's memory and one in each agent's notes.
            models.UniqueConstraint(
                fields=["user", "owner_agent", "key"],
                name=UNIQUE_KEY_CONSTRAINT,
                nulls_distinct=False,
            ),
            models.CheckConstraint(condition=Q(key__regex=KEY_PATTERN), name="user_context_key"),
            models.CheckConstraint(
                condition=Q(source__in=Source.values), name="user_context_source"
            ),
            models.CheckConstraint(
                condition=(
                    Q(source=Source.USER_STATED, confidence=1.0)
                    | Q(
                        source__in=[Source.TP_EXTRACTED, Source.DOCUMENT],
                        confidence__gt=0.0,
                        confidence__lt=1.0,
                    )
                ),
                name="user_context_confidence_for_source",
            ),
            models.CheckConstraint(
                condition=Range(Length("value"), (1, MAX_VALUE_LENGTH)),
                name="user_context_value_length",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def audience(self) -> str:
        """ "user" for the user's memory, "own" for an agent's own note (the API's name: an
        agent is only ever answered with its own notes)."""
        return "user" if self.owner_agent_id is None else "own"

    @property
    def kind(self) -> str:
        """The entry kind ("fact", …), "style" or "profile"."""
        if ":" in self.key:
            return self.key.split(":", 1)[0]
        if self.key.startswith(("tone_", "verbosity_")):
            return "style"
        return "profile"

    def snapshot(self) -> dict[str, object]:
        """The user-visible state of the row, as history stores it (the time as ISO 8601
        in UTC, as memory/occurrence.py `as_stored` writes it)."""
        return {
            "value": self.value,
            "source": self.source,
            "confidence": self.confidence,
            "tags": list(self.tags),
            "pinned": self.pinned,
            "occurred_at": self.occurred_at.astimezone(UTC).isoformat(),
            "session": self.session,
        }


class HistoryAction(models.TextChoices):
    CREATE = "create", "Created"
    UPDATE = "update", "Updated"
    DELETE = "delete", "Deleted"
    RESTORE = "restore", "Restored"
    RENAME = "rename", "Renamed"  # before and after carry "key": the old and the new
    # An agent's new note that said what this memory says already (memory/review_gate.py
    # _merge_note): the memory is left as it was, and the note is kept here rather than
    # lost. before and after are the memory's state; after also carries "merged": the
    # note, {"value": its text}. Who said it is the row's actor.
    MERGE = "merge", "Merged a note"


class MemoryHistory(ActorMixin):
    """One row per change to a memory, with the state before and after. Append-only."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_history"
    )
    key = models.CharField(max_length=MAX_KEY_LENGTH)
    # The memory it changed, kept after that memory is deleted (no database constraint:
    # the id names the memory, whether or not it is there now), so a restore that brings the
    # memory back under the same id (memory/services.py memory_restore) finds its whole
    # history again, and links to it (/memories/<id>/history/) answer once more. Null only
    # for rows written before issue 30, whose deleted memory was unlinked.
    memory = models.ForeignKey(
        Memory,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="history",
    )
    # On a deletion's row: when the memory it removed was created, so a restore brings it
    # back as the same memory, not a new one made at the restore's time.
    memory_created_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The audience of the row it changed: the agent whose own note it was, empty for the
    # user's memory. A restore puts a note back as that agent's note, and the as-of view
    # rebuilds the user's memory from the rows without one. Goes with the agent, as its
    # notes do.
    owner_agent = models.ForeignKey(
        "profiles.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    action = models.CharField(max_length=8, choices=HistoryAction.choices)
    source = models.CharField(max_length=16, choices=Source.choices)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # A default rather than auto_now_add: an import keeps the times of an earlier
    # account's history (memory/replay.py memory_history_replay).
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)
    # The bulk action this change was part of (memory/bulk.py: a bulk delete, re-tag or pin,
    # or deleting all memories): one undo puts back every change of the batch.
    batch = models.UUIDField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "user_context_history"
        verbose_name = "memory history"
        verbose_name_plural = "memory history"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "key", "-created_at"], name="history_user_key"),
            models.Index(
                fields=["user", "batch"],
                name="history_user_batch",
                condition=Q(batch__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=HistoryAction.values), name="history_action"
            ),
            models.CheckConstraint(
                condition=(
                    Q(action=HistoryAction.CREATE, before__isnull=True, after__isnull=False)
                    | Q(action=HistoryAction.DELETE, before__isnull=False, after__isnull=True)
                    | Q(
                        action__in=[HistoryAction.UPDATE, HistoryAction.RESTORE],
                        after__isnull=False,
                    )
                    | Q(action=HistoryAction.RENAME, before__isnull=False, after__isnull=False)
                    | Q(action=HistoryAction.MERGE, before__isnull=False, after__has_key="merged")
                ),
                name="history_states_match_action",
            ),
            ActorMixin.actor_constraint("history_actor_consistent"),
        ]

    def __str__(self) -> str:
        return f"{self.key}: {self.get_action_display()} by {self.actor_label}"

    def save(self, *args: object, **kwargs: object) -> None:
        from activity.models import AppendOnlyError

        if not self._state.adding:
            raise AppendOnlyError("Memory history is append-only.")
        super().save(*args, **kwargs)


class ProposalAction(models.TextChoices):
    CREATE = "create", "Add"
    UPDATE = "update", "Change"
    DELETE = "delete", "Delete"


class ProposalStatus(models.TextChoices):
    PENDING = "pending_review", "Waiting for review"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    SUPERSEDED = "superseded", "Replaced by a newer proposal"


class ProposalTrigger(models.TextChoices):
    """Why the write waits for the user instead of applying."""

    USER_STATED = "user_stated", "It changes what you said"
    NEW_MEMORY = "new_memory", "You review agents' new memories"
    NEAR_DUPLICATE = "near_duplicate", "It overlaps a memory you have"


class MemoryProposal(ActorMixin):
    """An agent's write that waits in the user's review inbox (memory/review.py).

    The actor is who proposed it. `before` is the row as it was when proposed, `after` the
    state the write would leave (null for a deletion). Accepting applies it through
    memory/services.py with the user as the actor; `applied` is that history row.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_proposals"
    )
    key = models.CharField(max_length=MAX_KEY_LENGTH)
    action = models.CharField(max_length=8, choices=ProposalAction.choices)
    # The reported turn this came from, when learning captured it (learning/capture.py).
    turn = models.ForeignKey(
        "llm.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    trigger = models.CharField(max_length=16, choices=ProposalTrigger.choices)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # For a near-duplicate: the key the agent asked to create, so the user can keep both.
    requested_key = models.CharField(max_length=MAX_KEY_LENGTH, blank=True)
    reason = models.CharField(max_length=MAX_REASON_LENGTH, blank=True)
    status = models.CharField(
        max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    applied = models.OneToOneField(
        MemoryHistory,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="proposal",
    )

    class Meta:
        db_table = "user_context_proposal"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "status", "-created_at"], name="proposal_user_status"),
            models.Index(
                fields=["expires_at"],
                name="proposal_pending_expiry",
                condition=Q(status="pending_review"),
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(key__regex=KEY_PATTERN), name="proposal_key"),
            models.CheckConstraint(
                condition=Q(action__in=ProposalAction.values), name="proposal_action"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ProposalStatus.values), name="proposal_status"
            ),
            models.CheckConstraint(
                condition=Q(trigger__in=ProposalTrigger.values), name="proposal_trigger"
            ),
            models.CheckConstraint(
                condition=(
                    Q(action=ProposalAction.CREATE, before__isnull=True, after__isnull=False)
                    | Q(action=ProposalAction.UPDATE, before__isnull=False, after__isnull=False)
                    | Q(action=ProposalAction.DELETE, before__isnull=False, after__isnull=True)
                ),
                name="proposal_states_match_action",
            ),
            models.CheckConstraint(
                condition=Q(status=ProposalStatus.PENDING, decided_at__isnull=True)
                | (~Q(status=ProposalStatus.PENDING) & Q(decided_at__isnull=False)),
                name="proposal_decided_when_not_pending",
            ),
            ActorMixin.actor_constraint("proposal_actor_consistent"),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} {self.key} by {self.actor_label}"

    @property
    def is_pending(self) -> bool:
        return self.status == ProposalStatus.PENDING


class LookAlikeDismissal(models.Model):
    """Agents' notes the user was shown as look-alikes and chose to leave as they are
    (memory/look_alike.py): a group made only of these notes is not suggested again, while
    a new look-alike note joining them brings the group back."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="look_alike_dismissals"
    )
    # Ids rather than foreign keys: a note deleted since simply no longer matches.
    memory_ids = ArrayField(models.BigIntegerField())
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "user_context_look_alike_dismissal"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="look_alike_dismissal_user"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(memory_ids__len__gte=2), name="look_alike_dismissal_group"
            ),
        ]

    def __str__(self) -> str:
        return f"{len(self.memory_ids)} notes left apart"
