"""The check an uploaded Mnemo export passes before the import writes anything
(portability/importing.py applies what it accepts).

An archive is untrusted input: made by hand, damaged, or built to hurt. The check reads
it in three steps, each bounded, and the import starts writing only after the last:

1. The zip's central directory, before a byte is extracted: at most MAX_MEMBERS members;
   names that are relative, without `..`, `.` or empty parts, backslashes, drive letters,
   NUL or other control characters; no name twice; regular files and folders only (no
   symbolic link, device or pipe); stored or deflated, not encrypted; all members together
   at most MNEMO_IMPORT_MAX_UNPACKED_MB uncompressed; and no member of RATIO_FLOOR_BYTES or
   more, nor the whole archive, unpacking to more than MAX_RATIO times its size (a zip
   bomb). A zip the archive library cannot read, or whose directory claims more compressed
   bytes than the file holds, is refused here too.
2. The manifest (at most MAX_MANIFEST_BYTES, parsed with a bound on nesting): the format
   and its version, and a `files` object naming members of the format only
   (portability/format.py). The archive holds nothing else: a member the manifest does not
   list (beyond the folders above what it lists) refuses the archive at once, from the
   names alone, however many there are.
3. Every member the manifest lists, read once as a stream (a line, a document or a work
   file at a time, never whole): its SHA-256 and length against the manifest, and each
   line, document and work file against the rules the write paths apply (types of every
   field, sizes, key grammar, source and confidence, history states, paths, times, actors,
   text PostgreSQL can store). A reader that the archive library stops (a lying central
   directory, a truncated file, a bad CRC) refuses the archive.

What fails steps 1 and 2, or a read in step 3, refuses the whole archive (ArchiveRefused):
nothing is written. What fails a rule in step 3 is refused alone (a member whose digest
does not match, a line, a document, a work file, the settings, an agent) and listed on the
job's page with its reason; merge imports the rest, replace does not start (see
portability/importing.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import unicodedata
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone

from activity.actors import Actor, ActorKind
from context.paths import REFUSED_CATEGORIES, normalize_path
from context.services import MAX_BODY_BYTES, PastVersion, past_version_problem
from lib.errors import ServiceError
from lib.json_depth import MAX_JSON_DEPTH, json_nesting_exceeds
from lib.tags import clean_tags
from memory.replay import PastChange, past_change_problem
from memory.snapshots import UNSTORABLE
from memory.validation import memory_clean
from portability import format as fmt
from profiles.models import AGENT_NAME_PATTERN
from work.models import MAX_BODY_LENGTH as MAX_WORK_BODY_LENGTH
from work.models import MAX_TAGS as MAX_WORK_TAGS
from work.models import MAX_TITLE_LENGTH, WorkKind, WorkStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from portability.importing import Report
    from profiles.models import Agent

# Limits of step 1, from the central directory. The total uncompressed size is a setting
# (MNEMO_IMPORT_MAX_UNPACKED_MB).
MAX_MEMBERS = 200_000
MAX_NAME_LENGTH = 1024  # a document's path is at most 512 (context/paths.py)
# Real exports are Markdown and JSON, which deflate 3-10 times; 100 leaves room for the
# repetitive ones. A member smaller than the floor cannot make much by itself, but the
# whole archive's ratio still counts it.
MAX_RATIO = 100
RATIO_FLOOR_BYTES = 64 * 1024
ARCHIVE_RATIO_FLOOR_BYTES = 1024 * 1024
COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
# Of step 2 and 3.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_PROFILE_BYTES = 1024 * 1024
# A line of JSON holding a 1 MB document version, every character escaped as \uXXXX.
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_WORK_FILE_BYTES = 8 * 1024 * 1024  # a report's body and the metadata an agent gave it
READ_CHUNK = 1024 * 1024
# Values one line, work file or profile may hold: a line's states, payloads and tags hold
# dozens; a work item's metadata (any JSON an agent gave it) may hold many more.
MAX_JSON_VALUES = 1_000_000
# The manifest's values per member of the archive (a file's entry holds about 13): its
# memory once parsed then follows the archive's own size.
MANIFEST_VALUES_PER_MEMBER = 20
# Times an archive may carry: PostgreSQL keeps earlier ones, but Python cannot read a time
# before the year 1 back (an offset can push one there), so every page showing it would fail.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
# How many names a refusal quotes.
QUOTED_NAMES = 3

SHA256 = re.compile(r"[0-9a-f]{64}")
AGENT_NAME = re.compile(AGENT_NAME_PATTERN)
FIXED_MEMBERS = frozenset(
    {
        fmt.PROFILE,
        fmt.MEMORIES,
        fmt.MEMORY_HISTORY,
        fmt.DOCUMENT_VERSIONS,
        fmt.ACTIVITY,
        fmt.PROPOSALS,
    }
)
JSONL_MEMBERS = (
    fmt.MEMORIES,
    fmt.MEMORY_HISTORY,
    fmt.DOCUMENT_VERSIONS,
    fmt.ACTIVITY,
    fmt.PROPOSALS,
)


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


def _quoted(names: list[str]) -> str:
    quoted = ", ".join(f"'{shown(name, 80)}'" for name in names[:QUOTED_NAMES])
    return quoted + (", …" if len(names) > QUOTED_NAMES else "")


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


# --- the shape of what an archive holds -------------------------------------------------

NONE = type(None)
NUMBER: tuple[type, ...] = (int, float)
WHOLE: tuple[type, ...] = (int,)
TEXT: tuple[type, ...] = (str,)
OBJECT: tuple[type, ...] = (dict,)
FLAG: tuple[type, ...] = (bool,)
TEXT_OR_NULL = (str, NONE)
NUMBER_OR_NULL = (int, float, NONE)
WHOLE_OR_NULL = (int, NONE)
OBJECT_OR_NULL = (dict, NONE)
LIST_OR_NULL = (list, NONE)
FLAG_OR_NULL = (bool, NONE)


def _type_name(kinds: tuple[type, ...]) -> str:
    names = {
        int: "a number",
        float: "a number",
        str: "text",
        dict: "an object",
        list: "a list",
        bool: "true or false",
        NONE: "null",
    }
    return " or ".join(dict.fromkeys(names[kind] for kind in kinds))


def fields_problem(
    record: dict[str, Any], spec: dict[str, tuple[type, ...]], required: tuple[str, ...]
) -> str:
    """Why a record's fields are not of the types `spec` gives ("" when they are); fields
    it does not name are not read, so not checked."""
    for name in required:
        if name not in record:
            return f"it has no '{name}'"
    for name, kinds in spec.items():
        if name not in record:
            continue
        value = record[name]
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if wrong_bool or not isinstance(value, kinds):
            return f"its '{name}' is not {_type_name(kinds)}"
    return ""


def time_problem(record: dict[str, Any], *names: str, required: bool = False) -> str:
    for name in names:
        value = record.get(name)
        if value is None and not required:
            continue
        if parse_time(value) is None:
            return f"its '{name}' is not a time with its offset between 1970 and 9999"
    return ""


def actor_problem(actor: object) -> str:
    """Why an archive's actor is not `{"type": user | agent | system, "agent": name or null}`."""
    if not isinstance(actor, dict):
        return "its actor is not an object"
    kind, agent = actor.get("type"), actor.get("agent")
    if kind not in ActorKind.values:
        return "its actor's type is not user, agent or system"
    if agent is None:
        return ""
    if kind != ActorKind.AGENT:
        return "only an agent actor names an agent"
    if not isinstance(agent, str) or not AGENT_NAME.fullmatch(agent):
        return "its actor's agent is not an agent's name"
    return ""


MEMORY_SPEC = {
    "key": TEXT,
    "value": TEXT,
    "source": TEXT_OR_NULL,
    "confidence": NUMBER_OR_NULL,
    "tags": LIST_OR_NULL,
    "pinned": FLAG_OR_NULL,
    "access_count": WHOLE_OR_NULL,
    "last_accessed_at": TEXT_OR_NULL,
    "occurred_at": TEXT_OR_NULL,
    "session": TEXT_OR_NULL,
    "created_at": TEXT_OR_NULL,
    "updated_at": TEXT_OR_NULL,
}
HISTORY_SPEC = {
    "key": TEXT,
    "action": TEXT,
    "source": TEXT,
    "before": OBJECT_OR_NULL,
    "after": OBJECT_OR_NULL,
    "actor": OBJECT,
    "created_at": TEXT,
}
# Checked by audience_problem; absent in archives made before issue 27.
AUDIENCE_SPEC = {"audience": (str, dict, NONE)}


def audience_problem(audience: object) -> str:
    """Why a line's `audience` is neither "user" (or absent, null) nor {"agent": name}."""
    if audience is None or audience == fmt.USER_AUDIENCE:
        return ""
    if not isinstance(audience, dict) or set(audience) != {"agent"}:
        return 'its audience is not "user" or {"agent": <name>}'
    problem = agent_problem(audience["agent"])
    return problem.replace("its agent", "its audience's agent", 1)


def audience_agent(record: dict[str, Any]) -> str | None:
    """The name of the agent whose note the line is (None: the user's memory), of a line
    whose audience passed audience_problem."""
    audience = record.get("audience")
    return audience["agent"] if isinstance(audience, dict) else None


VERSION_SPEC = {
    "path": TEXT,
    "agent": TEXT_OR_NULL,
    "action": TEXT,
    "body": TEXT,
    "actor": OBJECT,
    "created_at": TEXT,
}
ACTIVITY_SPEC = {"event_type": TEXT, "payload": OBJECT, "actor": OBJECT, "created_at": TEXT}
PROPOSAL_SPEC = {
    "key": TEXT,
    "action": TEXT,
    "trigger": TEXT,
    "status": TEXT,
    "before": OBJECT_OR_NULL,
    "after": OBJECT_OR_NULL,
    "reason": TEXT_OR_NULL,
    "requested_key": TEXT_OR_NULL,
    "actor": OBJECT,
    "created_at": TEXT,
    "expires_at": TEXT_OR_NULL,
    "decided_at": TEXT_OR_NULL,
}
SETTINGS_SPEC: dict[str, tuple[type, ...]] = {
    "token_budget": WHOLE,
    "memory_paused": FLAG,
    "review_agent_memories": FLAG,
    "auto_learn": FLAG,
    "profile_budget": WHOLE,
    "llm_daily_tokens": WHOLE,
    "heartbeat_enabled": FLAG,
    "notify_webhook_url": TEXT,
}
AGENT_SPEC = {
    "name": TEXT,
    "display_name": TEXT_OR_NULL,
    "description": TEXT_OR_NULL,
    "learns_from_turns": FLAG_OR_NULL,
}
WORK_SPEC = {
    "title": TEXT,
    "kind": TEXT,
    "status": TEXT,
    "tags": LIST_OR_NULL,
    "agent": TEXT_OR_NULL,
    "metadata": OBJECT_OR_NULL,
    "created_at": TEXT_OR_NULL,
    "updated_at": TEXT_OR_NULL,
}


class LineCheck:
    """The rule of one JSON Lines member: `problem(record)` says why a line is refused ("" when
    it is accepted). Deterministic, so the import's second reading skips the same lines."""

    section = ""

    def problem(self, record: dict[str, Any]) -> str:
        raise NotImplementedError


class MemoryLines(LineCheck):
    section = "memories"

    def __init__(self, user: AbstractBaseUser) -> None:
        self.user = user
        self.actor = Actor.for_user(user)
        self.keys: set[tuple[str | None, str]] = set()

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, {**MEMORY_SPEC, **AUDIENCE_SPEC}, ("key", "value"))
            or audience_problem(record.get("audience"))
            or time_problem(record, "updated_at", "created_at", "last_accessed_at")
        )
        if problem:
            return f"Refused: {problem}."
        try:
            # The rules of the write itself (memory/services.py memory_upsert).
            memory_clean(
                key=record["key"],
                value=record["value"],
                actor=self.actor,
                source=record.get("source"),
                confidence=record.get("confidence"),
                tags=record.get("tags") or [],
                user=self.user,
                occurred_at=record.get("occurred_at"),
                session=record.get("session"),
            )
        except ServiceError as error:
            return error.message
        where = (audience_agent(record), record["key"])
        if where in self.keys:
            return "An earlier line has the same key (in the same audience)."
        self.keys.add(where)
        return ""


class HistoryLines(LineCheck):
    section = "memory history"

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, {**HISTORY_SPEC, **AUDIENCE_SPEC}, tuple(HISTORY_SPEC))
            or audience_problem(record.get("audience"))
            or time_problem(record, "created_at", required=True)
            or actor_problem(record["actor"])
        )
        if problem:
            return f"Refused: {problem}."
        return past_change_problem(past_change(record, Actor.system()))


def past_change(
    record: dict[str, Any], actor: Actor, owner_agent: Agent | None = None
) -> PastChange:
    """`owner_agent`: the account's agent the line's audience names (None: the user's)."""
    when = parse_time(record["created_at"])
    assert when is not None  # HistoryLines checked it
    return PastChange(
        key=record["key"],
        action=record["action"],
        source=record["source"],
        before=record["before"],
        after=record["after"],
        actor=actor,
        created_at=when,
        owner_agent=owner_agent,
    )


class VersionLines(LineCheck):
    section = "document versions"

    def __init__(self) -> None:
        # When each document (agent name, path) last changed: merge's "newer wins".
        self.latest: dict[tuple[str | None, str], datetime] = {}

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, VERSION_SPEC, tuple(VERSION_SPEC))
            or time_problem(record, "created_at", required=True)
            or actor_problem(record["actor"])
            or agent_problem(record["agent"])
        )
        if problem:
            return f"Refused: {problem}."
        try:
            path = normalize_path(record["path"])
        except ServiceError as error:
            return error.message
        version = past_version(record, Actor.system())
        if problem := past_version_problem(version):
            return problem
        where = (record["agent"], path)
        if where not in self.latest or version.created_at > self.latest[where]:
            self.latest[where] = version.created_at
        return ""


def past_version(record: dict[str, Any], actor: Actor) -> PastVersion:
    when = parse_time(record["created_at"])
    assert when is not None  # VersionLines checked it
    return PastVersion(action=record["action"], body=record["body"], actor=actor, created_at=when)


def agent_problem(name: object) -> str:
    if name is not None and (not isinstance(name, str) or not AGENT_NAME.fullmatch(name)):
        return "its agent is not an agent's name (1-64 of a-z, 0-9, '_' and '-')"
    return ""


class ActivityLines(LineCheck):
    """Checked, never replayed: the account's activity records the import itself."""

    section = "activity"

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, ACTIVITY_SPEC, tuple(ACTIVITY_SPEC))
            or time_problem(record, "created_at", required=True)
            or actor_problem(record["actor"])
        )
        return f"Refused: {problem}." if problem else ""


class ProposalLines(LineCheck):
    """Checked, never replayed: a proposal waits for the account it was made to."""

    section = "proposals"

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, PROPOSAL_SPEC, ("key", "action", "actor", "created_at"))
            or time_problem(record, "created_at", required=True)
            or time_problem(record, "expires_at", "decided_at")
            or actor_problem(record["actor"])
        )
        return f"Refused: {problem}." if problem else ""


def checked_lines(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, check: LineCheck
) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """jsonl_records with `check` applied: (number, the accepted record or None, why not)."""
    for number, record, problem in jsonl_records(archive, info):
        if record is None:
            yield number, None, f"Line {number} is {problem}."
            continue
        problem = check.problem(record)
        yield number, None if problem else record, problem


# --- documents, work files, the profile --------------------------------------------------


@dataclass(frozen=True)
class DocumentEntry:
    member: str
    agent: str | None
    path: str  # normalized (context/paths.py)

    @property
    def item(self) -> str:
        return f"{self.agent}: {self.path}" if self.agent else self.path


def document_body(raw: bytes | None) -> tuple[str, str]:
    """(the body, "") of a document member's bytes, or ("", why it is refused)."""
    if raw is None or len(raw) > MAX_BODY_BYTES:
        return "", f"Larger than {MAX_BODY_BYTES:,} bytes."
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "", "Not UTF-8 text."
    if "\x00" in body:
        return "", "It contains a NUL character (U+0000)."
    return body, ""


def parse_work_file(text: str) -> tuple[dict[str, Any], str]:
    """A work file's front matter (JSON values) and body; ValueError saying what is wrong."""
    fence = fmt.WORK_FRONT_MATTER_FENCE
    head, sep, rest = text.partition("\n")
    if head != fence or not sep:
        raise ValueError(f"it does not start with a '{fence}' line")
    values: dict[str, Any] = {}
    while True:
        line, sep, rest = rest.partition("\n")
        if line == fence:
            return values, rest
        if not sep:
            raise ValueError(f"its front matter has no closing '{fence}' line")
        name, colon, raw = line.partition(": ")
        if not colon or name not in fmt.WORK_FRONT_MATTER:
            raise ValueError(f"'{shown(line, 60)}' is not a front matter line")
        value, problem = parse_json(raw)
        if problem:
            raise ValueError(f"the value of '{name}' is {problem}")
        values[name] = value


def read_work_file(raw: bytes | None) -> tuple[dict[str, Any], str, str]:
    """(front matter, body, "") of a work member's bytes, or ({}, "", why it is refused)."""
    try:
        if raw is None or len(raw) > MAX_WORK_FILE_BYTES:
            raise ValueError("it is too large")
        values, body = parse_work_file(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        return {}, "", f"Not a work file: {shown(error, 200)}."
    problem = (
        fields_problem(values, WORK_SPEC, ("title", "kind", "status"))
        or time_problem(values, "created_at", "updated_at")
        or agent_problem(values.get("agent"))
        or _work_problem(values, body)
    )
    return (values, body, "") if not problem else ({}, "", f"Refused: {problem}.")


def _work_problem(values: dict[str, Any], body: str) -> str:
    """The rules of work/services.py work_create, on a work file's values."""
    title = values["title"].strip()
    if not title or len(title) > MAX_TITLE_LENGTH or "\x00" in title:
        return f"its title is empty, holds NUL or is longer than {MAX_TITLE_LENGTH} characters"
    if values["kind"] not in WorkKind.values or values["status"] not in WorkStatus.values:
        return "its kind or status is not one Mnemo knows"
    if len(body) > MAX_WORK_BODY_LENGTH or "\x00" in body:
        return f"its body holds NUL or is longer than {MAX_WORK_BODY_LENGTH:,} characters"
    try:
        clean_tags(values.get("tags") or [], limit=MAX_WORK_TAGS)
    except ServiceError as error:
        return error.message.rstrip(".")
    return ""


def profile_problems(data: object) -> tuple[str, list[dict[str, Any]], list[tuple[str, str]]]:
    """Of profile.json: why its settings are refused ("" when they are not), the agents
    accepted, and each agent refused as (its name or position, why)."""
    if not isinstance(data, dict):
        return "Refused: it is not a JSON object.", [], []
    settings_problem = fields_problem(data, SETTINGS_SPEC, ())
    settings_problem = f"Refused: {settings_problem}." if settings_problem else ""
    agents = data.get("agents")
    if agents is not None and not isinstance(agents, list):
        return settings_problem or "Refused: its 'agents' is not a list.", [], []
    accepted: list[dict[str, Any]] = []
    refused: list[tuple[str, str]] = []
    names: set[str] = set()
    for position, agent in enumerate(agents or [], start=1):
        label, problem = f"agent {position}", "it is not an object"
        if isinstance(agent, dict):
            problem = fields_problem(agent, AGENT_SPEC, ("name",))
            if not problem:
                label = agent["name"]
                problem = agent_problem(agent["name"])
            if not problem and agent["name"] in names:
                problem = "an earlier agent has the same name"
        if problem:
            refused.append((label, f"Refused: {problem}."))
        else:
            names.add(agent["name"])
            accepted.append(agent)
    return settings_problem, accepted, refused


# --- the whole archive --------------------------------------------------------------------


@dataclass
class CheckedArchive:
    """An archive that passed the check, and what of it the import may apply."""

    archive: zipfile.ZipFile
    members: dict[str, zipfile.ZipInfo]
    manifest: dict[str, Any]
    # Members whose digest and length match the manifest (each line, document and work file
    # of them is checked again as it is applied, and skipped where it was refused).
    verified: set[str] = field(default_factory=set)
    user: AbstractBaseUser | None = None
    profile: dict[str, Any] | None = None  # profile.json, when its settings are accepted
    agents: list[dict[str, Any]] = field(default_factory=list)  # the accepted agents
    documents: list[DocumentEntry] = field(default_factory=list)
    work: list[str] = field(default_factory=list)  # accepted work members, in name order
    latest_versions: dict[tuple[str | None, str], datetime] = field(default_factory=dict)
    memories: int = 0  # accepted memory lines

    def info(self, name: str) -> zipfile.ZipInfo | None:
        return self.members.get(name) if name in self.verified else None

    @property
    def items(self) -> int:
        """The memories, documents and work items the import will apply."""
        return self.memories + len(self.documents) + len(self.work)


def check_archive(*, user: AbstractBaseUser, fileobj: IO[bytes], report: Report) -> CheckedArchive:
    """Check the archive in `fileobj` (see the module's docstring): ArchiveRefused for the
    whole; each item refused alone is added to `report`."""
    size = fileobj.seek(0, 2)
    fileobj.seek(0)
    try:
        archive = zipfile.ZipFile(fileobj)
    except Exception as error:  # the archive library, reading untrusted bytes
        raise ArchiveRefused(
            f"The file is not a zip archive, or its directory is damaged "
            f"({type(error).__name__}: {shown(error, 200)})."
        ) from error
    try:
        members = _check_directory(archive, size)
        manifest = _read_manifest(archive, members)
        checked = CheckedArchive(archive=archive, members=members, manifest=manifest, user=user)
        _check_listing(checked, report)
        _check_members(checked, report)
    except BaseException:
        archive.close()
        raise
    return checked


def name_problem(name: str) -> str:
    """Why an archive's member name is refused ("" when it is not)."""
    if len(name) > MAX_NAME_LENGTH:
        return f"its name is longer than {MAX_NAME_LENGTH} characters"
    if any(unicodedata.category(char) in REFUSED_CATEGORIES for char in name):
        return "its name holds NUL or another control character"
    if "\\" in name or name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "its name is absolute or uses a backslash"
    parts = name.removesuffix("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "its name leaves the archive or has an empty part ('..', '.', '//')"
    return ""


def _check_directory(archive: zipfile.ZipFile, size: int) -> dict[str, zipfile.ZipInfo]:
    """Step 1: the central directory's limits. The file members by name."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArchiveRefused(
            f"The archive has {len(infos):,} members; at most {MAX_MEMBERS:,} are accepted."
        )
    for info in infos:
        # orig_filename: zipfile cuts a name at its first NUL; the name as stored is judged.
        if problem := name_problem(info.orig_filename):
            raise ArchiveRefused(f"'{shown(info.orig_filename, 120)}' is refused: {problem}.")
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            what = "a symbolic link" if kind == stat.S_IFLNK else "not a regular file"
            raise ArchiveRefused(f"'{shown(info.filename, 120)}' is {what}: refused.")
        if info.flag_bits & 0x1:
            raise ArchiveRefused(f"'{shown(info.filename, 120)}' is encrypted: refused.")
        if info.compress_type not in COMPRESSIONS:
            raise ArchiveRefused(
                f"'{shown(info.filename, 120)}' is compressed with method "
                f"{info.compress_type}; this Mnemo reads stored or deflated members only."
            )
        if info.is_dir() and info.file_size:
            raise ArchiveRefused(f"The folder '{shown(info.filename, 120)}' holds bytes.")
    twice = [name for name, count in Counter(i.filename for i in infos).items() if count > 1]
    if twice:
        raise ArchiveRefused(f"The archive holds more than one member named {_quoted(twice)}.")
    _check_sizes(infos, size)
    return {info.filename: info for info in infos if not info.is_dir()}


def _check_sizes(infos: list[zipfile.ZipInfo], size: int) -> None:
    limit = settings.MNEMO_IMPORT_MAX_UNPACKED_BYTES
    total = sum(info.file_size for info in infos)
    if total > limit:
        raise ArchiveRefused(
            f"The archive would unpack to {total:,} bytes; an import may unpack at most "
            f"{limit:,} (MNEMO_IMPORT_MAX_UNPACKED_MB)."
        )
    if sum(info.compress_size for info in infos) > size:
        raise ArchiveRefused(
            "The archive's directory claims more compressed bytes than the file holds: it "
            "is damaged or made to mislead."
        )
    if total >= ARCHIVE_RATIO_FLOOR_BYTES and total > MAX_RATIO * size:
        raise ArchiveRefused(
            f"The archive would unpack to {total:,} bytes from {size:,}, more than {MAX_RATIO} "
            "times its size: refused as a possible zip bomb."
        )
    for info in infos:
        if info.file_size >= RATIO_FLOOR_BYTES and info.file_size > MAX_RATIO * max(
            info.compress_size, 1
        ):
            raise ArchiveRefused(
                f"'{shown(info.filename, 120)}' would unpack to {info.file_size:,} bytes from "
                f"{info.compress_size:,}, more than {MAX_RATIO} times: refused as a possible "
                "zip bomb."
            )


def _read_manifest(archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo]) -> dict:
    """Step 2: the manifest, its format and version, and what `files` may name."""
    if fmt.MANIFEST not in members:
        raise ArchiveRefused(f"The archive has no {fmt.MANIFEST}: it is not a Mnemo export.")
    raw = read_member(archive, members[fmt.MANIFEST], MAX_MANIFEST_BYTES)
    if raw is None:
        raise ArchiveRefused(f"{fmt.MANIFEST} is larger than {MAX_MANIFEST_BYTES:,} bytes.")
    entries = len(archive.infolist())
    manifest, problem = parse_json(raw, max_values=MANIFEST_VALUES_PER_MEMBER * entries + 1000)
    if problem:
        raise ArchiveRefused(f"{fmt.MANIFEST} is {problem} (the archive holds {entries:,}).")
    if not isinstance(manifest, dict) or manifest.get("format") != fmt.FORMAT:
        raise ArchiveRefused(
            f"{fmt.MANIFEST} does not name the format '{fmt.FORMAT}': not a Mnemo export."
        )
    version = manifest.get("format_version")
    if version != fmt.FORMAT_VERSION or isinstance(version, bool):
        raise ArchiveRefused(
            f"The archive's format_version is {shown(repr(version), 40)}; this Mnemo reads "
            f"version {fmt.FORMAT_VERSION} only."
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise ArchiveRefused(f"{fmt.MANIFEST} has no 'files' object.")
    if len(files) > MAX_MEMBERS:
        raise ArchiveRefused(
            f"{fmt.MANIFEST} lists {len(files):,} files; at most {MAX_MEMBERS:,} are accepted."
        )
    for name in files:
        if problem := name_problem(name):
            raise ArchiveRefused(f"{fmt.MANIFEST} lists '{shown(name, 120)}': {problem}.")
        if not _format_member(name):
            raise ArchiveRefused(
                f"{fmt.MANIFEST} lists '{shown(name, 120)}', which is not a file of the "
                "Mnemo export format (portability/format.py)."
            )
    return manifest


def _format_member(name: str) -> bool:
    if name in FIXED_MEMBERS:
        return True
    if name.startswith(fmt.DOCUMENTS_DIR):
        return len(name) > len(fmt.DOCUMENTS_DIR) and not name.endswith("/")
    return name.startswith(fmt.WORK_DIR) and name.endswith(".md") and "/" not in name[5:]


def _check_listing(checked: CheckedArchive, report: Report) -> None:
    """Step 2, against the archive: it holds what the manifest lists and nothing else
    (folders above what it lists may be there). Listed files that are missing are refused."""
    files: dict[str, Any] = checked.manifest["files"]
    folders = {name[: i + 1] for name in files for i, char in enumerate(name) if char == "/"}
    unlisted = [
        info.filename
        for info in checked.archive.infolist()
        if info.filename != fmt.MANIFEST
        and info.filename not in files
        and not (info.is_dir() and info.filename in folders)
    ]
    if unlisted:
        raise ArchiveRefused(
            f"The archive holds {len(unlisted):,} file{'s' if len(unlisted) > 1 else ''} its "
            f"manifest does not list ({_quoted(unlisted)}): it was changed after the export, "
            "or is not one. Nothing was imported."
        )
    for name in files:
        if name not in checked.members:
            report.add("archive", name, "refused", "Listed in the manifest, not in the archive.")
        report.alive()


def _check_members(checked: CheckedArchive, report: Report) -> None:
    """Step 3: each listed member, its digest and every item in it."""
    files: dict[str, Any] = checked.manifest["files"]
    for name in (fmt.PROFILE, *JSONL_MEMBERS):
        if name in files and name in checked.members and _digest_matches(checked, name, report):
            checked.verified.add(name)
    _check_profile(checked, report)
    _check_lines(checked, report)
    _check_documents(checked, report)
    work = sorted(name for name in files if name.startswith(fmt.WORK_DIR))
    for name in work:
        _check_work(checked, name, report)


def _digest_matches(checked: CheckedArchive, name: str, report: Report) -> bool:
    expected = checked.manifest["files"][name]
    digest, size = member_digest(checked.archive, checked.members[name])
    report.alive()
    if (
        isinstance(expected, dict)
        and isinstance(expected.get("sha256"), str)
        and SHA256.fullmatch(expected["sha256"])
        and digest == expected["sha256"]
        and size == expected.get("bytes")
    ):
        return True
    _digest_refused(report, name)
    return False


def _check_profile(checked: CheckedArchive, report: Report) -> None:
    info = checked.info(fmt.PROFILE)
    if info is None:
        return
    raw = read_member(checked.archive, info, MAX_PROFILE_BYTES)
    data, problem = parse_json(raw) if raw is not None else (None, "too large")
    if problem:
        report.add("settings", fmt.PROFILE, "refused", f"Refused: it is {problem}.")
        return
    settings_problem, checked.agents, refused_agents = profile_problems(data)
    if settings_problem:
        report.add("settings", "settings", "refused", settings_problem)
    else:
        checked.profile = data
    for label, reason in refused_agents:
        report.add("agents", label, "refused", reason)


def line_checks(user: AbstractBaseUser) -> dict[str, LineCheck]:
    """A fresh rule for each JSON Lines member (the import's second reading makes its own)."""
    return {
        fmt.MEMORIES: MemoryLines(user),
        fmt.MEMORY_HISTORY: HistoryLines(),
        fmt.DOCUMENT_VERSIONS: VersionLines(),
        fmt.ACTIVITY: ActivityLines(),
        fmt.PROPOSALS: ProposalLines(),
    }


def _check_lines(checked: CheckedArchive, report: Report) -> None:
    assert checked.user is not None
    for name, check in line_checks(checked.user).items():
        info = checked.info(name)
        if info is None:
            continue
        for number, record, problem in checked_lines(checked.archive, info, check):
            if record is None:
                report.add(check.section, f"{name} line {number}", "refused", problem)
            elif name == fmt.MEMORIES:
                checked.memories += 1
            report.alive()
        if isinstance(check, VersionLines):
            checked.latest_versions = check.latest


def _check_documents(checked: CheckedArchive, report: Report) -> None:
    taken: set[tuple[str | None, str]] = set()
    for name, entry in checked.manifest["files"].items():
        if not name.startswith(fmt.DOCUMENTS_DIR):
            continue
        report.alive()
        if name not in checked.members:
            continue  # refused as missing
        path = entry.get("path") if isinstance(entry, dict) else None
        agent = entry.get("agent") if isinstance(entry, dict) else None
        if not isinstance(path, str) or agent_problem(agent):
            report.add(
                "documents", name, "refused", "The manifest does not name its path and agent."
            )
            continue
        try:
            path = normalize_path(path)
        except ServiceError as error:
            report.add("documents", name, "refused", error.message)
            continue
        document = DocumentEntry(member=name, agent=agent, path=path)
        if (agent, path) in taken:
            report.add("documents", document.item, "refused", "An earlier file has the same path.")
            continue
        info = checked.members[name]
        raw = read_member(checked.archive, info, MAX_BODY_BYTES)
        if raw is None:
            report.add(
                "documents", document.item, "refused", f"Larger than {MAX_BODY_BYTES:,} bytes."
            )
            continue
        expected = entry.get("sha256"), entry.get("bytes")
        if expected != (hashlib.sha256(raw).hexdigest(), len(raw)):
            _digest_refused(report, name)
            continue
        _, problem = document_body(raw)
        if problem:
            report.add("documents", document.item, "refused", problem)
            continue
        checked.verified.add(name)
        taken.add((agent, path))
        checked.documents.append(document)


def _digest_refused(report: Report, name: str) -> None:
    report.add(
        "archive",
        name,
        "refused",
        "Not read: its SHA-256 or length does not match the manifest (damaged or changed "
        "after the export).",
    )


def _check_work(checked: CheckedArchive, name: str, report: Report) -> None:
    report.alive()
    if name not in checked.members:
        return  # refused as missing
    entry = checked.manifest["files"][name]
    raw = read_member(checked.archive, checked.members[name], MAX_WORK_FILE_BYTES)
    if raw is not None and (
        not isinstance(entry, dict)
        or (entry.get("sha256"), entry.get("bytes")) != (hashlib.sha256(raw).hexdigest(), len(raw))
    ):
        _digest_refused(report, name)
        return
    _, _, problem = read_work_file(raw)
    if problem:
        report.add("work", name, "refused", problem)
        return
    checked.verified.add(name)
    checked.work.append(name)
