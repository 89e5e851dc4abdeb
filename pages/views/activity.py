"""The Activity page: the user's log of what happened, newest first, filterable.

It tells every layer's events in words (memories, proposals, documents, work, the heartbeat,
turns) and links each row to what it is about, or says it is gone (pages/activity_links.py),
so it lives in pages/; activity/ below keeps the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from activity.actors import ActorKind
from activity.models import ActivityEvent, EventType
from activity.selectors import activity_list
from lib.pages import HtmxHttpRequest, Who, render_page, who
from memory.selectors import history_texts
from pages.activity_links import Found, Target, found_for, target_of
from pages.views.context_shared import quoted
from portability.origins import changes_imported_from, imported_who
from profiles.models import Agent
from work.models import WorkKind

PER_PAGE = 50
TEMPLATE = "pages/activity.html"
MEMORY_ACTIONS = {
    "create": "Created",
    "update": "Updated",
    "restore": "Restored",
    "rename": "Renamed",
    "merge": "Merged a note into",  # memory/models.py HistoryAction.MERGE
}
PROPOSED = {
    "create": "Proposed adding",
    "update": "Proposed a change to",
    "delete": "Proposed deleting",
}
TRIGGERS = {
    "user_stated": "it changes what you said",
    "new_memory": "you review agents' new memories",
    "near_duplicate": "it overlaps a memory you have",
}
DOCUMENT_PROPOSED = {
    "write": "Proposed replacing",
    "append": "Proposed adding to",
    "delete": "Proposed deleting",
}
IDENTITY_FILE_WAITS = "waits for your review: an identity file all your agents read"
DECIDED = {
    EventType.PROPOSAL_ACCEPTED: "Accepted",
    EventType.PROPOSAL_REJECTED: "Rejected",
    EventType.PROPOSAL_EXPIRED: "Expired",
}
SOURCE_LABELS = {"user_stated": "you said", "tp_extracted": "noted", "document": "from a document"}


class ActivityFilterForm(forms.Form):
    event_type = forms.ChoiceField(
        label="Event type", required=False, choices=[("", "All events"), *EventType.choices]
    )
    agent = forms.ModelChoiceField(
        label="Agent", required=False, queryset=Agent.objects.none(), empty_label="All agents"
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = Agent.objects.filter(user=user).order_by("name")


LEARNING_EVENTS = {
    EventType.TURN_REPORTED,
    EventType.TURN_PROCESSED,
    EventType.CONSOLIDATION_APPLIED,
    EventType.CONSOLIDATION_FAILED,
    EventType.CAPTURE_FAILED,
    EventType.LLM_BUDGET_REACHED,
}
PROFILE_FATES = {
    "rewritten": "profile rewritten",
    "noop": "profile unchanged",
    "failed": "profile not rewritten",
    "off": "profile not consolidated",
}


@dataclass(frozen=True)
class Row:
    """One event ready to show: every string is plain text, escaped by the template. The
    subject (or, without one, the verb) links to the target; `code` shows the subject as
    code (a memory key, a document path) rather than as a title."""

    event: ActivityEvent
    label: str
    who: Who
    verb: str
    subject: str
    detail: str
    target: Target
    code: bool = True


def _text(value: object, limit: int = 120) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _key(payload: dict[str, Any]) -> str:
    return _text(payload.get("key"), 100)


def _describe(event: ActivityEvent) -> tuple[str, str, str]:
    """(verb, subject, detail) from the payload; unknown shapes degrade to text.

    The subject is a memory key or document path (shown as code) or a work title.
    """
    payload = event.payload if isinstance(event.payload, dict) else {}
    kind = event.event_type
    if kind == EventType.MEMORY_WRITTEN:
        action = str(payload.get("action"))
        verb = MEMORY_ACTIONS.get(action, "Wrote")
        source = SOURCE_LABELS.get(str(payload.get("source")), _text(payload.get("source"), 40))
        if action == "rename" and payload.get("renamed_from"):
            # "Renamed fact:old to <code>preference:new</code>"
            return f"Renamed {_text(payload['renamed_from'], 100)} to", _key(payload), ""
        if action == "merge":  # the source is the memory's, which the note did not change
            return verb, _key(payload), "it said nothing new; kept in the history"
        if payload.get("moved_from"):
            moved_from = _text(payload["moved_from"], 80)
            return "Moved", _key(payload), f"from {moved_from}'s note into your memory"
        if payload.get("note_of"):  # an agent's own note, not the user's memory
            return verb, _key(payload), f"{_text(payload['note_of'], 80)}'s note · {source}"
        return verb, _key(payload), source
    if kind == EventType.PROPOSAL_CREATED and "document_proposal_id" in payload:
        verb = DOCUMENT_PROPOSED.get(str(payload.get("action")), "Proposed a change to")
        return verb, _text(payload.get("path"), 100), IDENTITY_FILE_WAITS
    if kind == EventType.PROPOSAL_CREATED:
        verb = PROPOSED.get(str(payload.get("action")), "Proposed a change to")
        why = TRIGGERS.get(str(payload.get("trigger")), "")
        return verb, _key(payload), f"waits for your review: {why}" if why else ""
    if kind in DECIDED:
        proposed_by = _text(payload.get("proposed_by"), 80)
        subject = _key(payload) or _text(payload.get("path"), 100)
        return DECIDED[kind], subject, f"proposed by {proposed_by}" if proposed_by else ""
    if kind == EventType.MEMORY_DELETED:
        note_of = _text(payload.get("note_of"), 80)
        return "Deleted", _text(payload.get("key"), 100), f"{note_of}'s note" if note_of else ""
    if kind == EventType.WORK_CREATED:
        kind_label = dict(WorkKind.choices).get(payload.get("kind"), _text(payload.get("kind"), 40))
        return "", _text(payload.get("title")) or "Untitled", str(kind_label)
    if kind in (EventType.DOCUMENT_WRITTEN, EventType.DOCUMENT_DELETED):
        path = payload.get("path") or payload.get("document") or ""
        verb = "Wrote" if kind == EventType.DOCUMENT_WRITTEN else "Deleted"
        return verb, _text(path, 100), ""
    if kind in WORKSPACE_EVENTS:
        return _describe_workspace(kind, payload)
    parts = [
        f"{name}: {_text(value, 60)}"
        for name, value in sorted(payload.items())
        if isinstance(value, str | int | float | bool) and not name.endswith("_id")
    ]
    return "", "", _text(", ".join(parts))


WORKSPACE_EVENTS = {
    EventType.WORK_UPDATED,
    EventType.HEARTBEAT_OK,
    EventType.HEARTBEAT_FINDING,
    EventType.HEARTBEAT_FAILED,
    EventType.BOOTSTRAP_COMPLETED,
    EventType.WORK_DELETED,
    EventType.WORK_RESTORED,
}
# The events whose subject is a work item's title (plain text, not code).
TITLED_EVENTS = {
    EventType.WORK_CREATED,
    EventType.WORK_UPDATED,
    EventType.WORK_DELETED,
    EventType.WORK_RESTORED,
    EventType.HEARTBEAT_FINDING,
}


def _describe_workspace(kind: str, payload: dict[str, Any]) -> tuple[str, str, str]:
    """The heartbeat, work updates and the bootstrap, as (verb, subject, detail)."""
    title = _text(payload.get("title")) or "Untitled"
    if kind == EventType.WORK_UPDATED:
        fields = payload.get("fields")
        changed = ", ".join(_text(f, 20) for f in fields) if isinstance(fields, list) else ""
        return "Updated", title, changed
    if kind == EventType.WORK_DELETED:
        return "Deleted work", title, ""
    if kind == EventType.WORK_RESTORED:
        return "Restored work", title, ""
    if kind == EventType.HEARTBEAT_OK:
        return "Heartbeat: nothing needs you", "", ""
    if kind == EventType.HEARTBEAT_FINDING:
        if payload.get("seen_again") is True:
            return "Heartbeat finding seen again:", title, ""
        return "Heartbeat finding:", title, ""
    if kind == EventType.HEARTBEAT_FAILED:
        return "Heartbeat failed", "", _text(payload.get("reason"), 200)
    return "Finished the first-run ritual: deleted", "BOOTSTRAP.md", "a version is kept"


def _count(value: object) -> int:
    if isinstance(value, list):
        return len(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _counted(count: int, singular: str, plural: str = "") -> str:
    return f"{count:,} {singular if count == 1 else plural or singular + 's'}"


def _turn_processed(payload: dict[str, Any], turn: str) -> str:
    if payload.get("error"):
        return f"{turn} failed: {_text(payload['error'])}"
    if payload.get("profile") == "paused" or payload.get("paused"):
        return f"{turn} processed: memory was paused, nothing was learned"
    fate = PROFILE_FATES.get(str(payload.get("profile")), "")
    reason = _text(payload.get("profile_reason"), 100)
    parts = [f"{fate} ({reason})" if fate and reason and fate != "profile rewritten" else fate]
    if payload.get("capture_failed"):
        parts.append("capture failed")
    parts.append(_counted(_count(payload.get("captured")), "observation") + " captured")
    if duplicates := _count(payload.get("duplicates")):
        parts.append(_counted(duplicates, "duplicate"))
    if proposals := _count(payload.get("proposals")):
        parts.append(_counted(proposals, "proposal"))
    tokens = _count(payload.get("prompt_tokens")) + _count(payload.get("completion_tokens"))
    if tokens:
        parts.append(_counted(tokens, "token"))
    return f"{turn} processed: " + ", ".join(part for part in parts if part)


def _describe_learning(event: ActivityEvent, by_agent: str) -> str:
    """The sentence for the assistant loop's events; the row links to the turn."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    turn_id = payload.get("turn_id")
    turn_id = turn_id if isinstance(turn_id, int) and not isinstance(turn_id, bool) else None
    turn = f"Turn {turn_id}" if turn_id else "A turn"
    kind = event.event_type
    if kind == EventType.TURN_REPORTED:
        by = f" by agent {by_agent}" if event.actor_type == ActorKind.AGENT else ""
        if payload.get("learning"):
            return f"{turn} reported{by}: Mnemo learns from it"
        reason = _text(payload.get("reason"))
        return f"{turn} reported{by} — learning off" + (f": {reason}" if reason else "")
    if kind == EventType.TURN_PROCESSED:
        return _turn_processed(payload, turn)
    if kind == EventType.CONSOLIDATION_APPLIED:
        size = _count(payload.get("profile_tokens"))
        cost = _count(payload.get("prompt_tokens")) + _count(payload.get("completion_tokens"))
        after = f" after turn {turn_id}" if turn_id else ""
        sentence = (
            f"Profile rewritten{after}: now {_counted(size, 'token')}, "
            f"{_counted(cost, 'LLM token')} used"
        )
        left_out = _count(payload.get("left_out_lines"))
        if left_out:
            # learning/consolidation.py consolidates from the capped text; the rest is only in
            # the version it started from, so the row says which one.
            source = _count(payload.get("left_out_version_id"))
            kept_in = f"version {source}" if source else "the profile's history"
            sentence += (
                f"; it started from the capped profile, and the {_counted(left_out, 'line')}"
                f" over the budget stay in {kept_in}"
            )
        return sentence
    if kind in (EventType.CONSOLIDATION_FAILED, EventType.CAPTURE_FAILED):
        what = "Consolidation" if kind == EventType.CONSOLIDATION_FAILED else "Capture"
        of = f" for turn {turn_id}" if turn_id else ""
        attempt = _count(payload.get("attempt"))
        tried = f" (attempt {attempt})" if attempt else ""
        reason = _text(payload.get("reason")) or "no reason given"
        return f"{what} failed{of}{tried}: {reason}"
    used, budget = _count(payload.get("used")), _count(payload.get("budget"))
    return f"Daily LLM budget reached: {used:,} of {budget:,} tokens"


def _imports(request: HtmxHttpRequest, events: list[ActivityEvent]) -> dict[int, str]:
    """The events (by id) of memories an import of another tool wrote, with the tool's
    name: the row says "import from ChatGPT", not "system" (portability/origins.py)."""
    history_ids = {
        event.pk: event.payload["history_id"]
        for event in events
        if event.event_type == EventType.MEMORY_WRITTEN
        and event.actor_type == ActorKind.SYSTEM
        and isinstance(event.payload, dict)
        and isinstance(event.payload.get("history_id"), int)
    }
    if not history_ids:
        return {}
    tools = changes_imported_from(user=request.user, history_ids=history_ids.values())
    return {pk: tools[h] for pk, h in history_ids.items() if h in tools}


def _texts(request: HtmxHttpRequest, events: list[ActivityEvent]) -> dict[int, str]:
    """The text of each memory change (by the event's id) that the row names by it."""
    history_ids = {
        event.pk: event.payload["history_id"]
        for event in events
        if event.event_type in (EventType.MEMORY_WRITTEN, EventType.MEMORY_DELETED)
        and isinstance(event.payload, dict)
        and event.payload.get("action") != "rename"  # a rename is about its keys
        and isinstance(event.payload.get("history_id"), int)
    }
    texts = history_texts(user=request.user, ids=history_ids.values())
    return {pk: texts[h] for pk, h in history_ids.items() if h in texts}


def _row(
    request: HtmxHttpRequest,
    event: ActivityEvent,
    found: Found,
    imported: dict[int, str],
    texts: dict[int, str],
) -> Row:
    by = who(request, event)
    if event.pk in imported:
        by = Who(ActorKind.SYSTEM, *imported_who(imported[event.pk]))
    label = event.get_event_type_display()
    target = target_of(event, found)
    if event.event_type in LEARNING_EVENTS:
        return Row(event, label, by, _describe_learning(event, by.name), "", "", target)
    verb, subject, detail = _describe(event)
    if event.pk in texts:
        # The memory by what it says; its key is a detail, after it.
        detail = f"{subject} · {detail}" if detail else subject
        return Row(event, label, by, verb, quoted(texts[event.pk]), detail, target, code=False)
    return Row(
        event, label, by, verb, subject, detail, target, event.event_type not in TITLED_EVENTS
    )


@login_required
@require_GET
def activity_page(request: HtmxHttpRequest) -> TemplateResponse:
    form = ActivityFilterForm(request.GET or None, user=request.user)
    filtered = False
    if form.is_bound and form.is_valid():
        events = activity_list(
            user=request.user,
            event_type=form.cleaned_data["event_type"],
            agent=form.cleaned_data["agent"],
        )
        filtered = bool(form.cleaned_data["event_type"] or form.cleaned_data["agent"])
    elif form.is_bound:
        events = ActivityEvent.objects.none()
    else:
        events = activity_list(user=request.user)
    page = Paginator(events, PER_PAGE).get_page(request.GET.get("page"))
    shown = list(page.object_list)
    found = found_for(user=request.user, events=shown)
    imported, texts = _imports(request, shown), _texts(request, shown)
    context = {
        "form": form,
        "page": page,
        "rows": [_row(request, event, found, imported, texts) for event in shown],
        "filtered": filtered,
    }
    status = 400 if form.is_bound and not form.is_valid() and not request.htmx else 200
    return render_page(request, TEMPLATE, context, partial="activity-list", status=status)
