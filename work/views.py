"""The Work pages: what the assistant produced for the user (filtered by kind and by agent),
and one item rendered."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from lib.markdown import render_markdown
from lib.pages import HtmxHttpRequest, render_page
from profiles.models import Agent
from work.models import WorkItem, WorkKind
from work.selectors import NO_AGENT, heartbeat_finding_count, work_get, work_list

PER_PAGE = 50
LIST_TEMPLATE = "work/list.html"


class WorkFilterForm(forms.Form):
    kind = forms.ChoiceField(
        label="Kind", required=False, choices=[("", "All kinds"), *WorkKind.choices]
    )
    agent = forms.ChoiceField(label="Agent", required=False)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agents = Agent.objects.filter(user=user).order_by("name").values_list("pk", "name")
        self.fields["agent"].choices = [
            ("", "All agents"),
            *((str(pk), name) for pk, name in agents),
            (NO_AGENT, "No agent (the heartbeat, the admin)"),
        ]


def _get_work_for_user(user: Any, pk: int) -> WorkItem:
    item = work_get(user=user, pk=pk)
    if item is None:
        raise Http404("No such work item.")
    return item


@login_required
@require_GET
def work_list_page(request: HtmxHttpRequest) -> TemplateResponse:
    # Only the filters' own parameters bind the form: ?page=2 alone is no filter.
    bound = any(request.GET.get(name) for name in ("kind", "agent"))
    form = WorkFilterForm(request.GET if bound else None, user=request.user)
    if bound and form.is_valid():
        items = work_list(
            user=request.user,
            kind=form.cleaned_data["kind"] or None,
            agent_id=form.cleaned_data["agent"] or None,
        )
    elif bound:
        items = WorkItem.objects.none()
    else:
        items = work_list(user=request.user)
    page = Paginator(items, PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "page": page,
        "filtered": bound,
        "findings": heartbeat_finding_count(user=request.user),
        "heartbeat": WorkKind.HEARTBEAT.value,
    }
    status = 400 if bound and not form.is_valid() and not request.htmx else 200
    return render_page(request, LIST_TEMPLATE, context, partial="work-list", status=status)


@login_required
@require_GET
def work_detail_page(request: HtmxHttpRequest, pk: int) -> TemplateResponse:
    item = _get_work_for_user(request.user, pk)
    context = {
        "item": item,
        "body_html": render_markdown(item.body),
        "is_finding": item.kind == WorkKind.HEARTBEAT,
    }
    return render_page(request, "work/detail.html", context, partial="work-item")
