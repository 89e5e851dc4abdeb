"""memory/'s periodic tasks for Celery beat, as plain data (no Django: lib/beat.py collects
them through lib/beat_schedule.py without loading Django)."""

BEAT_ENTRIES = {
    # Proposals in the review inbox nobody decided on expire (memory/tasks.py).
    "expire-proposals": {
        "task": "memory.tasks.expire_proposals",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
}
