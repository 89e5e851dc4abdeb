"""Reading the environment for the settings (config/settings.py and the modules it takes
blocks from): the `.env` file, strict parsers that stop the process with a message naming
the variable, and what every block needs first: where the data lives and whether Mnemo runs
embedded (DATABASE_URL unset).

Every variable read here is recorded with the default the code passes (READS), so
tests/test_configuration_doc.py can hold config/variables.py, the one list
docs/configuration.md is written from, to what the settings really read.
"""

from pathlib import Path
from typing import Any

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

# {name: the default the code passed, environ.Env.NOTSET for none}, in the order read.
READS: dict[str, Any] = {}


def _read(name: str, default: Any) -> None:
    READS.setdefault(name, default)


class _RecordingEnv(environ.Env):
    """django-environ's reader, noting each variable read (env.str, env.db, …)."""

    def get_value(self, var: str, cast: Any = None, default: Any = environ.Env.NOTSET, **kw: Any):
        _read(var, default)
        return super().get_value(var, cast=cast, default=default, **kw)


env = _RecordingEnv()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_bool(name: str, *, default: bool) -> bool:
    """Like env.bool, but a value that is neither true nor false is an error, not False."""
    _read(name, default)
    if name not in env:
        return default
    raw = env.str(name).strip().lower()
    if raw in TRUE_WORDS:
        return True
    if raw in FALSE_WORDS or raw == "":
        return False
    raise environ.ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use true or false.")


def env_number(name: str, parse: type, what: str) -> int | float | None:
    """The variable parsed as `parse` (int or float), None when it is not set."""
    if name not in env:
        return None
    raw = env.str(name)
    try:
        return parse(raw)
    except ValueError:
        raise environ.ImproperlyConfigured(f"{name}={raw!r} is not {what}.") from None


def env_int(name: str, *, default: int, minimum: int = 0) -> int:
    _read(name, default)
    value = env_number(name, int, "a whole number")
    if value is None:
        return default
    if value < minimum:
        raise environ.ImproperlyConfigured(f"{name}={value} must be at least {minimum}.")
    return value


def env_fraction(name: str, *, default: float, low: float = 0.0, high: float = 1.0) -> float:
    """A number from `low` to `high`, read from the environment."""
    _read(name, default)
    value = env_number(name, float, "a number")
    if value is None:
        return default
    if not low <= value <= high:
        raise environ.ImproperlyConfigured(
            f"{name}={env.str(name)!r} must be from {low:g} to {high:g}."
        )
    return value


def env_seconds(name: str, *, default: float) -> float:
    """A positive number of seconds (fractions allowed)."""
    _read(name, default)
    if name not in env:
        return default
    raw = env.str(name)
    try:
        value = float(raw)
    except ValueError:
        raise environ.ImproperlyConfigured(f"{name}={raw!r} is not a number of seconds.") from None
    if not 0 < value < float("inf"):
        raise environ.ImproperlyConfigured(f"{name}={raw!r} must be a positive number of seconds.")
    return value


def env_choice(name: str, *, default: str, choices: tuple[str, ...]) -> str:
    value = env.str(name, default=default).strip().lower()
    if value not in choices:
        raise environ.ImproperlyConfigured(f"{name}={value!r} must be one of {', '.join(choices)}.")
    return value


def env_rate(name: str, default: str) -> str:
    """Requests per period, e.g. 600/min or 20/s (Django REST Framework's throttle rates)."""
    raw = env.str(name, default=default).strip()
    number, _, period = raw.partition("/")
    if not (number.isdigit() and int(number) > 0 and period[:1] in ("s", "m", "h", "d")):
        raise environ.ImproperlyConfigured(
            f"{name}={raw!r} is not a rate; use requests per period, e.g. 600/min or 20/s."
        )
    return raw


DATA_DIR = Path(env.path("MNEMO_DATA_DIR", default=str(BASE_DIR / ".data"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)
EMBEDDED = "DATABASE_URL" not in env
