"""The turn pages: the reported turns, newest first, and one turn's whole story (who
reported it, what was said, what came of it, what it cost). Read-only; the user's own
turns only (anyone else's is a 404)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from learning.selectors import outcome_line, turn_get, turn_list, turn_story
from lib.pages import HtmxHttpRequest, render_page
from llm.models import Turn, TurnStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

PER_PAGE = 50
LIST_TEMPLATE = "learning/turns.html"
TURN_TEMPLATE = "learning/turn.html"


class TurnFilterForm(forms.Form):
    status = forms.ChoiceField(
        label="Status", required=False, choices=[("", "All turns"), *TurnStatus.choices]
    )


def _get_turn_for_user(user: AbstractBaseUser, turn_id: int) -> Turn:
    turn = turn_get(user=user, turn_id=turn_id)
    if turn is None:
        raise Http404("No such turn.")
    return turn


@login_required
@require_GET
def turn_list_page(request: HtmxHttpRequest) -> TemplateResponse:
    form = TurnFilterForm(request.GET or None)
    turns = turn_list(user=request.user)
    status = form.cleaned_data["status"] if form.is_bound and form.is_valid() else ""
    if status:
        turns = turns.filter(status=status)
    elif form.is_bound and not form.is_valid():
        turns = turns.none()
    page = Paginator(turns, PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "page": page,
        "rows": [(turn, outcome_line(turn)) for turn in page.object_list],
        "filtered": bool(status),
    }
    status_code = 400 if form.is_bound and not form.is_valid() and not request.htmx else 200
    return render_page(request, LIST_TEMPLATE, context, partial="turn-list", status=status_code)


@login_required
@require_GET
def turn_page(request: HtmxHttpRequest, turn_id: int) -> TemplateResponse:
    turn = _get_turn_for_user(request.user, turn_id)
    context = {"story": turn_story(turn=turn), "turn": turn}
    return render_page(request, TURN_TEMPLATE, context, partial="turn")
