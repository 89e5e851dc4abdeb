"""The documents as an API caller sees them: which scope a path names, and the global overlay.

A caller is an agent token (one agent of one user) or a system token (no user).

- A system token works in the global (company) scope only, for every path.
- An agent token works in its user's scope, except `AGENT_MEMORY.md`, which always names
  the calling agent's own private notes; another agent of the same user never reaches them.
- With MNEMO_GLOBAL_READABLE on, an agent token also reads global documents where its
  user has none at that path (DESIGN.md: identity files only from the primary scope), and
  may not write or delete them: an own document is never silently created on top of one.

Writes still go through context/services.py; this module only picks the scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from activity.actors import Actor
from context import services
from context.models import Document, DocumentVersion
from context.paths import normalize_path
from context.services import AGENT_MEMORY_PATH, TreeEntry
from lib.errors import Forbidden, NotFound

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

IDENTITY_FILES = frozenset(
    {"IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md", "HEARTBEAT.md"}
)


@dataclass(frozen=True)
class Caller:
    user: AbstractBaseUser | None  # None for a system token
    agent: Agent | None  # None for a system token
    actor: Actor

    @classmethod
    def for_agent(cls, agent: Agent) -> Caller:
        return cls(user=agent.user, agent=agent, actor=Actor.for_agent(agent))

    @classmethod
    def system(cls) -> Caller:
        return cls(user=None, agent=None, actor=Actor.system())

    @property
    def is_system(self) -> bool:
        return self.user is None


def workspace_read(*, caller: Caller, path: str) -> Document:
    path = normalize_path(path)
    user, agent = _primary_scope(caller, path)
    try:
        return services.document_read(user=user, agent=agent, path=path)
    except NotFound:
        shared = _readable_global(caller, path)
        if shared is None:
            raise
        return shared


def workspace_write(*, caller: Caller, path: str, content: str) -> tuple[Document, int]:
    """Create or replace; returns the document and the id of the version written."""
    user, agent, path = _writable_scope(caller, path)
    document = services.document_write(
        user=user, agent=agent, path=path, content=content, actor=caller.actor
    )
    return document, services.document_latest_version_id(document)


def workspace_append(*, caller: Caller, path: str, content: str) -> tuple[Document, int]:
    user, agent, path = _writable_scope(caller, path)
    document = services.document_append(
        user=user, agent=agent, path=path, content=content, actor=caller.actor
    )
    return document, services.document_latest_version_id(document)


def workspace_delete(*, caller: Caller, path: str) -> DocumentVersion:
    user, agent, path = _writable_scope(caller, path)
    return services.document_delete(user=user, agent=agent, path=path, actor=caller.actor)


def workspace_tree(*, caller: Caller, path: str = "", depth: int = 1) -> list[TreeEntry]:
    """The caller's folders and files under path; global ones added where readable."""
    own = _tree_or_empty(user=caller.user, agent=None, path=path, depth=depth)
    if caller.is_system:
        if path and not own:
            raise NotFound(f"No folder '{path}'.", field="path")
        return own
    # AGENT_MEMORY.md names the agent's own notes, never a user document at that path.
    own = [entry for entry in own if entry.path != AGENT_MEMORY_PATH]
    notes = services.agent_memory_get(agent=caller.agent) if not path else None
    if notes is not None:
        own.append(
            TreeEntry(
                path=AGENT_MEMORY_PATH,
                name=AGENT_MEMORY_PATH,
                kind="file",
                depth=1,
                scope="agent",
                document_id=notes.pk,
                size=len(notes.body),
                updated_at=notes.updated_at,
            )
        )
    entries = {(entry.path, entry.kind): entry for entry in own}
    if settings.MNEMO_GLOBAL_READABLE:
        for entry in _tree_or_empty(user=None, agent=None, path=path, depth=depth):
            key = (entry.path, entry.kind)
            if key not in entries and not _primary_only(entry.path):
                entries[key] = entry
    if path and not entries:
        raise NotFound(f"No folder '{path}'.", field="path")
    return sorted(entries.values(), key=lambda entry: (entry.path.split("/"), entry.kind))


def _primary_scope(caller: Caller, path: str) -> tuple[AbstractBaseUser | None, Agent | None]:
    if not caller.is_system and path == AGENT_MEMORY_PATH:
        return caller.user, caller.agent
    return caller.user, None


def _writable_scope(caller: Caller, path: str) -> tuple[AbstractBaseUser | None, Agent | None, str]:
    path = normalize_path(path)
    user, agent = _primary_scope(caller, path)
    own = Document.objects.filter(user=user, agent=agent, path=path).exists()
    if not own and _readable_global(caller, path) is not None:
        raise Forbidden(
            f"'{path}' is a company document: agents can read it but not change it.",
            field="path",
        )
    return user, agent, path


def _readable_global(caller: Caller, path: str) -> Document | None:
    if caller.is_system or not settings.MNEMO_GLOBAL_READABLE or _primary_only(path):
        return None
    return Document.objects.filter(user=None, agent=None, path=path).first()


def _primary_only(path: str) -> bool:
    return path in IDENTITY_FILES or path == AGENT_MEMORY_PATH


def _tree_or_empty(
    *, user: AbstractBaseUser | None, agent: Agent | None, path: str, depth: int
) -> list[TreeEntry]:
    try:
        return services.document_tree(user=user, agent=agent, path=path, depth=depth)
    except NotFound:
        return []


def workspace_append_daily(*, caller: Caller, content: str) -> tuple[Document, int]:
    """A line in today's daily log of the caller's own scope (global: UTC dates)."""
    document = services.append_daily_memory(user=caller.user, content=content, actor=caller.actor)
    return document, services.document_latest_version_id(document)
