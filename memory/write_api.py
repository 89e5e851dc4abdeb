"""The agent API's memory writes: create_memory, update_memory, delete_memory and
promote_memory (also named memory_promote), one POST endpoint per tool.

Each view validates its JSON body with a strict serializer, calls one service or
selector, and answers with an output serializer. Errors take lib/api.py's one shape.
The other tools: memory/read_api.py, memory/notes_api.py, memory/working_memory_api.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from lib.api import FlagField, ToolInput, error_responses
from lib.errors import InvalidInput
from memory import services
from memory.api_fields import (
    ROW_EXAMPLE,
    TOOL_TAG,
    AgentSourceField,
    ConfidenceField,
    KeySerializer,
    MemoryKeyField,
    MemorySerializer,
    ProposalSerializer,
    _occurred_at_field,
    _own_field,
    _pending_review,
    _reason_field,
    _session_field,
    _tags_field,
    _value_field,
    memory_body,
    notes_field,
    with_notes,
    written_notes,
)
from memory.api_guards import (
    _owner,
    _refuse_hidden_tags,
    _refuse_unreadable_duplicate,
)
from memory.models import Memory
from memory.outcomes import DuplicateMemory, ReviewRequired
from profiles.tool_base import ToolApi

if TYPE_CHECKING:
    from collections.abc import Callable

    from rest_framework.request import Request

    from activity.actors import Actor


class CreateMemorySerializer(ToolInput):
    key = MemoryKeyField()
    value = _value_field()
    confidence = ConfidenceField(required=False)
    tags = _tags_field()
    source = AgentSourceField(required=False)
    reason = _reason_field()
    occurred_at = _occurred_at_field()
    session = _session_field()


CREATE_STATUSES = ["created", "updated", "unchanged", "pending_review", "duplicate"]
UPDATE_STATUSES = ["updated", "unchanged", "pending_review"]
DELETE_STATUSES = ["deleted", "pending_review"]
WRITE_STATUS_HELP = (
    "created, updated or unchanged: applied (unchanged: it was so already). pending_review "
    "(answer 202): it waits for the user as `proposal`. duplicate: an entry of the same kind "
    "already says it (`memory`); no memory was added, and the text is kept in that entry's "
    "history."
)


class CreateMemoryResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=CREATE_STATUSES, help_text=WRITE_STATUS_HELP)
    created = serializers.BooleanField(help_text="true if the key was new.")
    memory = MemorySerializer(
        required=False, help_text="The memory written, or for a duplicate the one that has it."
    )
    proposal = ProposalSerializer(required=False)
    similarity = serializers.FloatField(
        required=False, help_text="For a duplicate: how near in meaning (1: the same text)."
    )
    notes = notes_field()


class UpdateMemorySerializer(ToolInput):
    key = MemoryKeyField()
    value = _value_field(required=False)
    confidence = ConfidenceField(required=False)
    tags = _tags_field()
    pinned = FlagField(required=False, help_text="Pinned entries come first in working memory.")
    reason = _reason_field()
    occurred_at = _occurred_at_field()
    session = _session_field()
    own = _own_field()


class UpdateResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=UPDATE_STATUSES, help_text=WRITE_STATUS_HELP)
    memory = MemorySerializer(help_text="The memory as it is now.")
    proposal = ProposalSerializer(required=False)
    notes = notes_field()


class DeleteMemorySerializer(KeySerializer):
    reason = _reason_field()


class DeleteMemoryResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=DELETE_STATUSES)
    deleted = serializers.BooleanField()
    key = serializers.CharField()
    history_id = serializers.IntegerField(
        required=False,
        help_text="The history entry that keeps the deleted state; the user can restore it.",
    )
    proposal = ProposalSerializer(required=False)


class MemoryCreateApi(ToolApi):
    @extend_schema(
        operation_id="create_memory",
        tags=[TOOL_TAG],
        summary="Remember something about the user",
        description="Save a memory under a key. If the key exists and you (an agent) wrote "
        "it, its value is replaced (last write wins): 201 when created, 200 when replaced. "
        "The user is in charge: a change to a memory the user stated does not apply but "
        "waits for their review (202, status pending_review, with the proposal), as do all "
        "new memories if the user chose to review them. A new entry that one of the same "
        "kind already says adds nothing: no memory is added and your text is kept in that "
        "one's history (200, status duplicate, naming it). One that adds something to a near "
        "entry an agent wrote is stored as its own memory (201); one that adds to a near entry "
        "the user stated becomes a proposal to update that one (202). Search before you write. "
        "Never store a credential (an API key, a password, a card number, …): 422 "
        "secret_refused, and nothing is written. occurred_at says when what it says "
        "happened or was said (default: now) and session which conversation you are in.",
        request=CreateMemorySerializer,
        responses={
            201: CreateMemoryResultSerializer,
            200: CreateMemoryResultSerializer,
            202: CreateMemoryResultSerializer,
            **error_responses(400, 401, 403, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample(
                "Remember a preference",
                value={
                    "key": "preference:report-format",
                    "value": "bullet points in reports",
                    "tags": ["work"],
                    "occurred_at": "2026-11-21T02:00:00+08:00",
                    "session": "chat-42",
                },
                request_only=True,
            ),
            OpenApiExample(
                "Created",
                value={"status": "created", "created": True, "memory": ROW_EXAMPLE},
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(CreateMemorySerializer)
        _refuse_hidden_tags(request, data)
        try:
            write = services.memory_upsert(
                user=request.user, actor=self.actor(), reader=request.auth.agent, **data
            )
        except ReviewRequired as waiting:
            return _pending_review(waiting.proposal, created=False)
        except DuplicateMemory as duplicate:
            _refuse_unreadable_duplicate(request, duplicate.existing)
            body = {
                "status": "duplicate",
                "created": False,
                "memory": memory_body(duplicate.existing),
                "similarity": round(duplicate.similarity, 4),
            }
            return Response(body)
        body = {
            "status": write.status,
            "created": write.created,
            "memory": memory_body(write.memory),
        }
        with_notes(body, written_notes(request.data, write.memory))
        return Response(
            body, status=status.HTTP_201_CREATED if write.created else status.HTTP_200_OK
        )


class MemoryUpdateApi(ToolApi):
    @extend_schema(
        operation_id="update_memory",
        tags=[TOOL_TAG],
        summary="Change an existing memory",
        description="Change the value, confidence, tags, pinned flag, occurred_at or session "
        "of a memory that exists; 404 if there is none. Give at least one of them; what you "
        "leave out stays as it is. A change to a memory the user stated (its time or "
        "session included) waits for their review: 202, status pending_review, with the "
        "proposal (list_proposals tells you what became of it).",
        request=UpdateMemorySerializer,
        responses={
            200: UpdateResultSerializer,
            202: UpdateResultSerializer,
            **error_responses(400, 401, 403, 404, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample(
                "Pin a memory",
                value={"key": "preference:report-format", "pinned": True},
                request_only=True,
            ),
            OpenApiExample(
                "Date a memory",
                value={"key": "fact:moved-to-lisbon", "occurred_at": "2023-05-08"},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(UpdateMemorySerializer)
        _refuse_hidden_tags(request, data)
        return _update(request, self.actor(), data)


def _update(request: Request, actor: Actor, data: dict[str, Any]) -> Response:
    """update_memory's and promote_memory's answer: applied, or waiting for review."""
    owner = _owner(request, data)
    try:
        write = services.memory_update(
            user=request.user, actor=actor, owner_agent=owner, reader=request.auth.agent, **data
        )
    except ReviewRequired as waiting:  # only ever the user's memory
        current = Memory.objects.get(user=request.user, owner_agent=None, key=waiting.proposal.key)
        return _pending_review(waiting.proposal, memory=memory_body(current))
    body = {"status": write.status, "memory": memory_body(write.memory)}
    return Response(with_notes(body, written_notes(request.data, write.memory)))


class MemoryDeleteApi(ToolApi):
    @extend_schema(
        operation_id="delete_memory",
        tags=[TOOL_TAG],
        summary="Forget a memory",
        description="Delete the memory with this key; 404 if there is none. The user can "
        "still restore it from its history. Deleting a memory the user stated waits for "
        "their review: 202, status pending_review, with the proposal. A document is "
        "deleted with memory_delete.",
        request=DeleteMemorySerializer,
        responses={
            200: DeleteMemoryResultSerializer,
            202: DeleteMemoryResultSerializer,
            **error_responses(400, 401, 403, 404, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample("Forget", value={"key": "preference:report-format"}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(DeleteMemorySerializer)
        key = data["key"]
        owner = _owner(request, data)
        try:
            history = services.memory_delete(
                user=request.user,
                actor=self.actor(),
                owner_agent=owner,
                reader=request.auth.agent,
                **data,
            )
        except ReviewRequired as waiting:
            return _pending_review(waiting.proposal, deleted=False, key=key)
        return Response(
            {"status": "deleted", "deleted": True, "key": key, "history_id": history.pk}
        )


# --- pinning: promote_memory, also named memory_promote (a write: update_memory's pinned) ------


class PromoteInput(ToolInput):
    key = MemoryKeyField(required=False)
    memory_id = MemoryKeyField(
        required=False,
        help_text="The agent-memory design's name for `key` (a memory is named by its key "
        "here): give one of the two.",
    )
    own = _own_field()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [attrs[name] for name in ("key", "memory_id") if name in attrs]
        if len(given) != 1:
            raise InvalidInput("Give the memory's key as `key` or as `memory_id` (one of them).")
        return {"key": given[0], "own": attrs["own"]}


PROMOTE_DESCRIPTION = (
    "Pin the memory with this key (`key`, or `memory_id` as the agent-memory design names "
    "it), so it comes first in the working memory (after the profile and styles); with "
    "own: true your own note, which then comes first in the scratchpad and "
    "memory_list_recent. 404 if there is none. Pinning a memory the user stated waits for "
    "their review: 202, status pending_review, with the proposal."
)


def _promote_schema(
    operation_id: str, description: str
) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """promote_memory's schema under a name: memory_promote is the same tool."""
    return extend_schema(
        operation_id=operation_id,
        tags=[TOOL_TAG],
        summary="Pin a memory",
        description=description,
        request=PromoteInput,
        responses={
            200: UpdateResultSerializer,
            202: UpdateResultSerializer,
            **error_responses(400, 401, 403, 404, 409, 413, 429),
        },
        examples=[
            OpenApiExample("Pin", value={"key": "preference:report-format"}, request_only=True),
        ],
    )


class PromoteMemoryApi(ToolApi):
    @_promote_schema("promote_memory", PROMOTE_DESCRIPTION)
    def post(self, request: Request) -> Response:
        data = self.validated(PromoteInput)
        return _update(request, self.actor(), {**data, "pinned": True})


class MemoryPromoteApi(PromoteMemoryApi):
    """The agent-memory design's name for promote_memory: one tool, two names."""

    @_promote_schema(
        "memory_promote",
        "The other name of promote_memory (the agent-memory design's name), the same tool. "
        + PROMOTE_DESCRIPTION,
    )
    def post(self, request: Request) -> Response:
        return super().post(request)
