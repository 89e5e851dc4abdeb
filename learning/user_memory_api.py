"""The agent API for the consolidated profile: `GET /api/v1/profile-memory`, what the assistant
loads before each turn (learning/user_memory_loading.py `load_profile`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from learning.user_memory_loading import LoadedProfile, load_profile
from lib.api import error_response, error_responses
from lib.errors import Forbidden, LLMNotConfigured
from memory.visibility import reads_all_memory
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET

if TYPE_CHECKING:
    from rest_framework.request import Request

EXAMPLE_TEXT = """---
user_id: 7
schema_version: 1
last_updated: 2025-06-03T09:00:00+00:00
turn_count: 42
---

# User Memory

## Identity
- Kevin, Head of Growth at YARNNN

## Communication Preferences
- Short answers, no preamble

## Work Context
- Planning the Q3 launch

## Skills & Expertise
_(empty)_

## Recent Topics
- Pricing page copy

## Open Questions / Follow-ups
_(empty)_
"""


class ProfileMemoryQuerySerializer(serializers.Serializer):
    # The working memory's parameter name and values (memory/working_memory_api.py); JSON
    # is the default here because the numbers (tokens, cut) matter as much as the text.
    format = serializers.ChoiceField(choices=["json", "markdown"], default="json")


class ProfileMemorySerializer(serializers.Serializer):
    text = serializers.CharField(
        help_text="The profile in Markdown (frontmatter, '# User Memory', six sections), "
        "within the budget."
    )
    tokens = serializers.IntegerField(min_value=0, help_text="Tokens of `text`.")
    budget = serializers.IntegerField(
        min_value=MIN_TOKEN_BUDGET,
        max_value=MAX_TOKEN_BUDGET,
        help_text="The user's profile budget in tokens.",
    )
    cut = serializers.BooleanField(
        help_text="true: the stored profile is over the budget and bullets were left out "
        "(from the end upward)."
    )
    tokenizer = serializers.CharField(
        help_text="How tokens are counted: the consolidating model's tokenizer."
    )
    version_id = serializers.IntegerField(
        allow_null=True,
        help_text="The stored version served (USER_MEMORY.md on the Documents pages); null "
        "for the empty profile.",
    )
    exists = serializers.BooleanField(
        help_text="false: nothing is stored yet, and this is the empty profile."
    )


def profile_memory_body(loaded: LoadedProfile) -> dict[str, object]:
    return {
        "text": loaded.text,
        "tokens": loaded.tokens,
        "budget": loaded.budget,
        "cut": loaded.cut,
        "tokenizer": loaded.tokenizer,
        "version_id": loaded.version_id,
        "exists": loaded.exists,
    }


NOT_CONFIGURED_RESPONSE = error_response(
    "No profile is stored yet and no LLM is configured to write one.",
    LLMNotConfigured.code,
    "There is no consolidated profile yet, and only an LLM writes one. No LLM is configured: "
    "set MNEMO_LLM_MODEL and MNEMO_LLM_BASE_URL …",
)


# The profile is consolidated from every memory, so it cannot honour a tag rule.
PARTIAL_READER_MESSAGE = (
    "The consolidated profile is built from all of the user's memory, and the user lets you "
    "read only part of it (Agents page): search_memory and the working memory give you what "
    "you may read."
)


class ProfileMemoryApi(APIView):
    """GET only: Mnemo writes the profile after each reported turn, the user edits it on the
    Documents pages."""

    @extend_schema(
        operation_id="get_profile_memory",
        tags=["turns"],
        summary="The user's consolidated profile, to load before each turn",
        description="The Markdown profile Mnemo keeps about the user and rewrites after each "
        "reported turn (POST /api/v1/turns): frontmatter (user_id, schema_version, "
        "last_updated, turn_count), then '# User Memory' and the sections Identity, "
        "Communication Preferences, Work Context, Skills & Expertise, Recent Topics and Open "
        "Questions / Follow-ups. It never exceeds the user's profile budget, counted with "
        "the consolidating model's tokenizer: an over-long stored profile loses bullets from "
        "the end upward and cut is true. turn_count counts every processed turn; "
        "last_updated changes only when the text does. Before anything is stored, the empty "
        "profile (exists false); with no LLM configured and nothing stored, 503 "
        "llm_not_configured. format=markdown returns the text alone, with the counts in "
        "X-Mnemo-Tokens, X-Mnemo-Token-Counter and X-Mnemo-Cut. The profile is built from "
        "all of the user's memory: an agent the user lets read only part of it (a tag rule "
        "on the Agents page) gets 403 forbidden.",
        parameters=[
            OpenApiParameter("format", str, enum=["json", "markdown"], default="json"),
        ],
        responses={
            (200, "application/json"): ProfileMemorySerializer,
            (200, "text/markdown"): OpenApiResponse(
                OpenApiTypes.STR, examples=[OpenApiExample("Profile", value=EXAMPLE_TEXT)]
            ),
            **error_responses(400, 401, 403, 429),
            503: NOT_CONFIGURED_RESPONSE,
        },
        examples=[
            OpenApiExample(
                "Profile",
                value={
                    "text": EXAMPLE_TEXT,
                    "tokens": 96,
                    "budget": 2000,
                    "cut": False,
                    "tokenizer": "tiktoken:o200k_base",
                    "version_id": 311,
                    "exists": True,
                },
                response_only=True,
                media_type="application/json",
            ),
        ],
    )
    def get(self, request: Request) -> HttpResponse:
        # A plain dict: an empty `?format=` is then refused instead of read as "not given".
        query = ProfileMemoryQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        if not reads_all_memory(request.auth.agent):
            raise Forbidden(PARTIAL_READER_MESSAGE)
        loaded = load_profile(request.user)
        if query.validated_data["format"] == "json":
            return Response(profile_memory_body(loaded))
        response = HttpResponse(loaded.text, content_type="text/markdown; charset=utf-8")
        response["X-Mnemo-Tokens"] = str(loaded.tokens)
        response["X-Mnemo-Token-Counter"] = loaded.tokenizer
        response["X-Mnemo-Cut"] = "true" if loaded.cut else "false"
        return response
