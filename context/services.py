"""The only functions that change documents.

A scope is (user, agent, shared_scope): agent=None is the user's own documents, agent set
is private to that agent, shared_scope set (user and agent None) is a named shared scope,
and all three None is the global (company) scope. Grants to shared scopes are written here
too (shared_scope_create, scope_grant_set, scope_grant_revoke).
Each change validates, writes the document, a DocumentVersion row and an activity
event in one transaction. Pages, the agent API, tasks and the admin all come through here.

Except that the user is in charge of what all their agents read. An agent's write, append
or delete of an identity file at the root of the user's documents (IDENTITY_FILES) writes a
DocumentProposal and its `proposal_created` event instead, and raises DocumentReviewRequired
(the API answers 202 pending_review); the user decides it in the review inbox
(context/review.py). The consolidated profile, USER_MEMORY.md, is the user's and Mnemo's own
consolidation's alone: an agent's change to it is refused (ProfileReadOnly). An agent keeps
its own identity files in its folder, agents/<name>/, where it writes freely.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Length
from django.utils import timezone

from activity import events
from activity.actors import ActorKind
from context.models import (
    Document,
    DocumentChunk,
    DocumentProposal,
    DocumentVersion,
    GrantAccess,
    ScopeGrant,
    SharedScope,
    VersionAction,
)
from context.paths import InvalidPath, normalize_folder, normalize_path
from lib.credentials import find_credentials, refuse_credentials
from lib.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    SecretRefused,
    ServiceError,
    VersionConflict,
)
from memory.models import ProposalStatus
from memory.selectors import user_zone
from profiles.services import agent_check_owner, check_agents_may_write
from search.chunking import split_into_chunks
from search.indexing import request_embedding

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from activity.actors import Actor
    from llm.models import Turn
    from profiles.models import Agent

MAX_BODY_BYTES = 1_048_576
MEMORY_PATH = "MEMORY.md"
AGENT_MEMORY_PATH = "AGENT_MEMORY.md"
DAILY_FOLDER = "daily"
# In a user's scope, agents/<name>/ is how agents address their private documents
# (context/workspace.py), so the user's own documents may not live there.
AGENTS_FOLDER = "agents"
# The identity files. At the root of a user's documents they are the user's, read by every
# one of their agents (the system prompt, learning/system_prompt.py; the heartbeat's
# checklist, learning/heartbeat.py): an agent's change to one waits for the user's review.
# Never read from a shared or the global scope (context/workspace.py primary_only).
IDENTITY_FILES = frozenset(
    {"IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md", "HEARTBEAT.md"}
)
BOOTSTRAP_PATH = "BOOTSTRAP.md"
# The consolidated profile (learning/profile.py), in the user's own documents.
PROFILE_PATH = "USER_MEMORY.md"


class DocumentReviewRequired(ServiceError):
    """An agent's change to a root identity file did not apply: it waits in the user's
    review inbox as `proposal`. The API answers 202 pending_review."""

    code = "pending_review"

    def __init__(self, proposal: DocumentProposal) -> None:
        super().__init__(
            f"'{proposal.path}' is an identity file all of the user's agents read: your change "
            f"waits for the user's review (proposal {proposal.pk}).",
            field="path",
        )
        self.proposal = proposal


class ProfileReadOnly(Forbidden):
    """An agent's change to the consolidated profile: only the user and Mnemo's own
    consolidation write it."""

    code = "profile_read_only"

    def __init__(self) -> None:
        super().__init__(
            f"{PROFILE_PATH} is the user's consolidated profile: only the user and Mnemo's "
            "own consolidation of reported turns write it, never an agent. Report the turn "
            "(POST /api/v1/turns) so Mnemo can learn from it, or note what you learned with "
            "memory_store. Nothing was changed.",
            field="path",
        )


@dataclass(frozen=True)
class TreeEntry:
    """One line of a tree listing: a folder or a file under the listed path."""

    path: str
    name: str
    kind: str  # "folder" or "file"
    depth: int  # 1 for direct children of the listed path
    scope: str = "user"  # "user", "agent", "global" or "shared:<slug>", as Document.scope
    document_id: int | None = None
    size: int | None = None  # characters, files only
    updated_at: datetime.datetime | None = None


@dataclass(frozen=True)
class TreeRow:
    """A document as a tree listing takes it: where it shows and what it is."""

    path: str
    scope: str
    document_id: int
    size: int
    updated_at: datetime.datetime


def document_write(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str,
    content: str,
    actor: Actor,
    base_version: int | None = None,
    create_only: bool = False,
    turn: Turn | None = None,
) -> Document:
    """Create the document, or replace its whole body.

    base_version is the id of the version the caller's text started from (the newest one
    when it read the document): a document that changed since then, or was deleted, is not
    overwritten (_check_base_version). With create_only, an existing document is a
    VersionConflict too (atomic, unlike checking first). Either way nothing is written.
    turn is the reported turn this write came from (the consolidated profile's rewrite),
    kept on the version so the page can open it.
    """
    scope = _scope(user, agent, shared_scope)
    path = _writable_path(user, agent, path)
    content = _clean_content(content)
    _refuse_credentials(actor, path=path, content=content, scope=scope)
    if _for_review(user, agent, shared_scope, path, actor):
        proposal = _propose(
            user=user,
            path=path,
            action=VersionAction.WRITE,
            content=content,
            actor=actor,
            base_version=base_version,
            create_only=create_only,
        )
        raise DocumentReviewRequired(proposal)
    with transaction.atomic():
        check_agents_may_write(user=_acting_for(user, shared_scope, actor), actor=actor)
        document, created = Document.objects.select_for_update().get_or_create(
            **scope, path=path, defaults={"body": content}
        )
        if create_only and not created:
            raise VersionConflict(
                f"'{path}' already exists; open it to edit it.",
                field="path",
                current_version=_latest_version_id(document),
            )
        if base_version is not None:
            _check_base_version(None if created else document, path=path, base_version=base_version)
        if not created:
            document.body = content
            document.save(update_fields=["body", "updated_at"])
        _record(document, action=VersionAction.WRITE, actor=actor, new=created, turn=turn)
    return document


def document_append(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str,
    content: str,
    actor: Actor,
) -> Document:
    """Add content on a new line at the end of the document, creating it if missing.

    Safe under contention: appenders serialize on the row lock, and a racing create
    falls back to the row the winner inserted (unique scope + path).
    """
    scope = _scope(user, agent, shared_scope)
    path = _writable_path(user, agent, path)
    content = _clean_content(content)
    _refuse_credentials(actor, path=path, content=content)
    if not content:
        raise InvalidInput("Nothing to append: the content is empty.", field="content")
    if _for_review(user, agent, shared_scope, path, actor):
        proposal = _propose(
            user=user, path=path, action=VersionAction.APPEND, content=content, actor=actor
        )
        raise DocumentReviewRequired(proposal)
    with transaction.atomic():
        check_agents_may_write(user=_acting_for(user, shared_scope, actor), actor=actor)
        document, created = Document.objects.select_for_update().get_or_create(
            **scope, path=path, defaults={"body": content}
        )
        if not created:
            body = document.body
            if body and not body.endswith("\n"):
                body += "\n"
            document.body = _clean_content(body + content)
            document.save(update_fields=["body", "updated_at"])
        _record(document, action=VersionAction.APPEND, actor=actor, new=created)
    return document


def document_read(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str,
) -> Document:
    scope = _scope(user, agent, shared_scope)
    path = normalize_path(path)
    document = Document.objects.filter(**scope, path=path).first()
    if document is None:
        raise NotFound(f"No document at '{path}'.", field="path")
    return document


def document_list(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    prefix: str = "",
) -> QuerySet[Document]:
    """The scope's documents whose path starts with prefix, ordered by path."""
    scope = _scope(user, agent, shared_scope)
    if not isinstance(prefix, str):
        raise InvalidInput("Prefix must be text.", field="prefix")
    return Document.objects.filter(**scope, path__startswith=prefix).order_by("path")


def document_tree(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str = "",
    depth: int = 1,
) -> list[TreeEntry]:
    """Folders and files under path down to depth levels, like `ls` (folders are implicit).

    NotFound when path is given and no document lives under it.
    """
    scope = _scope(user, agent, shared_scope)
    folder = normalize_folder(path)
    prefix = f"{folder}/" if folder else ""
    rows = tree_rows(Document.objects.filter(**scope, path__startswith=prefix))
    entries = tree_entries(rows, folder=folder, depth=depth)
    if folder and not entries:
        raise NotFound(f"No folder '{folder}'.", field="path")
    return entries


def tree_rows(documents: QuerySet[Document], *, under: str = "") -> list[TreeRow]:
    """The documents as tree rows, each path shown under the folder `under` ("" for as is)."""
    values = (
        documents.annotate(size=Length("body"))
        .order_by("path")
        .values_list(
            "pk", "path", "size", "updated_at", "user_id", "agent_id", "shared_scope__slug"
        )
    )
    return [
        TreeRow(
            path=f"{under}{path}",
            scope=Document.scope_of(user_id=user_id, agent_id=agent_id, shared_slug=slug),
            document_id=pk,
            size=size,
            updated_at=updated_at,
        )
        for pk, path, size, updated_at, user_id, agent_id, slug in values
    ]


def tree_entries(rows: list[TreeRow], *, folder: str, depth: int) -> list[TreeEntry]:
    """The folders and files that rows under `folder` (normalized, "" for the top) make,
    down to depth levels, sorted as `ls -R` would list them. A folder takes the scope of
    the first row inside it."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidInput("Depth must be a whole number of at least 1.", field="depth")
    prefix = f"{folder}/" if folder else ""
    entries: dict[tuple[str, str], TreeEntry] = {}  # a file 'a' and a folder 'a' may both exist
    for row in rows:
        if not row.path.startswith(prefix):
            continue
        parts = row.path[len(prefix) :].split("/")
        for level in range(min(depth, len(parts))):
            entry_path = prefix + "/".join(parts[: level + 1])
            if level == len(parts) - 1:
                entries[entry_path, "file"] = TreeEntry(
                    path=entry_path,
                    name=parts[level],
                    kind="file",
                    depth=level + 1,
                    scope=row.scope,
                    document_id=row.document_id,
                    size=row.size,
                    updated_at=row.updated_at,
                )
            else:
                entries.setdefault(
                    (entry_path, "folder"),
                    TreeEntry(
                        path=entry_path,
                        name=parts[level],
                        kind="folder",
                        depth=level + 1,
                        scope=row.scope,
                    ),
                )
    return sorted(entries.values(), key=lambda entry: (entry.path.split("/"), entry.kind))


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


def document_delete(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str,
    actor: Actor,
    base_version: int | None = None,
    ending_bootstrap: bool = False,
) -> DocumentVersion:
    """Delete a document; its last content stays in the returned version for restore.

    With base_version, a document that changed since that version is not deleted
    (_check_base_version); a missing one is NotFound with or without it. ending_bootstrap:
    complete_bootstrap's deletion of the user's BOOTSTRAP.md (learning/system_prompt.py),
    the one change of a root identity file an agent makes without review.
    """
    scope = _scope(user, agent, shared_scope)
    path = normalize_path(path)
    ritual_end = ending_bootstrap and path == BOOTSTRAP_PATH
    if not ritual_end and _for_review(user, agent, shared_scope, path, actor):
        proposal = _propose(
            user=user,
            path=path,
            action=VersionAction.DELETE,
            content="",
            actor=actor,
            base_version=base_version,
        )
        raise DocumentReviewRequired(proposal)
    with transaction.atomic():
        check_agents_may_write(user=_acting_for(user, shared_scope, actor), actor=actor)
        document = Document.objects.select_for_update().filter(**scope, path=path).first()
        if document is None:
            raise NotFound(f"No document at '{path}'.", field="path")
        if base_version is not None:
            _check_base_version(document, path=path, base_version=base_version)
        version = DocumentVersion.objects.create(
            document=None,
            user_id=document.user_id,
            agent_id=document.agent_id,
            shared_scope_id=document.shared_scope_id,
            path=path,
            action=VersionAction.DELETE,
            body=document.body,
            **actor.as_fields(),
        )
        scope_name = document.scope
        document.delete()
        events.document_deleted(
            user=_acting_for(user, shared_scope, actor),
            actor=actor,
            path=path,
            scope=scope_name,
            agent_id=scope["agent"].pk if scope["agent"] else None,
            version_id=version.pk,
        )
    return version


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
    scope = _scope(owner, version.agent, shared_scope)
    with transaction.atomic():
        check_agents_may_write(user=_acting_for(user, shared_scope, actor), actor=actor)
        document, created = Document.objects.select_for_update().get_or_create(
            **scope, path=version.path, defaults={"body": version.body}
        )
        if create_only and not created:
            raise VersionConflict(
                f"A document exists at '{version.path}' now; open it, or restore this version "
                "from its history to replace it.",
                field="path",
                current_version=_latest_version_id(document),
            )
        if not created:
            document.body = version.body
            document.save(update_fields=["body", "updated_at"])
        _record(document, action=VersionAction.RESTORE, actor=actor, new=created)
    return document


def document_versions(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str,
) -> QuerySet[DocumentVersion]:
    """The versions of one path in the scope, newest first, including deleted documents'."""
    scope = _scope(user, agent, shared_scope)
    path = normalize_path(path)
    return DocumentVersion.objects.filter(**scope, path=path).order_by("-created_at", "-id")


def document_latest_version_id(document: Document) -> int | None:
    """The id of the document's newest version: what an editor passes back as base_version."""
    return _latest_version_id(document)


# Which of a document's versions is its newest, for every reader of that question.
NEWEST_FIRST = ("-created_at", "-id")


def _latest_version_id(document: Document) -> int | None:
    if document.pk is None:
        return None
    return (
        DocumentVersion.objects.filter(document=document)
        .order_by(*NEWEST_FIRST)
        .values_list("pk", flat=True)
        .first()
    )


def _check_base_version(document: Document | None, *, path: str, base_version: int) -> None:
    """Optimistic concurrency, one rule for the pages and the API: a change made from the
    version base_version applies only while that is still the newest version of the document
    (which the caller holds locked); a document that does not exist (None) has no version.
    Otherwise VersionConflict, and the caller's transaction writes nothing."""
    if document is None:
        raise VersionConflict(
            f"'{path}' does not exist (any more): there is no version {base_version} of it to "
            "change.",
            field="base_version",
        )
    current = _latest_version_id(document)
    if current != base_version:
        now = "has no recorded version" if current is None else f"is now version {current}"
        raise VersionConflict(
            f"'{path}' changed since you opened it: you started from version {base_version}, "
            f"and it {now}. Reload it and apply your edit again.",
            field="base_version",
            current_version=current,
        )


# Well-known files.


def append_memory(
    *, user: AbstractBaseUser | None, agent: Agent | None = None, content: str, actor: Actor
) -> Document:
    """Add a line to the scope's long-term notes, MEMORY.md."""
    return document_append(user=user, agent=agent, path=MEMORY_PATH, content=content, actor=actor)


def append_daily_memory(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    content: str,
    actor: Actor,
    now: datetime.datetime | None = None,
) -> Document:
    """Add "- HH:MM content" to daily/YYYY-MM-DD.md, date and time in the user's timezone.

    The content is one line (_one_line): a line break would start lines the stamp does not
    own, such as a heading."""
    path, line = daily_log_line(user=user, content=content, now=now)
    return document_append(user=user, agent=agent, path=path, content=line, actor=actor)


def daily_log_line(
    *, user: AbstractBaseUser | None, content: str, now: datetime.datetime | None = None
) -> tuple[str, str]:
    """Today's daily log and the line "- HH:MM content" for it, date and time in the user's
    timezone (UTC for the global scope). InvalidInput for content that is not one line of
    text."""
    if not isinstance(content, str):
        raise InvalidInput("Content must be text.", field="content")
    content = content.strip()
    if not content:
        raise InvalidInput("Nothing to append: the content is empty.", field="content")
    _one_line(content, what="A daily log entry")
    local = (now or timezone.now()).astimezone(user_timezone(user))
    return daily_path(local.date()), f"- {local:%H:%M} {content}"


def daily_path(day: datetime.date) -> str:
    """The daily log of a local date: daily/YYYY-MM-DD.md."""
    return f"{DAILY_FOLDER}/{day:%Y-%m-%d}.md"


def user_timezone(user: AbstractBaseUser | None) -> datetime.tzinfo:
    """The user's `timezone` memory as a zone; UTC when unset, invalid or for the global scope."""
    return user_zone(user)


def append_agent_memory(*, agent: Agent | None, content: str, actor: Actor) -> Document:
    """Add a line to AGENT_MEMORY.md (one line: _one_line): the agent's own, private to it,
    or with agent None the global (company) scope's, the system token's notes. Both go
    through document_append, so each line is a version and an activity event."""
    if isinstance(content, str):
        _one_line(content.strip(), what="A note appended to AGENT_MEMORY.md")
    return document_append(
        user=_agent_memory_user(agent),
        agent=agent,
        path=AGENT_MEMORY_PATH,
        content=content,
        actor=actor,
    )


def agent_memory_get(*, agent: Agent | None) -> Document | None:
    """The agent's own AGENT_MEMORY.md, or with agent None the global scope's; None until
    the first line is appended."""
    return Document.objects.filter(
        **_scope(_agent_memory_user(agent), agent), path=AGENT_MEMORY_PATH
    ).first()


def _agent_memory_user(agent: Agent | None) -> AbstractBaseUser | None:
    """Whose scope an AGENT_MEMORY.md is in: the agent's user, or none (the global scope)."""
    return agent.user if agent is not None else None


# What ends a line: what str.splitlines() splits at (LF, CR, VT, FF, the file, group and
# record separators, NEL, and the Unicode line and paragraph separators).
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")


def _one_line(content: str, *, what: str) -> None:
    """InvalidInput when content holds a line break: tools documented as adding one line
    add exactly one, so their text cannot open lines (a heading, a list) of its own."""
    for position, char in enumerate(content):
        if char in LINE_BREAKS:
            raise InvalidInput(
                f"{what} is one line, and this content has a line break (U+{ord(char):04X}) "
                f"at position {position}. Send each line as its own call, or write the "
                "block with memory_append.",
                field="content",
            )


def _for_review(
    user: AbstractBaseUser | None,
    agent: Agent | None,
    shared_scope: SharedScope | None,
    path: str,
    actor: Actor,
) -> bool:
    """Whether this change is an agent's to a file at the root of its user's documents that
    every agent of the user reads (an identity file): then it waits for the user's review.
    ProfileReadOnly for the consolidated profile, which no agent changes."""
    if actor.kind != ActorKind.AGENT or user is None or agent is not None or shared_scope:
        return False
    if path == PROFILE_PATH:
        raise ProfileReadOnly()
    return path in IDENTITY_FILES


def _propose(
    *,
    user: AbstractBaseUser,
    path: str,
    action: VersionAction,
    content: str,
    actor: Actor,
    base_version: int | None = None,
    create_only: bool = False,
) -> DocumentProposal:
    """Put an agent's change of one of the user's identity files in their review inbox.

    Checked as the change itself would be, under the document's row lock: memory paused,
    a stale base_version, create_only over an existing document, a deletion of nothing.
    The same proposal again (an agent retrying) is the pending one; a different one from
    the same agent for the same path replaces it (the older is marked superseded)."""
    now = timezone.now()
    with transaction.atomic():
        check_agents_may_write(user=user, actor=actor)
        document = (
            Document.objects.select_for_update()
            .filter(user=user, agent=None, shared_scope=None, path=path)
            .first()
        )
        if create_only and document is not None:
            raise VersionConflict(
                f"'{path}' already exists; open it to edit it.",
                field="path",
                current_version=_latest_version_id(document),
            )
        if base_version is not None:
            _check_base_version(document, path=path, base_version=base_version)
        if action == VersionAction.DELETE and document is None:
            raise NotFound(f"No document at '{path}'.", field="path")
        before = document.body if document is not None else None
        current = _latest_version_id(document) if document is not None else None
        pending = DocumentProposal.objects.select_for_update().filter(
            user=user,
            path=path,
            status=ProposalStatus.PENDING,
            actor_type=actor.kind,
            actor_agent=actor.agent,
        )
        for proposal in pending:
            same = (proposal.action, proposal.content, proposal.before, proposal.base_version)
            if same == (action, content, before, current):
                return proposal
        pending.update(status=ProposalStatus.SUPERSEDED, decided_at=now)
        proposal = DocumentProposal.objects.create(
            user=user,
            path=path,
            action=action,
            content=content,
            before=before,
            base_version=current,
            expires_at=now + datetime.timedelta(days=settings.MNEMO_PROPOSAL_TTL_DAYS),
            **actor.as_fields(),
        )
        events.document_proposal_created(
            user=user, actor=actor, proposal_id=proposal.pk, path=path, action=action
        )
    return proposal


def _scope(
    user: AbstractBaseUser | None, agent: Agent | None, shared_scope: SharedScope | None = None
) -> dict[str, object]:
    agent_check_owner(agent=agent, user=user)
    if shared_scope is not None and (user is not None or agent is not None):
        raise InvalidInput(
            "A shared scope's documents belong to no user or agent.", field="shared_scope"
        )
    return {"user": user, "agent": agent, "shared_scope": shared_scope}


def _acting_for(
    user: AbstractBaseUser | None, shared_scope: SharedScope | None, actor: Actor
) -> AbstractBaseUser | None:
    """Whose change this is, for the pause and the activity log: the scope's user, or in a
    shared scope the user the actor is (or acts for)."""
    if shared_scope is None:
        return user
    if actor.agent is not None:
        return actor.agent.user
    return actor.user


def _writable_path(user: AbstractBaseUser | None, agent: Agent | None, path: object) -> str:
    """The normalized path, unless it is where the user's agents keep their own notes."""
    path = normalize_path(path)
    if user is None or agent is not None:
        return path
    if path.split("/", 1)[0] == AGENTS_FOLDER:
        raise InvalidPath(
            "reserved",
            f"'{AGENTS_FOLDER}/' is where your agents keep their private documents; to write "
            "there, choose that agent's notes as the place, or use another folder.",
        )
    if path == AGENT_MEMORY_PATH:
        raise InvalidPath(
            "reserved",
            f"{AGENT_MEMORY_PATH} is each agent's own notes; choose that agent's notes as the "
            "place, or another name.",
        )
    return path


def _refuse_credentials(
    actor: Actor, *, path: str, content: str, scope: dict[str, object] | None = None
) -> None:
    """Secrets never become memories, documents included: an agent's or the system's
    write whose path or content looks like a credential (lib/credentials.py) raises
    SecretRefused, and nothing is written. With `scope` (a write of the whole body), a
    credential the document holds already passes: the user may have put one there (their
    writes are not refused; Document.credential lets the pages warn), and an agent that
    edits the rest of the document keeps it as it is."""
    if actor.kind == ActorKind.USER:
        return
    refuse_credentials(path, field="path", where=IN_DOCUMENTS)
    found = find_credentials(content)
    if found and scope is not None:
        body = Document.objects.filter(**scope, path=path).values_list("body", flat=True).first()
        found = [c for c in found if content[c.start : c.end] not in (body or "")]
    if found:
        raise SecretRefused(
            kind=found[0].kind, label=found[0].label, field="content", where=IN_DOCUMENTS
        )


IN_DOCUMENTS = "in documents"


def _clean_content(content: object) -> str:
    if not isinstance(content, str):
        raise InvalidInput("Content must be text.", field="content")
    if "\x00" in content:
        raise InvalidInput("Content contains a NUL character (U+0000).", field="content")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise InvalidInput("Content is not valid UTF-8 text.", field="content") from error
    if size > MAX_BODY_BYTES:
        raise InvalidInput(
            f"Content is {size} bytes long; the largest document allowed is "
            f"{MAX_BODY_BYTES} bytes (1 MB).",
            field="content",
        )
    return content


def _record(
    document: Document, *, action: VersionAction, actor: Actor, new: bool, turn: Turn | None = None
) -> DocumentVersion:
    _rechunk(document, new=new)
    version = DocumentVersion.objects.create(
        document=document,
        user_id=document.user_id,
        agent_id=document.agent_id,
        shared_scope_id=document.shared_scope_id,
        path=document.path,
        action=action,
        body=document.body,
        turn=turn,
        **actor.as_fields(),
    )
    document.written_version = version
    events.document_written(
        user=document.user if document.user_id else _acting_for(None, document.shared_scope, actor),
        actor=actor,
        path=document.path,
        scope=document.scope,
        agent_id=document.agent_id,
        action=action,
        version_id=version.pk,
    )
    return version


def _rechunk(document: Document, *, new: bool = False) -> None:
    """Make the document's chunk rows (what search reads) match its body, in the write's
    transaction, so keyword search sees the write when it commits; unchanged chunks keep
    their vectors, and the new or changed ones are embedded after commit. A new document
    (just created in this transaction) has no chunks to compare with."""
    texts = split_into_chunks(document.body)
    existing = {} if new else {chunk.ordinal: chunk for chunk in document.chunks.all()}
    added = []
    for ordinal, text in enumerate(texts):
        chunk = existing.get(ordinal)
        if chunk is None:
            added.append(
                DocumentChunk(
                    document=document,
                    user_id=document.user_id,
                    agent_id=document.agent_id,
                    shared_scope_id=document.shared_scope_id,
                    ordinal=ordinal,
                    text=text,
                )
            )
        elif chunk.text != text:
            chunk.text, chunk.embedding, chunk.embedding_model, chunk.embedded_hash = (
                text,
                None,
                "",
                "",
            )
            chunk.save(update_fields=["text", "embedding", "embedding_model", "embedded_hash"])
    DocumentChunk.objects.bulk_create(added)
    if len(existing) > len(texts):
        document.chunks.filter(ordinal__gte=len(texts)).delete()
    if texts:
        request_embedding()


# Shared scopes and who may use them.


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
