"""Processing one reported turn: consolidate the profile, capture observations, and say
what came of it (the turn's `outcome` and a `turn_processed` activity event).

Each step writes through its layer's one write path, in its own transaction, and never
holds a transaction open while the model thinks. A turn is claimed before the work
(attempts + 1, claimed_at now), so two workers never process it at once; a worker that
dies leaves a claim that expires after CLAIM_LEASE, and beat's sweep sends the turn again,
up to MAX_ATTEMPTS. The steps are safe to run again: a second consolidation starts from
the profile the first wrote, and a second capture finds its observations already stored
(duplicates).
"""

from __future__ import annotations

import datetime
import logging

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from activity import events
from learning.capture import capture
from learning.consolidation import consolidate
from learning.outcomes import CaptureOutcome, ObservationStatus, ProfileOutcome, as_dict
from llm.models import Turn, TurnStatus
from profiles.services import profile_for_user

logger = logging.getLogger(__name__)

CLAIM_LEASE = datetime.timedelta(minutes=10)  # longer than a turn's LLM calls can take
UNSENT_GRACE = datetime.timedelta(minutes=1)  # a queued turn nobody claimed this long
MAX_ATTEMPTS = 3


def process_turn(turn_id: int) -> Turn | None:
    """Do the turn's work once. None when it is not ours to do (done, or being done)."""
    turn = _claim(turn_id)
    if turn is None:
        return None
    try:
        if profile_for_user(turn.user).memory_paused:
            return _finish(turn, {"paused": True})
        profile = consolidate(turn)
        captured = capture(turn)
    except Exception as error:
        logger.exception("Turn %s failed (attempt %s)", turn_id, turn.attempts)
        if turn.attempts >= MAX_ATTEMPTS:
            _give_up(turn, f"processing failed {turn.attempts} times; last error: {error!r}")
        raise
    return _finish(turn, summary(profile, captured))


def summary(profile: ProfileOutcome, captured: CaptureOutcome) -> dict[str, object]:
    return {
        "profile": as_dict(profile),
        "capture": as_dict(captured),
        "prompt_tokens": profile.prompt_tokens + captured.prompt_tokens,
        "completion_tokens": profile.completion_tokens + captured.completion_tokens,
    }


def pending_turn_ids(now: datetime.datetime | None = None) -> list[int]:
    """Queued turns whose message was lost or whose worker died (beat's sweep)."""
    now = now or timezone.now()
    return list(
        Turn.objects.filter(status=TurnStatus.QUEUED)
        .filter(
            Q(claimed_at__isnull=True, received_at__lt=now - UNSENT_GRACE)
            | Q(claimed_at__lt=now - CLAIM_LEASE)
        )
        .order_by("received_at")
        .values_list("pk", flat=True)[:500]
    )


def give_up_on_exhausted(now: datetime.datetime | None = None) -> int:
    """Mark failed the queued turns whose last allowed attempt's claim has expired."""
    now = now or timezone.now()
    exhausted = Turn.objects.filter(
        status=TurnStatus.QUEUED, attempts__gte=MAX_ATTEMPTS, claimed_at__lt=now - CLAIM_LEASE
    )
    count = 0
    for turn in exhausted:
        _give_up(turn, f"processing did not finish after {turn.attempts} attempts")
        count += 1
    return count


def _claim(turn_id: int) -> Turn | None:
    now = timezone.now()
    claimable = Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - CLAIM_LEASE)
    claimed = Turn.objects.filter(
        claimable, pk=turn_id, status=TurnStatus.QUEUED, attempts__lt=MAX_ATTEMPTS
    ).update(attempts=F("attempts") + 1, claimed_at=now)
    if not claimed:
        return None
    return Turn.objects.select_related("user", "agent").get(pk=turn_id)


def _finish(turn: Turn, outcome: dict[str, object]) -> Turn:
    with transaction.atomic():
        turn.status = TurnStatus.DONE
        turn.outcome = outcome
        turn.processed_at = timezone.now()
        turn.save(update_fields=["status", "outcome", "processed_at"])
        events.turn_processed(user=turn.user, turn_id=turn.pk, outcome=_event_payload(outcome))
    return turn


def _event_payload(outcome: dict[str, object]) -> dict[str, object]:
    """The few numbers the activity list shows; the whole story is on the turn's page."""
    if outcome.get("paused"):
        return {"profile": "paused", "captured": 0, "duplicates": 0, "proposals": 0}
    profile: dict = outcome["profile"]  # type: ignore[assignment]
    capture: dict = outcome["capture"]  # type: ignore[assignment]
    statuses = [observation["status"] for observation in capture["observations"]]
    written = (ObservationStatus.CREATED, ObservationStatus.UPDATED)
    return {
        "profile": profile["status"],
        "profile_reason": profile["reason"],
        "capture_method": capture["method"],
        "capture_failed": capture["failed"],
        "captured": sum(status in written for status in statuses),
        "duplicates": statuses.count(ObservationStatus.DUPLICATE),
        "proposals": statuses.count(ObservationStatus.PENDING_REVIEW),
        "prompt_tokens": outcome["prompt_tokens"],
        "completion_tokens": outcome["completion_tokens"],
    }


def _give_up(turn: Turn, reason: str) -> None:
    with transaction.atomic():
        updated = Turn.objects.filter(pk=turn.pk, status=TurnStatus.QUEUED).update(
            status=TurnStatus.FAILED, processed_at=timezone.now(), outcome={"error": reason}
        )
        if updated:
            events.turn_processed(
                user=turn.user, turn_id=turn.pk, outcome={"profile": "failed", "error": reason}
            )
