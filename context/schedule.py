"""context/'s periodic tasks for Celery beat, as plain data (no Django: lib/beat.py collects
them through lib/beat_schedule.py without loading Django)."""

BEAT_ENTRIES = {
    # Agents' proposed changes to identity files nobody decided on expire (context/tasks.py).
    "expire-document-proposals": {
        "task": "context.tasks.expire_document_proposals",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
}
