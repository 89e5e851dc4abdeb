"""What each step of processing a turn reports back to learning/pipeline.py, which sums
them up in the turn's `outcome` and its `turn_processed` activity event."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


class ProfileStatus:
    REWRITTEN = "rewritten"  # a new version of the profile document was written
    NOOP = "noop"  # the model answered NOOP: nothing to change
    FAILED = "failed"  # refused (schema, budget, parse) or the model failed; profile kept
    OFF = "off"  # no LLM configured, or today's LLM budget is spent: not attempted


class ObservationStatus:
    CREATED = "created"  # a new memory
    UPDATED = "updated"  # an existing agent note of the same key now says this
    DUPLICATE = "duplicate"  # an existing memory already said it; nothing added
    PENDING_REVIEW = "pending_review"  # a proposal in the user's inbox
    UNCHANGED = "unchanged"  # the same text was already stored under the key
    REFUSED = "refused"  # the write path refused it (bad text, paused…); see `reason`


@dataclass
class ProfileOutcome:
    status: str  # a ProfileStatus value
    reason: str = ""  # why it failed or is off, for people
    version_id: int | None = None  # the document version written (rewritten only)
    profile_tokens: int | None = None  # the profile's tokens after the rewrite
    prompt_tokens: int = 0  # LLM tokens over every attempt
    completion_tokens: int = 0
    attempts: int = 0  # LLM calls made (at most 2: one retry after a refused answer)


@dataclass
class Observation:
    kind: str  # preference, decision, discovery, pattern, task or bugfix
    text: str
    tags: list[str] = field(default_factory=list)
    confidence: float = 0.6


@dataclass
class CapturedObservation:
    kind: str
    text: str
    status: str  # an ObservationStatus value
    key: str = ""  # the memory written, or the existing one for a duplicate
    proposal_id: int | None = None
    reason: str = ""


@dataclass
class CaptureOutcome:
    method: str  # "llm" or "cues"
    observations: list[CapturedObservation] = field(default_factory=list)
    failed: bool = False  # the model's answers could not be used; nothing was written
    reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0


def as_dict(outcome: Any) -> dict[str, Any]:
    return asdict(outcome)
