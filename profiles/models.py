from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from profiles.naming import agent_name

AGENT_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
MIN_TOKEN_BUDGET = 500
MAX_TOKEN_BUDGET = 8000
DEFAULT_TOKEN_BUDGET = 2000
# The consolidated profile (learning/user_memory_loading.py) has a budget of its own, in the
# same range.
DEFAULT_PROFILE_BUDGET = 2000
# LLM tokens a user's features may spend per day (UTC), prompt and completion together.
MIN_LLM_DAILY_TOKENS = 1000
MAX_LLM_DAILY_TOKENS = 100_000_000
DEFAULT_LLM_DAILY_TOKENS = 200_000
# An agent's read rule names at most this many tags or folders.
MAX_RULE_ITEMS = 20
MAX_RULE_FOLDER_LENGTH = 200


class ReadRule(models.TextChoices):
    """What an agent reads of the user's memories (by tag) or documents (by folder):
    applied by memory/visibility.py and context/workspace.py."""

    ALL = "all", "All of it"
    EXCEPT = "except", "All except"
    ONLY = "only", "Only"


class Profile(models.Model):
    """A person's account settings; one per user."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile"
    )
    token_budget = models.PositiveIntegerField(
        default=DEFAULT_TOKEN_BUDGET,
        help_text=f"Working-memory budget in tokens ({MIN_TOKEN_BUDGET}–{MAX_TOKEN_BUDGET}).",
    )
    memory_paused = models.BooleanField(
        default=False, help_text="While paused, agents cannot write memory."
    )
    review_agent_memories = models.BooleanField(
        default=False,
        help_text="Agents' new memories wait in the review inbox instead of applying at once. "
        "Their changes to what the user stated always wait.",
    )
    auto_learn = models.BooleanField(
        default=False,
        help_text="Learn from the turns agents report: keep the consolidated profile and "
        "capture observations. Each agent must be switched on too (Agents page).",
    )
    profile_budget = models.PositiveIntegerField(
        default=DEFAULT_PROFILE_BUDGET,
        help_text=f"Consolidated profile budget in tokens ({MIN_TOKEN_BUDGET}–{MAX_TOKEN_BUDGET}).",
    )
    llm_daily_tokens = models.PositiveIntegerField(
        default=DEFAULT_LLM_DAILY_TOKENS,
        help_text="LLM tokens (prompt and completion) this account may use per day (UTC).",
    )
    heartbeat_enabled = models.BooleanField(
        default=False,
        help_text="Run the HEARTBEAT.md checklist on a schedule (briefing/heartbeat.py).",
    )
    notify_webhook_url = models.URLField(
        max_length=500,
        blank=True,
        help_text="Where a heartbeat finding is POSTed, signed with the webhook secret.",
    )
    webhook_secret = models.CharField(
        max_length=64,
        blank=True,
        help_text="Signs webhook POSTs (HMAC-SHA256); made when the URL is first set.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(token_budget__gte=MIN_TOKEN_BUDGET, token_budget__lte=MAX_TOKEN_BUDGET),
                name="profile_token_budget_range",
                violation_error_message=(
                    f"Token budget must be between {MIN_TOKEN_BUDGET} and {MAX_TOKEN_BUDGET}."
                ),
            ),
            models.CheckConstraint(
                condition=Q(
                    profile_budget__gte=MIN_TOKEN_BUDGET, profile_budget__lte=MAX_TOKEN_BUDGET
                ),
                name="profile_profile_budget_range",
                violation_error_message=(
                    f"Profile budget must be between {MIN_TOKEN_BUDGET} and {MAX_TOKEN_BUDGET}."
                ),
            ),
            models.CheckConstraint(
                condition=Q(
                    llm_daily_tokens__gte=MIN_LLM_DAILY_TOKENS,
                    llm_daily_tokens__lte=MAX_LLM_DAILY_TOKENS,
                ),
                name="profile_llm_daily_tokens_range",
                violation_error_message=(
                    f"The daily LLM budget must be between {MIN_LLM_DAILY_TOKENS:,} and "
                    f"{MAX_LLM_DAILY_TOKENS:,} tokens."
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"Profile of {self.user}"


class Agent(models.Model):
    """A named assistant identity acting for one user."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents"
    )
    name = models.CharField(
        max_length=64,
        validators=[
            RegexValidator(
                AGENT_NAME_PATTERN,
                "Agent names are 1–64 characters of a-z, 0-9, '_' and '-', "
                "starting with a letter or digit.",
            )
        ],
    )
    display_name = models.CharField(
        max_length=100,
        blank=True,
        help_text="What the user calls the agent (any text); `name`, used in paths and "
        "tokens, is derived from it.",
    )
    description = models.CharField(max_length=200, blank=True)
    learns_from_turns = models.BooleanField(
        default=False,
        help_text="Mnemo learns from the turns this agent reports (when the account's "
        "learning is on too).",
    )
    # What the agent may read, as the user set it on the Agents page (profiles/services.py
    # agent_set_read_rules; never an agent): of the user's memories by tag, of the user's
    # documents by folder. "all" names nothing; "except" and "only" name at least one.
    memory_rule = models.CharField(max_length=8, choices=ReadRule.choices, default=ReadRule.ALL)
    memory_tags = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    document_rule = models.CharField(max_length=8, choices=ReadRule.choices, default=ReadRule.ALL)
    document_folders = ArrayField(
        models.CharField(max_length=MAX_RULE_FOLDER_LENGTH), default=list, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="agent_unique_name_per_user"),
            models.CheckConstraint(
                condition=(
                    Q(memory_rule=ReadRule.ALL, memory_tags=[])
                    | Q(memory_rule__in=[ReadRule.EXCEPT, ReadRule.ONLY], memory_tags__len__gt=0)
                ),
                name="agent_memory_rule_names_tags",
            ),
            models.CheckConstraint(
                condition=(
                    Q(document_rule=ReadRule.ALL, document_folders=[])
                    | Q(
                        document_rule__in=[ReadRule.EXCEPT, ReadRule.ONLY],
                        document_folders__len__gt=0,
                    )
                ),
                name="agent_document_rule_names_folders",
            ),
            models.CheckConstraint(
                condition=Q(name__regex=AGENT_NAME_PATTERN), name="agent_name_format"
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """How pages name the agent (profiles/naming.py agent_name)."""
        return agent_name(self)


class TokenFields(models.Model):
    """What every API token stores: only a SHA-256 hash of the secret, never the secret."""

    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(
        max_length=16, help_text="The token's first characters, to tell it apart."
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(token_hash__regex=r"^[0-9a-f]{64}$"),  # noqa: S106
                name="%(class)s_hash_is_sha256",
            ),
        ]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AgentToken(TokenFields):
    """An API token for one agent of one user."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")

    class Meta(TokenFields.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.agent})"


class SystemToken(TokenFields):
    """An API token bound to no user: it reads and writes only global (company) documents.

    Made by an admin (Django admin or `manage.py create_system_token`).
    """

    class Meta(TokenFields.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.prefix}… (system{': ' + self.label if self.label else ''})"
