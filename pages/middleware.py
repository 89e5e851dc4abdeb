"""Times on pages in the user's own zone (issue 18): the zone of their `timezone` memory
is activated for the request, so `{{ moment|date }}`, `{% now %}` and forms show local
time, and the base template names it once per page. The API is not affected: agents
authenticate with tokens after this runs, and the API writes ISO 8601 with an offset."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from memory.selectors import user_zone

NOT_PAGES = ("/api/", "/mcp")


class UserTimezoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith(NOT_PAGES):
            # Agents' calls: they show no times, and looking at request.user here would
            # load the session machinery on every tool call (bench/mcp.py saw ~3 ms).
            return self.get_response(request)
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return self.get_response(request)
        timezone.activate(user_zone(user))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
