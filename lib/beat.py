"""Celery beat for `make run`: the schedule and the broker, without Django.

Beat only sends messages on a timer, so it needs neither the models nor the embedding
model; loading Django for it (`celery -A config beat`) costs ~80 MB more for nothing.
compose runs the full app's beat (`celery -A config beat`), whose settings hold the same
schedule.
"""

import os
from pathlib import Path

from celery import Celery

from lib.stack import data_dir_from_environment

# Reconciliation: every minute, embed whatever still lacks a vector for the current model
# (search/tasks.py). settings.CELERY_BEAT_SCHEDULE is this too.
BEAT_SCHEDULE = {
    "embed-pending": {"task": "search.tasks.embed_pending", "schedule": 60.0},
}


def embedded_broker_url(data_dir: Path) -> str:
    """The supervised Valkey's socket in the data dir (lib/stack.py starts it there)."""
    return f"redis+socket://{data_dir / 'run' / 'valkey.sock'}"


def _broker_url() -> str:
    if os.environ.get("CELERY_BROKER_URL"):
        return os.environ["CELERY_BROKER_URL"]
    return embedded_broker_url(data_dir_from_environment())


# fixups=[]: not even the Django fixup, which would set Django up in this process.
app = Celery("mnemo", broker=_broker_url(), fixups=[], set_as_current=True)
app.conf.beat_schedule = BEAT_SCHEDULE
app.conf.broker_connection_retry_on_startup = True
app.conf.beat_schedule_filename = str(data_dir_from_environment() / "celerybeat-schedule")
