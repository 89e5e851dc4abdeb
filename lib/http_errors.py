"""How Mnemo answers a request that went wrong, and the caching header every answer carries.

Under /api/ and /mcp an error is the API's one shape, `{"error": {"code", "message",
"field"}}`; anywhere else it is a small styled page (templates/errors/). Both are made
without the database, the session or request.user, so they still work while the database
is down:

- `refusal()`: requests lib/asgi.py turns away before Django (414 URL, 413 body, 400
  a body that ended early).
- `bad_request`, `permission_denied`, `page_not_found`, `server_error`: Django's
  handler400/403/404/500 (config/urls.py); `csrf_failure` is CSRF_FAILURE_VIEW.
- A database that cannot be reached (anywhere in the request: session, sign-in, a view,
  DRF) reaches handler500 as OperationalError or InterfaceError; `server_error` answers
  503 with Retry-After instead of 500. So does a cache (Valkey/Redis) that cannot be
  reached, wherever a request touches it (the API's rate limit decides for itself first:
  profiles/throttling.py). (With MNEMO_DEBUG on, Django shows its debug page instead of
  any handler500.)
- `NoStoreMiddleware`: `Cache-Control: no-store` on every answer Django makes (pages and
  the API show a user's memory); static files are served before it and keep theirs.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.cache import patch_cache_control
from django.utils.csp import build_policy
from django.utils.html import escape
from psycopg import InterfaceError as PsycopgInterfaceError
from psycopg import OperationalError as PsycopgOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lib.asgi import MAX_URL_BYTES

logger = logging.getLogger(__name__)

# While the database is unreachable, clients are asked to come back after this long.
DATABASE_RETRY_AFTER_SECONDS = 5
DATABASE_DOWN_MESSAGE = (
    f"The database is unreachable right now; retry in {DATABASE_RETRY_AFTER_SECONDS} seconds."
)
# Django's wrappers, and psycopg's own for code that talks to psycopg directly.
_DATABASE_DOWN = (
    OperationalError,
    InterfaceError,
    PsycopgOperationalError,
    PsycopgInterfaceError,
)
# While the cache (Valkey/Redis: the rate limit's counters) is unreachable, likewise.
CACHE_RETRY_AFTER_SECONDS = 5
CACHE_DOWN_MESSAGE = (
    f"Mnemo's cache is unreachable right now; retry in {CACHE_RETRY_AFTER_SECONDS} seconds."
)
# What Django's Redis cache raises while the server is down, restarting (a refused
# connection) or still loading its data (BusyLoadingError is a ConnectionError).
_CACHE_DOWN = (RedisConnectionError, RedisTimeoutError)

# Each status's page title; templates/errors/<status>.html adds advice under the message.
PAGES = {
    400: "Bad request",
    403: "Not allowed",
    404: "Page not found",
    413: "Too much at once",
    414: "Address too long",
    500: "Something went wrong",
    503: "Mnemo is unavailable",
}


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The API's one error shape (lib/api.py answers with it too)."""
    return {"error": {"code": code, "message": message, "field": field}}


def is_api_path(path: str) -> bool:
    return path.startswith(("/api/", "/mcp"))


def body_too_large_message() -> str:
    return f"The request body is larger than {settings.MNEMO_API_MAX_BODY_BYTES // 1024} KiB."


def url_too_long_message() -> str:
    return f"The URL is longer than {MAX_URL_BYTES} bytes."


def incomplete_body_message() -> str:
    return "The request body ended before it was complete; nothing was done. Send it again."


# What lib/asgi.py refuses before Django, by status: (code, message).
REFUSALS: dict[int, tuple[str, Callable[[], str]]] = {
    400: ("incomplete_body", incomplete_body_message),
    413: ("too_large", body_too_large_message),
    414: ("url_too_long", url_too_long_message),
}


def render_error_page(status: int, message: str) -> str:
    """The styled page for `status`, made from a standalone template (no request, no DB)."""
    title = PAGES.get(status, "Something went wrong")
    context = {"status": status, "title": title, "message": message}
    try:
        return render_to_string([f"errors/{status}.html", "errors/base.html"], context)
    except Exception:  # an error page must always answer; log why the styled one failed
        logger.exception("Could not render the %s error page", status)
        title, message = escape(title), escape(message)
        return (
            f"<!doctype html><html lang=en><meta charset=utf-8><title>{status} {title}</title>"
            f"<h1>{title}</h1><p>{message}</p><p><a href=/>Mnemo</a></p></html>"
        )


def error_answer(
    request: HttpRequest,
    status: int,
    code: str,
    message: str,
    *,
    retry_after: int | None = None,
) -> HttpResponse:
    """`{"error": …}` JSON under /api/ and /mcp, the styled page elsewhere."""
    response: HttpResponse
    if is_api_path(request.path):
        response = JsonResponse(error_body(code, message), status=status)
    else:
        response = HttpResponse(
            render_error_page(status, message),
            status=status,
            content_type="text/html; charset=utf-8",
        )
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def refusal(path: str, status: int) -> tuple[int, list, bytes]:
    """(status, ASGI headers, body) for a request refused at the door, before Django."""
    code, message_for = REFUSALS[status]
    message = message_for()
    if is_api_path(path):
        body = json.dumps(error_body(code, message)).encode()
        return status, [(b"content-type", b"application/json")], body
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"x-content-type-options", b"nosniff"),
        (b"cache-control", b"no-store"),
    ]
    if settings.SECURE_CSP:
        headers.append((b"content-security-policy", build_policy(settings.SECURE_CSP).encode()))
    return status, headers, render_error_page(status, message).encode()


def database_unavailable(error: BaseException | None) -> bool:
    """Whether this error, or one it came from, says the database cannot be reached."""
    return _caused_by(error, _DATABASE_DOWN)


def cache_unavailable(error: BaseException | None) -> bool:
    """Whether this error, or one it came from, says the cache cannot be reached."""
    return _caused_by(error, _CACHE_DOWN)


def _caused_by(error: BaseException | None, kinds: tuple[type[BaseException], ...]) -> bool:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, kinds):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


# Django's error handlers (config/urls.py).


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler400: a form body over the limit is a 413; any other bad request a 400."""
    if isinstance(exception, RequestDataTooBig):
        return error_answer(request, 413, "too_large", body_too_large_message())
    return error_answer(
        request, 400, "bad_request", "The request could not be understood; check it and retry."
    )


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_answer(request, 403, "forbidden", "You are not allowed to do that.")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_answer(request, 404, "not_found", "There is nothing at this address.")


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 with Retry-After while the database or the cache is unreachable,
    else a 500.

    Django calls it while handling the exception, so sys.exc_info() names it.
    """
    error = sys.exc_info()[1]
    if database_unavailable(error):
        return error_answer(
            request,
            503,
            "unavailable",
            DATABASE_DOWN_MESSAGE,
            retry_after=DATABASE_RETRY_AFTER_SECONDS,
        )
    if cache_unavailable(error):
        return error_answer(
            request,
            503,
            "unavailable",
            CACHE_DOWN_MESSAGE,
            retry_after=CACHE_RETRY_AFTER_SECONDS,
        )
    return error_answer(
        request, 500, "server_error", "Something went wrong on our side; it has been logged."
    )


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a form that expired or was posted from another site."""
    return error_answer(
        request,
        403,
        "csrf_failed",
        "This form expired or was sent from another site. Go back, reload the page and try again.",
    )


class NoStoreMiddleware:
    """`Cache-Control: no-store` on every answer Django makes: they show a user's memory.

    Goes after WhiteNoise, which serves static files (cacheable) without calling it. A
    view's own stricter header (`no-store`, never_cache) is kept as it is.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        directives = response.get("Cache-Control", "").replace(" ", "").lower().split(",")
        if "no-store" not in directives:
            patch_cache_control(response, no_store=True)
        return response
