"""The base view of every agent tool: it acts as the token's agent (profiles/authentication.py),
so it lives here above activity/ rather than in lib/ (kept apart from lib/api.py, which DRF's
settings import)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework.views import APIView

from activity.actors import Actor

if TYPE_CHECKING:
    from rest_framework.request import Request

    from lib.api import ToolInput


class ToolApi(APIView):
    """A tool: POST a JSON object, get JSON back. Acts as the token's agent."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # A body sent without a Content-Type is read as JSON rather than ignored.
        if request.META.get("CONTENT_LENGTH", "0") not in ("", "0") and not request.content_type:
            request._request.META["CONTENT_TYPE"] = "application/json"
        super().initial(request, *args, **kwargs)

    def actor(self) -> Actor:
        return Actor.for_agent(self.request.auth.agent)

    def validated(self, serializer_class: type[ToolInput]) -> dict[str, Any]:
        serializer = serializer_class(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data
