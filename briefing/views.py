"""The heartbeat's actions (briefing/heartbeat.py): Run now, its status panel on the
Settings page, and the navigation count's link to the findings."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from briefing import heartbeat
from lib.pages import HtmxHttpRequest

HEARTBEAT_PANEL_TEMPLATE = "briefing/heartbeat_panel.html"


def _heartbeat_panel(request: HtmxHttpRequest, **extra: Any) -> TemplateResponse:
    context = {"status": heartbeat.heartbeat_status(user=request.user), **extra}
    return TemplateResponse(request, HEARTBEAT_PANEL_TEMPLATE, context)


@login_required
@require_GET
def heartbeat_status_panel(request: HtmxHttpRequest) -> HttpResponse:
    """The Settings page's heartbeat status alone (htmx polls it while a run is going)."""
    if not request.htmx:
        return redirect("pages:settings")
    return _heartbeat_panel(request)


@login_required
@require_POST
def heartbeat_run_now(request: HtmxHttpRequest) -> HttpResponse:
    """Run now: send the user's heartbeat to the worker (the run records what came of it);
    refused while the heartbeat is off, while one runs or without a checklist."""
    sent = heartbeat.heartbeat_send_now(user=request.user)
    if request.htmx:
        if sent.queued:
            return _heartbeat_panel(request, run_message=sent.message)
        return _heartbeat_panel(request, run_error=sent.message)
    (messages.success if sent.queued else messages.error)(request, sent.message)
    return redirect("pages:settings")


@login_required
@require_GET
def heartbeat_findings(request: HtmxHttpRequest) -> HttpResponse:
    """The navigation count's link: the findings count as seen, and the Work page shows
    the heartbeat's."""
    heartbeat.findings_mark_seen(user=request.user)
    return redirect(f"{reverse('work_list')}?kind=heartbeat")
