"""The agent API for documents: the workspace tools and memory_search (the documents'
search), for agent tokens and system tokens.

Which scope a path names is context/workspace.py's rule; the views only validate,
call it, and answer in the API's shapes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from context import selectors, services
from context.models import PROPOSED_ACTIONS
from context.paths import MAX_PATH_LENGTH, normalize_folder
from context.search import search_documents
from context.services import ProfileReadOnly
from context.workspace import (
    Caller,
    shown_path,
    workspace_append,
    workspace_append_daily,
    workspace_delete,
    workspace_read,
    workspace_tree,
    workspace_write,
)
from lib.api import (
    ErrorSerializer,
    TextField,
    ToolInput,
    WholeNumberField,
    error_response,
    error_responses,
)
from lib.errors import InvalidInput, NotFound, VersionConflict
from lib.http_errors import error_body
from memory.models import ProposalStatus
from profiles.models import SystemToken
from profiles.tool_base import ToolApi
from search.serializers import TOOL_TAG as SEARCH_TOOL_TAG
from search.serializers import (
    ScorePartsMixin,
    bold_snippet,
    limit_field,
    query_field,
    score_parts,
)

if TYPE_CHECKING:
    from rest_framework.request import Request

    from context.models import Document
    from context.selectors import DocumentState

TOOL_TAG = "workspace tools"
MAX_TREE_DEPTH = 10
# The fixed scope names; a shared scope is shared:<slug> (context/workspace.py).
SCOPES = ["user", "agent", "global"]
SCOPE_PATTERN = rf"^({'|'.join(SCOPES)}|shared:[a-z0-9][a-z0-9_-]{{0,63}})$"
PATH_HELP = (
    "A relative path such as notes/ideas.md or daily/2026-11-21.md: no leading '/', no '.' "
    "or '..' segments, no '//', backslashes, control characters or look-alike characters, "
    f"at most {MAX_PATH_LENGTH} characters. agents/<your agent name>/ is your private folder "
    "(other agents cannot see it; the user can), and AGENT_MEMORY.md is short for "
    "agents/<your agent name>/AGENT_MEMORY.md."
)
SCOPE_HELP = (
    "user: the user's documents; agent: private to the calling agent; shared:<slug>: a "
    "shared scope (a team's) the user holds a grant to; global: the company's documents "
    "(read-only for agent tokens)."
)
SCOPE_PARAM_HELP = (
    "Optional: the one scope to work in, as results name it: shared:<slug> (a shared scope "
    "your user holds a grant to), global, or user for your user's own documents (and your "
    "private folder). Without it, reads take your user's own document first, then the "
    "shared scopes' (by slug), then the company's; writes go to your user's own documents. "
    "Writing in a shared scope needs a read-write grant (403 otherwise); a scope you have "
    "no grant to is 404, as one that does not exist. Identity files (SOUL.md, USER.md, …) "
    "and agents' notes are only ever read from your user's own documents."
)
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
SYSTEM_AGENT_MEMORY_HELP = (
    "A system token has one AGENT_MEMORY.md of its own, in the company (global) documents: "
    "no user's or agent's notes, and no agent reads it through these two tools."
)
DOCUMENT_ERRORS = {
    403: OpenApiResponse(
        ErrorSerializer,
        description="forbidden: another agent's private folder; changing a company (global) "
        "document or one in a shared scope your user may only read; an identity file in a "
        "shared scope; or a tool that needs an agent token called with a system token. "
        "profile_read_only: USER_MEMORY.md, which only the user and Mnemo's consolidation "
        "write. Nothing was changed.",
        examples=[
            OpenApiExample(
                "forbidden",
                value=error_body(
                    "forbidden",
                    "'handbook.md' is a company document: agents can read it but not delete it.",
                    "path",
                ),
                response_only=True,
            ),
            OpenApiExample(
                "profile_read_only",
                value=error_body(ProfileReadOnly.code, ProfileReadOnly().message, "path"),
                response_only=True,
            ),
        ],
    ),
    404: error_response(
        "No document at that path, or no readable scope of the name given as scope.",
        "not_found",
        "No document at 'x.md'.",
        "path",
    ),
    422: error_response(
        "The content (or path) looks like a credential: an API key, a private key, a "
        "password, a card number, a bearer token, … Agents never store one in a document (one "
        "the document held already may stay). Nothing was written.",
        "secret_refused",
        "This looks like a GitHub token; Mnemo does not store credentials in documents.",
        "content",
    ),
}


def document_errors(*codes: int) -> dict[int, Any]:
    """The shared error responses, with the document-specific 403 and 404."""
    return {code: DOCUMENT_ERRORS.get(code) or error_responses(code)[code] for code in codes}


# --- versions: base_version in the body, or If-Match with the version's ETag ---------------


def version_etag(version_id: int) -> str:
    """The ETag of a document version, the one format: `"v<version id>"`, quotes included."""
    return f'"v{version_id}"'


ETAG_PATTERN = re.compile(r'"v([1-9][0-9]{0,17})"')
ETAG_EXAMPLE = version_etag(17)
BASE_VERSION_HELP = (
    "Optional: the version_id memory_read gave you (or a previous write's version_id). The "
    "change applies only while that is still the document's current version; if someone "
    "changed it since, nothing changes and the answer is 409 version_conflict naming the "
    "current version; read it again and apply your change to it. Without base_version the "
    "change applies regardless."
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


IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description=f"The ETag memory_read answered, e.g. {ETAG_EXAMPLE}: the same check as "
    "base_version (send either; if both, they must name the same version).",
)
ETAG_HEADER = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200],
    description=f"The document's version as an ETag, e.g. {ETAG_EXAMPLE}: the one read or "
    "just written; send it back as If-Match to change that version only. Absent for a "
    "document with no recorded version.",
)
CONFLICT_ETAG_HEADER = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[409],
    description="With version_conflict: the document's current version as an ETag (absent "
    "when there is no document at the path any more).",
)


@extend_schema_field(
    {"type": "string", "minLength": 1, "maxLength": MAX_PATH_LENGTH, "description": PATH_HELP}
)
class PathField(TextField):
    """Checked by context.paths, so a bad path is a 400 that names the rule it broke."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)
        _leave_nul_to_the_service(self)


def _content_field(help_text: str, **kwargs: Any) -> TextField:
    field = TextField(trim_whitespace=False, help_text=help_text, **kwargs)
    _leave_nul_to_the_service(field)
    return field


def _leave_nul_to_the_service(field: TextField) -> None:
    """DRF's own NUL check would answer before the service names the rule."""
    field.validators = [
        validator
        for validator in field.validators
        if not isinstance(validator, ProhibitNullCharactersValidator)
    ]


@extend_schema_field(
    {"type": "string", "pattern": SCOPE_PATTERN, "maxLength": 71, "description": SCOPE_HELP}
)
class ScopeField(TextField):
    """A scope's name as results give it: user, agent, global or shared:<slug>."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=71, **kwargs)

    def to_internal_value(self, data: object) -> str:
        value = super().to_internal_value(data)
        if not re.fullmatch(SCOPE_PATTERN, value):
            raise serializers.ValidationError(
                f"A scope is user, agent, global or shared:<slug>; got {value[:71]!r}."
            )
        return value


def _scope_param() -> ScopeField:
    return ScopeField(required=False, help_text=SCOPE_PARAM_HELP)


class PathInput(ToolInput):
    path = PathField()
    scope = _scope_param()


def _base_version_field() -> WholeNumberField:
    return WholeNumberField(required=False, min_value=1, help_text=BASE_VERSION_HELP)


class WriteInput(ToolInput):
    path = PathField()
    content = _content_field(
        f"The whole new body, UTF-8 text up to {services.MAX_BODY_BYTES} bytes (1 MB).",
        allow_blank=True,
    )
    base_version = _base_version_field()
    scope = _scope_param()


class DeleteInput(ToolInput):
    path = PathField()
    base_version = _base_version_field()
    scope = _scope_param()


class AppendInput(ToolInput):
    path = PathField()
    content = _content_field("Text to add on a new line at the end; the file is created if new.")
    scope = _scope_param()


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
    scope = _scope_param()


class ContentInput(ToolInput):
    content = _content_field(
        "One line of text to add: a line break anywhere in it is refused (400), since a "
        "second line could pass for a heading or a section. Call once per line, or use "
        "memory_append for a block of text."
    )


class NoInput(ToolInput):
    pass


class DocumentSerializer(serializers.Serializer):
    path = serializers.CharField()
    scope = ScopeField(help_text=SCOPE_HELP)
    content = serializers.CharField(source="body")
    updated_at = serializers.DateTimeField()
    version_id = serializers.IntegerField(
        allow_null=True,
        help_text="The current version of this content: pass it as base_version to "
        "memory_write or memory_delete so they refuse to overwrite a change you have not "
        "seen. Null only for a document with no recorded version.",
    )
    etag = serializers.CharField(
        allow_null=True, help_text=f"The same version as an ETag ({ETAG_EXAMPLE}), for If-Match."
    )


class WrittenSerializer(serializers.Serializer):
    path = serializers.CharField()
    scope = ScopeField(help_text=SCOPE_HELP)
    size = serializers.IntegerField(help_text="Characters in the document now.")
    version_id = serializers.IntegerField(help_text="This change's version; the user can undo it.")
    updated_at = serializers.DateTimeField()


class TreeEntrySerializer(serializers.Serializer):
    path = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["folder", "file"])
    scope = ScopeField(help_text=SCOPE_HELP)
    size = serializers.IntegerField(allow_null=True, help_text="Characters; null for folders.")
    updated_at = serializers.DateTimeField(allow_null=True)


class TreeSerializer(serializers.Serializer):
    path = serializers.CharField(allow_blank=True)
    depth = serializers.IntegerField()
    entries = TreeEntrySerializer(many=True)


class WriteResultSerializer(WrittenSerializer):
    replaced_version = serializers.IntegerField(
        allow_null=True,
        help_text="The version that was current before this write (what it replaced); null "
        "when the write created the document.",
    )


class DeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField()
    path = serializers.CharField()
    version_id = serializers.IntegerField(
        help_text="The version that keeps the deleted content; the user can restore it."
    )


class DocumentProposalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    path = serializers.CharField()
    action = serializers.ChoiceField(choices=[action.value for action in PROPOSED_ACTIONS])
    status = serializers.ChoiceField(
        choices=ProposalStatus.values,
        help_text="pending_review until the user accepts or rejects it in their review inbox, "
        "or it expires.",
    )
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class PendingReviewSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=["pending_review"],
        help_text="The change did not apply: it waits for the user's review as `proposal`.",
    )
    path = serializers.CharField()
    message = serializers.CharField()
    proposal = DocumentProposalSerializer()


PENDING_REVIEW_RESPONSE = OpenApiResponse(
    PendingReviewSerializer,
    description="pending_review: the path is an identity file at the top of the user's "
    "documents, which all of their agents read, so the change waits in the user's review "
    "inbox and the document is unchanged. Proposing the same change again answers the same "
    "proposal; a different one replaces your earlier one. Keep your own identity under "
    "agents/<your agent name>/ instead.",
    examples=[
        OpenApiExample(
            "pending_review",
            value={
                "status": "pending_review",
                "path": "SOUL.md",
                "message": "'SOUL.md' is an identity file all of the user's agents read: your "
                "change waits for the user's review (proposal 7).",
                "proposal": {
                    "id": 7,
                    "path": "SOUL.md",
                    "action": "write",
                    "status": "pending_review",
                    "created_at": "2026-11-21T09:30:00Z",
                    "expires_at": "2026-12-05T09:30:00Z",
                },
            },
            response_only=True,
        )
    ],
)


class AgentMemorySerializer(serializers.Serializer):
    path = serializers.CharField()
    exists = serializers.BooleanField(help_text="false until the agent first appends.")
    content = serializers.CharField(allow_blank=True)
    updated_at = serializers.DateTimeField(allow_null=True)


# An empty serializer would leave the operation without a request body in the schema.
NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}

WRITTEN_EXAMPLE = {
    "path": "notes/ideas.md",
    "scope": "user",
    "size": 42,
    "version_id": 17,
    "updated_at": "2026-11-21T09:30:00Z",
}
READ_EXAMPLE = {
    "path": "notes/ideas.md",
    "scope": "user",
    "content": "# Ideas\n- a weekly digest\n",
    "updated_at": "2026-11-21T09:30:00Z",
    "version_id": 17,
    "etag": ETAG_EXAMPLE,
}


VERSION_CONFLICT_RESPONSE = OpenApiResponse(
    ErrorSerializer,
    description="version_conflict: the document changed (or was deleted) since base_version "
    "or the If-Match ETag; nothing was changed. The message and the ETag header name the "
    "current version: read it again (memory_read), apply your change to it and retry. "
    "memory_paused: the user paused memory.",
    examples=[
        OpenApiExample(
            "version_conflict",
            value=error_body(
                "version_conflict",
                "'notes/ideas.md' changed since you opened it: you started from version 16, "
                "and it is now version 17. Reload it and apply your edit again.",
                "base_version",
            ),
            response_only=True,
        ),
        OpenApiExample(
            "memory_paused",
            value=error_body(
                "memory_paused",
                "Memory is paused by the user; agents cannot change it until resumed.",
            ),
            response_only=True,
        ),
    ],
)


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


def _written(caller: Caller, document: Document) -> dict[str, Any]:
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
        return Response(_written(caller, document))


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
        "not deleted: 409 version_conflict naming the current version." + IDENTITY_HELP,
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


class DailyAppendApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="append_daily_memory",
        tags=[TOOL_TAG],
        summary="Add a line to today's daily log",
        description="Adds '- HH:MM content' to daily/YYYY-MM-DD.md, the date and time in the "
        "user's timezone (UTC when unset, and for system tokens). content is one line: a "
        "line break in it is refused (400) and nothing is written.",
        request=ContentInput,
        responses={200: WrittenSerializer, **document_errors(400, 401, 409, 413, 422, 429)},
        examples=[
            OpenApiExample("Log", value={"content": "Sent the weekly report"}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        content = self.validated(ContentInput)["content"]
        caller = self.caller()
        return Response(_written(caller, workspace_append_daily(caller=caller, content=content)))


class AgentMemoryAppendApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="append_agent_memory",
        tags=[TOOL_TAG],
        summary="Add to your private notes about this user",
        description="Adds a line to agents/<your agent name>/AGENT_MEMORY.md, your own "
        "notes on working with this user. Other agents cannot read them; the user can. "
        "content is one line (a line break is refused with 400). "
        f"{SYSTEM_AGENT_MEMORY_HELP}",
        request=ContentInput,
        responses={
            200: WrittenSerializer,
            **document_errors(400, 401, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample(
                "Note",
                value={"content": "Ask before booking anything over 100 EUR."},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        content = self.validated(ContentInput)["content"]
        caller = self.caller()
        document = services.append_agent_memory(
            agent=caller.agent, content=content, actor=caller.actor
        )
        return Response(_written(caller, document))


class AgentMemoryGetApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="agent_memory_get",
        tags=[TOOL_TAG],
        summary="Read your private notes about this user",
        description="Your agents/<your agent name>/AGENT_MEMORY.md; exists is false and "
        f"content empty until you first append. {SYSTEM_AGENT_MEMORY_HELP}",
        request={"application/json": NO_ARGUMENTS},
        responses={200: AgentMemorySerializer, **document_errors(400, 401, 413, 429)},
        examples=[OpenApiExample("Read", value={}, request_only=True)],
    )
    def post(self, request: Request) -> Response:
        self.validated(NoInput)
        caller = self.caller()
        document = services.agent_memory_get(agent=caller.agent)
        body = {
            "path": f"{caller.private_folder}{services.AGENT_MEMORY_PATH}",
            "exists": document is not None,
            "content": document.body if document else "",
            "updated_at": document.updated_at if document else None,
        }
        return Response(AgentMemorySerializer(body).data)


# --- the search tool over documents: memory_search -------------------------------------------


class MemorySearchInput(ToolInput):
    query = query_field()
    limit = limit_field()
    path_prefix = TextField(
        required=False,
        allow_blank=True,
        default="",
        max_length=512,
        help_text="Only documents whose path starts with this, e.g. daily/ or projects/alpha/.",
    )
    scope = _scope_param()


class DocumentHitSerializer(ScorePartsMixin):
    path = serializers.CharField()
    scope = ScopeField(help_text=SCOPE_HELP)
    chunk = serializers.IntegerField(help_text="Which part of the document (0 is the first).")
    snippet = serializers.CharField(help_text="The matching passage; matched words in **bold**.")


class DocumentHitsSerializer(serializers.Serializer):
    results = DocumentHitSerializer(many=True)


class MemorySearchApi(ToolApi):
    permission_classes = [IsAuthenticated]  # system tokens search the global documents

    @extend_schema(
        operation_id="memory_search",
        tags=[SEARCH_TOOL_TAG],
        summary="Search the documents",
        description="Find passages in documents by words and by meaning: the user's "
        "documents, your own private notes, the shared scopes granted to your user, and the "
        "company's when the operator shares them (each result's scope says whose; name "
        "scope to search one only). One result per document, its best passage with the "
        "matched words in bold.",
        request=MemorySearchInput,
        responses={200: DocumentHitsSerializer, **document_errors(400, 401, 404, 413, 429)},
        examples=[
            OpenApiExample(
                "Find",
                value={"query": "launch plan", "path_prefix": "projects/"},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(MemorySearchInput)
        data["scope"] = data.get("scope")
        if isinstance(request.auth, SystemToken):
            caller = Caller.system()
            hits = search_documents(user=None, **data)
        else:
            caller = Caller.for_agent(request.auth.agent)
            hits = search_documents(
                user=request.user,
                agent=caller.agent,
                include_global=settings.MNEMO_GLOBAL_READABLE,
                **data,
            )
        results = [
            {
                "path": shown_path(caller, hit.chunk.document),
                "scope": hit.scope,
                "chunk": hit.chunk.ordinal,
                "snippet": bold_snippet(hit.snippet),
                **score_parts(hit.ranks, hit.score, hit.freshness),
            }
            for hit in hits
        ]
        return Response(DocumentHitsSerializer({"results": results}).data)
