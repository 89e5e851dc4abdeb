"""learning/'s periodic tasks for Celery beat, as plain data (no Django: lib/beat.py collects
them through lib/beat_schedule.py without loading Django)."""

BEAT_ENTRIES = {
    # Reported turns whose task was lost or whose worker died are sent again
    # (learning/tasks.py); the pipeline claims each turn, so a turn is processed once.
    "pending-turns": {
        "task": "learning.tasks.process_pending_turns",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
}
