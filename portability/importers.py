"""Importers from other memory tools: what another assistant remembered about the user
becomes Mnemo entries.

- ChatGPT: the text copied from Settings → Personalization → Manage memories, one memory
  per line (bullets and numbering are dropped).
- Claude: the memory text Claude shows and exports, Markdown: `#` headings name sections
  (their words become a tag), each bullet or line below them is one memory.
- mem0: its export's JSON, a list of memories or `{"results": [...]}` (also
  `{"memories": [...]}`), each with `memory` (or `text`), `created_at`, `categories`,
  `metadata` and the ids it was stored under (`user_id`, `agent_id`, `run_id`: mem0's
  session). The text, the creation time (also as when it was said, `occurred_at`), the
  categories (as tags) and the run as the memory's `session` are kept; a run id that is not
  a session's name (memory/occurrence.py) is left out rather than the memory refused.
  ChatGPT's and Claude's texts say neither when nor in which conversation.

Each entry is stored through memory/entries.py `memory_store`, as the system: what another
tool inferred about the user is a note about them, not a fact they stated in Mnemo, so it
is `tp_extracted` (confidence 0.8), meets the near-duplicate rule (the same text twice, or
one already saying it, adds nothing) and, when the user reviews agents' new memories, waits
in the review inbox. A paused account refuses them. Each is tagged `imported` and the
tool's name, and its proposal (if any) says where it came from. One that looks like a
credential (lib/credentials.py) is refused and reported with the credential left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING

from django.db import transaction

from activity.actors import Actor
from lib.credentials import redact
from lib.errors import SecretRefused, ServiceError
from lib.tags import normalize_tag
from memory.entries import memory_store
from memory.models import MAX_TAGS, MAX_VALUE_LENGTH, Memory
from memory.occurrence import MAX_YEAR, MIN_YEAR, session_problem
from memory.snapshots import UNSTORABLE
from portability.models import ImportKind
from portability.report import Report
from portability.validation.reading import ArchiveRefused, parse_json, parse_time

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

MAX_TEXT_BYTES = 10 * 1024 * 1024
IMPORTED_TAG = "imported"
TOOL_NAMES = {ImportKind.CHATGPT: "ChatGPT", ImportKind.CLAUDE: "Claude", ImportKind.MEM0: "mem0"}

BULLET = re.compile(r"^\s*(?:[-*•·‣▪–]|\d{1,3}[.)])\s+")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
PREFERENCE = re.compile(
    r"\b(prefers?|preferred|likes?|dislikes?|loves?|hates?|enjoys?|wants?|favou?rite)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Entry:
    """One memory read from another tool's export."""

    text: str
    tags: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    kind: str = "fact"
    session: str = ""


def _kind(text: str, tags: Iterable[str | None] = ()) -> str:
    if "preferences" in tags or "preference" in tags or PREFERENCE.search(text):
        return "preference"
    return "fact"


def as_tag(label: object) -> str | None:
    """A label as a memory tag, by the rule every write uses (lib/tags.py), or None if
    nothing is left (not text, or no letter or digit)."""
    if not isinstance(label, str):
        return None
    return normalize_tag(label) or None


def _tags(tool: str, labels: list[object]) -> list[str]:
    tags = [IMPORTED_TAG, tool]
    for label in labels:
        tag = as_tag(label)
        if tag and tag not in tags and len(tags) < MAX_TAGS:
            tags.append(tag)
    return tags


def parse_chatgpt(text: str) -> list[Entry]:
    """ChatGPT's Manage memories, copied: one memory per non-empty line."""
    entries = []
    for line in text.splitlines():
        memory = BULLET.sub("", line).strip()
        if memory:
            entries.append(Entry(memory, _tags("chatgpt", []), kind=_kind(memory)))
    return entries


def parse_claude(text: str) -> list[Entry]:
    """Claude's memory text: Markdown sections whose lines are memories; the section's
    heading becomes a tag. Bold markers are dropped; a heading alone is not a memory."""
    entries = []
    section: str | None = None
    for line in text.splitlines():
        heading = HEADING.match(line)
        if heading:
            section = heading.group(1).strip("*_ ")
            continue
        memory = BULLET.sub("", line).replace("**", "").strip()
        if not memory or set(memory) <= {"-", "*", "_", "="}:  # a rule, not a memory
            continue
        labels: list[object] = [section] if section else []
        entries.append(Entry(memory, _tags("claude", labels), kind=_kind(memory)))
    return entries


def parse_mem0(data: object) -> list[Entry]:
    """mem0's export: a list of memories, or an object holding one under `results` (its
    get_all answer) or `memories`. ValueError when it is neither."""
    if isinstance(data, dict):
        data = data.get("results", data.get("memories"))
    if not isinstance(data, list):
        raise ValueError('expected a JSON list of memories or {"results": [...]}')
    entries = []
    for record in data:
        if not isinstance(record, dict):
            entries.append(Entry(""))  # refused below, counted where it was
            continue
        text = record.get("memory", record.get("text"))
        categories = record.get("categories")
        labels: list[object] = list(categories) if isinstance(categories, list) else []
        entries.append(
            Entry(
                text.strip() if isinstance(text, str) else "",
                _tags("mem0", labels),
                created_at=parse_time(record.get("created_at")),
                kind=_kind(text if isinstance(text, str) else "", [as_tag(c) for c in labels]),
                session=_session(record.get("run_id")),
            )
        )
    return entries


def _session(run_id: object) -> str:
    """mem0's run id as a session, when it is one (a number is kept as its digits)."""
    if isinstance(run_id, int) and not isinstance(run_id, bool):
        run_id = str(run_id)
    if not isinstance(run_id, str) or session_problem(run_id.strip()):
        return ""
    return run_id.strip()


def _said_at(moment: datetime | None) -> datetime | None:
    """The tool's creation time as when it was said, if a memory's time may be it."""
    if moment is None or not MIN_YEAR <= moment.year <= MAX_YEAR:
        return None
    return moment


def read_entries(kind: str, fileobj: IO[bytes]) -> list[Entry]:
    """The entries of an uploaded file; ArchiveRefused when the file is not of its kind."""
    raw = fileobj.read(MAX_TEXT_BYTES + 1)
    if len(raw) > MAX_TEXT_BYTES:
        raise ArchiveRefused(f"The file is larger than {MAX_TEXT_BYTES:,} bytes.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ArchiveRefused("The file is not UTF-8 text.") from error
    if kind == ImportKind.CHATGPT:
        return parse_chatgpt(text)
    if kind == ImportKind.CLAUDE:
        return parse_claude(text)
    if kind == ImportKind.MEM0:
        data, problem = parse_json(text)
        if problem:
            raise ArchiveRefused(f"The file is {problem}.")
        try:
            return parse_mem0(data)
        except ValueError as error:
            raise ArchiveRefused(f"Not a mem0 export: {error}.") from error
    raise ArchiveRefused(f"Unknown import format '{kind}'.")


def import_text(*, user: AbstractBaseUser, kind: str, fileobj: IO[bytes], report: Report) -> None:
    """Store each entry of another tool's export (see the module's docstring)."""
    entries = read_entries(kind, fileobj)
    report.set_total(len(entries))
    report.writing = True
    tool = TOOL_NAMES[ImportKind(kind)]
    for number, entry in enumerate(entries, start=1):
        store_entry(user=user, entry=entry, tool=tool, item=f"{number}", report=report)


def store_entry(
    *, user: AbstractBaseUser, entry: Entry, tool: str, item: str, report: Report
) -> None:
    label = f"{item}. {entry.text[:120]}" if entry.text else item
    if not entry.text:
        report.add("memories", label, "refused", "No memory text.")
        return
    if len(entry.text) > MAX_VALUE_LENGTH:
        report.add("memories", label, "refused", f"Longer than {MAX_VALUE_LENGTH:,} characters.")
        return
    if UNSTORABLE.search(entry.text):
        report.add("memories", label, "refused", "It holds a NUL character (U+0000).")
        return
    try:
        with transaction.atomic():
            result = memory_store(
                user=user,
                actor=Actor.system(),
                kind=entry.kind,
                text=entry.text,
                tags=entry.tags,
                reason=f"Imported from {tool}",
                occurred_at=_said_at(entry.created_at),
                session=entry.session,
            )
            if result.status == "created" and entry.created_at is not None:
                # The tool's creation time, kept: the memory was just inserted by the write
                # path above, and no history or event describes created_at.
                Memory.objects.filter(pk=result.memory.pk).update(created_at=entry.created_at)
    except ServiceError as error:
        if isinstance(error, SecretRefused):  # skipped; the report kept holds no secret
            label = f"{item}. {redact(entry.text)[:120]}"
        report.add("memories", label, "refused", error.message)
        return
    outcome, reason = _outcome(result.status, result.key)
    report.add("memories", label, outcome, reason)


def _outcome(status: str, key: str) -> tuple[str, str]:
    if status == "created":
        return "created", key
    if status == "pending_review":
        return "pending", f"Waits in your review inbox ({key})."
    if status == "duplicate":
        return "skipped", f"'{key}' says this already."
    return "skipped", f"Stored already as '{key}'."
