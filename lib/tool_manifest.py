"""The tool manifest: every `/api/v1/tools/<name>` endpoint in OpenAI function-calling format.

It is cut from the OpenAPI schema drf-spectacular generates, so each tool's parameters
come from the very serializer its endpoint validates with.
"""

from __future__ import annotations

import functools
from typing import Any

from django.http import HttpRequest, JsonResponse
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from lib.api import error_body

TOOLS_PATH = "/api/v1/tools/"

# JSON Schema keywords worth passing on to a model; OpenAPI-only ones are dropped.
_KEEP = {
    "type",
    "description",
    "properties",
    "required",
    "items",
    "enum",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "default",
    "additionalProperties",
}


@functools.cache
def tool_manifest() -> list[dict[str, Any]]:
    """Every tool, grouped by what it works on: the schema's tag order (SPECTACULAR_SETTINGS
    "TAGS") decides the groups' order, and each description starts with its group's name, so
    a model never has to guess from a tool's name whether it acts on memories or documents
    (`memory_delete` deletes a document, `delete_memory` a memory)."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    groups = {tag["name"]: tag.get("description", "") for tag in schema.get("tags", [])}
    order = list(groups)
    ranked = []
    for path, item in schema["paths"].items():
        if not path.startswith(TOOLS_PATH) or "post" not in item:
            continue
        operation = item["post"]
        tag = (operation.get("tags") or [""])[0]
        rank = order.index(tag) if tag in order else len(order)
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        description = operation.get("description") or operation.get("summary", "")
        function = {
            "name": operation["operationId"],
            "description": _in_group(groups.get(tag, ""), description),
            "parameters": to_json_schema(body, components),
        }
        ranked.append((rank, {"type": "function", "function": function}))
    ranked.sort(key=lambda pair: pair[0])  # stable: path order within a group
    return [tool for _, tool in ranked]


def group_label(tag_description: str) -> str:
    """A tag's group name: its description up to the first colon ("Memories: …")."""
    label, colon, _ = tag_description.partition(":")
    return label.strip() if colon else ""


def _in_group(tag_description: str, description: str) -> str:
    label = group_label(tag_description)
    return f"{label} — {description}" if label else description


def tool_names() -> list[str]:
    return [tool["function"]["name"] for tool in tool_manifest()]


def to_json_schema(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI 3.0 schema object as plain JSON Schema: refs inlined, 3.0 quirks converted."""
    if "$ref" in schema:
        return to_json_schema(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    converted: dict[str, Any] = {}
    for keyword, value in schema.items():
        if keyword == "properties":
            value = {name: to_json_schema(sub, components) for name, sub in value.items()}
        elif keyword == "items":
            value = to_json_schema(value, components)
        elif keyword == "allOf" and len(value) == 1:
            converted.update(to_json_schema(value[0], components))
            continue
        elif keyword not in _KEEP:
            continue
        converted[keyword] = value
    # OpenAPI 3.0 marks exclusive bounds with booleans; JSON Schema puts the number there.
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if schema.get(exclusive) is True and bound in converted:
            converted[exclusive] = converted.pop(bound)
    if schema.get("nullable") and "type" in converted:
        converted["type"] = [converted["type"], "null"]
    if converted.get("type") == "object":
        converted.setdefault("properties", {})
    return converted


class FunctionSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.JSONField(help_text="JSON Schema of the tool's arguments.")


class ToolSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["function"])
    function = FunctionSerializer()


class ToolManifestApi(APIView):
    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []

    @extend_schema(
        operation_id="list_tools",
        tags=["manifest"],
        summary="The tools, in OpenAI function-calling format",
        description="Register these with an agent framework as they are; each tool is "
        "called with POST /api/v1/tools/<name> and its arguments as the JSON body.",
        responses={200: ToolSerializer(many=True)},
        examples=[
            OpenApiExample(
                "One tool",
                value={
                    "type": "function",
                    "function": {
                        "name": "delete_memory",
                        "description": "Delete the memory with this key.",
                        "parameters": {
                            "type": "object",
                            "properties": {"key": {"type": "string"}},
                            "required": ["key"],
                            "additionalProperties": False,
                        },
                    },
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        return Response(tool_manifest())


class UnknownToolApi(APIView):
    """Any /api/v1/tools/<name> that is not a tool: a 404 that lists the real ones."""

    permission_classes = [IsAuthenticated]

    @extend_schema(exclude=True)
    def post(self, request: Request, name: str) -> Response:
        message = f"Unknown tool '{name}'; the tools are {', '.join(tool_names())}."
        return Response(error_body("unknown_tool", message), status=404)

    get = post


def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Unknown /api/ paths answer in the API's error shape, not with an HTML page."""
    return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}."), status=404)
