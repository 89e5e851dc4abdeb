"""The agent API's tools for the well-known files, which take no path: append_daily_memory
(a line in today's daily log) and append_agent_memory / agent_memory_get (the calling
agent's own AGENT_MEMORY.md, or a system token's in the global scope), on
context/well_known.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from context import services, well_known
from context.apis import WorkspaceToolApi, written_answer
from context.serializers import TOOL_TAG, WrittenSerializer, content_field, document_errors
from context.workspace import workspace_append_daily
from lib.api import ToolInput

if TYPE_CHECKING:
    from rest_framework.request import Request


SYSTEM_AGENT_MEMORY_HELP = (
    "A system token has one AGENT_MEMORY.md of its own, in the company (global) documents: "
    "no user's or agent's notes, and no agent reads it through these two tools."
)


class ContentInput(ToolInput):
    content = content_field(
        "One line of text to add: a line break anywhere in it is refused (400), since a "
        "second line could pass for a heading or a section. Call once per line, or use "
        "memory_append for a block of text."
    )


class NoInput(ToolInput):
    pass


class AgentMemorySerializer(serializers.Serializer):
    path = serializers.CharField()
    exists = serializers.BooleanField(help_text="false until the agent first appends.")
    content = serializers.CharField(allow_blank=True)
    updated_at = serializers.DateTimeField(allow_null=True)


# An empty serializer would leave the operation without a request body in the schema.
NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


class DailyAppendApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="append_daily_memory",
        tags=[TOOL_TAG],
        summary="Add a line to today's daily log",
        description="Adds '- HH:MM content' to daily/YYYY-MM-DD.md, the date and time in the "
        "user's timezone (UTC when unset, and for system tokens). content is one line: a "
        "line break in it is refused (400) and nothing is written.",
        request=ContentInput,
        responses={200: WrittenSerializer, **document_errors(400, 401, 409, 413, 422, 429)},
        examples=[
            OpenApiExample("Log", value={"content": "Sent the weekly report"}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        content = self.validated(ContentInput)["content"]
        caller = self.caller()
        document = workspace_append_daily(caller=caller, content=content)
        return Response(written_answer(caller, document))


class AgentMemoryAppendApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="append_agent_memory",
        tags=[TOOL_TAG],
        summary="Add to your private notes about this user",
        description="Adds a line to agents/<your agent name>/AGENT_MEMORY.md, your own "
        "notes on working with this user. Other agents cannot read them; the user can. "
        "content is one line (a line break is refused with 400). "
        f"{SYSTEM_AGENT_MEMORY_HELP}",
        request=ContentInput,
        responses={
            200: WrittenSerializer,
            **document_errors(400, 401, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample(
                "Note",
                value={"content": "Ask before booking anything over 100 EUR."},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        content = self.validated(ContentInput)["content"]
        caller = self.caller()
        document = well_known.append_agent_memory(
            agent=caller.agent, content=content, actor=caller.actor
        )
        return Response(written_answer(caller, document))


class AgentMemoryGetApi(WorkspaceToolApi):
    @extend_schema(
        operation_id="agent_memory_get",
        tags=[TOOL_TAG],
        summary="Read your private notes about this user",
        description="Your agents/<your agent name>/AGENT_MEMORY.md; exists is false and "
        f"content empty until you first append. {SYSTEM_AGENT_MEMORY_HELP}",
        request={"application/json": NO_ARGUMENTS},
        responses={200: AgentMemorySerializer, **document_errors(400, 401, 413, 429)},
        examples=[OpenApiExample("Read", value={}, request_only=True)],
    )
    def post(self, request: Request) -> Response:
        self.validated(NoInput)
        caller = self.caller()
        document = well_known.agent_memory_get(agent=caller.agent)
        body = {
            "path": f"{caller.private_folder}{services.AGENT_MEMORY_PATH}",
            "exists": document is not None,
            "content": document.body if document else "",
            "updated_at": document.updated_at if document else None,
        }
        return Response(AgentMemorySerializer(body).data)
