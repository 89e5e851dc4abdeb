"""The review inbox's part for documents: agents' proposed changes to the user's identity
files (context/review.py decides them).

The inbox page is memory/review_views.py's; its template shows this part through the tag
`{% document_proposals %}` (context/templatetags/document_inbox.py), so memory/ never
imports context/. Each proposal shows who proposed it, when, a line diff of what it would
change and the whole text it would leave, all escaped by the template. Accept and reject
answer an htmx request with the changed row and `HX-Trigger: inbox-changed` (the
navigation's count reloads itself, pages/views/nav.py); a plain POST redirects to the inbox
with a message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from activity.actors import Actor
from context.models import DocumentProposal, VersionAction
from context.review import document_proposal_accept, document_proposal_reject
from context.selectors import (
    ChangedLine,
    document_proposal_list,
    line_changes,
    pending_document_proposal_count,
)
from lib.errors import NotFound, ServiceError
from lib.pages import HtmxHttpRequest, done, render_page
from memory.models import ProposalStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

TEMPLATE = "context/inbox_documents.html"
INBOX_CHANGED = "inbox-changed"  # the event memory/review_views.py sends too
PENDING_SHOWN = 200
DECIDED_DAYS = 30
DECIDED_SHOWN = 50
TITLES = {
    VersionAction.WRITE: "Replace",
    VersionAction.APPEND: "Add to",
    VersionAction.DELETE: "Delete",
}


@dataclass
class DocumentRow:
    """One proposal ready to show; every string is plain text, escaped by the template."""

    proposal: DocumentProposal
    title: str  # "Replace", "Add to", "Delete": with the path, what it asks for
    agent: str
    changes: list[ChangedLine]
    proposed: str | None  # the whole text accepting would leave; None for a deletion
    new_file: bool
    outcome: str = ""
    error: str = ""

    @property
    def pending(self) -> bool:
        return self.proposal.is_pending and not self.outcome


def _agent_name(proposal: DocumentProposal) -> str:
    if proposal.actor_agent is not None:
        return proposal.actor_agent.name
    return "a deleted agent" if proposal.actor_type == "agent" else proposal.actor_label


def _outcome(proposal: DocumentProposal) -> str:
    path = proposal.path
    if proposal.status == ProposalStatus.ACCEPTED:
        if proposal.action == VersionAction.DELETE:
            return f"Accepted — {path} is deleted"
        return f"Accepted — {path} is changed"
    if proposal.status == ProposalStatus.REJECTED:
        return f"Rejected — {path} stays as it was"
    if proposal.status == ProposalStatus.EXPIRED:
        return "Expired — it waited too long; nothing changed"
    if proposal.status == ProposalStatus.SUPERSEDED:
        return "Replaced by a newer proposal from the same agent"
    return ""


def document_row(proposal: DocumentProposal) -> DocumentRow:
    before = proposal.before or ""
    after = proposal.after
    row = DocumentRow(
        proposal=proposal,
        title=TITLES.get(proposal.action, proposal.get_action_display()),
        agent=_agent_name(proposal),
        changes=line_changes(before, after if after is not None else ""),
        proposed=after,
        new_file=proposal.before is None,
    )
    if proposal.is_pending and proposal.expires_at <= timezone.now():
        row.outcome = "Expired — it waited too long; nothing changed"  # beat sweeps it soon
    elif not proposal.is_pending:
        row.outcome = _outcome(proposal)
    return row


def inbox_context(user: AbstractBaseUser) -> dict[str, Any]:
    """The pending document proposals and those decided lately, for the inbox's section."""
    pending = document_proposal_list(user=user, status=ProposalStatus.PENDING)[:PENDING_SHOWN]
    since = timezone.now() - timedelta(days=DECIDED_DAYS)
    decided = (
        document_proposal_list(user=user)
        .exclude(status=ProposalStatus.PENDING)
        .filter(decided_at__gte=since)
        .order_by("-decided_at", "-id")[:DECIDED_SHOWN]
    )
    rows = [document_row(proposal) for proposal in pending]
    return {
        "document_rows": rows,
        "document_pending": len(rows),
        "decided_document_rows": [document_row(proposal) for proposal in decided],
        "decided_days": DECIDED_DAYS,
    }


def _get_proposal_for_user(user: AbstractBaseUser, pk: int) -> DocumentProposal:
    proposal = document_proposal_list(user=user, ids=[pk]).first()
    if proposal is None:
        raise Http404("No such proposal.")
    return proposal


def _inbox_url(proposal: DocumentProposal | None = None) -> str:
    url = reverse("review_inbox")
    return f"{url}#document-proposal-{proposal.pk}" if proposal is not None else url


@login_required
@require_http_methods(["POST"])
def document_proposal_accept_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, document_proposal_accept)


@login_required
@require_http_methods(["POST"])
def document_proposal_reject_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, document_proposal_reject)


def _decide(request: HtmxHttpRequest, pk: int, decide: Callable[..., object]) -> HttpResponse:
    """Accept or reject as the user, then the proposal's row (htmx) or the Inbox again."""
    proposal = _get_proposal_for_user(request.user, pk)
    try:
        decide(user=request.user, proposal_id=proposal.pk, actor=Actor.for_user(request.user))
    except NotFound as error:
        raise Http404(error.message) from error
    except ServiceError as error:
        return _failed(request, proposal.pk, error)
    if request.htmx:
        return _row_response(request, pk)
    return done(request, _outcome(_get_proposal_for_user(request.user, pk)) + ".", _inbox_url())


def _row_response(request: HtmxHttpRequest, pk: int, error: str = "") -> HttpResponse:
    row = document_row(_get_proposal_for_user(request.user, pk))
    row.error = error
    response = render_page(request, TEMPLATE, {"row": row}, partial="document_proposal_row")
    response.headers["HX-Trigger"] = INBOX_CHANGED
    # The section's waiting count as it is now, swapped in out of band: a decision changes
    # it, and the page shows it without a reload.
    response.render()
    pending = min(pending_document_proposal_count(user=request.user), PENDING_SHOWN)
    context = {"document_pending": pending, "oob": True}
    extra = render_to_string(f"{TEMPLATE}#document_pending_count", context, request=request)
    response.content = response.content + extra.encode()
    return response


def _failed(request: HtmxHttpRequest, pk: int, error: ServiceError) -> HttpResponse:
    """A decision that could not be made: decided or expired meanwhile, or the file changed
    since it was proposed (the row says so, and stays to be rejected)."""
    if request.htmx:
        return _row_response(request, pk, error.message)
    messages.error(request, error.message)
    return HttpResponseRedirect(_inbox_url())
