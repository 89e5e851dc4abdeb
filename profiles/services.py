"""Writes for people and their agents: profiles, agents, API tokens."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils import timezone

from activity.actors import Actor, ActorKind
from lib import outbound
from lib.errors import Conflict, InvalidInput, MemoryPaused
from lib.slugs import slug_from_text
from lib.tags import clean_tags, normalize_tag
from profiles.models import (
    MAX_LLM_DAILY_TOKENS,
    MAX_RULE_FOLDER_LENGTH,
    MAX_RULE_ITEMS,
    MAX_TOKEN_BUDGET,
    MIN_LLM_DAILY_TOKENS,
    MIN_TOKEN_BUDGET,
    Agent,
    AgentToken,
    Profile,
    ReadRule,
    SystemToken,
)
from profiles.naming import clean_display_name

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "mnemo_"  # noqa: S105 - a public marker, not a secret
SYSTEM_TOKEN_PREFIX = "mnemo_sys_"  # noqa: S105 - tells authentication which table to look in
VISIBLE_PREFIX_LENGTH = 12


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_matches(raw: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(raw), token_hash)


def profile_for_user(user: AbstractBaseUser) -> Profile:
    profile, _ = Profile.objects.get_or_create(user=user)
    return profile


def profile_update(
    *,
    user: AbstractBaseUser,
    token_budget: int | None = None,
    memory_paused: bool | None = None,
    auto_learn: bool | None = None,
    review_agent_memories: bool | None = None,
    profile_budget: int | None = None,
    llm_daily_tokens: int | None = None,
) -> Profile:
    """Change the given settings of the user's profile; InvalidInput (naming the field) for
    a number out of its range, and then nothing is changed."""
    _check_range("profile_budget", profile_budget, MIN_TOKEN_BUDGET, MAX_TOKEN_BUDGET)
    _check_range("llm_daily_tokens", llm_daily_tokens, MIN_LLM_DAILY_TOKENS, MAX_LLM_DAILY_TOKENS)
    with transaction.atomic():
        profile_for_user(user)
        profile = Profile.objects.select_for_update().get(user=user)
        if token_budget is not None:
            if not MIN_TOKEN_BUDGET <= token_budget <= MAX_TOKEN_BUDGET:
                raise InvalidInput(
                    f"Token budget must be between {MIN_TOKEN_BUDGET} and {MAX_TOKEN_BUDGET}.",
                    field="token_budget",
                )
            profile.token_budget = token_budget
        if memory_paused is not None:
            profile.memory_paused = memory_paused
        if auto_learn is not None:
            profile.auto_learn = auto_learn
        if review_agent_memories is not None:
            profile.review_agent_memories = review_agent_memories
        if profile_budget is not None:
            profile.profile_budget = profile_budget
        if llm_daily_tokens is not None:
            profile.llm_daily_tokens = llm_daily_tokens
        profile.save()
    return profile


WEBHOOK_SCHEMES = ("http", "https")
WEBHOOK_URL_MESSAGE = (
    "The webhook URL must be an http:// or https:// address, e.g. https://example.com/hooks/mnemo."
)


@dataclass(frozen=True)
class HeartbeatSettings:
    profile: Profile
    new_secret: str  # the webhook secret when it was made by this call (shown once), else ""


def profile_set_heartbeat(
    *,
    user: AbstractBaseUser,
    enabled: bool,
    webhook_url: str,
    resolver: outbound.Resolver | None = None,
) -> HeartbeatSettings:
    """Switch the heartbeat on or off and set (or clear, with "") the notification webhook.

    InvalidInput on field "notify_webhook_url" for a URL webhook_url_clean refuses, and then
    nothing is changed. The first URL saved makes the secret that signs the POSTs
    (`secrets`); it is kept when the URL changes or is cleared, until rotated. `resolver`
    (tests) looks up the URL's host instead of the system's resolver."""
    url = webhook_url_clean(url=webhook_url, resolver=resolver)
    with transaction.atomic():
        profile_for_user(user)
        profile = Profile.objects.select_for_update().get(user=user)
        profile.heartbeat_enabled = enabled
        profile.notify_webhook_url = url
        new_secret = ""
        if url and not profile.webhook_secret:
            new_secret = profile.webhook_secret = _webhook_secret()
        fields = ["heartbeat_enabled", "notify_webhook_url", "webhook_secret", "updated_at"]
        profile.save(update_fields=fields)
    return HeartbeatSettings(profile=profile, new_secret=new_secret)


def profile_rotate_webhook_secret(*, user: AbstractBaseUser) -> HeartbeatSettings:
    """A new webhook secret, at once: POSTs from now on are signed with it only."""
    with transaction.atomic():
        profile_for_user(user)
        profile = Profile.objects.select_for_update().get(user=user)
        profile.webhook_secret = _webhook_secret()
        profile.save(update_fields=["webhook_secret", "updated_at"])
    return HeartbeatSettings(profile=profile, new_secret=profile.webhook_secret)


def _webhook_secret() -> str:
    return secrets.token_hex(32)  # 64 hex characters, Profile.webhook_secret's length


def webhook_url_clean(*, url: object, resolver: outbound.Resolver | None = None) -> str:
    """The webhook URL as saved ("" to clear it), or InvalidInput on "notify_webhook_url":
    not an http(s) URL, too long, or refused by lib/outbound.py (credentials in it, an odd
    host, an address inside the network that MNEMO_OUTBOUND_ALLOW does not list). The
    message says why without saying anything of what answers at that address: nothing is
    sent here. Every POST checks the URL again (briefing/heartbeat.py)."""
    if not isinstance(url, str):
        raise InvalidInput(WEBHOOK_URL_MESSAGE, field="notify_webhook_url")
    url = url.strip()
    if not url:
        return ""
    max_length = Profile._meta.get_field("notify_webhook_url").max_length or 500
    if len(url) > max_length:
        raise InvalidInput(
            f"The webhook URL is longer than {max_length} characters.", field="notify_webhook_url"
        )
    try:
        outbound.parse_url(url)  # the guard's own words first: credentials, odd IP spellings
        URLValidator(schemes=WEBHOOK_SCHEMES)(url)
        allow = outbound.allowlist(settings.MNEMO_OUTBOUND_ALLOW)
        outbound.check_url(url, allow=allow, resolver=resolver)
    except outbound.Refused as refusal:
        logger.info("Webhook URL refused: %s", refusal.detail)
        message = WEBHOOK_URL_MESSAGE if refusal.message == outbound.SCHEME_MESSAGE else None
        raise InvalidInput(message or refusal.message, field="notify_webhook_url") from None
    except ValidationError:
        raise InvalidInput(WEBHOOK_URL_MESSAGE, field="notify_webhook_url") from None
    return url


RANGE_MESSAGES = {
    "profile_budget": "The profile budget must be between {low:,} and {high:,} tokens.",
    "llm_daily_tokens": "The daily LLM budget must be between {low:,} and {high:,} tokens.",
}


def _check_range(field: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidInput(RANGE_MESSAGES[field].format(low=low, high=high), field=field)


def agent_set_learning(*, agent: Agent, learns_from_turns: bool) -> Agent:
    """Switch learning from this agent's turns on or off (the account's switch must be on
    too). Saves the one column, so a concurrent rename or description edit is kept."""
    Agent.objects.filter(pk=agent.pk).update(learns_from_turns=learns_from_turns)
    agent.learns_from_turns = learns_from_turns
    return agent


def agent_set_details(
    *, agent: Agent, display_name: str | None = None, description: str | None = None
) -> Agent:
    """Rename the agent as pages show it, or replace what it is for (None: unchanged). Its
    name in paths and tokens never changes. Saves those columns only, so a concurrent
    switch is kept."""
    changes: dict[str, str] = {}
    for field, value in (("display_name", display_name), ("description", description)):
        if value is None:
            continue
        value = clean_display_name(value) if field == "display_name" else " ".join(value.split())
        limit = Agent._meta.get_field(field).max_length
        if len(value) > limit:
            raise InvalidInput(
                f"That is {len(value)} characters; at most {limit} fit.", field=field
            )
        changes[field] = value
    Agent.objects.filter(pk=agent.pk).update(**changes)
    for field, value in changes.items():
        setattr(agent, field, value)
    return agent


@dataclass(frozen=True)
class ReadRules:
    """An agent's read rules as agent_set_read_rules stored them."""

    memory_rule: str
    memory_tags: list[str]
    document_rule: str
    document_folders: list[str]


def agent_set_read_rules(
    *,
    agent: Agent,
    memory_rule: str,
    memory_tags: list[str] | tuple[str, ...] = (),
    document_rule: str,
    document_folders: list[str] | tuple[str, ...] = (),
) -> ReadRules:
    """Set what the agent reads: of the user's memories all, all except those with one of
    `memory_tags`, or only those with one of them (tags normalised as lib/tags.py stores
    them, "#health" as "health"); of the user's documents likewise by folder (a path
    prefix in the user's scope). Only the signed-in user's page and the admin call this:
    no agent API or MCP tool does. InvalidInput, naming the field, and nothing changed, for
    an unknown rule, a bad tag or folder, or no item where "except" or "only" needs one;
    "all" drops the items given with it."""
    rules = clean_read_rules(
        memory_rule=memory_rule,
        memory_tags=memory_tags,
        document_rule=document_rule,
        document_folders=document_folders,
    )
    Agent.objects.filter(pk=agent.pk).update(
        memory_rule=rules.memory_rule,
        memory_tags=rules.memory_tags,
        document_rule=rules.document_rule,
        document_folders=rules.document_folders,
    )
    for field, value in vars(rules).items():
        setattr(agent, field, value)
    return rules


def clean_read_rules(
    *,
    memory_rule: str,
    memory_tags: list[str] | tuple[str, ...] = (),
    document_rule: str,
    document_folders: list[str] | tuple[str, ...] = (),
) -> ReadRules:
    """The rules as stored, or InvalidInput naming the field (agent_set_read_rules' checks,
    also the admin form's)."""
    memory_rule = _check_rule("memory_rule", memory_rule)
    document_rule = _check_rule("document_rule", document_rule)
    return ReadRules(
        memory_rule=memory_rule,
        memory_tags=_rule_items("memory_tags", memory_rule, _rule_tags(memory_tags), "tag"),
        document_rule=document_rule,
        document_folders=_rule_items(
            "document_folders", document_rule, clean_folders(document_folders), "folder"
        ),
    )


def _check_rule(field: str, rule: object) -> str:
    if rule not in ReadRule.values:
        raise InvalidInput("Choose all, all except, or only.", field=field)
    return str(rule)


def _rule_tags(tags: list[str] | tuple[str, ...]) -> list[str]:
    # A rule decides what an agent reads: a label that keeps nothing (an emoji alone) is
    # refused here, never dropped, so the rule is never other than the one typed.
    for tag in tags:
        if tag.strip() and not normalize_tag(tag):
            raise InvalidInput(
                f"Tag '{tag.strip()[:40]}' has no letter or digit, so no memory carries it; "
                "name tags as entries show them (e.g. health).",
                field="memory_tags",
            )
    try:
        return clean_tags([tag.lstrip("#") for tag in tags], limit=MAX_RULE_ITEMS)
    except InvalidInput as error:
        raise InvalidInput(error.message, field="memory_tags") from error


def clean_folders(folders: list[str] | tuple[str, ...]) -> list[str]:
    """Folders as a read rule stores them: NFC, no leading or trailing '/', no '.' or '..'
    segment, no control character; sorted, without repeats (InvalidInput on
    "document_folders"). A folder covers the documents under it (context/workspace.py)."""
    cleaned = set()
    for raw in folders:
        folder = unicodedata.normalize("NFC", raw.strip()).strip("/")
        if not folder:
            continue
        segments = folder.split("/")
        if (
            any(segment in ("", ".", "..") for segment in segments)
            or any(unicodedata.category(char).startswith("C") for char in folder)
            or len(folder) > MAX_RULE_FOLDER_LENGTH
        ):
            raise InvalidInput(
                f"'{folder[:60]}' is not a folder: write a path like projects/acme, "
                f"without '.' or '..' parts, at most {MAX_RULE_FOLDER_LENGTH} characters.",
                field="document_folders",
            )
        cleaned.add(folder)
    if len(cleaned) > MAX_RULE_ITEMS:
        raise InvalidInput(
            f"At most {MAX_RULE_ITEMS} folders; there are {len(cleaned)}.",
            field="document_folders",
        )
    return sorted(cleaned)


def _rule_items(field: str, rule: str, items: list[str], noun: str) -> list[str]:
    """The items a rule keeps: none for "all" (what was typed beside it is dropped), at
    least one for the others."""
    if rule == ReadRule.ALL:
        return []
    if not items:
        raise InvalidInput(f"Name at least one {noun} for this rule.", field=field)
    return items


MEMORY_PAUSED_MESSAGE = "Memory is paused by the user; agents cannot change it until resumed."


def check_agents_may_write(*, user: AbstractBaseUser | None, actor: Actor) -> None:
    """MemoryPaused when an agent (or the system) writes for a user who paused memory.

    The user's own changes always go through; the global scope has no pause. Call it
    inside the write's transaction. memory/write_sql.py reads the same flag in its row lock
    statement instead, which saves a round trip per write.
    """
    if user is None or actor.kind == ActorKind.USER:
        return
    if Profile.objects.filter(user=user, memory_paused=True).exists():
        raise MemoryPaused(MEMORY_PAUSED_MESSAGE)


def agent_check_owner(*, agent: Agent | None, user: AbstractBaseUser | None) -> None:
    """Refuse an agent that does not act for this user (InvalidInput on field "agent")."""
    if agent is not None and (user is None or agent.user_id != user.pk):
        raise InvalidInput("That agent belongs to another user.", field="agent")


def agent_slug(display_name: str) -> str:
    """An agent's name in paths and tokens, made from what the person called it by the
    rule entry keys are made by (lib/slugs.py): "Claude Desktop" → "claude-desktop",
    "Асистент" → "asistent", "🛠️" → "hammer_and_wrench", "???" → "agent-" and a hash."""
    return slug_from_text(
        display_name, max_length=Agent._meta.get_field("name").max_length, fallback="agent"
    )


def agent_create(*, user: AbstractBaseUser, display_name: str, description: str = "") -> Agent:
    """A new agent named as the user typed it, in any script ("Claude Desktop",
    "Асистент"); its name for paths and tokens is derived (agent_slug). Conflict when that
    name is taken."""
    display_name = clean_display_name(display_name)
    if not display_name:
        raise InvalidInput("Give the agent a name.", field="name")
    name = agent_slug(display_name)
    limit = Agent._meta.get_field("display_name").max_length
    if len(display_name) > limit:
        raise InvalidInput(
            f"The name is {len(display_name)} characters; at most {limit} fit.", field="name"
        )
    agent = Agent(
        user=user,
        name=name,
        display_name="" if display_name == name else display_name,
        description=" ".join(description.split()),
    )
    try:
        agent.full_clean(exclude=["user"], validate_unique=False, validate_constraints=False)
    except ValidationError as error:
        field, messages = next(iter(error.message_dict.items()))
        raise InvalidInput(" ".join(messages), field=field) from error
    try:
        with transaction.atomic():
            agent.save()
    except IntegrityError as error:
        existing = Agent.objects.get(user=user, name=name)
        raise Conflict(
            f"You already have the agent '{existing.label}' (named '{name}' in paths and "
            "tokens); choose another name.",
            field="name",
        ) from error
    return agent


def agent_get_or_create(
    *, user: AbstractBaseUser, name: str, description: str = "", display_name: str = ""
) -> Agent:
    """The user's agent of this name (as used in paths and tokens), created if missing
    (`display_name`: what pages call it, cleaned as agent_create cleans it)."""
    display_name = clean_display_name(display_name)
    agent = Agent(
        user=user,
        name=name,
        description=description,
        display_name="" if display_name == name else display_name,
    )
    try:
        agent.full_clean(exclude=["user"], validate_unique=False, validate_constraints=False)
    except ValidationError as error:
        raise InvalidInput(" ".join(error.messages), field="name") from error
    try:
        with transaction.atomic():
            agent.save()
    except IntegrityError:
        return Agent.objects.get(user=user, name=name)
    return agent


@dataclass(frozen=True)
class IssuedToken:
    token: AgentToken | SystemToken
    raw: str  # shown once, never stored


def token_create(*, agent: Agent, label: str = "") -> IssuedToken:
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(
        agent=agent,
        label=label,
        prefix=raw[:VISIBLE_PREFIX_LENGTH],
        token_hash=hash_token(raw),
    )
    return IssuedToken(token=token, raw=raw)


def system_token_create(*, label: str = "") -> IssuedToken:
    """A token bound to no user, for the global (company) documents only."""
    raw = SYSTEM_TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = SystemToken.objects.create(
        label=label, prefix=raw[: len(SYSTEM_TOKEN_PREFIX) + 6], token_hash=hash_token(raw)
    )
    return IssuedToken(token=token, raw=raw)


def token_revoke(*, token: AgentToken | SystemToken) -> AgentToken | SystemToken:
    type(token).objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    token.refresh_from_db(fields=["revoked_at"])
    return token


def signup_create_user(*, username: str, password: str) -> AbstractBaseUser:
    """Open sign-up: a new user with a usable password and their Profile, together."""
    from django.contrib.auth import get_user_model

    with transaction.atomic():
        user = get_user_model().objects.create_user(username=username, password=password)
        profile_for_user(user)
    return user
