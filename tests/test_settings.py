"""Settings come from the environment and fail loudly on bad values."""

import subprocess

import pytest

from tests.settings_process import UNSET, load_settings


def _load_settings(tmp_path, **overrides: str) -> subprocess.CompletedProcess:
    names = ["DEBUG", "DATABASES['default']['CONN_MAX_AGE']"]
    return load_settings(tmp_path, names, drop=("DATABASE_URL", "SECRET_KEY"), **overrides)


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
        ({"SECRET_KEY": UNSET}, "SECRET_KEY must be set when DATABASE_URL is set."),
        ({"MNEMO_API_RATE": "fast"}, "MNEMO_API_RATE='fast' is not a rate"),
        ({"MNEMO_API_RATE": "0/min"}, "MNEMO_API_RATE='0/min' is not a rate"),
        ({"MNEMO_API_RATE": "10/week"}, "MNEMO_API_RATE='10/week' is not a rate"),
    ],
)
def test_bad_values_stop_the_process_with_a_message(tmp_path, overrides, message):
    result = _load_settings(tmp_path, **overrides)

    assert result.returncode != 0
    assert message in result.stderr
