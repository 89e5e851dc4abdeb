"""The documents as an API caller sees them: which scope a path names, and the scopes read
across.

A caller is an agent token (one agent of one user) or a system token (no user).

- A system token works in the global (company) scope only, for every path.
- An agent token works in its user's scope, except for its private folder
  `agents/<agent name>/`, which holds documents private to that agent; `AGENT_MEMORY.md`
  is a short name for `agents/<agent name>/AGENT_MEMORY.md`. Another agent's folder is
  out of reach: reads answer 404 as for a missing file, writes 403.
- Beyond its own scope an agent token reads its user's granted scopes (Granted): each
  shared scope its user has a ScopeGrant to, and the global scope, which
  MNEMO_GLOBAL_READABLE grants every user read access to (reads_global_scope, the one
  place that flag is read). A read or a tree without a
  `scope` takes the user's own document at a path first, then the shared scopes' by slug
  (alphabetical), then the global one; a search finds them all; every result says its
  scope ("user", "agent", "shared:<slug>", "global"). Identity files and agents' notes are
  never read across scopes (DESIGN.md: the primary scope only); MEMORY.md and daily/*.md
  are.
- Writes go to the caller's own scope unless `scope` names a granted read_write one; a
  read-only scope is 403, a scope without a grant 404 exactly as one that does not exist.
  In the user's scope, context/services.py turns an agent's change to an identity file at
  the root into a proposal for the user's review and refuses USER_MEMORY.md; identity
  files and agents' notes are never written in a shared scope (primary_only, 403).
  Writing at the path of a document read from another scope gives the user their own
  document there, which from then on is read instead.
- Grants are read from the database on every call: a revoked grant is gone on the next
  request.

Writes still go through context/services.py; this module only picks the scope, for
reads, writes and searches (context/search.py) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from activity.actors import Actor
from context import services
from context.models import Document, DocumentVersion, ScopeGrant, SharedScope
from context.paths import normalize_folder, normalize_path
from context.services import (
    AGENT_MEMORY_PATH,
    AGENTS_FOLDER,
    IDENTITY_FILES,
    MEMORY_PATH,
    PROFILE_PATH,
)
from context.tree import TreeEntry, TreeRow, tree_entries, tree_rows
from context.versions import document_latest_version_id
from context.well_known import append_daily_memory, daily_log_line, daily_path
from lib.errors import Forbidden, InvalidInput, NotFound
from memory.selectors import user_zone
from memory.visibility import reads_all_memory
from profiles.models import ReadRule

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

GLOBAL = "global"
# What the `scope` parameter may say for the caller's own place (the path then picks the
# user's documents or the agent's private folder, as without it).
OWN_SCOPES = frozenset({"user", "agent"})
# memory_write's targets, `memory` and `daily_log`: a path that is exactly one
# of these names the well-known file, never a document of that name.
MEMORY_TARGET = "memory"  # MEMORY.md of the scope written in
DAILY_LOG_TARGET = "daily_log"  # a line added to today's daily/YYYY-MM-DD.md


def primary_only(path: str) -> bool:
    """Paths never read from another scope on a user's behalf: identity files and agents'
    notes."""
    return (
        path in IDENTITY_FILES
        or path == AGENT_MEMORY_PATH
        or path.split("/", 1)[0] == AGENTS_FOLDER
    )


def global_documents() -> Q:
    """The global (company) scope, as a filter on a model with the scope columns."""
    return Q(user__isnull=True, agent__isnull=True, shared_scope__isnull=True)


def cross_scope_paths(path_field: str = "path") -> Q:
    """The paths that may be read from a scope other than the user's own."""
    return ~Q(**{f"{path_field}__in": IDENTITY_FILES | {AGENT_MEMORY_PATH}}) & ~Q(
        **{f"{path_field}__startswith": f"{AGENTS_FOLDER}/"}
    )


@dataclass(frozen=True)
class Granted:
    """A scope beyond the user's own that they (and their agents) may read: a shared scope
    they hold a grant to, or the global scope, which MNEMO_GLOBAL_READABLE grants everyone
    read access to."""

    name: str  # "shared:<slug>" or "global", as results name it
    shared_scope: SharedScope | None  # None: the global scope
    writable: bool

    def documents(self, path_field: str = "path") -> Q:
        """This scope's documents that may be read across scopes, as a filter on a model with
        the scope columns and the document's path at `path_field`."""
        if self.shared_scope is None:
            scope = global_documents()
        else:
            scope = Q(user__isnull=True, agent__isnull=True, shared_scope=self.shared_scope)
        return scope & cross_scope_paths(path_field)


def reads_global_scope(user: AbstractBaseUser | None) -> bool:
    """Whether this reader, a user or one of their agents, reads the global (company)
    documents beyond its own: read-only, while the operator's MNEMO_GLOBAL_READABLE is on.
    A system token (no user) works in the global scope as its own place, not as a granted
    one. The one place the flag is read: granted_scopes asks here, and so do the pages
    (context/selectors.py), memory_search (context/search_api.py), ask_memory and the
    search box, which pass it to context/search.py as include_global."""
    return user is not None and bool(settings.MNEMO_GLOBAL_READABLE)


def granted_scopes(
    user: AbstractBaseUser | None, *, include_global: bool | None = None
) -> list[Granted]:
    """The scopes the user (and their agents) read beyond their own, in the order a read
    prefers them: shared scopes by slug, then the global one (include_global: default
    reads_global_scope). Read from the database on each call, so a revoked grant is gone on
    the next request."""
    if user is None:
        return []
    if include_global is None:
        include_global = reads_global_scope(user)
    grants = ScopeGrant.objects.filter(user=user).select_related("scope").order_by("scope__slug")
    scopes = [Granted(grant.scope.name, grant.scope, grant.writable) for grant in grants]
    if include_global:
        scopes.append(Granted(GLOBAL, None, writable=False))
    return scopes


def resolve_scope(
    *, user: AbstractBaseUser | None, name: str | None, include_global: bool | None = None
) -> Granted | None:
    """The scope a caller names with `scope`: None for its own place (or no name); NotFound
    for one it may not read, whether or not it exists, so a scope without a grant is never
    revealed. A system token's own place is the global scope."""
    if not name or (user is not None and name in OWN_SCOPES) or (user is None and name == GLOBAL):
        return None
    for granted in granted_scopes(user, include_global=include_global):
        if granted.name == name:
            return granted
    raise NotFound(f"No scope '{name}' is readable with this token.", field="scope")


def folder_rule(agent: Agent | None, *, path_field: str = "path") -> Q:
    """The documents of the user's own scope the agent's folder rule lets it read, as a
    filter (profiles/models.py Agent `document_rule`, set by the user on the Agents page:
    all, all except the folders it names, or only those). The root identity files, which
    set the agent up, are always read. The consolidated profile USER_MEMORY.md is built
    from all of the user's memory, so an agent whose memory rule is not "all" never reads
    it (memory/visibility.py)."""
    allowed = Q()
    if agent is not None and agent.document_rule != ReadRule.ALL:
        named = Q(pk__in=[])
        for folder in agent.document_folders:
            named |= Q(**{f"{path_field}__startswith": f"{folder}/"})
        allowed = named if agent.document_rule == ReadRule.ONLY else ~named
        allowed |= Q(**{f"{path_field}__in": IDENTITY_FILES})
    if agent is not None and not reads_all_memory(agent):
        allowed &= ~Q(**{path_field: PROFILE_PATH})
    return allowed


def folder_allows(agent: Agent | None, path: str) -> bool:
    """May the agent read the document at `path` of the user's own scope? (folder_rule)"""
    if agent is None:
        return True
    if path == PROFILE_PATH and not reads_all_memory(agent):
        return False
    if agent.document_rule == ReadRule.ALL or path in IDENTITY_FILES:
        return True
    named = any(path.startswith(f"{folder}/") for folder in agent.document_folders)
    return named if agent.document_rule == ReadRule.ONLY else not named


def private_folder(agent: Agent) -> str:
    """`agents/<name>/`, where an agent finds its private documents."""
    return f"{AGENTS_FOLDER}/{agent.name}/"


def readable_scope(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    all_agents: bool = False,
    include_global: bool = False,
    scope: str | None = None,
    path_field: str = "path",
) -> Q:
    """What a caller may read, as a filter on a model with the scope columns and the
    document's path at `path_field`: with no user (a system token) the global scope only;
    otherwise the user's own documents, the agent's private ones (every agent's with
    all_agents: the user's own view), and their granted scopes (global with include_global).
    A `scope` name narrows it to that one scope (NotFound for one the caller may not read)."""
    named = resolve_scope(user=user, name=scope, include_global=include_global)
    if named is not None:
        return named.documents(path_field)
    if user is None:
        return global_documents()
    readable = Q(user=user, agent__isnull=True) & folder_rule(agent, path_field=path_field)
    if all_agents:
        readable |= Q(user=user, agent__isnull=False)
    elif agent is not None:
        readable |= Q(user=user, agent=agent)
    if scope:  # the caller's own place, by name
        return readable
    for granted in granted_scopes(user, include_global=include_global):
        readable |= granted.documents(path_field)
    return readable


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


def workspace_read(*, caller: Caller, path: str, scope: str | None = None) -> Document:
    """The document at path: in the scope named, or the caller's own, else the first
    granted scope that has it."""
    path = normalize_path(path)
    named = _named(caller, scope)
    if named is not None:
        found = _document_in(named, path)
        if found is None:
            raise NotFound(f"No document at '{path}' in {named.name}.", field="path")
        return found
    place = _place(caller, path, writing=False)
    try:
        return services.document_read(user=place.user, agent=place.agent, path=place.path)
    except NotFound:
        found = None if scope else _read_across(caller, place)
        if found is None:
            raise NotFound(f"No document at '{path}'.", field="path") from None
        return found


def workspace_write(
    *,
    caller: Caller,
    path: str,
    content: str,
    base_version: int | None = None,
    scope: str | None = None,
) -> Document:
    """Create or replace in the caller's own scope, or in the granted read_write scope named;
    `written_version` is this change's.

    base_version is the version the caller read at this path (the services refuse a stale
    one). Where the user has no document there and the caller read another scope's, it names
    that document's version: the write then makes the user's own copy, unless one appeared
    meanwhile.

    The path `memory` writes MEMORY.md; `daily_log` adds content as one line to today's
    daily log (`_write_daily_log`)."""
    if path == DAILY_LOG_TARGET:
        return _write_daily_log(caller, content, base_version=base_version, scope=scope)
    path = MEMORY_PATH if path == MEMORY_TARGET else normalize_path(path)
    named = _named(caller, scope)
    if named is not None:
        return services.document_write(
            user=None,
            shared_scope=_writable(named, path),
            path=path,
            content=content,
            actor=caller.actor,
            base_version=base_version,
        )
    place = _place(caller, path, writing=True)
    create_only = base_version is not None and _reads_other_version(caller, place, base_version)
    return services.document_write(
        user=place.user,
        agent=place.agent,
        path=place.path,
        content=content,
        actor=caller.actor,
        base_version=None if create_only else base_version,
        create_only=create_only,
    )


def _write_daily_log(
    caller: Caller, content: str, *, base_version: int | None, scope: str | None
) -> Document:
    """memory_write's `daily_log`: "- HH:MM content" added to today's log of the scope
    written in, the date and time in the caller's user's timezone (UTC for a system token),
    as append_daily_memory adds it. An append changes no version the caller read, so a
    base_version is refused rather than ignored."""
    if base_version is not None:
        raise InvalidInput(
            "base_version does not apply to daily_log: each call adds a line to today's log, "
            "whatever it holds.",
            field="base_version",
        )
    path, line = daily_log_line(user=caller.user, content=content)
    return workspace_append(caller=caller, path=path, content=line, scope=scope)


def workspace_append(
    *, caller: Caller, path: str, content: str, scope: str | None = None
) -> Document:
    path = normalize_path(path)
    named = _named(caller, scope)
    if named is not None:
        return services.document_append(
            user=None,
            shared_scope=_writable(named, path),
            path=path,
            content=content,
            actor=caller.actor,
        )
    place = _place(caller, path, writing=True)
    return services.document_append(
        user=place.user, agent=place.agent, path=place.path, content=content, actor=caller.actor
    )


def workspace_delete(
    *, caller: Caller, path: str, base_version: int | None = None, scope: str | None = None
) -> DocumentVersion:
    path = normalize_path(path)
    named = _named(caller, scope)
    if named is not None:
        shared_scope = _writable(named, path)
        try:
            return services.document_delete(
                user=None,
                shared_scope=shared_scope,
                path=path,
                actor=caller.actor,
                base_version=base_version,
            )
        except NotFound:
            raise NotFound(f"No document at '{path}' in {named.name}.", field="path") from None
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
        other = None if scope else _read_across(caller, place)
        if other is None:
            raise NotFound(f"No document at '{path}'.", field="path") from None
        if other.shared_scope_id is None:
            raise Forbidden(
                f"'{path}' is a company document: agents can read it but not delete it.",
                field="path",
            ) from None
        raise Forbidden(
            f"'{path}' is in {other.scope}, not in your user's documents: name scope "
            f"'{other.scope}' to delete it there (that needs read-write access).",
            field="path",
        ) from None


def workspace_append_daily(*, caller: Caller, content: str) -> Document:
    """A line in today's daily log of the caller's own scope (global: UTC dates)."""
    if not caller.is_system:  # the agent's folder rule binds its daily log too
        today = timezone.now().astimezone(user_zone(caller.user)).date()
        _check_folder_rule(caller, daily_path(today), writing=True)
    return append_daily_memory(user=caller.user, content=content, actor=caller.actor)


def workspace_tree(
    *, caller: Caller, path: str = "", depth: int = 1, scope: str | None = None
) -> list[TreeEntry]:
    """The folders and files the caller sees under path: in the scope named, or the user's,
    the agent's private folder, and each granted scope's where no earlier scope has that
    path (the order reads prefer)."""
    folder = normalize_folder(path)
    named = _named(caller, scope)
    prefix = f"{folder}/" if folder else ""
    if named is not None:
        rows = tree_rows(Document.objects.filter(named.documents(), path__startswith=prefix))
    else:
        rows = _visible_rows(caller, prefix, across=not scope)
    entries = tree_entries(rows, folder=folder, depth=depth)
    if folder and not entries:
        raise NotFound(f"No folder '{folder}'.", field="path")
    return entries


def _named(caller: Caller, scope: str | None) -> Granted | None:
    return resolve_scope(user=caller.user, name=scope)


def _writable(granted: Granted, path: str) -> SharedScope:
    """The shared scope to write path in, if the grant allows it (Forbidden otherwise)."""
    if not granted.writable or granted.shared_scope is None:
        raise Forbidden(
            f"{granted.name} is read-only for you: your user's grant lets agents read it, not "
            "change it.",
            field="scope",
        )
    if primary_only(path):
        raise Forbidden(
            f"'{path}' is an identity file or an agent's notes: those live in your user's own "
            "documents only.",
            field="path",
        )
    return granted.shared_scope


def _document_in(granted: Granted, path: str) -> Document | None:
    return Document.objects.filter(granted.documents(), path=path).first()


def _place(caller: Caller, path: str, *, writing: bool) -> Place:
    if caller.is_system:
        return Place(None, None, path)
    if path == AGENT_MEMORY_PATH:
        return Place(caller.user, caller.agent, path)
    if path.startswith(caller.private_folder):
        return Place(caller.user, caller.agent, path.removeprefix(caller.private_folder))
    if path.split("/", 1)[0] != AGENTS_FOLDER:
        _check_folder_rule(caller, path, writing=writing)
        return Place(caller.user, None, path)
    if not writing:  # another agent's notes look exactly like a missing file
        raise NotFound(f"No document at '{path}'.", field="path")
    raise Forbidden(
        f"'{path}' is outside your private folder: {AGENTS_FOLDER}/ holds each agent's "
        f"private documents, and yours are under {caller.private_folder}.",
        field="path",
    )


def _check_folder_rule(caller: Caller, path: str, *, writing: bool) -> None:
    """A path of the user's own scope the agent's folder rule hides: a read answers as for
    a missing file, a write is refused (it could not read what it wrote)."""
    if folder_allows(caller.agent, path):
        return
    if not writing:
        raise NotFound(f"No document at '{path}'.", field="path")
    raise Forbidden(
        f"'{path}' is in a folder your read rule hides, so you cannot write there: the user "
        "sets what you read on the Agents page.",
        field="path",
    )


def _read_across(caller: Caller, place: Place) -> Document | None:
    """The document at the place in the first granted scope that has one (for a user
    without one of their own there)."""
    if caller.is_system or place.agent is not None or primary_only(place.path):
        return None
    for granted in granted_scopes(caller.user):
        found = _document_in(granted, place.path)
        if found is not None:
            return found
    return None


def _reads_other_version(caller: Caller, place: Place, version_id: int) -> bool:
    """Whether the caller reads another scope's document at this place (the user has none
    of their own there) and version_id is its newest version."""
    other = _read_across(caller, place)
    return (
        other is not None
        and not Document.objects.filter(user=place.user, agent=None, path=place.path).exists()
        and document_latest_version_id(other) == version_id
    )


def _visible_rows(caller: Caller, prefix: str, *, across: bool = True) -> list[TreeRow]:
    if caller.is_system:
        return tree_rows(Document.objects.filter(global_documents(), path__startswith=prefix))
    own = tree_rows(
        Document.objects.filter(
            folder_rule(caller.agent), user=caller.user, agent=None, path__startswith=prefix
        )
    )
    private = tree_rows(
        Document.objects.filter(user=caller.user, agent=caller.agent),
        under=caller.private_folder,
    )
    rows = own + [row for row in private if row.path.startswith(prefix)]
    if not across:
        return rows
    taken = {row.path for row in own}
    for granted in granted_scopes(caller.user):
        found = tree_rows(Document.objects.filter(granted.documents(), path__startswith=prefix))
        rows += [row for row in found if row.path not in taken]
        taken |= {row.path for row in found}
    return rows
