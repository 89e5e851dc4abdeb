"""The Settings page's "Download everything": the account's export prepared in the
background with a progress bar (then downloaded), or streamed at once as a zip."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods, require_POST

from lib.errors import ServiceError
from lib.pages import HtmxHttpRequest, render_page
from portability.export import export_chunks, export_filename
from portability.exporting import KEEP_FOR, export_job_create
from portability.models import ExportJob

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


@login_required
@require_POST
def export_start(request: HttpRequest) -> HttpResponse:
    """Prepare the export in the background and open its page."""
    try:
        job = export_job_create(user=request.user)
    except ServiceError as error:
        messages.info(request, error.message)
        running = ExportJob.objects.filter(user=request.user).first()
        return redirect(running.url() if running else "pages:settings")
    return redirect(job.url())


def _get_job_for_user(request: HttpRequest, pk: int) -> ExportJob:
    job = ExportJob.objects.filter(pk=pk, user=request.user).first()
    if job is None:
        raise Http404("No such export.")
    return job


@login_required
@require_http_methods(["GET"])
def export_job(request: HtmxHttpRequest, pk: int) -> TemplateResponse:
    job = _get_job_for_user(request, pk)
    context = {"job": job, "keep_hours": int(KEEP_FOR.total_seconds() // 3600)}
    return render_page(request, "portability/export_job.html", context, partial="progress")


@login_required
@require_http_methods(["GET"])
def export_job_download(request: HttpRequest, pk: int) -> FileResponse:
    job = _get_job_for_user(request, pk)
    if not job.downloadable:
        raise Http404("This export is not ready, or its file has expired.")
    response = FileResponse(
        job.file.open("rb"), as_attachment=True, filename=job.filename or "mnemo-export.zip"
    )
    response["Cache-Control"] = "no-store"
    return response
