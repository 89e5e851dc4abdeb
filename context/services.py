"""The write path of documents: write, append and delete one document.

A scope is (user, agent, shared_scope): agent=None is the user's own documents, agent set
is private to that agent, shared_scope set (user and agent None) is a named shared scope,
and all three None is the global (company) scope (scope_columns).
Each change validates, writes the document, a DocumentVersion row and an activity
event in one transaction (record_change). Pages, the agent API, tasks and the admin all
come through here, and so do the modules that change documents on top of it: the
well-known files (MEMORY.md, the daily logs, AGENT_MEMORY.md) in context/well_known.py, a
restore and an import's earlier versions in context/history.py. Grants to shared scopes
are written in context/shared_scopes.py; which version is current and the base_version
rule are context/versions.py's, the chunks search reads context/chunks.py's, and the tree
listing context/tree.py's.

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
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from activity import events
from activity.actors import ActorKind
from context.chunks import rechunk
from context.models import (
    Document,
    DocumentProposal,
    DocumentVersion,
    SharedScope,
    VersionAction,
)
from context.paths import InvalidPath, normalize_path
from context.versions import check_base_version, document_latest_version_id
from lib.credentials import find_credentials, refuse_credentials
from lib.errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    SecretRefused,
    ServiceError,
    VersionConflict,
)
from memory.models import ProposalStatus
from profiles.services import agent_check_owner, check_agents_may_write

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from activity.actors import Actor
    from llm.models import Turn
    from profiles.models import Agent

MAX_BODY_BYTES = 1_048_576
MEMORY_PATH = "MEMORY.md"
AGENT_MEMORY_PATH = "AGENT_MEMORY.md"
# In a user's scope, agents/<name>/ is how agents address their private documents
# (context/workspace.py), so the user's own documents may not live there.
AGENTS_FOLDER = "agents"
# The identity files. At the root of a user's documents they are the user's, read by every
# one of their agents (the system prompt, briefing/system_prompt.py; the heartbeat's
# checklist, briefing/heartbeat.py): an agent's change to one waits for the user's review.
# Never read from a shared or the global scope (context/workspace.py primary_only).
IDENTITY_FILES = frozenset(
    {"IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md", "HEARTBEAT.md"}
)
BOOTSTRAP_PATH = "BOOTSTRAP.md"
# The consolidated user-memory document, in the user's own documents: its format in
# learning/user_memory_doc.py, its rewrite after a turn in learning/consolidation.py.
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
    overwritten (check_base_version). With create_only, an existing document is a
    VersionConflict too (atomic, unlike checking first). Either way nothing is written.
    turn is the reported turn this write came from (the consolidated profile's rewrite),
    kept on the version so the page can open it.
    """
    scope = scope_columns(user, agent, shared_scope)
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
        check_agents_may_write(user=acting_for(user, shared_scope, actor), actor=actor)
        document, created = Document.objects.select_for_update().get_or_create(
            **scope, path=path, defaults={"body": content}
        )
        if create_only and not created:
            raise VersionConflict(
                f"'{path}' already exists; open it to edit it.",
                field="path",
                current_version=document_latest_version_id(document),
            )
        if base_version is not None:
            check_base_version(None if created else document, path=path, base_version=base_version)
        if not created:
            document.body = content
            document.save(update_fields=["body", "updated_at"])
        record_change(document, action=VersionAction.WRITE, actor=actor, new=created, turn=turn)
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
    scope = scope_columns(user, agent, shared_scope)
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
        check_agents_may_write(user=acting_for(user, shared_scope, actor), actor=actor)
        document, created = Document.objects.select_for_update().get_or_create(
            **scope, path=path, defaults={"body": content}
        )
        if not created:
            body = document.body
            if body and not body.endswith("\n"):
                body += "\n"
            document.body = _clean_content(body + content)
            document.save(update_fields=["body", "updated_at"])
        record_change(document, action=VersionAction.APPEND, actor=actor, new=created)
    return document


def document_read(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str,
) -> Document:
    scope = scope_columns(user, agent, shared_scope)
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
    scope = scope_columns(user, agent, shared_scope)
    if not isinstance(prefix, str):
        raise InvalidInput("Prefix must be text.", field="prefix")
    return Document.objects.filter(**scope, path__startswith=prefix).order_by("path")


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
    (check_base_version); a missing one is NotFound with or without it. ending_bootstrap:
    complete_bootstrap's deletion of the user's BOOTSTRAP.md (briefing/system_prompt.py),
    the one change of a root identity file an agent makes without review.
    """
    scope = scope_columns(user, agent, shared_scope)
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
        check_agents_may_write(user=acting_for(user, shared_scope, actor), actor=actor)
        document = Document.objects.select_for_update().filter(**scope, path=path).first()
        if document is None:
            raise NotFound(f"No document at '{path}'.", field="path")
        if base_version is not None:
            check_base_version(document, path=path, base_version=base_version)
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
            user=acting_for(user, shared_scope, actor),
            actor=actor,
            path=path,
            scope=scope_name,
            agent_id=scope["agent"].pk if scope["agent"] else None,
            version_id=version.pk,
        )
    return version


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
                current_version=document_latest_version_id(document),
            )
        if base_version is not None:
            check_base_version(document, path=path, base_version=base_version)
        if action == VersionAction.DELETE and document is None:
            raise NotFound(f"No document at '{path}'.", field="path")
        before = document.body if document is not None else None
        current = document_latest_version_id(document) if document is not None else None
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


def scope_columns(
    user: AbstractBaseUser | None, agent: Agent | None, shared_scope: SharedScope | None = None
) -> dict[str, object]:
    """The scope as filter columns of Document and DocumentVersion, once checked: the agent
    is the user's, and a shared scope's documents belong to no user or agent."""
    agent_check_owner(agent=agent, user=user)
    if shared_scope is not None and (user is not None or agent is not None):
        raise InvalidInput(
            "A shared scope's documents belong to no user or agent.", field="shared_scope"
        )
    return {"user": user, "agent": agent, "shared_scope": shared_scope}


def acting_for(
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


def record_change(
    document: Document, *, action: VersionAction, actor: Actor, new: bool, turn: Turn | None = None
) -> DocumentVersion:
    """After a change of the document in the caller's transaction: its chunks (what search
    reads), the version row keeping its body, and the activity event. The version is also
    `document.written_version`."""
    rechunk(document, new=new)
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
        user=document.user if document.user_id else acting_for(None, document.shared_scope, actor),
        actor=actor,
        path=document.path,
        scope=document.scope,
        agent_id=document.agent_id,
        action=action,
        version_id=version.pk,
    )
    return version
