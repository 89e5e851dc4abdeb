"""What Celery beat sends, and where the embedded broker listens: shared by the settings
and by lib/beat.py, which must not create its Celery app in Django's processes.

Each app declares its own periodic tasks as plain data in its `schedule.py`
(`BEAT_ENTRIES`, no Django import: lib/beat.py runs without Django); this module only
collects them, so lib/ names no app and no task."""

import importlib
from pathlib import Path
from typing import Any

from lib.stack import ROOT, Layout

# The module every app that has periodic tasks keeps beside its tasks.py.
SCHEDULE_MODULE = "schedule"


def schedule_modules(root: Path = ROOT) -> list[str]:
    """The dotted names of the project's schedule modules (`search.schedule`, …), sorted."""
    return sorted(
        f"{path.parent.name}.{SCHEDULE_MODULE}"
        for path in root.glob(f"*/{SCHEDULE_MODULE}.py")
        if (path.parent / "__init__.py").exists()
    )


def collect_beat_schedule(modules: list[str]) -> dict[str, dict[str, Any]]:
    """One beat schedule from the apps' entries; two apps may not claim the same name."""
    schedule: dict[str, dict[str, Any]] = {}
    for name in modules:
        entries = importlib.import_module(name).BEAT_ENTRIES
        if clash := schedule.keys() & entries.keys():
            raise ValueError(f"{name} declares beat entries already declared: {sorted(clash)}")
        schedule.update(entries)
    return schedule


def beat_schedule() -> dict[str, dict[str, Any]]:
    """Every app's periodic tasks (the settings' CELERY_BEAT_SCHEDULE and lib/beat.py's)."""
    return collect_beat_schedule(schedule_modules())


def embedded_broker_url(data_dir: Path) -> str:
    """The supervised Valkey's socket in the data dir (lib/stack.py starts it there)."""
    return f"redis+socket://{Layout(data_dir).valkey_socket}"
