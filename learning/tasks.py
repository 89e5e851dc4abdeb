"""Celery tasks of the assistant loop. Idempotent: a turn is processed once however often
its task runs (learning/pipeline.py claims it first)."""

from __future__ import annotations

import datetime

from celery import shared_task

from learning import pipeline


@shared_task(ignore_result=True)
def process_turn(turn_id: int) -> None:
    pipeline.process_turn(turn_id)


@shared_task(ignore_result=True)
def process_pending_turns() -> int:
    """Beat, every minute: send again the queued turns whose message was lost or whose
    worker died, and fail those out of attempts. A report is never silently dropped."""
    pipeline.give_up_on_exhausted()
    turn_ids = pipeline.pending_turn_ids()
    for turn_id in turn_ids:
        process_turn.delay(turn_id)
    return len(turn_ids)


# --- the heartbeat (learning/heartbeat.py) ---------------------------------------------------


@shared_task(ignore_result=True)
def heartbeat_tick() -> int:
    """Beat, every minute: fail runs a dead worker left running, then send a run for each
    user whose heartbeat is due. A lost message only delays that user to the next tick."""
    from learning import heartbeat

    return heartbeat.heartbeat_tick(send=run_heartbeat.delay)


@shared_task(ignore_result=True)
def run_heartbeat(user_id: int, requested_at: str | None = None) -> None:
    """One user's heartbeat: scheduled, or Run now's when `requested_at` (ISO time of the
    click) is given. Idempotent: the claim refuses a second run while one is running, a
    scheduled run before the user is due, and a Run now message delivered twice."""
    from learning import heartbeat

    when = datetime.datetime.fromisoformat(requested_at) if requested_at else None
    heartbeat.heartbeat_run_for_user_id(user_id, requested_at=when)
