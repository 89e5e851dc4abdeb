"""Document paths: relative, normalized, and never able to step outside their scope."""

from __future__ import annotations

import unicodedata

from lib.errors import InvalidInput

MAX_PATH_LENGTH = 512
MAX_SEGMENT_LENGTH = 255
# Control and format characters, surrogates, and line or paragraph separators: invisible
# or line-breaking in a listing.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Slashes and backslashes that no Unicode normalization turns into '/' or '\\', but that
# look like them: a name holding one would pass for a folder.
SLASH_LOOKALIKES = frozenset("\u2044\u2215\u2216\u2571\u2572\u29f5\u29f8\u29f9")


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
    # Compatibility look-alikes (fullwidth letters, dots and slashes, dot leaders) are
    # refused: a fullwidth MEMORY.md must not be a second MEMORY.md, nor fullwidth dots a
    # way up. The folded form is checked first so a look-alike of '..' or '/' names that rule.
    folded = unicodedata.normalize("NFKC", normalized)
    if folded != normalized:
        _check(folded, note=" after Unicode normalization (NFKC)")
        _refuse_lookalike(normalized, folded)
    return normalized


def normalize_folder(path: object) -> str:
    """A folder path as normalize_path, a trailing '/' allowed; "" is the top level."""
    if path == "":
        return ""
    if isinstance(path, str) and len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return normalize_path(path)


def _refuse_lookalike(path: str, folded: str) -> None:
    for position, char in enumerate(path):
        plain = unicodedata.normalize("NFKC", char)
        if plain != char:
            raise InvalidPath(
                "lookalike",
                f"Path contains '{char}' (U+{ord(char):04X}) at position {position}, a "
                f"look-alike of '{plain}'; write '{plain}' instead.",
            )
    raise InvalidPath("lookalike", f"Path reads as '{folded}' once normalized; write that.")


def _check(path: str, *, note: str) -> None:
    if len(path) > MAX_PATH_LENGTH:
        raise InvalidPath(
            "too_long",
            f"Path is {len(path)} characters long{note}; the longest allowed is {MAX_PATH_LENGTH}.",
        )
    for position, char in enumerate(path):
        if unicodedata.category(char) in REFUSED_CATEGORIES:
            raise InvalidPath(
                "control_character",
                f"Path contains the control character U+{ord(char):04X} at position "
                f"{position}{note}.",
            )
        if char in SLASH_LOOKALIKES:
            raise InvalidPath(
                "lookalike",
                f"Path contains '{char}' (U+{ord(char):04X}) at position {position}, which "
                "looks like a slash; use '/' between folders.",
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
        if segment != segment.strip():
            raise InvalidPath(
                "whitespace",
                f"Path segment '{segment}' starts or ends with a space{note}; names may "
                "hold spaces only between other characters.",
            )
        if len(segment) > MAX_SEGMENT_LENGTH:
            raise InvalidPath(
                "segment_too_long",
                f"Path segment '{segment[:20]}…' is {len(segment)} characters long{note}; "
                f"the longest allowed is {MAX_SEGMENT_LENGTH}.",
            )
