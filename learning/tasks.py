"""Celery tasks of the assistant loop. Idempotent: a turn is processed once however often
its task runs (learning/pipeline.py claims it first)."""

from __future__ import annotations

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
