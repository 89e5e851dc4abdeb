"""The beat schedule is assembled from each app's own schedule.py (lib/beat_schedule.py):
the same entries as before the split, in the settings and in the Django-free beat."""

import importlib
import json
import subprocess
import sys

import pytest
from django.conf import settings

from lib.beat_schedule import collect_beat_schedule, schedule_modules
from lib.stack import ROOT

# Every periodic task: (name, task, interval in seconds, expires or None).
EXPECTED = {
    ("embed-pending", "search.tasks.embed_pending", 60.0, None),
    ("vector-indexes", "search.tasks.maintain_vector_indexes", 600.0, 600.0),
    ("pending-turns", "learning.tasks.process_pending_turns", 60.0, 60.0),
    ("heartbeat-tick", "learning.tasks.heartbeat_tick", 60.0, 60.0),
    ("stalled-imports", "portability.tasks.sweep_imports", 60.0, 60.0),
    ("exports", "portability.tasks.sweep_exports", 60.0, 60.0),
    ("expire-proposals", "memory.tasks.expire_proposals", 3600.0, 3600.0),
    ("expire-document-proposals", "context.tasks.expire_document_proposals", 3600.0, 3600.0),
}


def flattened(schedule: dict) -> set[tuple]:
    return {
        (name, entry["task"], entry["schedule"], entry.get("options", {}).get("expires"))
        for name, entry in schedule.items()
    }


def test_the_settings_hold_every_apps_entries():
    assert len(settings.CELERY_BEAT_SCHEDULE) == len(EXPECTED)
    assert flattened(settings.CELERY_BEAT_SCHEDULE) == EXPECTED


def test_each_app_names_only_its_own_tasks():
    modules = schedule_modules()
    assert modules == [
        "briefing.schedule",
        "context.schedule",
        "learning.schedule",
        "memory.schedule",
        "portability.schedule",
        "search.schedule",
    ]
    for module in modules:
        app = module.split(".")[0]
        # The names the app's own tasks.py registers (the heartbeat's kept the names they had
        # in learning/tasks.py: briefing/tasks.py).
        tasks = importlib.import_module(f"{app}.tasks")
        registered = {value.name for value in vars(tasks).values() if hasattr(value, "delay")}
        for entry in collect_beat_schedule([module]).values():
            assert entry["task"] in registered


def test_beat_gets_the_same_schedule_without_django(tmp_path):
    """lib/beat.py (the embedded stack's beat) loads no Django and sends the same tasks."""
    script = (
        "import json, sys\n"
        "from lib.beat import app\n"
        # kombu imports django.utils for its JSON; the settings, apps and models stay out.
        "loaded = {'django.conf', 'django.apps', 'django.db', 'config'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
        "print(json.dumps(app.conf.beat_schedule))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "MNEMO_DATA_DIR": str(tmp_path)}
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert flattened(json.loads(done.stdout)) == EXPECTED


def test_two_apps_may_not_claim_one_name(tmp_path, monkeypatch):
    for app in ("one", "two"):
        (tmp_path / app).mkdir()
        (tmp_path / app / "__init__.py").write_text("")
        (tmp_path / app / "schedule.py").write_text(
            f"BEAT_ENTRIES = {{'tick': {{'task': '{app}.tasks.tick', 'schedule': 60.0}}}}\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(ValueError, match="tick"):
        collect_beat_schedule(schedule_modules(tmp_path))
