"""The agent API for work: create_work, list_work, get_work and update_work, for the
calling agent's user.

Each view validates its JSON body with a strict serializer, calls one service or selector
of work/, and answers with the item as WorkItemSerializer describes it. Bodies are
Markdown, stored as sent; the Work pages sanitize them when they render (lib/markdown.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from lib.api import TextField, TextListField, ToolInput, WholeNumberField, error_responses
from lib.tags import TAG_RULE, TYPED_TAG_LENGTH, tag_notes
from profiles.tool_base import ToolApi
from work import selectors, services
from work.models import (
    MAX_BODY_LENGTH,
    MAX_TAGS,
    MAX_TITLE_LENGTH,
    WorkItem,
    WorkKind,
    WorkStatus,
)

if TYPE_CHECKING:
    from rest_framework.request import Request

TOOL_TAG = "work tools"
# Heartbeat findings are the heartbeat's (learning/), never an agent's.
AGENT_KINDS = [kind for kind in WorkKind.values if kind != WorkKind.HEARTBEAT]
MAX_LIST = 100
DEFAULT_LIST = 20
UPDATE_STATUSES = ["updated", "unchanged"]

KIND_HELP = (
    "report (findings, a write-up), draft (something for the user to send or finish), "
    "summary (of a meeting, a thread, a document) or other."
)


def _title_field(**kwargs: Any) -> TextField:
    return TextField(
        max_length=MAX_TITLE_LENGTH,
        help_text=f"A short title, 1–{MAX_TITLE_LENGTH} characters.",
        **kwargs,
    )


def _body_field(**kwargs: Any) -> TextField:
    return TextField(
        max_length=MAX_BODY_LENGTH,
        trim_whitespace=False,
        help_text=f"The work itself in Markdown, up to {MAX_BODY_LENGTH:,} characters. Shown "
        "to the user on the Work page; raw HTML and scripts are removed there.",
        error_messages={
            "max_length": f"Longer than {MAX_BODY_LENGTH:,} characters; shorten the body."
        },
        **kwargs,
    )


def _tags_field() -> TextListField:
    return TextListField(
        child=TextField(max_length=TYPED_TAG_LENGTH, allow_blank=False),
        max_length=MAX_TAGS,
        required=False,
        help_text=(
            f"Up to {MAX_TAGS} labels, stored as {TAG_RULE}: 'Morning Routine' is kept as "
            "'morning-routine', 'café' as 'café'; a label with no letter or digit (an emoji "
            "alone) is left out, and the answer's `notes` say so."
        ),
    )


class WorkItemSerializer(serializers.Serializer):
    """A work item as agents see it (get_work, create_work and update_work add the body)."""

    id = serializers.IntegerField()
    title = serializers.CharField()
    kind = serializers.ChoiceField(choices=WorkKind.choices)
    status = serializers.ChoiceField(choices=WorkStatus.choices)
    tags = serializers.ListField(child=serializers.CharField())
    agent = serializers.CharField(
        allow_null=True, help_text="The agent that wrote it; null for the heartbeat's."
    )
    url = serializers.CharField(help_text="Its page, relative to Mnemo's address.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class WorkItemWithBodySerializer(WorkItemSerializer):
    body = serializers.CharField(help_text="Markdown.")


_DATETIME = serializers.DateTimeField()


def work_body(item: WorkItem, *, with_body: bool = True) -> dict[str, Any]:
    """A work item as WorkItemSerializer (with the body: WorkItemWithBodySerializer) renders it."""
    body: dict[str, Any] = {
        "id": item.pk,
        "title": item.title,
        "kind": str(item.kind),
        "status": str(item.status),
        "tags": [str(tag) for tag in item.tags],
        "agent": item.agent.name if item.agent else None,
        "url": item.get_absolute_url(),
        "created_at": _DATETIME.to_representation(item.created_at),
        "updated_at": _DATETIME.to_representation(item.updated_at),
    }
    if with_body:
        body["body"] = item.body
    return body


ITEM_EXAMPLE = {
    "id": 42,
    "title": "Competitor pricing, June",
    "kind": "report",
    "status": "done",
    "tags": ["pricing"],
    "agent": "assistant",
    "url": "/work/42/",
    "created_at": "2025-06-03T09:00:00Z",
    "updated_at": "2025-06-03T09:00:00Z",
    "body": "# Competitor pricing\n\n- Acme raised its base plan to $29.\n",
}


class CreateWorkInput(ToolInput):
    title = _title_field()
    body = _body_field()
    kind = serializers.ChoiceField(choices=AGENT_KINDS, help_text=KIND_HELP)
    tags = _tags_field()


TAG_NOTES_HELP = (
    "Present when a tag was kept other than as written, one line each: \"'Morning Routine' "
    'saved as #morning-routine", "\'🍣\' left out: a tag needs a letter or a digit".'
)


def _tag_notes_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(), required=False, help_text=TAG_NOTES_HELP
    )


def _with_tag_notes(body: dict[str, Any], raw: object) -> dict[str, Any]:
    """`body` with `notes` on the tags of the request's JSON (`raw`), when there are any."""
    tags = raw.get("tags") if isinstance(raw, dict) else None
    texts = isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)
    if texts and (notes := tag_notes(tags)):
        body["notes"] = notes
    return body


class WorkResultSerializer(serializers.Serializer):
    work = WorkItemWithBodySerializer()
    notes = _tag_notes_field()


class WorkCreateApi(ToolApi):
    @extend_schema(
        operation_id="create_work",
        tags=[TOOL_TAG],
        summary="Hand the user a piece of work",
        description="Save something you produced for the user (a report, a draft, a summary) "
        "as Markdown; it appears on their Work page, newest first, under your agent's name, "
        "status done. Returns the item with its id (201); change it later with update_work.",
        request=CreateWorkInput,
        responses={201: WorkResultSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[
            OpenApiExample(
                "Report",
                value={
                    "title": "Competitor pricing, June",
                    "body": "# Competitor pricing\n\n- Acme raised its base plan to $29.\n",
                    "kind": "report",
                    "tags": ["pricing"],
                },
                request_only=True,
            ),
            OpenApiExample("Created", value={"work": ITEM_EXAMPLE}, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(CreateWorkInput)
        item = services.work_create(user=request.user, actor=self.actor(), **data)
        body = _with_tag_notes({"work": work_body(item)}, request.data)
        return Response(body, status=status.HTTP_201_CREATED)


class ListWorkInput(ToolInput):
    kind = serializers.ChoiceField(
        choices=WorkKind.choices,
        required=False,
        help_text="Only this kind; heartbeat lists the findings of the user's heartbeat.",
    )
    limit = WholeNumberField(
        required=False,
        min_value=1,
        max_value=MAX_LIST,
        default=DEFAULT_LIST,
        help_text=f"How many, 1–{MAX_LIST} (default {DEFAULT_LIST}).",
    )


class WorkPageSerializer(serializers.Serializer):
    results = WorkItemSerializer(many=True)


class WorkListApi(ToolApi):
    @extend_schema(
        operation_id="list_work",
        tags=[TOOL_TAG],
        summary="The user's work items, newest first",
        description="The work items of the user (every agent's, and the heartbeat's "
        "findings), newest first, without their bodies: read one with get_work. Filter by "
        f"kind; limit 1–{MAX_LIST}, default {DEFAULT_LIST}.",
        request=ListWorkInput,
        responses={200: WorkPageSerializer, **error_responses(400, 401, 403, 413, 429)},
        examples=[
            OpenApiExample("Findings", value={"kind": "heartbeat", "limit": 5}, request_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(ListWorkInput)
        items = selectors.work_list(user=request.user, kind=data.get("kind"))[: data["limit"]]
        return Response({"results": [work_body(item, with_body=False) for item in items]})


class WorkIdInput(ToolInput):
    id = WholeNumberField(min_value=1, help_text="The work item's id.")


class WorkGetApi(ToolApi):
    @extend_schema(
        operation_id="get_work",
        tags=[TOOL_TAG],
        summary="One work item with its body",
        description="A work item of the user by id, with its Markdown body. 404 if the user "
        "has none with that id.",
        request=WorkIdInput,
        responses={200: WorkResultSerializer, **error_responses(400, 401, 403, 404, 413, 429)},
        examples=[OpenApiExample("Read", value={"id": 42}, request_only=True)],
    )
    def post(self, request: Request) -> Response:
        pk = self.validated(WorkIdInput)["id"]
        return Response({"work": work_body(selectors.work_get_or_404(user=request.user, pk=pk))})


class UpdateWorkInput(WorkIdInput):
    title = _title_field(required=False)
    body = _body_field(required=False)
    kind = serializers.ChoiceField(choices=AGENT_KINDS, required=False, help_text=KIND_HELP)
    status = serializers.ChoiceField(
        choices=WorkStatus.choices,
        required=False,
        help_text="in_progress (still being worked on), done, or archived (kept, out of the way).",
    )
    tags = _tags_field()


class UpdateWorkResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=UPDATE_STATUSES,
        help_text="updated, or unchanged when every field given already had that value.",
    )
    changed = serializers.ListField(
        child=serializers.CharField(), help_text="The fields that changed."
    )
    work = WorkItemWithBodySerializer(help_text="The item as it is now.")
    notes = _tag_notes_field()


class WorkUpdateApi(ToolApi):
    @extend_schema(
        operation_id="update_work",
        tags=[TOOL_TAG],
        summary="Change a work item",
        description="Change the title, body, kind, status or tags of one of the user's work "
        "items, whichever agent wrote it (the change is recorded under your name); fields "
        "left out stay as they are, tags given replace the tags. A heartbeat finding keeps "
        "its kind, but you may set its status (e.g. done once handled). 404 if the user has "
        "no item with that id.",
        request=UpdateWorkInput,
        responses={
            200: UpdateWorkResultSerializer,
            **error_responses(400, 401, 403, 404, 413, 429),
        },
        examples=[
            OpenApiExample(
                "Finish", value={"id": 42, "status": "done", "tags": ["pricing"]}, request_only=True
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.validated(UpdateWorkInput)
        pk = data.pop("id")
        result = services.work_update(user=request.user, pk=pk, actor=self.actor(), **data)
        body = {
            "status": "updated" if result.changed else "unchanged",
            "changed": result.changed,
            "work": work_body(result.item),
        }
        return Response(_with_tag_notes(body, request.data))
