"""Reads for the Documents pages: the scopes a user may see, and lookups that return None
for anything outside them, so a view can 404 without telling whose it was. Also which
version of a document is current, as the agent API reports it (document_state).

A scope is named in URLs by a key: "mine" (the user's own documents), "agents/<name>"
(private to one of the user's agents), "shared/<slug>" (a shared scope the user holds a
grant to: editable with read_write, read-only with read) or "company" (the global scope,
read-only, and only while MNEMO_GLOBAL_READABLE is on). Which scopes a user may read beyond
their own is context/workspace.py's granted_scopes, read afresh on every request, and
whether that includes the company's its reads_global_scope. Writes
stay in context/services.py.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from context.models import (
    Document,
    DocumentProposal,
    DocumentVersion,
    SharedScope,
    VersionAction,
)
from context.paths import InvalidPath, normalize_path
from context.versions import NEWEST_FIRST
from context.well_known import daily_path
from context.workspace import (
    Granted,
    global_documents,
    granted_scopes,
    primary_only,
    reads_global_scope,
)
from memory.models import ProposalStatus
from memory.selectors import user_zone
from profiles.models import Agent
from profiles.naming import agent_name

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

MINE = "mine"
COMPANY = "company"
AGENT_PREFIX = "agents/"
SHARED_PREFIX = "shared/"


@dataclass(frozen=True)
class Scope:
    """Where documents live, as the pages show it."""

    key: str  # the URL segment: "mine", "agents/<name>", "shared/<slug>" or "company"
    label: str
    user: AbstractBaseUser | None
    agent: Agent | None
    writable: bool
    shared: SharedScope | None = None

    @property
    def kind(self) -> str:
        """ "user", "agent", "shared" or "global" (a CSS class and a test hook)."""
        if self.shared is not None:
            return "shared"
        if self.user is None:
            return "global"
        return "user" if self.agent is None else "agent"

    @property
    def where(self) -> dict[str, Any]:
        """The scope as context/services.py takes it."""
        return {"user": self.user, "agent": self.agent, "shared_scope": self.shared}


def scope_mine(*, user: AbstractBaseUser) -> Scope:
    return Scope(key=MINE, label="Your documents", user=user, agent=None, writable=True)


def scope_of_agent(*, agent: Agent) -> Scope:
    return Scope(
        key=f"{AGENT_PREFIX}{agent.name}",
        label=f"Notes of agent {agent_name(agent)}",
        user=agent.user,
        agent=agent,
        writable=True,
    )


def scope_company() -> Scope:
    return Scope(key=COMPANY, label="Company (read-only)", user=None, agent=None, writable=False)


def scope_shared(*, granted: Granted) -> Scope:
    shared = granted.shared_scope
    access = "" if granted.writable else " (read-only)"
    return Scope(
        key=f"{SHARED_PREFIX}{shared.slug}",
        label=f"Shared: {shared.slug}{access}",
        user=None,
        agent=None,
        writable=granted.writable,
        shared=shared,
    )


def shared_scopes(*, user: AbstractBaseUser) -> list[Scope]:
    """The shared scopes the user holds a grant to, by slug (the grant read now)."""
    return [
        scope_shared(granted=granted)
        for granted in granted_scopes(user, include_global=False)
        if granted.shared_scope is not None
    ]


def scope_get(*, user: AbstractBaseUser, key: str) -> Scope | None:
    """The scope a URL key names for this user; None for another user's agent, an unknown
    agent, a shared scope without a grant (as one that does not exist), or the company
    scope while it is not readable."""
    if key == MINE:
        return scope_mine(user=user)
    if key == COMPANY:
        return scope_company() if reads_global_scope(user) else None
    if key.startswith(AGENT_PREFIX):
        agent = Agent.objects.filter(user=user, name=key.removeprefix(AGENT_PREFIX)).first()
        return scope_of_agent(agent=agent) if agent is not None else None
    if key.startswith(SHARED_PREFIX):
        return next((scope for scope in shared_scopes(user=user) if scope.key == key), None)
    return None


def scope_of_row(*, user: AbstractBaseUser, row: Document | DocumentVersion) -> Scope:
    """The scope of a document or version the user may already see."""
    if row.shared_scope_id is not None:
        granted = scope_get(user=user, key=f"{SHARED_PREFIX}{row.shared_scope.slug}")
        # A grant revoked a moment ago: shown as it was found, changed no more.
        return granted or scope_shared(
            granted=Granted(row.shared_scope.name, row.shared_scope, False)
        )
    if row.user_id is None:
        return scope_company()
    if row.agent_id is None:
        return scope_mine(user=user)
    return scope_of_agent(agent=row.agent)


def document_scopes(*, user: AbstractBaseUser) -> list[Scope]:
    """What the tree shows: the user's own documents, one scope per agent that has private
    notes, each shared scope granted to the user, and the company scope when readable."""
    agents = Agent.objects.filter(user=user, private_documents__isnull=False).distinct()
    scopes = [scope_mine(user=user), *(scope_of_agent(agent=a) for a in agents.order_by("name"))]
    scopes += shared_scopes(user=user)
    if reads_global_scope(user):
        scopes.append(scope_company())
    return scopes


def writable_scopes(*, user: AbstractBaseUser) -> list[Scope]:
    """Where a user may create documents: their own scope, each of their agents', and the
    shared scopes they may write in."""
    agents = Agent.objects.filter(user=user).order_by("name")
    return [
        scope_mine(user=user),
        *(scope_of_agent(agent=agent) for agent in agents),
        *(scope for scope in shared_scopes(user=user) if scope.writable),
    ]


def path_writable(*, scope: Scope, path: str) -> bool:
    """Whether the user may change the document at path in scope: a writable scope, and in
    a shared scope not an identity file or an agent's notes, which live in each user's own
    documents and are never read from a shared scope (context/workspace.py primary_only,
    the rule the agent API follows)."""
    return scope.writable and (scope.shared is None or not primary_only(path))


def scope_at(*, scope: Scope, path: str) -> Scope:
    """The scope as the pages show it for one path: read-only where path_writable says no."""
    if scope.writable and not path_writable(scope=scope, path=path):
        return dataclasses.replace(scope, writable=False)
    return scope


def shared_path_refusal(path: str) -> str:
    """Why path may not be written in a shared scope, in the pages' words."""
    return (
        f"'{path}' is an identity file or an agent's notes: those live in each user's own "
        "documents, where their agents read them, and are never read from a shared scope. "
        "Write it in your own documents instead."
    )


def _visible(user: AbstractBaseUser) -> Q:
    """The documents (or versions) the pages show the user: their own, their agents', their
    granted shared scopes' and, while readable, the company's."""
    visible = Q(user=user)
    granted = [scope.shared.pk for scope in shared_scopes(user=user)]
    if granted:
        visible |= Q(user__isnull=True, shared_scope__in=granted)
    if reads_global_scope(user):
        visible |= global_documents()
    return visible


def documents_exist(*, user: AbstractBaseUser) -> bool:
    """Whether the user sees any document at all (their own, their agents', a granted
    scope's, the company's)."""
    return Document.objects.filter(_visible(user)).exists()


def document_get(*, scope: Scope, path: str) -> Document | None:
    try:
        path = normalize_path(path)
    except InvalidPath:
        return None
    return Document.objects.filter(**scope.where, path=path).first()


def document_has_history(*, scope: Scope, path: str) -> bool:
    """Whether the path ever held a document in this scope (it may be deleted now)."""
    try:
        path = normalize_path(path)
    except InvalidPath:
        return False
    return DocumentVersion.objects.filter(**scope.where, path=path).exists()


def version_get(*, user: AbstractBaseUser, version_id: int) -> DocumentVersion | None:
    """One version of the user's documents (own or their agents'), of a shared scope they
    hold a grant to, or of the company's while those are readable."""
    return (
        DocumentVersion.objects.select_related("agent", "shared_scope", "actor_user", "actor_agent")
        .filter(_visible(user), pk=version_id)
        .first()
    )


def version_states(*, user: AbstractBaseUser, ids: Iterable[int]) -> dict[int, bool]:
    """For each of these version ids that the user may open (as version_get would find it):
    whether a document is at its path in its scope now (False: deleted since). An id missing
    from the answer is no version they can open. Three queries (the grants among them)."""
    wanted = {pk for pk in ids if isinstance(pk, int) and not isinstance(pk, bool)}
    if not wanted:
        return {}
    visible = _visible(user)
    versions = list(
        DocumentVersion.objects.filter(visible, pk__in=wanted).values_list(
            "pk", "user_id", "agent_id", "shared_scope_id", "path"
        )
    )
    paths = {path for *_, path in versions}
    there = set(
        Document.objects.filter(visible, path__in=paths).values_list(
            "user_id", "agent_id", "shared_scope_id", "path"
        )
    )
    return {pk: tuple(place) in there for pk, *place in versions}


@dataclass(frozen=True)
class DeletedDocument:
    """A document in Recently deleted: the version its deletion wrote (what it removed, who
    deleted it and when), its scope, and the document at its path now, if one was written
    there since (then restoring would overwrite it, so the page offers to open it)."""

    version: DocumentVersion
    scope: Scope
    current: Document | None


def deleted_document_list(
    *, user: AbstractBaseUser, since: datetime.datetime, limit: int = 200
) -> list[DeletedDocument]:
    """The documents deleted since `since` and not restored since, newest deletion first: the
    user's own, their agents', and those of the shared scopes they may write. Per path, the
    latest deletion. Four queries, whatever the number of rows."""
    writable = {scope.shared.pk: scope for scope in shared_scopes(user=user) if scope.writable}
    where = Q(user=user)
    if writable:
        where |= Q(user__isnull=True, shared_scope__in=list(writable))
    latest = (
        DocumentVersion.objects.filter(where, action=VersionAction.DELETE, created_at__gte=since)
        .select_related("agent__user", "shared_scope", "actor_user", "actor_agent")
        .order_by("user_id", "agent_id", "shared_scope_id", "path", "-created_at", "-id")
        .distinct("user_id", "agent_id", "shared_scope_id", "path")
    )
    deletions = {_place(version): version for version in latest}
    if not deletions:
        return []
    paths = {version.path for version in deletions.values()}
    restored = (
        DocumentVersion.objects.filter(
            where, action=VersionAction.RESTORE, created_at__gte=since, path__in=paths
        )
        .order_by()
        .values_list("user_id", "agent_id", "shared_scope_id", "path", "created_at")
    )
    for *where_restored, created_at in restored:
        place = tuple(where_restored)
        version = deletions.get(place)
        if version is not None and created_at >= version.created_at:
            del deletions[place]  # restored since: not deleted any more
    now = {
        _place(document): document
        for document in Document.objects.filter(where, path__in=paths).only(
            "pk", "user_id", "agent_id", "shared_scope_id", "path", "updated_at"
        )
    }
    rows = [
        DeletedDocument(
            version=version,
            scope=_scope_of_deleted(user, version, writable),
            current=now.get(place),
        )
        for place, version in deletions.items()
    ]
    rows.sort(key=lambda row: (row.version.created_at, row.version.pk), reverse=True)
    return rows[:limit]


def _place(row: Document | DocumentVersion) -> tuple[int | None, int | None, int | None, str]:
    """Where a document lives, as one key: (user, agent, shared scope, path)."""
    return (row.user_id, row.agent_id, row.shared_scope_id, row.path)


def _scope_of_deleted(
    user: AbstractBaseUser, version: DocumentVersion, writable: dict[int, Scope]
) -> Scope:
    """scope_of_row without a query: the shared scopes were read once."""
    if version.shared_scope_id is not None:
        return writable[version.shared_scope_id]
    if version.agent_id is None:
        return scope_mine(user=user)
    return scope_of_agent(agent=version.agent)


def versions_with_actors(versions: QuerySet[DocumentVersion]) -> QuerySet[DocumentVersion]:
    return versions.select_related("actor_user", "actor_agent")


def daily_log_path(*, user: AbstractBaseUser, now: datetime.datetime | None = None) -> str:
    """daily/YYYY-MM-DD.md for today in the user's timezone, as append_daily_memory writes."""
    return daily_path((now or timezone.now()).astimezone(user_zone(user)).date())


@dataclass(frozen=True)
class DocumentState:
    """A document with the id of its newest version (None if it has none), read together."""

    document: Document
    version_id: int | None


def document_state(*, document_id: int) -> DocumentState | None:
    """The document as it is now and its newest version, in one statement, so the body and
    the version an API caller gets agree (the version is what base_version and If-Match name
    to change this body); None once it is deleted. No scope check: the caller found it."""
    newest = (
        DocumentVersion.objects.filter(document=OuterRef("pk"))
        .order_by(*NEWEST_FIRST)
        .values("pk")[:1]
    )
    found = (
        Document.objects.filter(pk=document_id).annotate(newest_version_id=Subquery(newest)).first()
    )
    if found is None:
        return None
    return DocumentState(document=found, version_id=found.newest_version_id)


def version_replaced_id(*, version: DocumentVersion) -> int | None:
    """The id of the version of the same document that `version` came after: what a write
    replaced, or None for the one that created the document. Exact, since a document's
    versions are written one at a time under its row lock."""
    if version.document_id is None:
        return None
    earlier = Q(created_at__lt=version.created_at) | Q(
        created_at=version.created_at, pk__lt=version.pk
    )
    return (
        DocumentVersion.objects.filter(earlier, document_id=version.document_id)
        .order_by(*NEWEST_FIRST)
        .values_list("pk", flat=True)
        .first()
    )


@dataclass(frozen=True)
class ChangedLine:
    kind: str  # "same", "added" or "removed"
    text: str


# Unchanged lines shown around a change; the rest fold into one "…" line.
DIFF_CONTEXT_LINES = 2


def version_before(version: DocumentVersion) -> DocumentVersion | None:
    """The version of the same document (scope and path) just before this one."""
    return (
        DocumentVersion.objects.filter(
            user_id=version.user_id,
            agent_id=version.agent_id,
            shared_scope_id=version.shared_scope_id,
            path=version.path,
        )
        .filter(
            Q(created_at__lt=version.created_at)
            | Q(created_at=version.created_at, id__lt=version.pk)
        )
        .order_by(*NEWEST_FIRST)
        .first()
    )


def version_changes(version: DocumentVersion) -> list[ChangedLine] | None:
    """What this version changed, line by line, against the one before it (None for the
    first version or a deletion): line_changes below."""
    previous = version_before(version)
    if previous is None or version.action == "delete":
        return None
    return line_changes(previous.body, version.body)


def line_changes(before: str, after: str) -> list[ChangedLine]:
    """The changed lines from before to after, with a little context around them.

    The lines both share at the start and at the end are set aside first; the rest is
    compared exactly when each side has at most DIFF_EXACT_LINES, else shown as one block
    replaced by another (cut to DIFF_BLOCK_LINES each): difflib's time grows with the
    product of the sides when lines repeat, and a body of up to 1 MiB (an imported version
    too) could otherwise hold a page for minutes."""
    old, new = before.splitlines(), after.splitlines()
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    old_middle, new_middle = old[start : len(old) - end], new[start : len(new) - end]
    if not old_middle and not new_middle:
        return []
    context = DIFF_CONTEXT_LINES
    lines = [ChangedLine("same", text) for text in old[max(0, start - context) : start]]
    if len(old_middle) <= DIFF_EXACT_LINES and len(new_middle) <= DIFF_EXACT_LINES:
        matcher = difflib.SequenceMatcher(a=old_middle, b=new_middle, autojunk=False)
        lines += _grouped(matcher.get_grouped_opcodes(context), old_middle, new_middle)
    else:
        lines += _block("removed", old_middle) + _block("added", new_middle)
    lines += [ChangedLine("same", text) for text in new[len(new) - end :][:context]]
    return lines


# Changed lines compared exactly, on each side at most; longer changes show as blocks.
DIFF_EXACT_LINES = 1000
DIFF_BLOCK_LINES = 200


def _block(kind: str, texts: list[str]) -> list[ChangedLine]:
    lines = [ChangedLine(kind, text) for text in texts[:DIFF_BLOCK_LINES]]
    if len(texts) > DIFF_BLOCK_LINES:
        lines.append(ChangedLine(kind, f"… and {len(texts) - DIFF_BLOCK_LINES:,} more lines"))
    return lines


def _grouped(
    groups: Iterable[list[tuple[str, int, int, int, int]]], old: list[str], new: list[str]
) -> list[ChangedLine]:
    lines: list[ChangedLine] = []
    for group in groups:
        if lines:
            lines.append(ChangedLine("same", "…"))
        for tag, old_start, old_end, new_start, new_end in group:
            if tag == "equal":
                lines += [ChangedLine("same", text) for text in new[new_start:new_end]]
                continue
            lines += [ChangedLine("removed", text) for text in old[old_start:old_end]]
            lines += [ChangedLine("added", text) for text in new[new_start:new_end]]
    return lines


# --- document proposals (the review inbox's identity files) ---------------------------------


def document_proposal_list(
    *,
    user: AbstractBaseUser,
    status: str | None = None,
    ids: Iterable[int] | None = None,
) -> QuerySet[DocumentProposal]:
    """The user's document proposals, newest first; only one status or some ids if given.
    A pending one past its expiry that beat has not swept yet is left out of the pending."""
    proposals = DocumentProposal.objects.filter(user=user).select_related(
        "actor_agent", "decided_by", "applied"
    )
    if status == ProposalStatus.PENDING:
        proposals = proposals.filter(status=status, expires_at__gt=timezone.now())
    elif status is not None:
        proposals = proposals.filter(status=status)
    if ids is not None:
        proposals = proposals.filter(pk__in=list(ids))
    return proposals.order_by("-created_at", "-id")


def pending_document_proposal_count(*, user: AbstractBaseUser) -> int:
    """How many document proposals wait for the user (in the navigation's Inbox count)."""
    return DocumentProposal.objects.filter(
        user=user, status=ProposalStatus.PENDING, expires_at__gt=timezone.now()
    ).count()


def document_proposal_states(*, user: AbstractBaseUser, ids: Iterable[int]) -> dict[int, str]:
    """The status of each of these ids that is one of the user's document proposals."""
    wanted = {pk for pk in ids if isinstance(pk, int) and not isinstance(pk, bool)}
    if not wanted:
        return {}
    rows = DocumentProposal.objects.filter(user=user, pk__in=wanted).values_list("pk", "status")
    return dict(rows)
