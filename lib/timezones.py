"""Time zones as people type them: matched to their canonical IANA name whatever the case
("europe/berlin" → "Europe/Berlin"), with a close match named when there is none. One rule
for every place a zone is written (the profile's timezone, through memory/validation.py)."""

from __future__ import annotations

import difflib
import functools
import zoneinfo

from lib.errors import InvalidInput


@functools.cache
def timezone_names() -> tuple[str, ...]:
    """The IANA zone names this system knows, sorted."""
    return tuple(sorted(zoneinfo.available_timezones()))


@functools.cache
def _by_folded_name() -> dict[str, str]:
    return {_fold(name): name for name in timezone_names()}


def _fold(text: str) -> str:
    # Spaces typed for '_' ("America/New York") and any case match the same zone.
    return "_".join(text.split()).casefold()


def canonical_timezone(value: str, *, field: str = "value") -> str:
    """The IANA name `value` means: itself, or the zone of the same name in another case
    ("europe/berlin" → "Europe/Berlin", "utc" → "UTC", "America/New York" →
    "America/New_York").

    InvalidInput naming `field` when no zone has that name; the message names the closest
    names there are, if any is close."""
    typed = value.strip()
    zone = _by_folded_name().get(_fold(typed))
    if zone is not None:
        return zone
    close = [
        _by_folded_name()[name]
        for name in difflib.get_close_matches(_fold(typed), _by_folded_name(), n=2, cutoff=0.8)
    ] or [
        # "berlin": the zones named after that place.
        name
        for name in timezone_names()
        if _fold(name.rsplit("/", 1)[-1]) == _fold(typed)
    ][:2]
    hint = (
        f" Did you mean {' or '.join(close)}?"
        if close
        else " Type one such as Europe/Paris, Asia/Singapore or UTC."
    )
    raise InvalidInput(f"'{typed[:64]}' is not an IANA time zone.{hint}", field=field)
