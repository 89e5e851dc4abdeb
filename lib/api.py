"""The agent API's shared contract: one error shape, strict JSON fields, bounded bodies.

Every 4xx the API sends is `{"error": {"code", "message", "field"}}`; the service errors
of lib/errors.py map onto it, and so do DRF's own exceptions.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.settings import api_settings

from lib.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LLMNotConfigured,
    MemoryPaused,
    NotFound,
    SecretRefused,
    ServiceError,
)
from lib.http_errors import body_too_large_message, error_body
from lib.json_depth import MAX_JSON_DEPTH, json_nesting_exceeds

SERVICE_ERROR_STATUS = {
    InvalidInput: status.HTTP_400_BAD_REQUEST,
    NotFound: status.HTTP_404_NOT_FOUND,
    MemoryPaused: status.HTTP_409_CONFLICT,
    Conflict: status.HTTP_409_CONFLICT,
    Forbidden: status.HTTP_403_FORBIDDEN,
    SecretRefused: status.HTTP_422_UNPROCESSABLE_ENTITY,
    LLMNotConfigured: status.HTTP_503_SERVICE_UNAVAILABLE,
}


def service_error_status(error: ServiceError) -> int:
    """The status of the error's nearest class in SERVICE_ERROR_STATUS (a VersionConflict
    is a Conflict: 409); 400 for any other."""
    for cls in type(error).__mro__:
        if cls in SERVICE_ERROR_STATUS:
            return SERVICE_ERROR_STATUS[cls]
    return status.HTTP_400_BAD_REQUEST


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class Unavailable(exceptions.APIException):
    """503 `unavailable`; DRF's handler sends `wait` as Retry-After."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.wait = retry_after


class JSONTooDeep(exceptions.ParseError):
    """A body nesting arrays and objects deeper than MAX_JSON_DEPTH (code bad_json)."""


DRF_ERROR_CODES = {
    RequestTooLarge: "too_large",
    exceptions.ParseError: "bad_json",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "invalid_token",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.Throttled: "rate_limited",
    Unavailable: "unavailable",
}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler, answering in the API's one error shape."""
    if isinstance(exc, RequestDataTooBig):
        exc = _too_large()
    if isinstance(exc, ServiceError):
        return Response(
            error_body(exc.code, exc.message, exc.field), status=service_error_status(exc)
        )
    # Imported here: rest_framework.views reads DEFAULT_PARSER_CLASSES (this module's
    # LimitedJSONParser) when it loads, so importing it above made `import lib.api` fail
    # whenever lib.api came first.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        field, message = first_validation_error(exc.detail)
        response.data = error_body("invalid", message, field)
    elif isinstance(exc, Http404):
        response.data = error_body("not_found", "Not found.")
    else:
        code = _drf_code(exc)
        response.data = error_body(code, _message(exc, code))
    return response


def _drf_code(exc: Exception) -> str:
    for exc_type, code in DRF_ERROR_CODES.items():
        if isinstance(exc, exc_type):
            return code
    return "error"


def _message(exc: Exception, code: str) -> str:
    if isinstance(exc, exceptions.Throttled):
        return f"Too many requests for this token; retry in {int(exc.wait or 1)} seconds."
    if isinstance(exc, JSONTooDeep):
        return str(exc.detail)
    if isinstance(exc, exceptions.ParseError):
        return f"The request body is not valid JSON ({exc.detail})."
    if isinstance(exc, exceptions.NotAuthenticated):
        return "Send an API token as 'Authorization: Bearer <token>'."
    detail = getattr(exc, "detail", None)
    return str(detail) if detail else code.replace("_", " ").capitalize() + "."


def first_validation_error(detail: Any, path: tuple[str, ...] = ()) -> tuple[str | None, str]:
    """The first (field, message) in a DRF ValidationError detail, e.g. ("tags", "tags[0]: …")."""
    if isinstance(detail, dict):
        name, inner = next(iter(detail.items()))
        if name == api_settings.NON_FIELD_ERRORS_KEY:
            step: tuple[str, ...] = ()
        else:
            step = (f"[{name}]",) if isinstance(name, int) else (str(name),)
        return first_validation_error(inner, path + step)
    if isinstance(detail, list) and detail:
        if all(not isinstance(item, dict | list) for item in detail):
            return _located(path, str(detail[0]))
        for index, item in enumerate(detail):
            if item:
                return first_validation_error(item, (*path, f"[{index}]"))
    return _located(path, str(detail) or "Invalid input.")


def _located(path: tuple[str, ...], message: str) -> tuple[str | None, str]:
    if not path:
        return None, message
    where = path[0] + "".join(part if part.startswith("[") else f".{part}" for part in path[1:])
    return path[0], f"{where}: {message}"


class LimitedJSONParser(JSONParser):
    """JSON bodies up to MNEMO_API_MAX_BODY_BYTES; larger ones are a 413, not a memory spike."""

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: dict | None = None
    ) -> Any:
        limit = settings.MNEMO_API_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise _too_large()
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise _too_large()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise exceptions.ParseError("the body is not UTF-8") from error
        if json_nesting_exceeds(raw, MAX_JSON_DEPTH):
            raise JSONTooDeep(
                f"The JSON body nests arrays and objects more than {MAX_JSON_DEPTH} levels "
                f"deep; the limit is {MAX_JSON_DEPTH} levels."
            )
        try:
            return json.loads(text, parse_constant=_refuse_constant)
        except ValueError as error:
            raise exceptions.ParseError(str(error)) from error


def _too_large() -> RequestTooLarge:
    return RequestTooLarge(body_too_large_message())


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


# Strict JSON types: DRF's own fields accept "0.5" for a number, 1 for text and "yes"
# for a boolean. Agents get the type the schema promises or a 400 that names it.


def json_type(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "text"}
    names |= {list: "a list", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


class TextField(serializers.CharField):
    default_error_messages = {"not_text": "Must be text, not {type}."}

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("not_text", type=json_type(data))
        return super().to_internal_value(data)


class NumberField(serializers.FloatField):
    default_error_messages = {"not_number": "Must be a number, not {type}."}

    def to_internal_value(self, data: object) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("not_number", type=json_type(data))
        return super().to_internal_value(data)


class WholeNumberField(serializers.IntegerField):
    default_error_messages = {"not_integer": "Must be a whole number, not {type}."}

    def to_internal_value(self, data: object) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("not_integer", type=json_type(data))
        return super().to_internal_value(data)


class FlagField(serializers.BooleanField):
    default_error_messages = {"not_boolean": "Must be true or false, not {type}."}

    def to_internal_value(self, data: object) -> bool:
        if not isinstance(data, bool):
            self.fail("not_boolean", type=json_type(data))
        return data


class TextListField(serializers.ListField):
    default_error_messages = {"not_a_list": "Must be a list of text, not {input_type}."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", TextField(allow_blank=False))
        super().__init__(**kwargs)

    def to_internal_value(self, data: object) -> list[str]:
        if not isinstance(data, list):
            self.fail("not_a_list", input_type=json_type(data))
        return super().to_internal_value(data)


class ToolInput(serializers.Serializer):
    """A tool's request body: a JSON object with only the fields the tool declares."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise exceptions.ValidationError(
                    {
                        unknown[0]: [
                            f"Unknown field; this tool takes {', '.join(self.fields) or 'none'}."
                        ]
                    }
                )
        return super().to_internal_value(data)


def forbid_unknown_request_fields(result: dict, **_: Any) -> dict:
    """Schema hook: tool request bodies say `additionalProperties: false`, as ToolInput enforces."""
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            content = operation.get("requestBody", {}).get("content", {})
            for media in content.values():
                ref = media.get("schema", {}).get("$ref", "")
                name = ref.rsplit("/", 1)[-1]
                component = result.get("components", {}).get("schemas", {}).get(name)
                if component is not None and component.get("type") == "object":
                    component["additionalProperties"] = False
    return result


# Shared error responses for the schema.


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="A stable machine-readable code, e.g. `invalid`.")
    message = serializers.CharField(help_text="What was wrong, for a person or an agent.")
    field = serializers.CharField(
        allow_null=True, help_text="The request field at fault, when there is one."
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def error_response(description: str, code: str, message: str, field: str | None = None):
    return OpenApiResponse(
        ErrorSerializer,
        description=description,
        examples=[OpenApiExample(code, value=error_body(code, message, field), response_only=True)],
    )


ERROR_RESPONSES = {
    400: error_response(
        "Invalid input: bad JSON, a missing or wrongly typed field, a bad key or value.",
        "invalid",
        "Unknown entry kind 'facts' in key 'facts:tea'; expected one of fact, instruction, …",
        "key",
    ),
    401: error_response(
        "No token, an unknown token or a revoked one.",
        "invalid_token",
        "This token was revoked; ask the user for a new one.",
    ),
    404: error_response("No such memory (for this user).", "not_found", "No memory with key…"),
    403: error_response(
        "A system token calling a tool that needs an agent token.",
        "forbidden",
        "System tokens work only with global documents (memory_read, …); "
        "this tool needs an agent token.",
    ),
    409: error_response(
        "The user has paused memory (agent writes are refused until they resume it), or the "
        "thing changed since it was read.",
        "memory_paused",
        "Memory is paused by the user; agents cannot change it until resumed.",
    ),
    413: error_response(
        "The request body is over 4 MiB.", "too_large", "The request body is larger than 4096 KiB."
    ),
    422: error_response(
        "The text looks like a credential (an API key, a private key, a password, a card "
        "number, a bearer token, …): agents' writes never store one. The message names what "
        "it looks like, the field where it is. Nothing was written.",
        "secret_refused",
        "This looks like an OpenAI API key; Mnemo does not store credentials as memories.",
        "value",
    ),
    429: error_response(
        "Too many requests for this token; see the Retry-After header.",
        "rate_limited",
        "Too many requests for this token; retry in 12 seconds.",
    ),
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    return {code: ERROR_RESPONSES[code] for code in codes}
