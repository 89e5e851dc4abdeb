"""Tags, as people type them and as they are stored: one rule for memories, work items,
imports and capture, and (through slug_for) for agents' names. Lenient in what it takes
("Morning Routine", "café"), strict in what it keeps (a-z, 0-9, '_' and '-', at most 40
characters for a tag)."""

from __future__ import annotations

import re
import unicodedata

from lib.errors import InvalidInput

TAG_PATTERN = r"[a-z0-9][a-z0-9_-]{0,39}"
TAG_RULE = "a-z, 0-9, '_' and '-', at most 40 characters"
_OUTSIDE = re.compile(r"[^a-z0-9_-]+")


def slug_for(label: str, max_length: int) -> str:
    """A label as an identifier (a tag, an agent's name): accents dropped, lower-cased, each
    run of spaces or other characters outside a-z, 0-9, '_' and '-' one '-', cut to
    `max_length`, never starting or ending with '-' or '_'; "" if nothing is left.

    "Morning Routine" → "morning-routine", "Café" → "cafe", "data_model" stays."""
    ascii_text = unicodedata.normalize("NFKD", label).encode("ascii", "ignore").decode()
    slug = _OUTSIDE.sub("-", ascii_text.lower()).strip("-_")
    return slug[:max_length].rstrip("-_")


def normalize_tag(label: str) -> str:
    """The tag stored for a label (slug_for, at most 40 characters)."""
    return slug_for(label, 40)


def clean_tags(tags: object, *, limit: int) -> list[str]:
    """Tags as stored: normalized, sorted, without repeats.

    InvalidInput (field "tags") when `tags` is not a list of text, when a label keeps
    nothing (no letter or digit of a-z, 0-9), or when more than `limit` remain."""
    if not isinstance(tags, list | tuple) or not all(isinstance(tag, str) for tag in tags):
        raise InvalidInput("Tags must be a list of text labels.", field="tags")
    cleaned = set()
    for label in tags:
        if not label.strip():
            continue
        tag = normalize_tag(label)
        if not re.fullmatch(TAG_PATTERN, tag):
            raise InvalidInput(
                f"Tag '{label.strip()[:40]}' has nothing Mnemo can keep: a tag is {TAG_RULE}.",
                field="tags",
            )
        cleaned.add(tag)
    if len(cleaned) > limit:
        raise InvalidInput(f"At most {limit} tags; there are {len(cleaned)}.", field="tags")
    return sorted(cleaned)
