"""The agent API of the assistant loop: report a turn, and read what came of it.

`POST /api/v1/turns` answers 202 at once; the work runs in Celery. `GET
/api/v1/turns/<id>` shows the turn's status and outcome, for an agent that wants to know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from learning.services import TurnReport, turn_report
from lib.api import TextField, ToolInput, error_responses
from llm.client import llm_configured
from llm.models import MAX_CLIENT_TURN_ID, Turn, TurnStatus
from memory.models import MAX_SESSION_LENGTH
from profiles.tool_base import ToolApi

if TYPE_CHECKING:
    from rest_framework.request import Request

MAX_MESSAGE_CHARS = 100_000
MAX_TOOL_OUTPUTS = 50
MAX_TOOL_NAME_CHARS = 100
MAX_TOOL_OUTPUT_CHARS = 100_000
NO_LLM = (
    "No LLM is configured: observations are captured by cue phrases and the profile is not "
    "consolidated (set MNEMO_LLM_MODEL and MNEMO_LLM_BASE_URL or MNEMO_LLM_API_KEY)."
)


class ToolOutputSerializer(ToolInput):
    name = TextField(max_length=MAX_TOOL_NAME_CHARS, help_text="The tool's name.")
    text = TextField(
        max_length=MAX_TOOL_OUTPUT_CHARS, allow_blank=True, help_text="What the tool returned."
    )


class TurnReportSerializer(ToolInput):
    user_message = TextField(
        max_length=MAX_MESSAGE_CHARS, allow_blank=True, help_text="What the user said."
    )
    assistant_reply = TextField(
        max_length=MAX_MESSAGE_CHARS, allow_blank=True, help_text="What the assistant answered."
    )
    tool_outputs = ToolOutputSerializer(
        many=True,
        required=False,
        max_length=MAX_TOOL_OUTPUTS,
        help_text="The turn's tool results, each {name, text}.",
    )
    turn_id = TextField(
        required=False,
        max_length=MAX_CLIENT_TURN_ID,
        help_text="Your id for this turn. The same id from the same agent again is "
        "answered with the first report and does no work twice.",
    )
    session = TextField(
        required=False,
        allow_blank=True,
        max_length=MAX_SESSION_LENGTH,
        help_text=f"The conversation the turn is part of, up to {MAX_SESSION_LENGTH} "
        "characters on one line (your chat or thread id). What Mnemo captures from the turn "
        "carries it as its session, and the time the turn was received as its occurred_at.",
        error_messages={
            "max_length": f"Longer than {MAX_SESSION_LENGTH} characters; shorten the session."
        },
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not data["user_message"].strip() and not data["assistant_reply"].strip():
            raise serializers.ValidationError(
                {"user_message": "A turn needs the user's message or the assistant's reply."}
            )
        return data


class TurnSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="Mnemo's id of the turn (GET /api/v1/turns/<id>).")
    turn_id = serializers.CharField(help_text="Your id for the turn, or empty.")
    session = serializers.CharField(help_text="The conversation it was part of, or empty.")
    status = serializers.ChoiceField(choices=TurnStatus.choices)
    learning = serializers.BooleanField(help_text="Whether Mnemo learns from this turn.")
    reason = serializers.CharField(help_text="Why not, when learning is false.")
    duplicate = serializers.BooleanField(
        help_text="true: this turn id was reported before; this answer is the first report's."
    )
    llm = serializers.CharField(
        help_text="'configured', or what happens without an LLM (cue phrases, no profile)."
    )
    outcome = serializers.DictField(
        help_text="What came of it once processed: the profile (rewritten, noop, failed, "
        "off), the observations captured and the tokens used."
    )
    received_at = serializers.DateTimeField()
    processed_at = serializers.DateTimeField(allow_null=True)


def turn_body(turn: Turn, *, duplicate: bool = False) -> dict[str, Any]:
    return {
        "id": turn.pk,
        "turn_id": turn.client_turn_id,
        "session": turn.session,
        "status": turn.status,
        "learning": turn.status != TurnStatus.SKIPPED,
        "reason": turn.skipped_reason,
        "duplicate": duplicate,
        "llm": "configured" if llm_configured() else NO_LLM,
        "outcome": turn.outcome,
        "received_at": turn.received_at,
        "processed_at": turn.processed_at,
    }


class TurnReportApi(ToolApi):
    @extend_schema(
        operation_id="report_turn",
        tags=["turns"],
        summary="Report a conversation turn so Mnemo can learn from it",
        description="Send each turn after it ends: the user's message, your reply, and the "
        "tool outputs. Answers 202 at once; Mnemo then, in the background, rewrites the "
        "user's consolidated profile (GET /api/v1/profile-memory) and captures observations "
        "(preferences, decisions, discoveries, patterns, tasks, bugfixes) as memories, "
        "through the same review and duplicate rules as your own writes. Learning is opt-in: "
        "the user's setting and this agent's switch must both be on; otherwise the report "
        "is accepted, learning is false and reason says why. A turn_id makes the report "
        "idempotent. session names the conversation: the memories captured from the turn "
        "carry it, and the time the turn was received as when they were said.",
        request=TurnReportSerializer,
        responses={202: TurnSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[
            OpenApiExample(
                "A turn",
                value={
                    "user_message": "Remember that I prefer short answers.",
                    "assistant_reply": "Noted: I'll keep answers short.",
                    "tool_outputs": [{"name": "search_memory", "text": "no results"}],
                    "turn_id": "chat-42:7",
                    "session": "chat-42",
                },
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(TurnReportSerializer)
        report: TurnReport = turn_report(
            agent=request.auth.agent,
            user_message=data["user_message"],
            assistant_reply=data["assistant_reply"],
            tool_outputs=[dict(output) for output in data.get("tool_outputs", [])],
            client_turn_id=data.get("turn_id", ""),
            session=data.get("session", ""),
        )
        body = turn_body(report.turn, duplicate=not report.created)
        return Response(body, status=status.HTTP_202_ACCEPTED)


class TurnGetApi(ToolApi):
    @extend_schema(
        operation_id="get_turn",
        tags=["turns"],
        summary="What came of a reported turn",
        description="The turn's status (queued, done, failed, skipped) and, once done, "
        "what came of it. Only turns of this token's user.",
        responses={200: TurnSerializer, **error_responses(401, 403, 404, 429)},
    )
    def get(self, request: Request, turn_id: int) -> Response:
        turn = get_object_or_404(Turn, pk=turn_id, user=request.user)
        return Response(turn_body(turn))
