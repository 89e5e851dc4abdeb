"""The agent-memory design's tools: memory_store (by default the agent's own note) and
memory_list_recent (its own notes, most used and newest first).

Each view is built as memory/write_api.py says: a strict serializer, one service or
selector, an output serializer, lib/api.py's one error shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from lib.api import FlagField, TextField, ToolInput, WholeNumberField, error_responses
from memory import selectors
from memory.api_fields import (
    _DATETIME,
    AUDIENCES,
    ROW_EXAMPLE,
    TOOL_TAG,
    MemorySerializer,
    ProposalSerializer,
    _occurred_at_field,
    _pending_review,
    _session_field,
    _tags_field,
    memory_body,
    notes_field,
    with_notes,
    written_notes,
)
from memory.api_guards import _refuse_hidden_tags, _refuse_unreadable_duplicate
from memory.entries import memory_store
from memory.keys import ENTRY_KINDS
from memory.models import MAX_VALUE_LENGTH, Memory, Source
from profiles.tool_base import ToolApi

if TYPE_CHECKING:
    from rest_framework.request import Request


STORE_STATUSES = ["created", "duplicate", "unchanged", "pending_review"]


MAX_RECENT = 50


class MemoryStoreInput(ToolInput):
    content = TextField(
        max_length=MAX_VALUE_LENGTH,
        help_text=f"What to remember, 1–{MAX_VALUE_LENGTH} characters of plain text: one "
        "self-contained statement. The key is made from its first words.",
        error_messages={
            "max_length": f"Longer than {MAX_VALUE_LENGTH} characters; shorten the content."
        },
    )
    category = serializers.ChoiceField(
        choices=ENTRY_KINDS,
        help_text="What kind of memory: preference (how the user likes things), decision (a "
        "choice made), discovery (something found out), pattern (something that recurs), "
        "task (something to do), bugfix (a problem and its fix), fact (about the user or "
        "their world), instruction (how the user wants you to work).",
    )
    tags = _tags_field()
    occurred_at = _occurred_at_field()
    session = _session_field()
    share = FlagField(
        required=False,
        default=False,
        help_text="false (default): your own note, which only you (and the user) see, and "
        "which never waits for review. true: into the user's memory, which the agents the "
        "user allows read, under the user's review rules.",
    )


class StoreResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=STORE_STATUSES,
        help_text="created (201): stored under `key`. duplicate: a memory of the category "
        "already says it; `key` is that one: no memory was added, and the content is kept in "
        "its history. unchanged: this content is "
        "stored under `key` already. pending_review (202): it waits for the user as "
        "`proposal`.",
    )
    key = serializers.CharField(
        help_text="The memory's key: the one written, the one that already says it, or the "
        "one the proposal would add or change."
    )
    memory = MemorySerializer(required=False, help_text="The memory written or found.")
    proposal = ProposalSerializer(required=False)
    similarity = serializers.FloatField(
        required=False, help_text="For a duplicate: how near in meaning (1: the same text)."
    )
    notes = notes_field()


class MemoryStoreApi(ToolApi):
    @extend_schema(
        operation_id="memory_store",
        tags=[TOOL_TAG],
        summary="Store something new, keyed by its content",
        description="Store a new memory without choosing a key: it is made from the "
        "content's first words (numbered if taken), and adding never replaces a memory. "
        "By default it is your own note (audience own): only you and the user see it, it "
        "never waits for review, and the same content again is unchanged. With share: true "
        "it goes into the user's memory under the rules that follow. "
        "Returns the key (201). If a memory of the category already says it, no memory is "
        "added: the content is kept in that one's history and you get its key (200, status "
        "duplicate); the same content again is 200, status unchanged. Content that adds "
        "something to a near memory an agent wrote is stored as its own (201). If it adds to "
        "a near memory the user stated, or the user reviews agents' new memories, it waits "
        "for the user (202, status pending_review, with the proposal). Use update_memory to "
        "change a memory you know the key of. A credential "
        "(an API key, a password, a card number, …) is never stored: 422 secret_refused. "
        'Pass occurred_at when what it says happened at another time than now ("last '
        'Tuesday" as a date) and session to say which conversation you are in.',
        request=MemoryStoreInput,
        responses={
            201: StoreResultSerializer,
            200: StoreResultSerializer,
            202: StoreResultSerializer,
            **error_responses(400, 401, 403, 409, 413, 422, 429),
        },
        examples=[
            OpenApiExample(
                "Store a decision",
                value={
                    "content": "The team chose PostgreSQL for the event store",
                    "category": "decision",
                    "tags": ["database"],
                    "occurred_at": "2026-11-18",
                    "session": "chat-42",
                },
                request_only=True,
            ),
            OpenApiExample(
                "Stored",
                value={
                    "status": "created",
                    "key": "decision:the-team-chose-postgresql-for-the-event-store",
                    "memory": {
                        **ROW_EXAMPLE,
                        "audience": "own",
                        "key": "decision:the-team-chose-postgresql-for-the-event-store",
                        "kind": "decision",
                        "value": "The team chose PostgreSQL for the event store",
                        "tags": ["database"],
                        "occurred_at": "2026-11-18T00:00:00Z",
                    },
                },
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(MemoryStoreInput)
        if data.get("share", True):  # into the user's memory: the read rule binds it
            _refuse_hidden_tags(request, data)
        result = memory_store(
            user=request.user,
            actor=self.actor(),
            owner_agent=None if data["share"] else request.auth.agent,
            kind=data["category"],
            text=data["content"],
            tags=data.get("tags"),
            occurred_at=data.get("occurred_at"),
            session=data.get("session"),
        )
        if result.proposal is not None:
            return _pending_review(result.proposal, key=result.key)
        if result.memory is not None:
            _refuse_unreadable_duplicate(request, result.memory)
        body: dict[str, Any] = {"status": result.status, "key": result.key}
        if result.memory is not None:
            body["memory"] = memory_body(result.memory)
        if result.similarity is not None:
            body["similarity"] = round(result.similarity, 4)
        if result.status == "created":
            with_notes(body, written_notes(request.data))
        created = result.status == "created"
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ListRecentInput(ToolInput):
    limit = WholeNumberField(
        required=False,
        min_value=1,
        max_value=MAX_RECENT,
        default=10,
        help_text=f"How many, 1–{MAX_RECENT}; default 10.",
    )


class RecentMemorySerializer(serializers.Serializer):
    key = serializers.CharField()
    kind = serializers.CharField(help_text="The entry kind: preference, decision, fact, …")
    text = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    source = serializers.ChoiceField(choices=Source.choices)
    occurred_at = serializers.DateTimeField(
        help_text="When what it says happened or was said (ISO 8601, UTC)."
    )
    session = serializers.CharField(help_text="The conversation it came from, or empty.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    audience = serializers.ChoiceField(choices=AUDIENCES, help_text="own: your own note.")


class RecentPageSerializer(serializers.Serializer):
    results = RecentMemorySerializer(many=True)


class MemoryListRecentApi(ToolApi):
    @extend_schema(
        operation_id="memory_list_recent",
        tags=[TOOL_TAG],
        summary="Your most recent notes",
        description="Your own notes (memory_store's; not the user's memory), with their "
        f"dates: first the ones used {selectors.SCRATCHPAD_USES} times or more (read with "
        "get_memory or found by search_memory) or pinned with promote_memory, then those "
        f"added or changed in the last {selectors.SCRATCHPAD_RECENT_DAYS} days, newest "
        f"first. limit 1–{MAX_RECENT}, default 10. Listing does not count as a use.",
        request=ListRecentInput,
        responses={200: RecentPageSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[OpenApiExample("Last five", value={"limit": 5}, request_only=True)],
    )
    def post(self, request: Request) -> Response:
        limit = self.validated(ListRecentInput)["limit"]
        agent = self.request.auth.agent
        memories = selectors.memory_list_recent(user=request.user, agent=agent)[:limit]
        return Response({"results": [_recent_body(memory) for memory in memories]})


def _recent_body(memory: Memory) -> dict[str, Any]:
    """A memory as RecentMemorySerializer renders it."""
    return {
        "key": memory.key,
        "kind": memory.kind,
        "text": memory.value,
        "tags": [str(tag) for tag in memory.tags],
        "source": str(memory.source),
        "occurred_at": _DATETIME.to_representation(memory.occurred_at),
        "session": memory.session,
        "created_at": _DATETIME.to_representation(memory.created_at),
        "updated_at": _DATETIME.to_representation(memory.updated_at),
        "audience": memory.audience,
    }
