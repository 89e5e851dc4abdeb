"""What the document tools share in their schema and answers: the scope and path fields
and their help, the error responses, the version ETag (If-Match), and the serializers of
documents, writes, tree listings and proposals. The tools themselves are in
context/apis.py (memory_read, memory_write, memory_append, memory_tree, memory_delete),
context/notes_api.py (the daily log and AGENT_MEMORY.md) and context/search_api.py
(memory_search).
"""

from __future__ import annotations

import re
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema_field,
)
from rest_framework import serializers

from context.models import PROPOSED_ACTIONS
from context.paths import MAX_PATH_LENGTH
from context.services import ProfileReadOnly
from lib.api import ErrorSerializer, TextField, WholeNumberField, error_response, error_responses
from lib.http_errors import error_body
from memory.models import ProposalStatus

TOOL_TAG = "document tools"
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


def content_field(help_text: str, **kwargs: Any) -> TextField:
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


def scope_param() -> ScopeField:
    return ScopeField(required=False, help_text=SCOPE_PARAM_HELP)


def base_version_field() -> WholeNumberField:
    return WholeNumberField(required=False, min_value=1, help_text=BASE_VERSION_HELP)


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
