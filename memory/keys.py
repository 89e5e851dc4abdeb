"""The memory key grammar (DESIGN.md). Every write path validates keys here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from lib.errors import InvalidInput
from lib.tags import normalize_platform

PROFILE_KEYS = ("name", "role", "company", "timezone", "summary")
STYLE_ASPECTS = ("tone", "verbosity")
ENTRY_KINDS = (
    "fact",
    "instruction",
    "preference",
    "decision",
    "discovery",
    "pattern",
    "task",
    "bugfix",
)
PLATFORM_PATTERN = r"[a-z0-9_]{1,32}"
SLUG_PATTERN = r"[a-z0-9][a-z0-9_-]{0,79}"
MAX_KEY_LENGTH = max(len(kind) for kind in ENTRY_KINDS) + 1 + 80

# The same grammar as one regular expression, for the database check constraint.
KEY_PATTERN = (
    rf"^({'|'.join(PROFILE_KEYS)}|({'|'.join(STYLE_ASPECTS)})_{PLATFORM_PATTERN}"
    rf"|({'|'.join(ENTRY_KINDS)}):{SLUG_PATTERN})$"
)


class KeyFamily(StrEnum):
    PROFILE = "profile"
    STYLE = "style"
    ENTRY = "entry"


@dataclass(frozen=True)
class MemoryKey:
    family: KeyFamily
    raw: str
    kind: str | None = None  # entry kind, e.g. "fact"
    slug: str | None = None
    aspect: str | None = None  # style aspect: "tone" or "verbosity"
    platform: str | None = None


def normalize_key(key: str) -> str:
    """A style key with its platform as people write it ("tone_Microsoft Teams",
    "Verbosity_Slack") as it is stored ("tone_microsoft_teams", "verbosity_slack"), by the
    platforms' one rule (lib/tags.py); any other key as it is (parse_key judges it)."""
    aspect, underscore, platform = key.partition("_")
    style = underscore and ":" not in key and aspect.lower() in STYLE_ASPECTS
    if style and (normal := normalize_platform(platform)):
        return f"{aspect.lower()}_{normal}"
    return key


def parse_key(key: object) -> MemoryKey:
    """Parse a key, or raise InvalidInput naming the part that is wrong."""
    if not isinstance(key, str) or not key:
        raise InvalidInput("Key is empty.", field="key")
    # Past this length no part could be valid; answer without echoing the whole key.
    if len(key) > 2 * MAX_KEY_LENGTH:
        raise InvalidInput(
            f"Key is {len(key)} characters long; the longest allowed is {MAX_KEY_LENGTH}.",
            field="key",
        )
    if key in PROFILE_KEYS:
        return MemoryKey(KeyFamily.PROFILE, key)
    if ":" in key:
        return _parse_entry_key(key)
    aspect, underscore, platform = key.partition("_")
    if underscore and aspect in STYLE_ASPECTS:
        if not re.fullmatch(PLATFORM_PATTERN, platform):
            raise InvalidInput(
                f"Platform '{platform}' in style key '{key}' must be 1–32 characters "
                "of a-z, 0-9 and '_'.",
                field="key",
            )
        return MemoryKey(KeyFamily.STYLE, key, aspect=aspect, platform=platform)
    raise InvalidInput(
        f"Unknown key '{key}': expected a profile key ({', '.join(PROFILE_KEYS)}), "
        "a style key (tone_<platform> or verbosity_<platform>) or an entry key (<kind>:<slug>).",
        field="key",
    )


def _parse_entry_key(key: str) -> MemoryKey:
    kind, _, slug = key.partition(":")
    if kind not in ENTRY_KINDS:
        raise InvalidInput(
            f"Unknown entry kind '{kind}' in key '{key}'; expected one of "
            f"{', '.join(ENTRY_KINDS)}.",
            field="key",
        )
    if not slug:
        raise InvalidInput(f"Key '{key}' has no slug after '{kind}:'.", field="key")
    if len(slug) > 80:
        raise InvalidInput(
            f"Slug in key '{key}' is {len(slug)} characters long; the longest allowed is 80.",
            field="key",
        )
    if not re.fullmatch(SLUG_PATTERN, slug):
        raise InvalidInput(
            f"Slug '{slug}' in key '{key}' must start with a-z or 0-9 and contain only "
            "a-z, 0-9, '_' and '-'.",
            field="key",
        )
    return MemoryKey(KeyFamily.ENTRY, key, kind=kind, slug=slug)
