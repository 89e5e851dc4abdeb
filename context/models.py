from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Func, Q
from django.utils import timezone

from activity.actors import ActorMixin
from context.paths import MAX_PATH_LENGTH, InvalidPath, normalize_path
from lib.credentials import Credential, find_credential
from memory.models import ProposalStatus
from search.fields import EmbeddingFields

SHARED_PREFIX = "shared:"


class SharedScope(models.Model):
    """A named set of documents (a team's, a project's) that users are granted access to.

    Its documents have no user and no agent; who reads and writes them is ScopeGrant's.
    """

    slug = models.SlugField(
        max_length=64,
        unique=True,
        help_text="The scope's name: agents name it as shared:<slug>, the pages as shared/<slug>.",
    )
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(slug__regex=r"^[a-z0-9][a-z0-9_-]{0,63}$"), name="sharedscope_slug"
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def name(self) -> str:
        """How results and the `scope` parameter name it: shared:<slug>."""
        return f"{SHARED_PREFIX}{self.slug}"


class GrantAccess(models.TextChoices):
    READ = "read", "Read"
    READ_WRITE = "read_write", "Read and write"


class ScopeGrant(models.Model):
    """One user's access to one shared scope; their agents read (and write) with it."""

    scope = models.ForeignKey(SharedScope, on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scope_grants"
    )
    access = models.CharField(max_length=10, choices=GrantAccess.choices, default=GrantAccess.READ)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["scope__slug", "user_id"]
        constraints = [
            models.UniqueConstraint(fields=["scope", "user"], name="scopegrant_unique_user"),
            models.CheckConstraint(
                condition=Q(access__in=GrantAccess.values), name="scopegrant_access"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.scope} ({self.access})"

    @property
    def writable(self) -> bool:
        return self.access == GrantAccess.READ_WRITE


def validate_document_path(value: str) -> None:
    try:
        normalize_path(value)
    except InvalidPath as error:
        raise ValidationError(error.message, code=error.rule) from error


class Document(models.Model):
    """Content the assistant can read and search, addressed by a path inside a scope.

    Scope: a user's own documents (agent empty), one agent's private notes (agent set),
    a shared scope (shared_scope set, user and agent empty), or the global/company scope
    (all three empty).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="documents",
        help_text="Owner; empty for the global (company) scope.",
    )
    agent = models.ForeignKey(
        "profiles.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="private_documents",
        help_text="Set when the document is private to one agent.",
    )
    shared_scope = models.ForeignKey(
        SharedScope,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="documents",
        help_text="Set when the document belongs to a shared scope (then no user or agent).",
    )
    path = models.CharField(max_length=MAX_PATH_LENGTH, validators=[validate_document_path])
    body = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Not a column: on the instance a context service returns after a change, the version
    # that change wrote (the id to undo it by, whatever other writers did since).
    written_version: "DocumentVersion | None" = None

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "agent", "shared_scope", "path"],
                name="document_unique_path_per_scope",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=Q(agent__isnull=True) | Q(user__isnull=False),
                name="document_agent_needs_user",
            ),
            models.CheckConstraint(
                condition=Q(shared_scope__isnull=True) | Q(user__isnull=True),
                name="document_one_scope_kind",
            ),
            # The database refuses the worst paths even if a caller skipped normalize_path.
            models.CheckConstraint(
                condition=~Q(path="")
                & ~Q(path__startswith="/")
                & ~Q(path__contains="\\")
                & ~Q(path__endswith="/")
                & ~Q(path__contains="//")
                & ~Q(path__regex=r"(^|/)\.\.?(/|$)"),
                name="document_path_relative",
            ),
        ]

    def __str__(self) -> str:
        return self.path

    @property
    def scope(self) -> str:
        """One of "global", "user" (the user's own), "agent" (private to one agent) or
        "shared:<slug>"."""
        slug = self.shared_scope.slug if self.shared_scope_id is not None else None
        return self.scope_of(user_id=self.user_id, agent_id=self.agent_id, shared_slug=slug)

    @property
    def credential(self) -> Credential | None:
        """What looks like a credential in the path or body (lib/credentials.py). Only the
        user's writes can hold one (context/services.py refuses agents'); the pages warn."""
        return find_credential(self.path) or find_credential(self.body)

    @staticmethod
    def scope_of(
        *, user_id: int | None, agent_id: int | None, shared_slug: str | None = None
    ) -> str:
        if shared_slug is not None:
            return f"{SHARED_PREFIX}{shared_slug}"
        if user_id is None:
            return "global"
        return "user" if agent_id is None else "agent"


class VersionAction(models.TextChoices):
    WRITE = "write", "Write"
    APPEND = "append", "Append"
    DELETE = "delete", "Delete"
    RESTORE = "restore", "Restore"


# What a version's change was, as the history says it happened ("Written by you"): the
# choices' labels name the action ("Write"), which reads wrongly before "by".
VERSION_DONE = {
    VersionAction.WRITE: "Written",
    VersionAction.APPEND: "Added to",
    VersionAction.DELETE: "Deleted",
    VersionAction.RESTORE: "Restored",
}


class DocumentVersion(ActorMixin):
    """One row per change to a document. Append-only.

    body is the content after the change; for a deletion, the content it removed.
    The scope and path are copied so a deleted document keeps its versions.
    """

    document = models.ForeignKey(
        Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="versions"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="document_versions",
    )
    agent = models.ForeignKey(
        "profiles.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="document_versions",
    )
    shared_scope = models.ForeignKey(
        SharedScope, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    path = models.CharField(max_length=MAX_PATH_LENGTH)
    action = models.CharField(max_length=8, choices=VersionAction.choices)
    body = models.TextField(blank=True)
    # The reported turn whose consolidation wrote this version (learning/consolidation.py).
    turn = models.ForeignKey(
        "llm.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A default rather than auto_now_add: an import keeps the times of an earlier
    # account's versions (context/history.py document_versions_replay).
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "agent", "path", "-created_at"], name="docversion_path"),
            models.Index(
                fields=["shared_scope", "path", "-created_at"],
                name="docversion_shared_path",
                condition=Q(shared_scope__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(shared_scope__isnull=True) | Q(user__isnull=True),
                name="docversion_one_scope_kind",
            ),
            models.CheckConstraint(
                condition=Q(action__in=VersionAction.values), name="docversion_action"
            ),
            ActorMixin.actor_constraint("docversion_actor_consistent"),
        ]

    def __str__(self) -> str:
        return f"{self.path}: {self.get_action_display()} by {self.actor_label}"

    @property
    def done_label(self) -> str:
        """The change as done: "Written", "Added to" (then "by you" on the pages)."""
        return VERSION_DONE.get(self.action, self.get_action_display())

    def save(self, *args: object, **kwargs: object) -> None:
        from activity.models import AppendOnlyError

        if not self._state.adding:
            raise AppendOnlyError("Document versions are append-only.")
        super().save(*args, **kwargs)


# What a document proposal may ask for: a restore is the user's, never proposed.
PROPOSED_ACTIONS = (VersionAction.WRITE, VersionAction.APPEND, VersionAction.DELETE)


class DocumentProposal(ActorMixin):
    """An agent's change to one of the identity files at the root of the user's documents
    (context/services.py IDENTITY_FILES), which every agent of the user reads: it waits in
    the user's review inbox instead of applying, until the user accepts or rejects it
    (context/review.py) or it expires (MNEMO_PROPOSAL_TTL_DAYS).

    The actor is the agent that proposed it. `content` is what it sent: the whole new body
    (write), the text to add (append) or nothing (delete). `before` is the document's body
    when proposed (null: there was none) and `base_version` its newest version then, so
    accepting never overwrites unseen a change made since. Accepting applies it through
    context/services.py with the user as the actor; `applied` is the version that wrote.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="document_proposals"
    )
    path = models.CharField(max_length=MAX_PATH_LENGTH)
    action = models.CharField(max_length=8, choices=VersionAction.choices)
    content = models.TextField(blank=True)
    before = models.TextField(null=True, blank=True)  # noqa: DJ001 - null: no document; "": empty
    # A DocumentVersion id, as the API's base_version (not a foreign key: only compared).
    base_version = models.BigIntegerField(null=True, blank=True)
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
        DocumentVersion,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="proposal",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "status", "-created_at"], name="docproposal_user_status"),
            models.Index(
                fields=["expires_at"],
                name="docproposal_pending_expiry",
                condition=Q(status="pending_review"),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=[action.value for action in PROPOSED_ACTIONS]),
                name="docproposal_action",
            ),
            models.CheckConstraint(
                condition=Q(status__in=ProposalStatus.values), name="docproposal_status"
            ),
            models.CheckConstraint(
                condition=Q(status=ProposalStatus.PENDING, decided_at__isnull=True)
                | (~Q(status=ProposalStatus.PENDING) & Q(decided_at__isnull=False)),
                name="docproposal_decided_when_not_pending",
            ),
            models.CheckConstraint(
                condition=~Q(path="") & ~Q(path__startswith="/"), name="docproposal_path"
            ),
            ActorMixin.actor_constraint("docproposal_actor_consistent"),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} {self.path} by {self.actor_label}"

    @property
    def is_pending(self) -> bool:
        return self.status == ProposalStatus.PENDING

    @property
    def after(self) -> str | None:
        """The body accepting would leave, as things stood when proposed (null: deleted)."""
        if self.action == VersionAction.DELETE:
            return None
        if self.action == VersionAction.WRITE:
            return self.content
        before = self.before or ""
        joint = "\n" if before and not before.endswith("\n") else ""
        return f"{before}{joint}{self.content}"


class DocumentChunk(EmbeddingFields):
    """A piece of a document as search sees it: about 800 words, overlapping its neighbours.

    Rewritten whenever the document changes (search/chunking.py); the scope is copied from
    the document so searches filter on this table alone.
    """

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    agent = models.ForeignKey(
        "profiles.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    shared_scope = models.ForeignKey(
        SharedScope, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    # The text's words for any script: English stemmed, other text as written, text with
    # no spaces as character pairs (search/migrations/0003_text_search_any_script.py).
    search_vector = models.GeneratedField(
        expression=Func("text", function="mnemo_text_tsvector", output_field=SearchVectorField()),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["document_id", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["document", "ordinal"], name="chunk_unique_ordinal"),
            models.CheckConstraint(
                condition=Q(shared_scope__isnull=True) | Q(user__isnull=True),
                name="chunk_one_scope_kind",
            ),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="chunk_fts"),
            models.Index(fields=["user", "agent", "embedding_model"], name="chunk_scope_embedding"),
            models.Index(
                fields=["shared_scope", "embedding_model"],
                name="chunk_shared_embedding",
                condition=Q(shared_scope__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal}"
