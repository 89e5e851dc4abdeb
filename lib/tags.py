"""Tags and platforms, as people type them and as they are stored: one rule per field, used
on every write (pages, the agent API and MCP, imports, capture) and on every filter, so
"Morning Routine" typed in a filter finds the entry shown as #morning-routine.

Tags keep letters and digits of any script ("café", "日本語", "привет") and drop the rest:
lenient in what they take, strict in what they keep. A label with no letter or digit (an
emoji, "#", "---") keeps nothing and is dropped with a word (tag_notes), never refusing the
other tags or the entry."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from lib.errors import InvalidInput
from lib.slugs import romanize

MAX_TAG_LENGTH = 40
# A label as typed may be longer than the tag kept ("Notes from the quarterly planning call"
# is cut to 40); past this it is refused, not cut.
TYPED_TAG_LENGTH = 100
TAG_RULE = (
    "letters and digits of any script, lower-cased, each run of anything else (spaces, "
    "'_', punctuation, emoji) one '-', at most 40 characters"
)


def normalize_tag(label: str) -> str:
    """The tag stored for a label; "" when it has no letter or digit.

    Compatibility forms folded (NFKC: full-width letters are plain ones), case folded
    ("Straße" → "strasse"), letters, digits and the marks that belong to them kept in any
    script; every run of anything else (spaces, '_', '-', punctuation, emoji, '#') is one
    '-', never at either end; cut to 40 characters.

    "Morning Routine" → "morning-routine", "morning_routine" → "morning-routine",
    "#Café" → "café", "日本語 メモ" → "日本語-メモ", "🍣" → ""."""
    text = unicodedata.normalize("NFKC", label).casefold()
    out: list[str] = []
    for char in text:
        category = unicodedata.category(char)
        if category[0] in "LN":
            out.append(char)
        elif category[0] == "M":
            # A mark belongs to the letter before it (Devanagari vowel signs, accents
            # NFKC could not compose); after an emoji or a separator it goes with them.
            if out and out[-1] != "-":
                out.append(char)
        elif category == "Cf":
            # Zero-width joiners and direction marks: invisible, so neither kept nor a gap.
            continue
        elif out and out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-")[:MAX_TAG_LENGTH].rstrip("-")


def is_tag(text: str) -> bool:
    """Whether `text` is a tag as stored (its own normal form, not empty)."""
    return bool(text) and normalize_tag(text) == text


def clean_tags(tags: object, *, limit: int) -> list[str]:
    """Tags as stored: normalized, sorted, without repeats; labels that keep nothing (an
    emoji alone) are left out (tag_notes says so), the others kept.

    InvalidInput (field "tags") when `tags` is not a list of text, or when more than
    `limit` remain."""
    if not isinstance(tags, list | tuple) or not all(isinstance(tag, str) for tag in tags):
        raise InvalidInput("Tags must be a list of text labels.", field="tags")
    cleaned = {tag for tag in map(normalize_tag, tags) if tag}
    if len(cleaned) > limit:
        raise InvalidInput(f"At most {limit} tags; there are {len(cleaned)}.", field="tags")
    return sorted(cleaned)


def tag_notes(labels: Iterable[str]) -> list[str]:
    """What became of each typed label that was not kept as typed, in the order typed:
    "'Morning Routine' saved as #morning-routine", "'🍣' left out: a tag needs a letter or
    a digit". Nothing for a label kept as it was (or blank, or a leading '#' only)."""
    notes: list[str] = []
    seen: set[str] = set()
    for label in labels:
        typed = label.strip()
        if not typed or typed in seen:
            continue
        seen.add(typed)
        tag = normalize_tag(typed)
        if not tag:
            notes.append(f"'{typed[:MAX_TAG_LENGTH]}' left out: a tag needs a letter or a digit")
        elif tag != typed.removeprefix("#"):
            notes.append(f"'{typed[: MAX_TAG_LENGTH * 2]}' saved as #{tag}")
    return notes


# Platforms name the style keys (tone_<platform>, memory/keys.py), which are ASCII.
MAX_PLATFORM_LENGTH = 32
PLATFORM_RULE = "a-z, 0-9 and '_', at most 32 characters"
_NOT_PLATFORM = re.compile(r"[^a-z0-9]+")


def normalize_platform(label: str) -> str:
    """The platform stored for a label, as in its style keys; "" when nothing is left.

    Letters and digits of any script romanised as keys are (lib/slugs.py: "微信" →
    "wei_xin", accents dropped; an emoji is no name, "🍣" leaves nothing), lower-cased, each
    run of anything but a-z and 0-9 (spaces, '-', '_', '.') one '_', never at either end,
    cut to 32 characters: "Microsoft Teams" → "microsoft_teams", "Slack" → "slack",
    "Google-Chat" → "google_chat"."""
    letters = "".join(
        char if unicodedata.category(char)[0] in "LN" else " "
        for char in unicodedata.normalize("NFKC", label)
    )
    ascii_text = romanize(letters)
    platform = _NOT_PLATFORM.sub("_", ascii_text.lower()).strip("_")
    return platform[:MAX_PLATFORM_LENGTH].rstrip("_")


def clean_platform(label: str, *, field: str = "platform") -> str:
    """normalize_platform, or InvalidInput naming `field` when nothing is left."""
    platform = normalize_platform(label)
    if not platform:
        raise InvalidInput(
            f"Platform '{label.strip()[:MAX_PLATFORM_LENGTH]}' has no letter a-z or digit "
            "to name it by; type its name (e.g. wechat, line).",
            field=field,
        )
    return platform


def tags_note(labels: Iterable[str]) -> str:
    """tag_notes as one sentence for a page ("Tag 'Morning Routine' saved as
    #morning-routine."), "" when every tag was kept as typed."""
    notes = tag_notes(labels)
    if not notes:
        return ""
    return f"{'Tag' if len(notes) == 1 else 'Tags'}: {'; '.join(notes)}."
