"""briefing/'s periodic tasks for Celery beat, as plain data (no Django: lib/beat.py collects
them through lib/beat_schedule.py without loading Django)."""

BEAT_ENTRIES = {
    # The heartbeat (briefing/heartbeat.py): every minute, send a run for each user whose
    # checklist is due. Beat only looks; who is due is decided in the database from each
    # user's last run (MNEMO_HEARTBEAT_INTERVAL after it, sooner after a failure), under a
    # per-user lock. So a user runs at most once per interval whatever beat does (restarted,
    # two beats, a late tick), users spread over the interval instead of all at once, and
    # this module needs no Django setting (lib/beat.py runs without Django).
    "heartbeat-tick": {
        # The task's registered name from before it moved to briefing/tasks.py, which keeps
        # it so that queued messages and this entry still reach it.
        "task": "learning.tasks.heartbeat_tick",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
}
