"""The documents as an API caller sees them: which scope a path names, and the global overlay.

A caller is an agent token (one agent of one user) or a system token (no user).

- A system token works in the global (company) scope only, for every path.
- An agent token works in its user's scope, except for its private folder
  `agents/<agent name>/`, which holds documents private to that agent; `AGENT_MEMORY.md`
  is a short name for `agents/<agent name>/AGENT_MEMORY.md`. Another agent's folder is
  out of reach: reads answer 404 as for a missing file, writes 403.
- With MNEMO_GLOBAL_READABLE on, an agent token also reads global documents where its
  user has none at that path, except identity files and agents' notes (DESIGN.md: those
  are read from the primary scope only). Writes always go to the caller's own scope, so a
  company document is never changed by an agent; writing at its path gives the user their
  own document, which from then on is read instead (the response's scope says which).

Writes still go through context/services.py; this module only picks the scope, for
reads, writes and searches (context/search.py) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Q

from activity.actors import Actor
from context import services
from context.models import Document, DocumentVersion
from context.paths import normalize_folder, normalize_path
from context.services import AGENT_MEMORY_PATH, AGENTS_FOLDER, TreeEntry, TreeRow, tree_rows
from lib.errors import Forbidden, NotFound

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

IDENTITY_FILES = frozenset(
    {"IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md", "HEARTBEAT.md"}
)


def primary_only(path: str) -> bool:
    """Paths never read from the global scope on a user's behalf: identity files and
    agents' notes."""
    return (
        path in IDENTITY_FILES
        or path == AGENT_MEMORY_PATH
        or path.split("/", 1)[0] == AGENTS_FOLDER
    )


def shared_global_documents(path_field: str = "path") -> Q:
    """The global documents shown beside a user's own (when readable), as a filter on a
    model with user and agent columns and the document's path at `path_field`."""
    return (
        Q(user__isnull=True, agent__isnull=True)
        & ~Q(**{f"{path_field}__in": IDENTITY_FILES | {AGENT_MEMORY_PATH}})
        & ~Q(**{f"{path_field}__startswith": f"{AGENTS_FOLDER}/"})
    )


def private_folder(agent: Agent) -> str:
    """`agents/<name>/`, where an agent finds its private documents."""
    return f"{AGENTS_FOLDER}/{agent.name}/"


def readable_scope(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    all_agents: bool = False,
    include_global: bool = False,
    path_field: str = "path",
) -> Q:
    """What a caller may read, as a filter on a model with user and agent columns and the
    document's path at `path_field`: with no user (a system token) the global scope only;
    otherwise the user's own documents, the agent's private ones (every agent's with
    all_agents: the user's own view), and with include_global the shared global ones."""
    if user is None:
        return Q(user__isnull=True, agent__isnull=True)
    scope = Q(user=user, agent__isnull=True)
    if all_agents:
        scope |= Q(user=user, agent__isnull=False)
    elif agent is not None:
        scope |= Q(user=user, agent=agent)
    if include_global:
        # Identity files and agents' notes are read from the user's own scope only.
        scope |= shared_global_documents(path_field=path_field)
    return scope


def under_prefix(prefix: str, agent: Agent | None, *, path_field: str = "path") -> Q:
    """Documents whose path, as the agent names it, starts with prefix: its private
    documents are named under its folder agents/<name>/ (shown_path)."""
    shared = Q(agent__isnull=True, **{f"{path_field}__startswith": prefix})
    if agent is None:
        return shared
    folder = private_folder(agent)
    if folder.startswith(prefix):
        return shared | Q(agent=agent)
    if prefix.startswith(folder):
        return shared | Q(agent=agent, **{f"{path_field}__startswith": prefix.removeprefix(folder)})
    return shared


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

    @property
    def private_folder(self) -> str:
        """`agents/<name>/`, where this agent's private documents appear."""
        return private_folder(self.agent) if self.agent is not None else ""


@dataclass(frozen=True)
class Place:
    """What a path names for a caller: a scope and the path inside it."""

    user: AbstractBaseUser | None
    agent: Agent | None
    path: str


def shown_path(caller: Caller, document: Document | DocumentVersion) -> str:
    """The path under which the caller finds this document (its own or a readable one)."""
    if document.agent_id is not None:
        return f"{caller.private_folder}{document.path}"
    return document.path


def workspace_read(*, caller: Caller, path: str) -> Document:
    path = normalize_path(path)
    place = _place(caller, path, writing=False)
    try:
        return services.document_read(user=place.user, agent=place.agent, path=place.path)
    except NotFound:
        shared = _readable_global(caller, place)
        if shared is None:
            raise NotFound(f"No document at '{path}'.", field="path") from None
        return shared


def workspace_write(
    *, caller: Caller, path: str, content: str, base_version: int | None = None
) -> Document:
    """Create or replace in the caller's own scope; `written_version` is this change's.

    base_version is the version the caller read at this path (the services refuse a stale
    one). Where the user has no document there and the caller read the company's, it names
    that document's version: the write then makes the user's own copy, unless one appeared
    meanwhile."""
    place = _place(caller, normalize_path(path), writing=True)
    create_only = base_version is not None and _reads_shared_version(caller, place, base_version)
    return services.document_write(
        user=place.user,
        agent=place.agent,
        path=place.path,
        content=content,
        actor=caller.actor,
        base_version=None if create_only else base_version,
        create_only=create_only,
    )


def workspace_append(*, caller: Caller, path: str, content: str) -> Document:
    place = _place(caller, normalize_path(path), writing=True)
    return services.document_append(
        user=place.user, agent=place.agent, path=place.path, content=content, actor=caller.actor
    )


def workspace_delete(
    *, caller: Caller, path: str, base_version: int | None = None
) -> DocumentVersion:
    path = normalize_path(path)
    place = _place(caller, path, writing=True)
    try:
        return services.document_delete(
            user=place.user,
            agent=place.agent,
            path=place.path,
            actor=caller.actor,
            base_version=base_version,
        )
    except NotFound:
        if _readable_global(caller, place) is not None:
            raise Forbidden(
                f"'{path}' is a company document: agents can read it but not delete it.",
                field="path",
            ) from None
        raise NotFound(f"No document at '{path}'.", field="path") from None


def workspace_append_daily(*, caller: Caller, content: str) -> Document:
    """A line in today's daily log of the caller's own scope (global: UTC dates)."""
    return services.append_daily_memory(user=caller.user, content=content, actor=caller.actor)


def workspace_tree(*, caller: Caller, path: str = "", depth: int = 1) -> list[TreeEntry]:
    """The folders and files the caller sees under path: the user's, the agent's private
    folder, and readable global ones where the user has none at that path."""
    folder = normalize_folder(path)
    entries = services.tree_entries(_visible_rows(caller, folder), folder=folder, depth=depth)
    if folder and not entries:
        raise NotFound(f"No folder '{folder}'.", field="path")
    return entries


def _place(caller: Caller, path: str, *, writing: bool) -> Place:
    if caller.is_system:
        return Place(None, None, path)
    if path == AGENT_MEMORY_PATH:
        return Place(caller.user, caller.agent, path)
    if path.startswith(caller.private_folder):
        return Place(caller.user, caller.agent, path.removeprefix(caller.private_folder))
    if path.split("/", 1)[0] != AGENTS_FOLDER:
        return Place(caller.user, None, path)
    if not writing:  # another agent's notes look exactly like a missing file
        raise NotFound(f"No document at '{path}'.", field="path")
    raise Forbidden(
        f"'{path}' is outside your private folder: {AGENTS_FOLDER}/ holds each agent's "
        f"private documents, and yours are under {caller.private_folder}.",
        field="path",
    )


def _readable_global(caller: Caller, place: Place) -> Document | None:
    if (
        caller.is_system
        or place.agent is not None
        or not settings.MNEMO_GLOBAL_READABLE
        or primary_only(place.path)
    ):
        return None
    return Document.objects.filter(user=None, agent=None, path=place.path).first()


def _reads_shared_version(caller: Caller, place: Place, version_id: int) -> bool:
    """Whether the caller reads a company document at this place (the user has none of
    their own there) and version_id is its newest version."""
    shared = _readable_global(caller, place)
    return (
        shared is not None
        and not Document.objects.filter(user=place.user, agent=None, path=place.path).exists()
        and services.document_latest_version_id(shared) == version_id
    )


def _visible_rows(caller: Caller, folder: str) -> list[TreeRow]:
    prefix = f"{folder}/" if folder else ""
    if caller.is_system:
        return tree_rows(Document.objects.filter(user=None, agent=None, path__startswith=prefix))
    own = tree_rows(Document.objects.filter(user=caller.user, agent=None, path__startswith=prefix))
    private = tree_rows(
        Document.objects.filter(user=caller.user, agent=caller.agent),
        under=caller.private_folder,
    )
    rows = own + [row for row in private if row.path.startswith(prefix)]
    if settings.MNEMO_GLOBAL_READABLE:
        taken = {row.path for row in own}
        shared = tree_rows(
            Document.objects.filter(shared_global_documents(), path__startswith=prefix)
        )
        rows += [row for row in shared if row.path not in taken]
    return rows
