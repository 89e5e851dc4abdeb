"""Reads for the turn pages: a user's reported turns, and one turn's whole story (what it
said, what came of it, which LLM calls it cost), from the turn's `outcome` and the rows it
links to. Every read is filtered by the requesting user."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from context.models import DocumentVersion
from learning.outcomes import ObservationStatus, ProfileStatus
from llm.models import LLMCall, Turn, TurnStatus
from llm.selectors import llm_calls_for_turn
from memory.models import Memory, MemoryProposal

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

PROFILE_LABELS = {
    ProfileStatus.REWRITTEN: "Profile rewritten",
    ProfileStatus.NOOP: "Profile unchanged (nothing new)",
    ProfileStatus.FAILED: "Profile not rewritten",
    ProfileStatus.OFF: "Profile not consolidated",
}
OBSERVATION_LABELS = {
    ObservationStatus.CREATED: "Created",
    ObservationStatus.UPDATED: "Updated an agent's note",
    ObservationStatus.DUPLICATE: "Duplicate: already known",
    ObservationStatus.PENDING_REVIEW: "Sent to your review",
    ObservationStatus.UNCHANGED: "Already stored",
    ObservationStatus.REFUSED: "Not stored",
}
CAPTURE_METHODS = {"llm": "by the LLM", "cues": "by cue phrases"}
WRITTEN = (ObservationStatus.CREATED, ObservationStatus.UPDATED)


def turn_list(*, user: AbstractBaseUser) -> QuerySet[Turn]:
    """The user's reported turns, newest first, with their agents."""
    return Turn.objects.filter(user=user).select_related("agent").order_by("-received_at", "-id")


def turn_get(*, user: AbstractBaseUser, turn_id: int) -> Turn | None:
    return Turn.objects.filter(user=user, pk=turn_id).select_related("agent").first()


# --- one line per turn --------------------------------------------------------------------


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _plural(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count:,} {singular if count == 1 else plural or singular + 's'}"


def outcome_line(turn: Turn) -> str:
    """What came of the turn in one line, for the list of turns."""
    if turn.status == TurnStatus.SKIPPED:
        return f"Not learned from: {turn.skipped_reason}" if turn.skipped_reason else "Skipped"
    if turn.status == TurnStatus.QUEUED:
        return "Waiting to be processed"
    outcome = _dict(turn.outcome)
    if outcome.get("error"):
        return f"Failed: {outcome['error']}"
    if turn.status == TurnStatus.FAILED:
        return "Failed"
    if outcome.get("paused"):
        return "Memory was paused: nothing was learned"
    profile = _dict(outcome.get("profile"))
    statuses = [
        _dict(observation).get("status")
        for observation in _dict(outcome.get("capture")).get("observations") or []
    ]
    parts = [PROFILE_LABELS.get(profile.get("status", ""), "Profile: unknown outcome")]
    captured = sum(status in WRITTEN for status in statuses)
    observed = [_plural(captured, "observation") + " captured"]
    if duplicates := statuses.count(ObservationStatus.DUPLICATE):
        observed.append(_plural(duplicates, "duplicate"))
    if proposals := statuses.count(ObservationStatus.PENDING_REVIEW):
        observed.append(_plural(proposals, "proposal"))
    parts.append(", ".join(observed))
    tokens = _int(outcome.get("prompt_tokens")) + _int(outcome.get("completion_tokens"))
    if tokens:
        parts.append(_plural(tokens, "LLM token"))
    return " · ".join(parts)


# --- one turn's story ---------------------------------------------------------------------


@dataclass(frozen=True)
class ToolOutput:
    name: str
    text: str


@dataclass(frozen=True)
class ProfileResult:
    status: str  # a ProfileStatus value, or "" when the outcome does not say
    label: str
    reason: str
    version_id: int | None  # the version written, while it is the user's and exists
    profile_tokens: int | None
    prompt_tokens: int
    completion_tokens: int
    attempts: int


@dataclass(frozen=True)
class ObservationRow:
    kind: str
    text: str
    status: str
    label: str
    key: str
    reason: str
    memory_id: int | None  # the memory under that key now, to link to
    proposal_id: int | None
    proposal_status: str  # "" when there is no proposal (or it is gone)
    proposal_status_label: str


@dataclass(frozen=True)
class TurnStory:
    turn: Turn
    tool_outputs: list[ToolOutput]
    paused: bool = False
    error: str = ""
    profile: ProfileResult | None = None
    capture_method: str = ""
    capture_failed: bool = False
    capture_reason: str = ""
    observations: list[ObservationRow] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)
    prompt_tokens: int = 0  # over the calls listed
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def captured(self) -> int:
        return sum(row.status in WRITTEN for row in self.observations)


def turn_story(*, turn: Turn) -> TurnStory:
    """Everything the turn page shows. Links only to the turn's user's own rows."""
    outcome = _dict(turn.outcome)
    calls = list(llm_calls_for_turn(turn=turn))
    story: dict[str, Any] = {
        "turn": turn,
        "tool_outputs": _tool_outputs(turn.tool_outputs),
        "paused": bool(outcome.get("paused")),
        "error": str(outcome.get("error") or ""),
        "calls": calls,
        "prompt_tokens": sum(call.prompt_tokens for call in calls),
        "completion_tokens": sum(call.completion_tokens for call in calls),
    }
    if "profile" in outcome:
        story["profile"] = _profile_result(turn, _dict(outcome["profile"]))
    if "capture" in outcome:
        capture = _dict(outcome["capture"])
        method = str(capture.get("method") or "")
        story["capture_method"] = CAPTURE_METHODS.get(method, method)
        story["capture_failed"] = bool(capture.get("failed"))
        story["capture_reason"] = str(capture.get("reason") or "")
        story["observations"] = _observation_rows(turn, capture.get("observations") or [])
    return TurnStory(**story)


def _tool_outputs(value: object) -> list[ToolOutput]:
    outputs = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):
            name, text = item.get("name"), item.get("text", item.get("output"))
            outputs.append(ToolOutput(name=str(name or "tool"), text=str(text or "")))
        else:
            outputs.append(ToolOutput(name="tool", text=str(item)))
    return outputs


def _profile_result(turn: Turn, profile: dict[str, Any]) -> ProfileResult:
    status = str(profile.get("status") or "")
    version_id = profile.get("version_id")
    if not (
        isinstance(version_id, int)
        and DocumentVersion.objects.filter(pk=version_id, user_id=turn.user_id).exists()
    ):
        version_id = None
    tokens = profile.get("profile_tokens")
    return ProfileResult(
        status=status,
        label=PROFILE_LABELS.get(status, "Profile: unknown outcome"),
        reason=str(profile.get("reason") or ""),
        version_id=version_id,
        profile_tokens=tokens if isinstance(tokens, int) else None,
        prompt_tokens=_int(profile.get("prompt_tokens")),
        completion_tokens=_int(profile.get("completion_tokens")),
        attempts=_int(profile.get("attempts")),
    )


def _observation_rows(turn: Turn, raw: object) -> list[ObservationRow]:
    items = [_dict(item) for item in (raw if isinstance(raw, list) else [])]
    keys = {str(item["key"]) for item in items if item.get("key")}
    memories = dict(
        Memory.objects.filter(user_id=turn.user_id, owner_agent=None, key__in=keys).values_list(
            "key", "pk"
        )
    )
    proposal_ids = {_int(item.get("proposal_id")) for item in items} - {0}
    proposals = {
        proposal.pk: proposal
        for proposal in MemoryProposal.objects.filter(user_id=turn.user_id, pk__in=proposal_ids)
    }
    rows = []
    for item in items:
        status = str(item.get("status") or "")
        key = str(item.get("key") or "")
        proposal = proposals.get(_int(item.get("proposal_id")))
        rows.append(
            ObservationRow(
                kind=str(item.get("kind") or ""),
                text=str(item.get("text") or ""),
                status=status,
                label=OBSERVATION_LABELS.get(status, status),
                key=key,
                reason=str(item.get("reason") or ""),
                memory_id=memories.get(key),
                proposal_id=proposal.pk if proposal else None,
                proposal_status=proposal.status if proposal else "",
                proposal_status_label=proposal.get_status_display() if proposal else "",
            )
        )
    return rows
