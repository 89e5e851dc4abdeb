"""Load config.settings in a fresh Python process, as a deployment would, and print values.

A DATABASE_URL keeps the embedded server out of these checks; nothing connects.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNSET = "<unset>"  # as a value: leave the variable out of the environment


def load_settings(
    tmp_path: Path, names: list[str], *, drop: tuple[str, ...] = (), **environment: str
) -> subprocess.CompletedProcess:
    """Settings loaded with this environment; stdout is the named settings' values, one
    line, space-separated. Variables starting with a `drop` prefix are left out first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        MNEMO_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://u:p@127.0.0.1:1/none",
        SECRET_KEY="test-only",
    )
    env.update(environment)
    env = {k: v for k, v in env.items() if v != UNSET}
    values = ", ".join(f"s.{name}" for name in names)
    return subprocess.run(
        [sys.executable, "-c", f"from django.conf import settings as s; print({values})"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
