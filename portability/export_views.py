"""The Settings page's "Download everything": the account's export, streamed as a zip."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, StreamingHttpResponse
from django.views.decorators.http import require_http_methods

from portability.export import export_chunks, export_filename

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


def export_response(user: AbstractBaseUser) -> StreamingHttpResponse:
    """The user's export as a download. It streams: the browser's download shows the
    progress, and the server never holds the whole archive."""
    response = StreamingHttpResponse(export_chunks(user), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{export_filename(user)}"'
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # a proxy in front should pass chunks on at once
    return response


@login_required
@require_http_methods(["GET"])
def export_download(request: HttpRequest) -> StreamingHttpResponse:
    return export_response(request.user)
