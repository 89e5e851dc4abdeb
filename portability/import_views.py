"""The import pages: Settings → Import (upload a file, choose the format and the mode) and
one page per job with its progress bar (polled by htmx every second while it runs) and,
when it ends, its summary."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods

from lib.errors import ServiceError
from lib.pages import HtmxHttpRequest, render_page
from portability.importing import MAX_UPLOAD_BYTES, import_job_create
from portability.models import ImportJob, ImportKind, ImportMode

RECENT_JOBS = 10


class ImportForm(forms.Form):
    file = forms.FileField()
    kind = forms.ChoiceField(choices=ImportKind.choices, initial=ImportKind.MNEMO)
    mode = forms.ChoiceField(
        choices=ImportMode.choices, initial=ImportMode.MERGE, widget=forms.RadioSelect
    )
    confirm_replace = forms.BooleanField(required=False)

    def clean(self) -> dict:
        data = super().clean()
        if data.get("mode") == ImportMode.REPLACE:
            if data.get("kind") != ImportKind.MNEMO:
                self.add_error(
                    "mode", "Replace is for a Mnemo export; other tools' memories merge."
                )
            elif not data.get("confirm_replace"):
                self.add_error(
                    "confirm_replace",
                    "Replace deletes your memories, documents and work items first: tick the "
                    "box to confirm.",
                )
        upload = data.get("file")
        if upload is not None and upload.size > MAX_UPLOAD_BYTES:
            self.add_error("file", f"The file is larger than {MAX_UPLOAD_BYTES:,} bytes.")
        return data


def _get_job_for_user(request: HtmxHttpRequest, pk: int) -> ImportJob:
    job = ImportJob.objects.filter(pk=pk, user=request.user).first()
    if job is None:
        raise Http404("No such import.")
    return job


@login_required
@require_http_methods(["GET", "POST"])
def import_start(request: HtmxHttpRequest) -> TemplateResponse | HttpResponseRedirect:
    if request.method == "POST":
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                job = import_job_create(
                    user=request.user,
                    kind=form.cleaned_data["kind"],
                    mode=form.cleaned_data["mode"],
                    upload=form.cleaned_data["file"],
                )
            except ServiceError as error:
                form.add_error(None, error.message)
            else:
                return HttpResponseRedirect(job.url())
        status = 400
    else:
        form = ImportForm()
        status = 200
    jobs = ImportJob.objects.filter(user=request.user)[:RECENT_JOBS]
    return TemplateResponse(
        request, "portability/import.html", {"form": form, "jobs": jobs}, status=status
    )


@login_required
@require_http_methods(["GET"])
def import_job(request: HtmxHttpRequest, pk: int) -> TemplateResponse:
    job = _get_job_for_user(request, pk)
    return render_page(request, "portability/import_job.html", {"job": job}, partial="progress")
