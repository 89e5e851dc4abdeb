"""Shared scopes and who may use them: a scope is made once (the admin, or
`manage.py share_scope`), and each user's grant to it (read, or read_write) is set or taken
away here. Which scopes a user reads is context/workspace.py's granted_scopes, read from the
grants on every request, so a revoked grant is gone on the next one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction

from context.models import GrantAccess, ScopeGrant, SharedScope
from lib.errors import Conflict, InvalidInput

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


def shared_scope_create(*, slug: str, description: str = "") -> SharedScope:
    """A new, empty shared scope; Conflict if the slug is taken."""
    scope = SharedScope(slug=slug, description=description)
    try:
        scope.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as error:
        raise InvalidInput(" ".join(error.messages), field="slug") from error
    with transaction.atomic():
        scope, created = SharedScope.objects.get_or_create(
            slug=slug, defaults={"description": description}
        )
    if not created:
        raise Conflict(f"A shared scope '{slug}' already exists.", field="slug")
    return scope


def scope_grant_set(
    *, scope: SharedScope, user: AbstractBaseUser, access: str = GrantAccess.READ
) -> ScopeGrant:
    """Give the user (and so their agents) read or read_write access; replaces their grant."""
    if access not in GrantAccess.values:
        raise InvalidInput(
            f"Access is one of {', '.join(GrantAccess.values)}; got {access!r}.", field="access"
        )
    grant, _ = ScopeGrant.objects.update_or_create(
        scope=scope, user=user, defaults={"access": access}
    )
    return grant


def scope_grant_revoke(*, scope: SharedScope, user: AbstractBaseUser) -> bool:
    """Take the user's access away; the next request already goes without it. Whether there
    was a grant."""
    deleted, _ = ScopeGrant.objects.filter(scope=scope, user=user).delete()
    return deleted > 0
