"""What Celery beat sends, and where the embedded broker listens: shared by the settings
and by lib/beat.py, which must not create its Celery app in Django's processes."""

from pathlib import Path

from lib.stack import Layout

# Reconciliation: every minute, embed whatever still lacks a vector for the current model
# (search/tasks.py).
BEAT_SCHEDULE = {
    "embed-pending": {"task": "search.tasks.embed_pending", "schedule": 60.0},
}


def embedded_broker_url(data_dir: Path) -> str:
    """The supervised Valkey's socket in the data dir (lib/stack.py starts it there)."""
    return f"redis+socket://{Layout(data_dir).valkey_socket}"
