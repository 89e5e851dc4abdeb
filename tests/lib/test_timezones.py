"""Time zones as typed and as stored (lib/timezones.py)."""

import zoneinfo

import pytest

from lib.errors import InvalidInput
from lib.timezones import canonical_timezone, timezone_names


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("Europe/Berlin", "Europe/Berlin"),
        ("europe/berlin", "Europe/Berlin"),
        ("EUROPE/BERLIN", "Europe/Berlin"),
        ("  europe/berlin ", "Europe/Berlin"),
        ("utc", "UTC"),
        ("america/new york", "America/New_York"),
        ("America/New_York", "America/New_York"),
        ("asia/ho_chi_minh", "Asia/Ho_Chi_Minh"),
        ("america/argentina/buenos_aires", "America/Argentina/Buenos_Aires"),
    ],
)
def test_a_zone_is_matched_to_its_canonical_name_whatever_the_case(typed, stored):
    assert canonical_timezone(typed) == stored
    zoneinfo.ZoneInfo(stored)  # and it is one


def test_every_known_zone_is_its_own_canonical_name():
    assert all(canonical_timezone(name) == name for name in timezone_names())


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("Europe/Berlni", "'Europe/Berlni' is not an IANA time zone. Did you mean Europe/Berlin?"),
        ("berlin", "'berlin' is not an IANA time zone. Did you mean Europe/Berlin?"),
        ("new york", "'new york' is not an IANA time zone. Did you mean America/New_York?"),
        (
            "Mars/Olympus",
            "'Mars/Olympus' is not an IANA time zone. Type one such as Europe/Paris, "
            "Asia/Singapore or UTC.",
        ),
    ],
)
def test_an_unknown_zone_is_refused_naming_a_close_one(typed, message):
    with pytest.raises(InvalidInput) as raised:
        canonical_timezone(typed, field="timezone")
    assert raised.value.message == message
    assert raised.value.field == "timezone"
