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


def test_the_search_nudges_are_read(tmp_path):
    names = [
        "MNEMO_SEARCH_USE_NUDGE",
        "MNEMO_SEARCH_AGE_NUDGE",
        "MNEMO_SEARCH_AGE_HALF_LIFE_DAYS",
    ]
    defaults = load_settings(tmp_path, names, drop=("MNEMO_SEARCH_",))
    assert defaults.returncode == 0, defaults.stderr
    assert defaults.stdout.split() == ["0.05", "0.05", "180"]

    result = load_settings(
        tmp_path,
        names,
        drop=("MNEMO_SEARCH_",),
        MNEMO_SEARCH_USE_NUDGE="0.1",
        MNEMO_SEARCH_AGE_NUDGE="0",
        MNEMO_SEARCH_AGE_HALF_LIFE_DAYS="30",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.1", "0.0", "30"]


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
        (
            {"MNEMO_API_RATE_FAIL_OPEN": "maybe"},
            "MNEMO_API_RATE_FAIL_OPEN='maybe' must be one of reads, all, none.",
        ),
        ({"MNEMO_SEARCH_USE_NUDGE": "0.2"}, "MNEMO_SEARCH_USE_NUDGE='0.2' must be from 0 to 0.1."),
        ({"MNEMO_SEARCH_AGE_NUDGE": "-0.01"}, "MNEMO_SEARCH_AGE_NUDGE='-0.01' must be from 0 to"),
        ({"MNEMO_SEARCH_AGE_NUDGE": "some"}, "MNEMO_SEARCH_AGE_NUDGE='some' is not a number."),
        (
            {"MNEMO_SEARCH_AGE_HALF_LIFE_DAYS": "0"},
            "MNEMO_SEARCH_AGE_HALF_LIFE_DAYS=0 must be at least 1.",
        ),
        (
            {"MNEMO_OUTBOUND_ALLOW": "10.0.0.0/8, 10.0.0.1/8"},
            "MNEMO_OUTBOUND_ALLOW: '10.0.0.1/8' is not a CIDR range",
        ),
        (
            {"MNEMO_OUTBOUND_ALLOW": "hooks.corp:http"},
            "MNEMO_OUTBOUND_ALLOW: 'hooks.corp:http' is not an address, a CIDR range, a host",
        ),
    ],
)
def test_bad_values_stop_the_process_with_a_message(tmp_path, overrides, message):
    result = _load_settings(tmp_path, **overrides)

    assert result.returncode != 0
    assert message in result.stderr
