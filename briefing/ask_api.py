"""The agent API for the memory assistant: `POST /api/v1/tools/ask_memory`
(briefing/ask.py does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from briefing.ask import (
    DEFAULT_ANSWER_TOKENS,
    DOCUMENT,
    DOCUMENT_RESULTS,
    MAX_ANSWER_TOKENS,
    MEMORY,
    MEMORY_RESULTS,
    MIN_ANSWER_TOKENS,
    MemoryAnswer,
    ask_memory,
)
from lib.api import TextField, ToolInput, WholeNumberField, error_responses
from profiles.tool_base import ToolApi
from search.ranking import MAX_QUERY_LENGTH

if TYPE_CHECKING:
    from rest_framework.request import Request


class AskMemoryInput(ToolInput):
    question = TextField(
        max_length=MAX_QUERY_LENGTH,
        trim_whitespace=False,  # the length the schema states is the length sent
        help_text="The question about the user or their work, in plain words.",
    )
    max_tokens = WholeNumberField(
        required=False,
        min_value=MIN_ANSWER_TOKENS,
        max_value=MAX_ANSWER_TOKENS,
        default=DEFAULT_ANSWER_TOKENS,
        help_text=f"The longest answer you want, in tokens, {MIN_ANSWER_TOKENS}–"
        f"{MAX_ANSWER_TOKENS} (default {DEFAULT_ANSWER_TOKENS}).",
    )


class AnswerSourceSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=[MEMORY, DOCUMENT])
    key = serializers.CharField(required=False, help_text="A memory's key (get_memory reads it).")
    path = serializers.CharField(
        required=False, help_text="A document's path (memory_read reads it)."
    )
    scope = serializers.CharField(required=False, help_text="A document's scope.")
    audience = serializers.ChoiceField(
        choices=["user", "own"],
        required=False,
        help_text="A memory's: user (the user's memory) or own (your own note).",
    )


class MemoryAnswerSerializer(serializers.Serializer):
    answer = serializers.CharField(
        allow_blank=True,
        help_text="The answer, or with summarized false the top results, one line each.",
    )
    summarized = serializers.BooleanField(
        help_text="true: the model wrote the answer from the results. false: no summary was "
        "made (see note); the answer is the results themselves."
    )
    tokens = serializers.IntegerField(
        min_value=0, help_text="Tokens of the answer, counted with the model's tokenizer."
    )
    sources = AnswerSourceSerializer(
        many=True,
        help_text="The memories and documents the answer was made from, best first.",
    )
    note = serializers.CharField(
        allow_blank=True,
        help_text="Empty, or why no summary was made, or that the answer was cut to fit.",
    )


def answer_body(answer: MemoryAnswer) -> dict[str, Any]:
    return {
        "answer": answer.answer,
        "summarized": answer.summarized,
        "tokens": answer.tokens,
        "sources": [source.as_dict() for source in answer.sources],
        "note": answer.note,
    }


class AskMemoryApi(ToolApi):
    @extend_schema(
        operation_id="ask_memory",
        tags=["memory and document tools"],
        summary="Ask the user's memory a question; get a short answer",
        description="Answer a question from the user's memories and documents in a few "
        "hundred tokens instead of reading raw search results. Mnemo searches as "
        f"search_memory and memory_search do (the top {MEMORY_RESULTS} memories and "
        f"{DOCUMENT_RESULTS} documents) and gives the model only those results and your "
        "question, nothing else; the answer is at most max_tokens long and lists the keys "
        "and paths it was made from. Without a model (none configured, today's LLM budget "
        "spent, or the model failing) you get the top results themselves, one line each "
        "within max_tokens, summarized false and a note saying why. Found memories count "
        "as used.",
        request=AskMemoryInput,
        responses={200: MemoryAnswerSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[
            OpenApiExample(
                "Ask",
                value={"question": "How does the user like reports written?", "max_tokens": 150},
                request_only=True,
            ),
            OpenApiExample(
                "Answered",
                value={
                    "answer": "Short, with the numbers first and no preamble.",
                    "summarized": True,
                    "tokens": 11,
                    "sources": [
                        {"type": "memory", "key": "preference:report-format"},
                        {"type": "document", "path": "notes/reports.md", "scope": "user"},
                    ],
                    "note": "",
                },
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(AskMemoryInput)
        answer = ask_memory(user=request.user, agent=request.auth.agent, **data)
        return Response(answer_body(answer))
