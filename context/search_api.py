"""The agent API's search of documents, memory_search: the user's documents, the agent's
private notes, the shared scopes granted to the user and the company's when readable
(context/workspace.py reads_global_scope), or the one scope named; a system token
searches the global documents. The search itself is context/search.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from context.search import search_documents
from context.serializers import SCOPE_HELP, TOOL_TAG, ScopeField, document_errors, scope_param
from context.workspace import Caller, reads_global_scope, shown_path
from lib.api import TextField, ToolInput
from profiles.models import SystemToken
from profiles.tool_base import ToolApi
from search.serializers import ScorePartsMixin, bold_snippet, limit_field, query_field, score_parts

if TYPE_CHECKING:
    from rest_framework.request import Request


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
    scope = scope_param()


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
        tags=[TOOL_TAG],
        summary="Search the documents",
        description="Find passages in documents by words and by meaning: the user's "
        "documents, your own private notes, the shared scopes granted to your user, and the "
        "company's when the operator shares them (each result's scope says whose; name "
        "scope to search one only). One result per document, its best passage with the "
        "matched words in bold. Memories are searched with search_memory; ask_memory "
        "searches both.",
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
                include_global=reads_global_scope(request.user),
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
