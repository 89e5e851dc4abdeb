"""What Celery beat sends, and where the embedded broker listens: shared by the settings
and by lib/beat.py, which must not create its Celery app in Django's processes."""

from pathlib import Path

from lib.stack import Layout

# Reconciliation: every minute, embed whatever still lacks a vector for the current model;
# every ten minutes, build the HNSW index of an owner who has grown past
# MNEMO_SEARCH_OWN_INDEX_ROWS and drop those no longer needed (search/tasks.py). A build
# runs past the next tick (~30 s for 100,000 rows); an advisory lock keeps runs apart.
BEAT_SCHEDULE = {
    "embed-pending": {"task": "search.tasks.embed_pending", "schedule": 60.0},
    "vector-indexes": {
        "task": "search.tasks.maintain_vector_indexes",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    },
    # Reported turns whose task was lost or whose worker died are sent again
    # (learning/tasks.py); the pipeline claims each turn, so a turn is processed once.
    "pending-turns": {
        "task": "learning.tasks.process_pending_turns",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    # The heartbeat (learning/heartbeat.py): every minute, send a run for each user whose
    # checklist is due. Beat only looks; who is due is decided in the database from each
    # user's last run (MNEMO_HEARTBEAT_INTERVAL after it, sooner after a failure), under a
    # per-user lock. So a user runs at most once per interval whatever beat does (restarted,
    # two beats, a late tick), users spread over the interval instead of all at once, and
    # this module needs no Django setting (lib/beat.py runs without Django).
    "heartbeat-tick": {
        "task": "learning.tasks.heartbeat_tick",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
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
    # Proposals in the review inbox nobody decided on expire (memory/tasks.py).
    "expire-proposals": {
        "task": "memory.tasks.expire_proposals",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
    # ... and so do agents' proposed changes to identity files (context/tasks.py).
    "expire-document-proposals": {
        "task": "context.tasks.expire_document_proposals",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
}


def embedded_broker_url(data_dir: Path) -> str:
    """The supervised Valkey's socket in the data dir (lib/stack.py starts it there)."""
    return f"redis+socket://{Layout(data_dir).valkey_socket}"
