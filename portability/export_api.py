"""`GET /api/v1/export`: the signed-in person's whole account as a zip
(portability/format.py). A browser session only: agents may not export."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from lib.api import error_response
from portability.export_views import export_response
from profiles.authentication import AgentTokenAuthentication

if TYPE_CHECKING:
    from rest_framework.request import Request

AGENTS_MAY_NOT_EXPORT = (
    "Agents may not export; the person signs in to Mnemo and uses Settings → "
    "Download everything (or this endpoint with their session)."
)


class SessionUserOnly(BasePermission):
    """A signed-in person's browser session; any token (agent or system) is refused."""

    message = AGENTS_MAY_NOT_EXPORT

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and request.auth is None)


class ExportApi(APIView):
    # The token scheme stays first so a bearer token is recognised (and refused with a
    # 403), and so an anonymous request gets a 401 with its WWW-Authenticate header.
    authentication_classes = [AgentTokenAuthentication, SessionAuthentication]
    permission_classes = [SessionUserOnly]

    @extend_schema(
        operation_id="export_account",
        summary="Download the whole account as a zip",
        description=(
            "The signed-in person's memories, their history, documents (their own and their "
            "agents' folders), document versions, work, activity, proposals and settings as "
            "one zip with a manifest of counts and SHA-256 digests (format_version 1). "
            "Streamed. Needs the browser session: agent and system tokens get a 403."
        ),
        auth=[{"cookieAuth": []}],
        responses={
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The export archive."
            ),
            401: error_response(
                "Not signed in.",
                "not_authenticated",
                "Authentication credentials were not provided.",
            ),
            403: error_response("Called with a token.", "forbidden", AGENTS_MAY_NOT_EXPORT),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        return export_response(request.user)
