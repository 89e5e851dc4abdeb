"""Bearer-token authentication and per-token throttling for the agent API."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.throttling import SimpleRateThrottle

from profiles.models import AgentToken, SystemToken
from profiles.services import SYSTEM_TOKEN_PREFIX, hash_token, token_matches

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
        if raw.startswith(SYSTEM_TOKEN_PREFIX):
            tokens = SystemToken.objects.all()
        else:
            tokens = AgentToken.objects.select_related("agent__user")
        token = tokens.filter(token_hash=hash_token(raw)).first()
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


def _note_use(token: AgentToken | SystemToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        type(token).objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


class AgentTokenThrottle(SimpleRateThrottle):
    """MNEMO_API_RATE requests per token; over it, 429 with Retry-After."""

    scope = "agent_token"

    def get_rate(self) -> str:
        return settings.MNEMO_API_RATE

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if isinstance(request.auth, AgentToken):
            ident = request.auth.pk
        elif isinstance(request.auth, SystemToken):
            ident = f"system-{request.auth.pk}"
        else:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}


class UserTokenOnly(BasePermission):
    """Tools about one user's memory: a system token gets a 403 that says what it may do."""

    message = (
        "System tokens work only with global documents (memory_read, memory_write, "
        "memory_append, memory_tree, memory_delete, append_daily_memory); "
        "this tool needs an agent token."
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
