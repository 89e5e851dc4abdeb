"""The agent API's document tools, memory_read, memory_write, memory_append, memory_tree
and memory_delete, for agent tokens and system tokens, and their base class
(WorkspaceToolApi). The well-known files' tools are in context/notes_api.py, the documents'
search in context/search_api.py; the fields, serializers and error responses they share in
context/serializers.py.

Which scope a path names is context/workspace.py's rule; the views only validate,
call it, and answer in the API's shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from context import selectors, services
from context.paths import normalize_folder
from context.serializers import (
    CONFLICT_ETAG_HEADER,
    ETAG_EXAMPLE,
    ETAG_HEADER,
    ETAG_PATTERN,
    IF_MATCH,
    PENDING_REVIEW_RESPONSE,
    READ_EXAMPLE,
    TOOL_TAG,
    VERSION_CONFLICT_RESPONSE,
    WRITTEN_EXAMPLE,
    DeletedSerializer,
    DocumentSerializer,
    PathField,
    PendingReviewSerializer,
    TreeSerializer,
    WriteResultSerializer,
    WrittenSerializer,
    base_version_field,
    content_field,
    document_errors,
    scope_param,
    version_etag,
)
from context.workspace import (
    Caller,
    shown_path,
    workspace_append,
    workspace_delete,
    workspace_read,
    workspace_tree,
    workspace_write,
)
from lib.api import ToolInput, WholeNumberField
from lib.errors import InvalidInput, NotFound, VersionConflict
from lib.http_errors import error_body
from profiles.models import SystemToken
from profiles.tool_base import ToolApi

if TYPE_CHECKING:
    from rest_framework.request import Request

    from context.models import Document
    from context.selectors import DocumentState


MAX_TREE_DEPTH = 10
PLACES_HELP = (
    " Agent tokens write in the user's documents, or in their private folder "
    "agents/<agent name>/, or with scope shared:<slug> in a shared scope their user may "
    "write in; company documents are never changed by an agent (writing at one's path "
    "gives the user their own document there, as for a shared scope's when scope is not "
    "named). System tokens work in the company documents only."
)
IDENTITY_HELP = (
    " The identity files at the top of the user's documents (IDENTITY.md, SOUL.md, "
    "AGENTS.md, USER.md, TOOLS.md, BOOTSTRAP.md, HEARTBEAT.md) are the user's and every one "
    "of their agents reads them: your change to one does not apply but waits for the "
    "user's review (202, status pending_review, with the proposal). Keep your own under "
    "agents/<your agent name>/ (IDENTITY.md, SOUL.md, …), where you write freely and which "
    "only your own system prompt reads. USER_MEMORY.md, the consolidated profile, is "
    "written only by the user and Mnemo's consolidation: 403 profile_read_only."
)
WRITE_TARGETS_HELP = (
    " Two paths are targets rather than names: memory writes MEMORY.md (your user's long-term "
    "notes, or the scope's named by scope), and daily_log adds content as one line "
    "'- HH:MM content' to today's daily/YYYY-MM-DD.md (the date and time in the user's "
    "timezone, UTC for system tokens), as append_daily_memory does: one line (a line break "
    "is 400), no base_version (400), the answer's path the log's. No document is ever "
    "named memory or daily_log by this tool."
)


def _etag_header(version_id: int | None) -> dict[str, str]:
    return {} if version_id is None else {"ETag": version_etag(version_id)}


def _base_version(request: Request, in_body: int | None) -> int | None:
    """The version the caller started from: base_version, or the If-Match ETag (400 if
    both are given and name different versions, or If-Match is not one of our ETags)."""
    header = request.headers.get("If-Match")
    if header is None:
        return in_body
    match = ETAG_PATTERN.fullmatch(header.strip())
    if match is None:
        raise InvalidInput(
            f"If-Match takes one ETag as memory_read answers it, such as {ETAG_EXAMPLE}; "
            f"got {header[:40]!r}.",
            field="If-Match",
        )
    from_header = int(match[1])
    if in_body is not None and in_body != from_header:
        raise InvalidInput(
            f"base_version {in_body} and If-Match {version_etag(from_header)} name different "
            "versions; send one of them, or the same version in both.",
            field="base_version",
        )
    return from_header


class PathInput(ToolInput):
    path = PathField()
    scope = scope_param()


class WriteInput(ToolInput):
    path = PathField()
    content = content_field(
        f"The whole new body, UTF-8 text up to {services.MAX_BODY_BYTES} bytes (1 MB).",
        allow_blank=True,
    )
    base_version = base_version_field()
    scope = scope_param()


class DeleteInput(ToolInput):
    path = PathField()
    base_version = base_version_field()
    scope = scope_param()


class AppendInput(ToolInput):
    path = PathField()
    content = content_field("Text to add on a new line at the end; the file is created if new.")
    scope = scope_param()


class TreeInput(ToolInput):
    path = PathField(
        required=False,
        allow_blank=True,
        default="",
        help_text="The folder to list; empty or absent for the top level.",
    )
    depth = WholeNumberField(
        required=False,
        min_value=1,
        max_value=MAX_TREE_DEPTH,
        default=1,
        help_text=f"How many levels to list, 1–{MAX_TREE_DEPTH} (default 1).",
    )
    scope = scope_param()


class WorkspaceToolApi(ToolApi):
    """A document tool: agent tokens work in their user's scope, system tokens in global."""

    permission_classes = [IsAuthenticated]

    def caller(self) -> Caller:
        if isinstance(self.request.auth, SystemToken):
            return Caller.system()
        return Caller.for_agent(self.request.auth.agent)


def _pending_review(waiting: services.DocumentReviewRequired) -> Response:
    """202: the change waits for the user's review as a proposal."""
    proposal = waiting.proposal
    body = {
        "status": "pending_review",
        "path": proposal.path,
        "message": waiting.message,
        "proposal": {
            "id": proposal.pk,
            "path": proposal.path,
            "action": proposal.action,
            "status": proposal.status,
            "created_at": proposal.created_at,
            "expires_at": proposal.expires_at,
        },
    }
    return Response(PendingReviewSerializer(body).data, status=status.HTTP_202_ACCEPTED)


def written_answer(caller: Caller, document: Document) -> dict[str, Any]:
    """A change's answer (WrittenSerializer): where the document is, its size and the
    change's version; the notes tools answer with it too (context/notes_api.py)."""
    return WrittenSerializer(_written_fields(caller, document)).data


def _written_fields(caller: Caller, document: Document) -> dict[str, Any]:
    return {
        "path": shown_path(caller, document),
        "scope": document.scope,
        "size": len(document.body),
        "version_id": document.written_version.pk,
        "updated_at": document.updated_at,
    }


def _document(caller: Caller, state: DocumentState) -> dict[str, Any]:
    """A document as memory_read answers it, with its current version."""
    document = state.document
    body = {
        "path": shown_path(caller, document),
        "scope": document.scope,
        "body": document.body,
        "updated_at": document.updated_at,
        "version_id": state.version_id,
        "etag": None if state.version_id is None else version_etag(state.version_id),
    }
    return DocumentSerializer(body).data


def _version_conflict(conflict: VersionConflict) -> Response:
    """409 in the API's one error shape; the message and the ETag header name the version
    that is current (lib/api.py would answer a subclass of Conflict with a 400)."""
    return Response(
        error_body(conflict.code, conflict.message, conflict.field),
        status=status.HTTP_409_CONFLICT,
        headers=_etag_header(conflict.current_version),
    )


class DocumentReadApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="memory_read",
        tags=[TOOL_TAG],
        summary="Read a document",
        description="The whole document at path. Your user's own document comes first; "
        "where they have none, the first shared scope granted to your user that has one (by "
        "slug), then a readable company document (scope says which); name scope to read "
        "one scope only. version_id (and the ETag header) name this version: pass it as "
        "base_version to memory_write or memory_delete to change only this version.",
        request=PathInput,
        parameters=[ETAG_HEADER],
        responses={200: DocumentSerializer, **document_errors(400, 401, 404, 413, 429)},
        examples=[
            OpenApiExample("Read notes", value={"path": "MEMORY.md"}, request_only=True),
            OpenApiExample(
                "Read a team's notes",
                value={"path": "MEMORY.md", "scope": "shared:team"},
                request_only=True,
            ),
            OpenApiExample("Read", value=READ_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(PathInput)
        caller = self.caller()
        document = workspace_read(caller=caller, path=data["path"], scope=data.get("scope"))
        state = selectors.document_state(document_id=document.pk)
        if state is None:  # deleted a moment ago
            raise NotFound(f"No document at '{shown_path(caller, document)}'.", field="path")
        return Response(_document(caller, state), headers=_etag_header(state.version_id))


class DocumentWriteApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="memory_write",
        tags=[TOOL_TAG],
        summary="Create or replace a document",
        description="Write the whole body of the document at path, creating it if new. "
        "The previous body stays in the document's history, so the user can undo it. "
        "To be sure you do not overwrite a change you have not seen (another agent or the "
        "user may write too), pass the version_id memory_read gave you as base_version (or "
        "its ETag as If-Match): if the document changed or was deleted since, nothing is "
        "written and the answer is 409 version_conflict naming the current version; read it "
        "again and apply your change to it. Without base_version the write applies "
        "regardless; replaced_version in the answer says which version it replaced."
        + WRITE_TARGETS_HELP
        + PLACES_HELP
        + IDENTITY_HELP,
        request=WriteInput,
        parameters=[IF_MATCH, ETAG_HEADER, CONFLICT_ETAG_HEADER],
        responses={
            200: WriteResultSerializer,
            202: PENDING_REVIEW_RESPONSE,
            **document_errors(400, 401, 403, 404, 413, 422, 429),
            409: VERSION_CONFLICT_RESPONSE,
        },
        examples=[
            OpenApiExample(
                "Write notes",
                value={"path": "notes/ideas.md", "content": "# Ideas\n- a weekly digest\n"},
                request_only=True,
            ),
            OpenApiExample(
                "Change the version you read",
                value={
                    "path": "notes/ideas.md",
                    "content": "# Ideas\n- a weekly digest\n- a dark mode\n",
                    "base_version": 17,
                },
                request_only=True,
            ),
            OpenApiExample(
                "Write in a shared scope (read-write grant)",
                value={"path": "runbook.md", "content": "# Runbook\n", "scope": "shared:team"},
                request_only=True,
            ),
            OpenApiExample(
                "Replace MEMORY.md (the memory target)",
                value={"path": "memory", "content": "# Notes\n- Prefers short answers\n"},
                request_only=True,
            ),
            OpenApiExample(
                "Add a line to today's daily log (the daily_log target)",
                value={"path": "daily_log", "content": "Sent the weekly report"},
                request_only=True,
            ),
            OpenApiExample(
                "Written", value={**WRITTEN_EXAMPLE, "replaced_version": 16}, response_only=True
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(WriteInput)
        caller = self.caller()
        base_version = _base_version(request, data.get("base_version"))
        try:
            document = workspace_write(
                caller=caller,
                path=data["path"],
                content=data["content"],
                base_version=base_version,
                scope=data.get("scope"),
            )
        except VersionConflict as conflict:
            return _version_conflict(conflict)
        except services.DocumentReviewRequired as waiting:
            return _pending_review(waiting)
        written = document.written_version
        replaced = selectors.version_replaced_id(version=written)
        body = {**_written_fields(caller, document), "replaced_version": replaced}
        return Response(WriteResultSerializer(body).data, headers=_etag_header(written.pk))


class DocumentAppendApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="memory_append",
        tags=[TOOL_TAG],
        summary="Add to the end of a document",
        description="Add content on a new line at the end of the document, creating it if "
        "new. Safe when several agents append at once: no line is lost."
        + PLACES_HELP
        + IDENTITY_HELP,
        request=AppendInput,
        responses={
            200: WrittenSerializer,
            202: PENDING_REVIEW_RESPONSE,
            **document_errors(400, 401, 403, 404, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample(
                "Append",
                value={"path": "MEMORY.md", "content": "- Prefers meetings after 10:00"},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(AppendInput)
        caller = self.caller()
        try:
            document = workspace_append(caller=caller, **data)
        except services.DocumentReviewRequired as waiting:
            return _pending_review(waiting)
        return Response(written_answer(caller, document))


class DocumentTreeApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="memory_tree",
        tags=[TOOL_TAG],
        summary="List folders and documents",
        description="What is under path (default: the top level) down to depth levels "
        "(default 1), like `ls`. Folders exist while documents live in them. Your private "
        "folder agents/<your agent name>/ is listed with the user's documents, then what the "
        "scopes granted to your user add (each entry's scope says whose; a path your user "
        "has is theirs). Name scope to list one scope only.",
        request=TreeInput,
        responses={200: TreeSerializer, **document_errors(400, 401, 404, 413, 429)},
        examples=[
            OpenApiExample("Top level", value={}, request_only=True),
            OpenApiExample("A folder", value={"path": "daily", "depth": 1}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(TreeInput)
        folder = normalize_folder(data["path"])
        entries = workspace_tree(
            caller=self.caller(), path=folder, depth=data["depth"], scope=data.get("scope")
        )
        body = {"path": folder, "depth": data["depth"], "entries": entries}
        return Response(TreeSerializer(body).data)


class DocumentDeleteApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="memory_delete",
        tags=[TOOL_TAG],
        summary="Delete a document",
        description="Delete the document at path; 404 if there is none. Its content stays "
        "in its history, so the user can restore it. With base_version (the version_id "
        "memory_read gave you) or its ETag as If-Match, a document that changed since is "
        "not deleted: 409 version_conflict naming the current version. A memory is "
        "forgotten with delete_memory." + IDENTITY_HELP,
        request=DeleteInput,
        parameters=[IF_MATCH, CONFLICT_ETAG_HEADER],
        responses={
            200: DeletedSerializer,
            202: PENDING_REVIEW_RESPONSE,
            **document_errors(400, 401, 403, 404, 413, 429),
            409: VERSION_CONFLICT_RESPONSE,
        },
        examples=[
            OpenApiExample("Delete", value={"path": "notes/old.md"}, request_only=True),
            OpenApiExample(
                "Delete the version you read",
                value={"path": "notes/old.md", "base_version": 17},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(DeleteInput)
        path = data["path"]
        caller = self.caller()
        base_version = _base_version(request, data.get("base_version"))
        try:
            version = workspace_delete(
                caller=caller, path=path, base_version=base_version, scope=data.get("scope")
            )
        except VersionConflict as conflict:
            return _version_conflict(conflict)
        except services.DocumentReviewRequired as waiting:
            return _pending_review(waiting)
        body = {"deleted": True, "path": shown_path(caller, version), "version_id": version.pk}
        return Response(DeletedSerializer(body).data)
