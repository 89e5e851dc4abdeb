"""The Work pages: what the assistant produced for the user, and one item rendered."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from lib.markdown import render_markdown
from lib.pages import render_page
from work.models import WorkItem
from work.selectors import work_get, work_list

PER_PAGE = 50


def _get_work_for_user(user: Any, pk: int) -> WorkItem:
    item = work_get(user=user, pk=pk)
    if item is None:
        raise Http404("No such work item.")
    return item


@login_required
@require_GET
def work_list_page(request: HttpRequest) -> TemplateResponse:
    page = Paginator(work_list(user=request.user), PER_PAGE).get_page(request.GET.get("page"))
    history_restore = request.htmx and request.htmx.history_restore_request
    return render_page(
        request,
        "work/list.html",
        {"page": page},
        partial=None if history_restore else "work-list",
    )


@login_required
@require_GET
def work_detail_page(request: HttpRequest, pk: int) -> TemplateResponse:
    item = _get_work_for_user(request.user, pk)
    history_restore = request.htmx and request.htmx.history_restore_request
    return render_page(
        request,
        "work/detail.html",
        {"item": item, "body_html": render_markdown(item.body)},
        partial=None if history_restore else "work-item",
    )
