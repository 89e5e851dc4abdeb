"""portability/'s periodic tasks for Celery beat, as plain data (no Django: lib/beat.py
collects them through lib/beat_schedule.py without loading Django)."""

BEAT_ENTRIES = {
    # Import jobs whose message was lost or whose worker stopped are sent again, up to
    # three attempts (portability/importing.py); a job is claimed, so it runs once at a time.
    "stalled-imports": {
        "task": "portability.tasks.sweep_imports",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    # Prepared exports: expired files deleted, stalled jobs sent again (portability/exporting.py).
    "exports": {
        "task": "portability.tasks.sweep_exports",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
}
