"""Reading an archive's members, bounded: a member's digest and bytes, its JSON Lines a
line at a time, JSON with bounds on nesting and size, and times. Whatever the archive
library raises while it reads refuses the archive (ArchiveRefused): nothing read from it so
far is trusted. The check (portability/validation/archive.py) and the import's second
reading (portability/applying.py) read through these alike."""

from __future__ import annotations

import hashlib
import json
import unicodedata
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import IO, Any

from django.utils import timezone

from lib.json_depth import MAX_JSON_DEPTH, json_nesting_exceeds
from memory.snapshots import UNSTORABLE

# A line of JSON holding a 1 MB document version, every character escaped as \uXXXX.
MAX_LINE_BYTES = 8 * 1024 * 1024
READ_CHUNK = 1024 * 1024
# Values one line, work file or profile may hold: a line's states, payloads and tags hold
# dozens; a work item's metadata (any JSON an agent gave it) may hold many more.
MAX_JSON_VALUES = 1_000_000
# Times an archive may carry: PostgreSQL keeps earlier ones, but Python cannot read a time
# before the year 1 back (an offset can push one there), so every page showing it would fail.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)


class ArchiveRefused(Exception):
    """The whole upload is refused (nothing was written): `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def shown(text: object, limit: int = 200) -> str:
    """Text from an archive as a page shows it and PostgreSQL keeps it: control characters,
    NUL and lone surrogates written as escapes (\\x00, \\u202e), at most `limit` characters."""
    text = str(text)
    if not text.isprintable():
        text = "".join(
            char if char == " " or unicodedata.category(char)[0] not in "CZ" else _escape(char)
            for char in text
        )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# --- reading members ------------------------------------------------------------------


class _Bounded:
    """A member opened for reading that yields at most what it declared (zipfile stops at
    the declared size too; this holds even if that ever changes). Whatever the archive
    library raises while it reads (a bad CRC, a truncated or lying archive) refuses the
    archive: nothing read from it so far is trusted."""

    def __init__(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        self._name = info.filename
        self._left = info.file_size
        self._handle: IO[bytes] = self._guard(archive.open, info)

    def _guard(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except ArchiveRefused:
            raise
        except Exception as error:  # the archive library, reading untrusted bytes
            raise ArchiveRefused(
                f"The archive is damaged: reading '{shown(self._name, 120)}' failed "
                f"({type(error).__name__}: {shown(error, 200)}). Nothing was imported."
            ) from error

    def read(self, size: int) -> bytes:
        return self._counted(self._guard(self._handle.read, min(size, self._left + 1)))

    def _counted(self, data: bytes) -> bytes:
        self._left -= len(data)
        if self._left < 0:
            raise ArchiveRefused(
                f"'{shown(self._name, 120)}' holds more bytes than the archive declares."
            )
        return data

    def close(self) -> None:
        self._handle.close()


def member_digest(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[str, int]:
    """The member's SHA-256 and length, read a chunk at a time."""
    digest = hashlib.sha256()
    size = 0
    handle = _Bounded(archive, info)
    try:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    finally:
        handle.close()
    return digest.hexdigest(), size


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes | None:
    """The member's bytes, or None when it is longer than `limit`."""
    if info.file_size > limit:
        return None
    handle = _Bounded(archive, info)
    try:
        return handle.read(limit + 1)
    finally:
        handle.close()


def parse_json(raw: bytes | str, *, max_values: int = MAX_JSON_VALUES) -> tuple[Any, str]:
    """(the value, "") of a JSON text, or (None, why not), never raising: nested at most
    MAX_JSON_DEPTH levels, as the agent API takes (found before parsing, so deep nesting is
    a refusal, not a RecursionError), at most about `max_values` values (counted before
    parsing: `[]` is 2 bytes of text and 56 of memory once parsed), no NaN or Infinity,
    strict UTF-8, and no string PostgreSQL cannot store (NUL, a lone surrogate)."""
    data = raw.encode() if isinstance(raw, str) else raw
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    if json_nesting_exceeds(data, MAX_JSON_DEPTH):
        return None, f"nested more than {MAX_JSON_DEPTH} levels deep"
    # Every string, array, object or further element adds one of these (more, if strings
    # hold them): an upper bound on the values parsing would make.
    values = data.count(b'"') // 2 + data.count(b"[") + data.count(b"{") + data.count(b",")
    if values > max_values:
        return None, f"holding more than {max_values:,} values"
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:
        return None, f"not JSON ({shown(error, 120)})"
    # Only an escape (\u0000, \ud800) can put NUL or a surrogate in a string of strict JSON.
    if "\\u" in text and _unstorable(value):
        return None, "holding a NUL character or an unpaired surrogate"
    return value, ""


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _unstorable(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if UNSTORABLE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def jsonl_records(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo
) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """(line number, the object or None, why not) for each non-empty line, streamed."""
    handle = _Bounded(archive, info)
    try:
        for number, line in enumerate(_lines(handle), start=1):
            if line is None:
                yield number, None, f"longer than {MAX_LINE_BYTES:,} bytes"
                continue
            if not line.strip():
                continue
            record, problem = parse_json(line)
            if problem:
                yield number, None, problem
            elif not isinstance(record, dict):
                yield number, None, "not a JSON object"
            else:
                yield number, record, ""
    finally:
        handle.close()


def _lines(handle: _Bounded) -> Iterator[bytes | None]:
    """The member's lines (without their newline), None for each longer than
    MAX_LINE_BYTES, holding at most that much: zipfile's readline(limit) may return more
    than its limit."""
    pending = bytearray()
    too_long = False
    while chunk := handle.read(READ_CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if too_long or len(pending) + end - start > MAX_LINE_BYTES:
                yield None
            else:
                yield bytes(pending + chunk[start:end]) if pending else chunk[start:end]
            pending.clear()
            too_long = False
            start = end + 1
        if too_long or len(pending) + len(chunk) - start > MAX_LINE_BYTES:
            pending.clear()
            too_long = True
        else:
            pending += chunk[start:]
    if too_long:
        yield None
    elif pending:
        yield bytes(pending)


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time with its offset between 1970 and 9999, or None (naive times are
    read as UTC)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed, timezone.UTC)
        in_utc = parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return parsed if EARLIEST <= in_utc <= LATEST else None
