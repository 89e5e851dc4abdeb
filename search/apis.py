"""The agent API for search: search_memory over entries, memory_search over documents,
and promote_memory to pin an entry found useful."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from context.apis import SCOPES
from context.workspace import Caller, shown_path
from lib.api import TextField, TextListField, ToolInput, WholeNumberField, error_responses
from lib.tool_api import ToolApi
from memory import selectors, services
from memory.apis import MemoryKeyField, MemoryResultSerializer, MemorySerializer
from memory.services import MAX_TAGS
from profiles.models import SystemToken
from search.services import (
    HIGHLIGHT_END,
    HIGHLIGHT_START,
    MAX_LIMIT,
    MAX_QUERY_LENGTH,
    search_documents,
    search_memory,
)

if TYPE_CHECKING:
    from rest_framework.request import Request

TOOL_TAG = "search tools"


def _query_field() -> TextField:
    return TextField(
        max_length=MAX_QUERY_LENGTH,
        help_text="What to look for, in plain words or as a question; any word may match, "
        "and meaning counts too.",
    )


def _limit_field() -> WholeNumberField:
    return WholeNumberField(
        required=False,
        min_value=1,
        max_value=MAX_LIMIT,
        default=10,
        help_text=f"How many results, 1–{MAX_LIMIT} (default 10).",
    )


class SearchMemoryInput(ToolInput):
    query = _query_field()
    limit = _limit_field()
    kind = serializers.ChoiceField(
        choices=selectors.KINDS, required=False, help_text="Only this kind of memory."
    )
    tags = TextListField(
        child=TextField(max_length=40, allow_blank=False),
        max_length=MAX_TAGS,
        required=False,
        help_text="Only memories carrying all of these tags.",
    )


class MemorySearchInput(ToolInput):
    query = _query_field()
    limit = _limit_field()
    path_prefix = TextField(
        required=False,
        allow_blank=True,
        default="",
        max_length=512,
        help_text="Only documents whose path starts with this, e.g. daily/ or projects/alpha/.",
    )


class PromoteInput(ToolInput):
    key = MemoryKeyField()


class ScorePartsMixin(serializers.Serializer):
    score = serializers.FloatField(help_text="Higher is better; the product of the parts.")
    fused = serializers.FloatField(
        help_text=f"Reciprocal Rank Fusion: Σ 1/({settings.MNEMO_SEARCH_RRF_K} + rank)."
    )
    keyword_rank = serializers.IntegerField(
        allow_null=True, help_text="Place among full-text matches; null if not among them."
    )
    vector_rank = serializers.IntegerField(
        allow_null=True, help_text="Place by meaning; null if not among the nearest."
    )
    decay = serializers.FloatField(
        help_text=f"Freshness: 1/(1 + {settings.MNEMO_SEARCH_DECAY_PER_DAY:g}·age in days)."
    )


class MemoryHitSerializer(ScorePartsMixin):
    memory = MemorySerializer()
    use_boost = serializers.FloatField(
        help_text=f"Use: 1 + {settings.MNEMO_SEARCH_ACCESS_BOOST:g}·access_count."
    )


class DocumentHitSerializer(ScorePartsMixin):
    path = serializers.CharField()
    scope = serializers.ChoiceField(choices=SCOPES)
    chunk = serializers.IntegerField(help_text="Which part of the document (0 is the first).")
    snippet = serializers.CharField(help_text="The matching passage; matched words in **bold**.")


class MemoryHitsSerializer(serializers.Serializer):
    results = MemoryHitSerializer(many=True)


class DocumentHitsSerializer(serializers.Serializer):
    results = DocumentHitSerializer(many=True)


def _parts(hit: Any) -> dict[str, Any]:
    return {
        "score": hit.score,
        "fused": hit.ranks.fused,
        "keyword_rank": hit.ranks.keyword_rank,
        "vector_rank": hit.ranks.vector_rank,
        "decay": hit.decay,
    }


def bold_snippet(snippet: str) -> str:
    return snippet.replace(HIGHLIGHT_START, "**").replace(HIGHLIGHT_END, "**")


class SearchMemoryApi(ToolApi):
    @extend_schema(
        operation_id="search_memory",
        tags=[TOOL_TAG],
        summary="Search the user's memories",
        description="Find memories by words and by meaning (hybrid search), fresher and "
        "more used ones first. Each result carries its score and the parts of it. "
        "Results count as a use.",
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
        hits = search_memory(user=request.user, **data)
        results = [
            {"memory": hit.memory, "use_boost": hit.use_boost, **_parts(hit)} for hit in hits
        ]
        return Response(MemoryHitsSerializer({"results": results}).data)


class MemorySearchApi(ToolApi):
    permission_classes = [IsAuthenticated]  # system tokens search the global documents

    @extend_schema(
        operation_id="memory_search",
        tags=[TOOL_TAG],
        summary="Search the documents",
        description="Find passages in documents by words and by meaning: the user's "
        "documents, your own private notes, and the company's when the operator shares "
        "them. One result per document, its best passage with the matched words in bold.",
        request=MemorySearchInput,
        responses={200: DocumentHitsSerializer, **error_responses(400, 401, 413, 429)},
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
                **_parts(hit),
            }
            for hit in hits
        ]
        return Response(DocumentHitsSerializer({"results": results}).data)


class PromoteMemoryApi(ToolApi):
    @extend_schema(
        operation_id="promote_memory",
        tags=[TOOL_TAG],
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
