"""Celery beat for `make run`: the schedule and the broker, without Django.

Beat only sends messages on a timer, so it needs neither the models nor the embedding
model; loading Django for it (`celery -A config beat`) costs ~50 MB more for nothing.
compose runs the full app's beat (`celery -A config beat`), whose settings hold the same
schedule (each app's schedule.py, collected by lib/beat_schedule.py). Only
`celery -A lib.beat beat` imports this module.
"""

import os

from celery import Celery

from lib.beat_schedule import beat_schedule, embedded_broker_url
from lib.stack import data_dir_from_environment

# fixups=[]: not even the Django fixup, which would set Django up in this process.
app = Celery(
    "mnemo",
    broker=os.environ.get("CELERY_BROKER_URL") or embedded_broker_url(data_dir_from_environment()),
    fixups=[],
    set_as_current=False,
)
app.conf.beat_schedule = beat_schedule()
app.conf.broker_connection_retry_on_startup = True
app.conf.beat_schedule_filename = str(data_dir_from_environment() / "celerybeat-schedule")
