"""Settings come from the environment and fail loudly on bad values."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_settings(tmp_path, **overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
    # A DATABASE_URL keeps the embedded server out of these checks; nothing connects.
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        MNEMO_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://u:p@127.0.0.1:1/none",
        SECRET_KEY="test-only",
    )
    env.update(overrides)
    env = {k: v for k, v in env.items() if v != "<unset>"}
    code = (
        "from django.conf import settings; "
        "print(settings.DEBUG, settings.DATABASES['default']['CONN_MAX_AGE'])"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_valid_values_are_read(tmp_path):
    result = _load_settings(tmp_path, MNEMO_DEBUG="true", DATABASE_CONN_MAX_AGE="5")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "5"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"MNEMO_DEBUG": "maybe"}, "MNEMO_DEBUG='maybe' is not a boolean; use true or false."),
        ({"MNEMO_SECURE_COOKIES": "2"}, "MNEMO_SECURE_COOKIES='2' is not a boolean"),
        ({"DATABASE_CONN_MAX_AGE": "soon"}, "DATABASE_CONN_MAX_AGE='soon' is not a whole number."),
        ({"DATABASE_CONN_MAX_AGE": "-1"}, "DATABASE_CONN_MAX_AGE=-1 must be at least 0."),
        ({"SECRET_KEY": "<unset>"}, "SECRET_KEY must be set when DATABASE_URL is set."),
        ({"MNEMO_API_RATE": "fast"}, "MNEMO_API_RATE='fast' is not a rate"),
        ({"MNEMO_API_RATE": "0/min"}, "MNEMO_API_RATE='0/min' is not a rate"),
        ({"MNEMO_API_RATE": "10/week"}, "MNEMO_API_RATE='10/week' is not a rate"),
    ],
)
def test_bad_values_stop_the_process_with_a_message(tmp_path, overrides, message):
    result = _load_settings(tmp_path, **overrides)

    assert result.returncode != 0
    assert message in result.stderr
