"""Bearer-token authentication for the agent API (the rate limit is profiles/throttling.py)."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from profiles.models import Agent, AgentToken, Profile, SystemToken
from profiles.services import (
    SYSTEM_TOKEN_PREFIX,
    hash_token,
    profile_for_user,
    token_matches,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from rest_framework.request import Request

# last_used_at is precise to this interval, so busy agents don't write on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)
MAX_TOKEN_LENGTH = 200


class SystemCaller:
    """request.user for a system token: authenticated, but acting for no user."""

    is_authenticated = True
    is_active = True
    is_anonymous = False
    pk = None
    id = None
    username = "system"

    def __str__(self) -> str:
        return "system"


class AgentTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>`: the request acts for the token's agent and its user.

    A system token (prefix mnemo_sys_) acts for no user: request.user is a SystemCaller
    and request.auth the SystemToken.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, AgentToken] | None:
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword.lower().encode():
            raise exceptions.AuthenticationFailed(
                "Use 'Authorization: Bearer <token>'; other schemes are not accepted."
            )
        if len(header) != 2 or len(header[1]) > MAX_TOKEN_LENGTH:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header; expected 'Bearer <token>'."
            )
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Unknown token.") from None
        return self._check(raw)

    def _check(self, raw: str) -> tuple[AbstractBaseUser | SystemCaller, AgentToken | SystemToken]:
        # The lookup is by hash, so response time says nothing about the secret;
        # compare_digest then checks the stored hash without an early exit.
        token: AgentToken | SystemToken | None
        if raw.startswith(SYSTEM_TOKEN_PREFIX):
            token = SystemToken.objects.filter(token_hash=hash_token(raw)).first()
        else:
            token = agent_token_lookup(hash_token(raw))
        if token is None or not token_matches(raw, token.token_hash):
            raise exceptions.AuthenticationFailed("Unknown token.")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed(
                f"This token was revoked on {token.revoked_at:%Y-%m-%d}; "
                "ask the user for a new one."
            )
        user = SystemCaller() if isinstance(token, SystemToken) else token.agent.user
        if not user.is_active:
            raise exceptions.AuthenticationFailed("The user this token acts for is deactivated.")
        _note_use(token)
        return user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="mnemo"'


class _AgentTokenQuery:
    """The one statement behind every agent request: token, agent, user and profile by hash.

    The same rows as AgentToken.objects.select_related("agent__user__profile"), as SQL
    written once: building that query with the ORM took more CPU than everything
    PostgreSQL does for it (bench/README.md, issue 12). Every column of the four tables
    is read, so the instances are whole; the profile is absent for a user who has none.
    """

    def __init__(self) -> None:
        quote = connection.ops.quote_name
        self.models: list[tuple[type[Model], list[str]]] = [
            (model, [field.attname for field in model._meta.concrete_fields])
            for model in (AgentToken, Agent, get_user_model(), Profile)
        ]
        columns = ", ".join(
            f"{alias}.{quote(field.column)}"
            for alias, (model, _) in zip("taup", self.models, strict=True)
            for field in model._meta.concrete_fields
        )
        token, agent, user, profile = (quote(model._meta.db_table) for model, _ in self.models)
        self.sql = (
            f"SELECT {columns} FROM {token} t "  # noqa: S608 - names from the models
            f"JOIN {agent} a ON a.id = t.agent_id "
            f"JOIN {user} u ON u.id = a.user_id "
            f"LEFT JOIN {profile} p ON p.user_id = u.id "
            "WHERE t.token_hash = %s"
        )

    def run(self, token_hash: str) -> AgentToken | None:
        with connection.cursor() as cursor:
            cursor.execute(self.sql, [token_hash])
            row = cursor.fetchone()
        if row is None:
            return None
        instances, start = [], 0
        for model, names in self.models:
            values = row[start : start + len(names)]
            instances.append(model.from_db(connection.alias, names, values))
            start += len(names)
        token, agent, user, profile = instances
        token.agent = agent
        agent.user = user
        if profile.pk is not None:
            user.profile = profile  # as select_related would; request_profile() reads it
        return token


@functools.cache
def _agent_token_query() -> _AgentTokenQuery:
    return _AgentTokenQuery()


def agent_token_lookup(token_hash: str) -> AgentToken | None:
    """The agent token with this hash, with its agent, user and the user's profile."""
    return _agent_token_query().run(token_hash)


def request_profile(request: Request) -> Profile:
    """The profile of the user an agent request acts for: the row the token lookup read
    with the user, or (a user with none yet) a new one."""
    user = request.user
    if Profile.user.field.remote_field.is_cached(user):
        return user.profile
    return profile_for_user(user)


def _note_use(token: AgentToken | SystemToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        type(token).objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


class UserTokenOnly(BasePermission):
    """Tools about one user's memory: a system token gets a 403 that says what it may do."""

    message = (
        "System tokens work only with global documents (memory_read, memory_write, "
        "memory_append, memory_tree, memory_delete, memory_search, append_daily_memory, "
        "append_agent_memory, agent_memory_get); this tool needs an agent token."
    )

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, AgentToken)


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = AgentTokenAuthentication
    name = "agentToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent's API token, from `manage.py create_agent_token` "
            "or the Agents page; it acts for one agent of one user. Or a system token "
            "(`manage.py create_system_token`, or the admin), bound to no user, which works "
            "only with the global (company) documents.",
        }
