"""Document paths: relative, normalized, and never able to step outside their scope."""

from __future__ import annotations

import unicodedata

from lib.errors import InvalidInput

MAX_PATH_LENGTH = 512
MAX_SEGMENT_LENGTH = 255


class InvalidPath(InvalidInput):
    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message, field="path")
        self.rule = rule


def normalize_path(path: object) -> str:
    """Return the path in NFC form, or raise InvalidPath naming the rule it broke."""
    if not isinstance(path, str) or not path:
        raise InvalidPath("empty", "Path is empty.")
    normalized = unicodedata.normalize("NFC", path)
    _check(normalized, note="")
    # Compatibility look-alikes (fullwidth dots and slashes, dot leaders) must not
    # turn into '..' or '/' for whatever reads the path later.
    folded = unicodedata.normalize("NFKC", normalized)
    if folded != normalized:
        _check(folded, note=" after Unicode normalization (NFKC)")
    return normalized


def _check(path: str, *, note: str) -> None:
    if len(path) > MAX_PATH_LENGTH:
        raise InvalidPath(
            "too_long",
            f"Path is {len(path)} characters long{note}; the longest allowed is {MAX_PATH_LENGTH}.",
        )
    for position, char in enumerate(path):
        if unicodedata.category(char) in ("Cc", "Cf"):
            raise InvalidPath(
                "control_character",
                f"Path contains the control character U+{ord(char):04X} at position "
                f"{position}{note}.",
            )
    if "\\" in path:
        raise InvalidPath("backslash", f"Path contains a backslash{note}; use '/' between folders.")
    if path.startswith("/"):
        raise InvalidPath(
            "absolute", f"Path is absolute{note}; write it relative, without a leading '/'."
        )
    for segment in path.split("/"):
        if segment == "":
            raise InvalidPath(
                "empty_segment", f"Path has an empty segment ('//' or a trailing '/'){note}."
            )
        if segment in (".", ".."):
            raise InvalidPath(
                "dot_segment", f"Path contains a '{segment}' segment{note}; name folders directly."
            )
        if len(segment) > MAX_SEGMENT_LENGTH:
            raise InvalidPath(
                "segment_too_long",
                f"Path segment '{segment[:20]}…' is {len(segment)} characters long{note}; "
                f"the longest allowed is {MAX_SEGMENT_LENGTH}.",
            )
