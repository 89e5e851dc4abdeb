"""The agent API's memory reads: get_memory, list_memories, search_memory and
list_proposals, one POST endpoint per tool.

Each view is built as memory/write_api.py says: a strict serializer, one service or
selector, an output serializer, lib/api.py's one error shape.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import TYPE_CHECKING

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from lib.api import TextField, TextListField, ToolInput, WholeNumberField, error_responses
from lib.errors import InvalidInput
from memory import selectors, visibility
from memory.api_fields import (
    TOOL_TAG,
    KeySerializer,
    MemorySerializer,
    ProposalSerializer,
    memory_body,
    proposal_body,
)
from memory.api_guards import _owner, _refuse_unreadable
from memory.models import MAX_TAGS, ProposalStatus, Source
from memory.search import search_memory
from memory.uses import memory_record_access
from profiles.tool_base import ToolApi
from search.ranking import USES_AT_FULL_NUDGE
from search.serializers import ScorePartsMixin, limit_field, query_field, score_parts

if TYPE_CHECKING:
    from rest_framework.request import Request


class MemoryResultSerializer(serializers.Serializer):
    memory = MemorySerializer()


class ListProposalsSerializer(ToolInput):
    status = serializers.ChoiceField(
        choices=ProposalStatus.choices, required=False, help_text="Only proposals in this state."
    )
    limit = WholeNumberField(required=False, min_value=1, max_value=200, default=50)


class ProposalPageSerializer(serializers.Serializer):
    results = ProposalSerializer(many=True)


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
        tags=[TOOL_TAG],
        summary="Search the user's memories",
        description="Find memories by words (their text, key and tags) and by meaning, "
        "best match first; use and age only break near ties. A query that matches nothing "
        "returns no results rather than the least bad ones. Each result carries its score "
        "and the parts of it. Results count as a use. Documents are searched with "
        "memory_search; ask_memory searches both.",
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
