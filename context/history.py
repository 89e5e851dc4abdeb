"""A document's history: the versions of a path (deleted documents' included), bringing a
document back to one of them, and an earlier account's versions an import keeps
(portability/importing.py). Which version is current, and the base_version rule, are
context/versions.py's; a restore is a change like any other (context/services.py
record_change), with its own version and activity event.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from context.models import Document, DocumentVersion, VersionAction
from context.paths import normalize_path
from context.services import MAX_BODY_BYTES, acting_for, record_change, scope_columns
from context.versions import document_latest_version_id
from lib.errors import NotFound, VersionConflict
from profiles.services import check_agents_may_write

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

    from activity.actors import Actor
    from context.models import SharedScope
    from profiles.models import Agent


def document_restore(
    *,
    user: AbstractBaseUser | None,
    shared_scope: SharedScope | None = None,
    version_id: int,
    actor: Actor,
    create_only: bool = False,
) -> Document:
    """Bring a document back to a version's content (for a deletion, what it removed).

    Works whether the document still exists or was deleted; the restore is a version too.
    With create_only (Recently deleted's Restore), a document that exists at the path now is
    not overwritten: VersionConflict, and nothing is written. The version must be of the
    user's documents (theirs or their agents'), or with shared_scope of that scope's.
    """
    owner = None if shared_scope else user
    version = (
        DocumentVersion.objects.select_related("agent")
        .filter(user=owner, shared_scope=shared_scope, pk=version_id)
        .first()
    )
    if version is None:
        raise NotFound(f"No document version {version_id}.", field="version_id")
    scope = scope_columns(owner, version.agent, shared_scope)
    with transaction.atomic():
        check_agents_may_write(user=acting_for(user, shared_scope, actor), actor=actor)
        document, created = Document.objects.select_for_update().get_or_create(
            **scope, path=version.path, defaults={"body": version.body}
        )
        if create_only and not created:
            raise VersionConflict(
                f"A document exists at '{version.path}' now; open it, or restore this version "
                "from its history to replace it.",
                field="path",
                current_version=document_latest_version_id(document),
            )
        if not created:
            document.body = version.body
            document.save(update_fields=["body", "updated_at"])
        record_change(document, action=VersionAction.RESTORE, actor=actor, new=created)
    return document


def document_versions(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str,
) -> QuerySet[DocumentVersion]:
    """The versions of one path in the scope, newest first, including deleted documents'."""
    scope = scope_columns(user, agent, shared_scope)
    path = normalize_path(path)
    return DocumentVersion.objects.filter(**scope, path=path).order_by("-created_at", "-id")


@dataclass(frozen=True)
class PastVersion:
    """One version from an earlier account's history of a document (an import brings it)."""

    action: str
    body: str
    actor: Actor
    created_at: datetime.datetime


def past_version_problem(version: PastVersion) -> str:
    """Why the version cannot be kept ("" when it can)."""
    if version.action not in VersionAction.values:
        return f"'{version.action}' is not a version action."
    if not isinstance(version.body, str):
        return "Its body is not text."
    # The rules of a live write (document_write): no NUL, UTF-8 (so no lone surrogate).
    if "\x00" in version.body:
        return "Its body contains a NUL character (U+0000)."
    try:
        size = len(version.body.encode())
    except UnicodeEncodeError:
        return "Its body holds an unpaired surrogate (not UTF-8 text)."
    if size > MAX_BODY_BYTES:
        return f"Its body is larger than {MAX_BODY_BYTES:,} bytes."
    if version.created_at > timezone.now():
        return "It is dated in the future."
    return ""


def document_versions_replay(*, versions: list[tuple[Document, PastVersion]]) -> int:
    """Keep an earlier account's versions of documents: each becomes a version row of the
    document with its own time and actor, restorable from the document's history.

    For an import, of the documents it created, before the import's own version. Nothing
    current changes (no event, no chunks). Every version must pass past_version_problem."""
    rows = [
        DocumentVersion(
            document=document,
            user_id=document.user_id,
            agent_id=document.agent_id,
            shared_scope_id=document.shared_scope_id,
            path=document.path,
            action=version.action,
            body=version.body,
            created_at=version.created_at,
            **version.actor.as_fields(),
        )
        for document, version in versions
    ]
    DocumentVersion.objects.bulk_create(rows)
    return len(rows)
