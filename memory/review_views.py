"""The review inbox: agents' changes that wait for the user (memory/review.py decides them).

Each proposal shows who proposed it, when, why it waits, the agent's reason and a word-level
diff of what it would change. Above them, one line suggests tidying agents' notes that look
alike (memory/look_alike.py, its page memory/look_alike_views.py): a suggestion, not a
queue. Accept, edit then accept, reject and (for a near-duplicate)
keep both work one by one and in bulk. An htmx request gets the changed row (or list) back
with `HX-Trigger: inbox-changed`, on which the navigation's count reloads itself
(pages/views/nav.py); a row comes with the list's waiting count and bulk bar swapped in out
of band, as they are after the decision. A decided row shows what was saved: after an edit,
the edited text, the agent's beside it. A plain POST redirects to the inbox with a message.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.text import Truncator
from django.views.decorators.http import require_http_methods

from activity.actors import Actor
from lib.errors import InvalidInput, NotFound, ServiceError
from lib.pages import HtmxHttpRequest, done, render_page, target_partial
from memory.look_alike import look_alike_groups
from memory.models import (
    MemoryHistory,
    MemoryProposal,
    ProposalAction,
    ProposalStatus,
    ProposalTrigger,
)
from memory.occurrence import from_stored, stored_problem
from memory.review import MAX_BULK, proposal_accept, proposal_reject, proposals_decide
from memory.selectors import pending_proposal_count, proposal_list
from memory.validation import UNSET

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from memory.review import BulkDecision, Decided

PAGE = "memory/inbox.html"
INBOX_CHANGED = "inbox-changed"
DECIDED_DAYS = 30
DECIDED_SHOWN = 50
WORDS = re.compile(r"\s+|\S+")


# ---------------------------------------------------------------- what a row shows


@dataclass(frozen=True)
class Part:
    """A run of the word diff: kind is "same", "del", "ins" or "gap" (a space between a
    deletion and its replacement); the template escapes text."""

    kind: str
    text: str


def word_diff(old: str, new: str) -> list[Part]:
    """The changes from old to new, word by word (whitespace kept as it is). A replaced run
    is its deletion, a space ("gap") and its insertion, so the two do not read as one word."""
    before, after = WORDS.findall(old), WORDS.findall(new)
    parts: list[Part] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            parts.append(Part("same", "".join(before[i1:i2])))
            continue
        if i2 > i1:
            parts.append(Part("del", "".join(before[i1:i2])))
        if j2 > j1:
            if i2 > i1:
                parts.append(Part("gap", " "))
            parts.append(Part("ins", "".join(after[j1:j2])))
    return parts


@dataclass
class Row:
    """One proposal ready to show; every string is plain text, escaped by the template."""

    proposal: MemoryProposal
    title: str  # "Change", "New memory", "Delete": with the key, what it asks for
    agent: str
    why: str
    diff: list[Part]
    changes: list[str]  # tags and pin, in words
    text: str  # the proposed text, for the edit box ("" for a deletion)
    outcome: str = ""  # what happened, once decided
    error: str = ""  # why the last action on it failed
    editing: bool = False  # the edit box open (after a failed edit)
    kept_key: str = ""  # for "keep both": the key the agent's text went under
    proposed_text: str = ""  # accepted with the user's edit: what the agent proposed

    @property
    def pending(self) -> bool:
        return self.proposal.is_pending and not self.outcome


def _agent_name(proposal: MemoryProposal) -> str:
    if proposal.actor_agent is not None:
        return proposal.actor_agent.name
    return "a deleted agent" if proposal.actor_type == "agent" else proposal.actor_label


def _why(proposal: MemoryProposal) -> str:
    before: dict[str, Any] = proposal.before or {}
    if proposal.trigger == ProposalTrigger.NEAR_DUPLICATE:
        return f"overlaps “{before.get('value', proposal.key)}”"
    if proposal.trigger == ProposalTrigger.NEW_MEMORY:
        return "new memory (you review agents' new memories)"
    if proposal.action == ProposalAction.DELETE:
        return "deletes what you said"
    return "changes what you said"


def _title(proposal: MemoryProposal) -> str:
    if proposal.action == ProposalAction.CREATE:
        return "New memory"
    if proposal.action == ProposalAction.DELETE:
        return "Delete"
    return "Change"


def _tag_and_pin_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    changes = []
    old_tags, new_tags = set(before.get("tags") or []), set(after.get("tags") or [])
    if added := sorted(new_tags - old_tags):
        changes.append(f"Adds tag{'s' if len(added) > 1 else ''} {', '.join(added)}")
    if removed := sorted(old_tags - new_tags):
        changes.append(f"Removes tag{'s' if len(removed) > 1 else ''} {', '.join(removed)}")
    if bool(before.get("pinned")) != bool(after.get("pinned")):
        changes.append("Pins it" if after.get("pinned") else "Unpins it")
    return changes


def _when_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What a proposal does to when the memory was said and to its conversation, in the
    user's zone (pages/middleware.py activates it). A state from before issue 26 holds
    neither, and says nothing about them."""
    changes = []
    old, new = before.get("occurred_at"), after.get("occurred_at")
    if not stored_problem(new) and old != new:
        said = _day(new)
        was = "" if stored_problem(old) else f" (was {_day(old)})"
        changes.append(f"Says it was said {said}{was}")
    old, new = before.get("session", ""), after.get("session", "")
    if isinstance(new, str) and new != old:
        changes.append(
            f"Puts it in conversation {new}" if new else "Takes it out of its conversation"
        )
    return changes


def _day(stored: str) -> str:
    return dateformat.format(timezone.localtime(from_stored(stored)), "j M Y H:i")


def _outcome_of(status: str, proposal: MemoryProposal) -> str:
    if status == ProposalStatus.ACCEPTED:
        if proposal.action == ProposalAction.DELETE:
            return "Accepted — deleted from your memory"
        return "Accepted — now in your memory"
    if status == ProposalStatus.REJECTED:
        return "Rejected — your memory stays as it was"
    if status == ProposalStatus.EXPIRED:
        return "Expired — it waited too long; nothing changed"
    if status == ProposalStatus.SUPERSEDED:
        return "Replaced by a newer proposal from the same agent"
    return ""


def _row(proposal: MemoryProposal) -> Row:
    before: dict[str, Any] = proposal.before or {}
    after: dict[str, Any] = proposal.after or {}
    if proposal.action == ProposalAction.DELETE:
        diff, changes = [Part("del", before.get("value", ""))], []
    elif proposal.action == ProposalAction.CREATE:
        diff = [Part("ins", after.get("value", ""))]
        changes = _tag_and_pin_changes({}, after) + _when_changes({}, after)
    else:
        diff = word_diff(before.get("value", ""), after.get("value", ""))
        changes = _tag_and_pin_changes(before, after) + _when_changes(before, after)
    row = Row(
        proposal=proposal,
        title=_title(proposal),
        agent=_agent_name(proposal),
        why=_why(proposal),
        diff=diff,
        changes=changes,
        text=after.get("value", ""),
    )
    if proposal.is_pending and proposal.expires_at <= timezone.now():
        row.outcome = _outcome_of(ProposalStatus.EXPIRED, proposal)  # beat sweeps it soon
    elif not proposal.is_pending:
        row.outcome = _outcome_of(proposal.status, proposal)
        applied = proposal.applied
        kept_both = applied is not None and applied.key != proposal.key
        if kept_both:
            row.kept_key = applied.key
            row.outcome = "Accepted — both kept"
        _show_saved(row, applied, before, kept_both=kept_both)
    return row


def _show_saved(
    row: Row, applied: MemoryHistory | None, before: dict[str, Any], *, kept_both: bool
) -> None:
    """An accepted proposal whose text the user edited first shows what was saved (the
    applied history row's state), not the agent's text, which it names beside it."""
    saved = applied.after if applied is not None and isinstance(applied.after, dict) else {}
    value = saved.get("value")
    if (
        not isinstance(value, str)
        or value == row.text
        or row.proposal.action == ProposalAction.DELETE
    ):
        return
    row.proposed_text = row.text
    if kept_both or not before:
        row.diff = [Part("ins", value)]
    else:
        row.diff = word_diff(before.get("value", ""), value)
    if not kept_both:
        row.outcome = "Accepted with your edit — now in your memory"


# ---------------------------------------------------------------- lookups and context


def _get_proposal_for_user(user: AbstractBaseUser, pk: int) -> MemoryProposal:
    proposal = proposal_list(user=user, ids=[pk]).first()
    if proposal is None:
        raise Http404("No such proposal.")
    return proposal


def _actor(request: HtmxHttpRequest) -> Actor:
    return Actor.for_user(request.user)


def _inbox_url() -> str:
    return reverse("review_inbox")


@dataclass
class ListState:
    """What the pending list shows after an action: notes on some rows, a summary on top."""

    outcomes: dict[int, str] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    note: str = ""
    note_is_error: bool = False


def _list_context(user: AbstractBaseUser, state: ListState | None = None) -> dict[str, Any]:
    """The pending proposals (and, after a bulk action, the ones it touched, with what
    became of them), newest first."""
    state = state or ListState()
    pending = list(proposal_list(user=user, status=ProposalStatus.PENDING)[: MAX_BULK + 1])
    more = len(pending) > MAX_BULK
    pending = pending[:MAX_BULK]
    touched = set(state.outcomes) | set(state.errors)
    shown = {proposal.pk: proposal for proposal in pending}
    if touched - set(shown):
        for proposal in proposal_list(user=user, ids=touched - set(shown)):
            shown[proposal.pk] = proposal
    proposals = sorted(shown.values(), key=lambda p: (p.created_at, p.pk), reverse=True)
    rows = []
    for proposal in proposals:
        row = _row(proposal)
        row.error = state.errors.get(proposal.pk, "")
        if proposal.pk in state.outcomes:
            row.outcome = state.outcomes[proposal.pk] or row.outcome
        rows.append(row)
    return {
        "rows": rows,
        "pending_count": len(pending),
        "more_pending": more,
        "any_pending": any(row.pending for row in rows),
        "list_note": state.note,
        "list_note_is_error": state.note_is_error,
    }


def _decided_rows(user: AbstractBaseUser) -> list[Row]:
    since = timezone.now() - timedelta(days=DECIDED_DAYS)
    decided = (
        proposal_list(user=user)
        .exclude(status=ProposalStatus.PENDING)
        .filter(decided_at__gte=since)
        .order_by("-decided_at", "-id")[:DECIDED_SHOWN]
    )
    return [_row(proposal) for proposal in decided]


def _page_context(request: HtmxHttpRequest, state: ListState | None = None) -> dict[str, Any]:
    return {
        **_list_context(request.user, state),
        "decided_rows": _decided_rows(request.user),
        "decided_days": DECIDED_DAYS,
    }


def _changed(response: HttpResponse) -> HttpResponse:
    """Tell the page (the navigation's count) that the inbox changed."""
    response.headers["HX-Trigger"] = INBOX_CHANGED
    return response


def _row_response(request: HtmxHttpRequest, row: Row) -> HttpResponse:
    """The row, then (out of band) the list's waiting count and its bulk bar as they are
    now: a decision changes both, and the page shows them without a reload. The
    navigation's count reloads itself on `inbox-changed` (_changed)."""
    response = render_page(request, PAGE, {"row": row}, partial="proposal_row")
    response.render()
    pending = pending_proposal_count(user=request.user)
    counts = {"pending_count": min(pending, MAX_BULK), "any_pending": pending > 0}
    extra = render_to_string(f"{PAGE}#list_counts", counts, request=request)
    response.content = response.content + extra.encode()
    return response


# ---------------------------------------------------------------- the page


@dataclass(frozen=True)
class LookAlikeLine:
    """The Inbox's one line about agents' notes that look alike (memory/look_alike.py)."""

    groups: int
    notes: int


def _look_alike_context(user: AbstractBaseUser) -> dict[str, Any]:
    groups = look_alike_groups(user=user)
    line = LookAlikeLine(len(groups), sum(len(group.notes) for group in groups))
    return {"look_alike": line}


# The regions an htmx GET of the page asks for alone, by HX-Target: the pending list (a
# refresh after a decision), and the look-alike line, which the page asks for once it has
# loaded, so that comparing notes never holds the Inbox up (memory/look_alike.py).
REGIONS = {"inbox-list": "inbox_list", "look-alike": "look_alike_line"}
REGION_CONTEXTS = {"inbox_list": _list_context, "look_alike_line": _look_alike_context}


@login_required
@require_http_methods(["GET", "HEAD"])
def inbox_page(request: HtmxHttpRequest) -> HttpResponse:
    partial = target_partial(request, REGIONS)
    if partial is not None:
        context = REGION_CONTEXTS[partial](request.user)
        return render_page(request, PAGE, context, partial=partial)
    return render_page(request, PAGE, _page_context(request))


# ---------------------------------------------------------------- one proposal


@login_required
@require_http_methods(["POST"])
def proposal_accept_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    proposal = _get_proposal_for_user(request.user, pk)
    value = request.POST.get("value")
    edited = None if value is None else value.replace("\r\n", "\n")
    keep_both = request.POST.get("keep_both") == "1"
    try:
        decided = proposal_accept(
            user=request.user,
            proposal_id=proposal.pk,
            actor=_actor(request),
            value=UNSET if edited is None else edited,
            keep_both=keep_both,
        )
    except NotFound as error:
        raise Http404(error.message) from error
    except ServiceError as error:
        return _failed(request, proposal.pk, error, edited)
    return _decided(request, decided, keep_both=keep_both)


@login_required
@require_http_methods(["POST"])
def proposal_reject_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    proposal = _get_proposal_for_user(request.user, pk)
    try:
        decided = proposal_reject(user=request.user, proposal_id=proposal.pk, actor=_actor(request))
    except NotFound as error:
        raise Http404(error.message) from error
    except ServiceError as error:
        return _failed(request, proposal.pk, error, None)
    return _decided(request, decided, keep_both=False)


def _decided(request: HtmxHttpRequest, decided: Decided, *, keep_both: bool) -> HttpResponse:
    proposal = decided.proposal
    row = _row(_get_proposal_for_user(request.user, proposal.pk))
    if request.htmx:
        return _changed(_row_response(request, row))
    key = proposal.key
    saved = decided.history.after if decided.history is not None else None
    # What was saved, in words: the text (edited or not) rather than the key.
    text = saved.get("value") if isinstance(saved, dict) else None
    shown = f"“{Truncator(' '.join(text.split())).chars(80)}”" if isinstance(text, str) else key
    if proposal.status == ProposalStatus.REJECTED:
        message = f"Rejected the change to {key}; your memory stays as it was."
    elif keep_both and decided.history is not None:
        message = f"Kept both: {decided.history.key} added beside {key}."
    elif proposal.action == ProposalAction.DELETE:
        message = f"Accepted: {key} is deleted from your memory."
    else:
        message = f"Accepted: {shown} is now in your memory."
    return done(request, message, _inbox_url())


def _failed(
    request: HtmxHttpRequest, pk: int, error: ServiceError, edited: str | None
) -> HttpResponse:
    """A decision that could not be made: decided or expired meanwhile (the row shows its
    state now), or edited text the memory cannot take (the edit box keeps the text)."""
    row = _row(_get_proposal_for_user(request.user, pk))
    row.error = error.message
    bad_text = isinstance(error, InvalidInput) and edited is not None
    if bad_text:
        row.text, row.editing = edited, True
    if request.htmx:
        return _changed(_row_response(request, row))
    if bad_text:
        context = _page_context(request)
        context["rows"] = [row if other.proposal.pk == pk else other for other in context["rows"]]
        return render_page(request, PAGE, context, status=400)
    messages.error(request, error.message)
    return HttpResponseRedirect(_inbox_url())


# ---------------------------------------------------------------- several at once

DECISIONS = {"accept": True, "reject": False}


@login_required
@require_http_methods(["POST"])
def proposals_bulk(request: HtmxHttpRequest) -> HttpResponse:
    raw_ids = request.POST.getlist("ids")
    decision = request.POST.get("decision", "")
    if decision not in DECISIONS or not all(raw.isdigit() for raw in raw_ids):
        return _bulk_answer(request, ListState(note=BAD_BULK, note_is_error=True), status=400)
    if not raw_ids:
        state = ListState(note="Select at least one proposal first.", note_is_error=True)
        return _bulk_answer(request, state)
    try:
        result = proposals_decide(
            user=request.user,
            proposal_ids=[int(raw) for raw in raw_ids],
            accept=DECISIONS[decision],
            actor=_actor(request),
        )
    except ServiceError as error:
        return _bulk_answer(request, ListState(note=error.message, note_is_error=True))
    state = ListState(
        outcomes={done.proposal.pk: "" for done in result.done},
        errors=dict(result.skipped),
        note=_bulk_summary(result, accepted=DECISIONS[decision]),
        note_is_error=bool(result.skipped),
    )
    return _bulk_answer(request, state, changed=bool(result.done))


BAD_BULK = "That request could not be understood. Reload the page and try again."


def _bulk_summary(result: BulkDecision, *, accepted: bool) -> str:
    done = len(result.done)
    verb = "Accepted" if accepted else "Rejected"
    parts = [f"{verb} {done} proposal{'s' if done != 1 else ''}."] if done else []
    if result.skipped:
        reasons = " ".join(why for _, why in result.skipped)
        parts.append(f"Skipped {len(result.skipped)}: {reasons}")
    return " ".join(parts)


def _bulk_answer(
    request: HtmxHttpRequest, state: ListState, *, status: int = 200, changed: bool = False
) -> HttpResponse:
    if request.htmx:
        context = _list_context(request.user, state)
        response = render_page(request, PAGE, context, partial="inbox_list")
        return _changed(response) if changed else response
    if status != 200:
        return render_page(request, PAGE, _page_context(request, state), status=status)
    if state.note_is_error:
        messages.error(request, state.note)
    else:
        messages.success(request, state.note)
    return HttpResponseRedirect(_inbox_url())
