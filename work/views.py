"""The Work pages: what the assistant produced for the user (filtered by kind and by agent),
one item rendered (deleting it, and restoring it while it is deleted), and Recently deleted
work."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from activity.actors import Actor
from lib.errors import NotFound
from lib.markdown import render_markdown
from lib.pages import HtmxHttpRequest, done, render_page, who
from profiles.models import Agent
from profiles.naming import agent_name
from work.models import WorkItem, WorkKind
from work.selectors import (
    NO_AGENT,
    deleted_work_list,
    heartbeat_finding_count,
    work_deletion,
    work_get,
    work_list,
)
from work.services import work_delete, work_restore

PER_PAGE = 50
LIST_TEMPLATE = "work/list.html"
DELETED_TEMPLATE = "work/deleted.html"


class WorkFilterForm(forms.Form):
    kind = forms.ChoiceField(
        label="Kind", required=False, choices=[("", "All kinds"), *WorkKind.choices]
    )
    agent = forms.ChoiceField(label="Agent", required=False)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agents = Agent.objects.filter(user=user).order_by("name")
        self.fields["agent"].choices = [
            ("", "All agents"),
            *((str(agent.pk), agent_name(agent)) for agent in agents),
            (NO_AGENT, "No agent (the heartbeat, the admin)"),
        ]


def _get_work_for_user(user: Any, pk: int) -> WorkItem:
    """One of the user's work items, deleted or not; 404 for anyone else's id."""
    item = work_get(user=user, pk=pk, include_deleted=True)
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
    deletion = work_deletion(user=request.user, item=item)
    context = {
        "item": item,
        "body_html": render_markdown(item.body),
        "is_finding": item.kind == WorkKind.HEARTBEAT,
        "deleted_by": who(request, deletion) if deletion is not None else None,
    }
    return render_page(request, "work/detail.html", context, partial="work-item")


@login_required
@require_POST
def work_delete_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Delete the item (its page asked first); it waits in Recently deleted. Back to its
    page, which now says so and offers Restore."""
    item = _get_work_for_user(request.user, pk)
    try:
        work_delete(user=request.user, pk=item.pk, actor=Actor.for_user(request.user))
        message = f"Deleted “{item.title}”. It waits in Recently deleted work: restore it there."
    except NotFound:  # deleted already (another tab)
        message = f"“{item.title}” was deleted already."
    return done(request, message, item.get_absolute_url())


@login_required
@require_POST
def work_restore_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Bring a deleted item back. From Recently deleted with htmx, its row says so in place;
    otherwise back to the item's page."""
    item = _get_work_for_user(request.user, pk)
    try:
        item = work_restore(user=request.user, pk=item.pk, actor=Actor.for_user(request.user))
        message = f"Restored “{item.title}”."
    except NotFound:  # restored already (another tab)
        message = f"“{item.title}” is not deleted."
    from_trash = request.POST.get("then") == "trash"
    if from_trash and request.htmx:
        context = {"row": {"item": item}, "restored": item}
        return render_page(request, DELETED_TEMPLATE, context, partial="deleted-row")
    url = reverse("work_recently_deleted") if from_trash else item.get_absolute_url()
    return done(request, message, url)


@login_required
@require_GET
def work_deleted_page(request: HtmxHttpRequest) -> TemplateResponse:
    """Recently deleted work: the items deleted in the last MNEMO_UNDO_DAYS days, with who
    deleted them and when, each with Restore."""
    since = timezone.now() - timedelta(days=settings.MNEMO_UNDO_DAYS)
    rows = deleted_work_list(user=request.user, since=since)
    context = {
        "rows": [
            {
                "item": row.item,
                "who": who(request, row.event) if row.event is not None else None,
            }
            for row in rows
        ],
        "days": settings.MNEMO_UNDO_DAYS,
    }
    return render_page(request, DELETED_TEMPLATE, context)
