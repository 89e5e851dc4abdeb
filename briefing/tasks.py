"""Celery tasks of the heartbeat (briefing/heartbeat.py).

The tasks keep the names they were registered under when they lived in learning/tasks.py:
beat's "heartbeat-tick" entry (briefing/schedule.py) sends that name, and messages a running
deployment queued before the move must still find their task."""

from __future__ import annotations

import datetime

from celery import shared_task


@shared_task(name="learning.tasks.heartbeat_tick", ignore_result=True)
def heartbeat_tick() -> int:
    """Beat, every minute: fail runs a dead worker left running, then send a run for each
    user whose heartbeat is due. A lost message only delays that user to the next tick."""
    from briefing import heartbeat

    return heartbeat.heartbeat_tick(send=run_heartbeat.delay)


@shared_task(name="learning.tasks.run_heartbeat", ignore_result=True)
def run_heartbeat(user_id: int, requested_at: str | None = None) -> None:
    """One user's heartbeat: scheduled, or Run now's when `requested_at` (ISO time of the
    click) is given. Idempotent: the claim refuses a second run while one is running, a
    scheduled run before the user is due, and a Run now message delivered twice."""
    from briefing import heartbeat

    when = datetime.datetime.fromisoformat(requested_at) if requested_at else None
    heartbeat.heartbeat_run_for_user_id(user_id, requested_at=when)
