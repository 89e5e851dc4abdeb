"""Export: one user's whole account as a zip in the format of portability/format.py.

The archive is made as a stream of byte chunks (`export_chunks`): rows are read a page at
a time with keyset pagination, each file is deflated and hashed as it is written, and the
zip goes out through a sink that hands back what has accumulated every EXPORT_CHUNK_BYTES.
Nothing holds the whole account or the whole zip. Pages are separate short queries rather
than one server-side cursor, because the web front door (lib/asgi.py) pulls each chunk of a
streamed response on whichever pool thread is free, and a thread's database connection
must not be used from another one.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.text import slugify

from activity.models import ActivityEvent
from context.models import Document, DocumentVersion
from memory.models import Memory, MemoryHistory, MemoryProposal
from portability import format as fmt
from profiles.models import Agent, Profile
from work.models import WorkItem

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

EXPORT_CHUNK_BYTES = 256 * 1024
PAGE_SIZE = 2000
DOCUMENT_PAGE_SIZE = 100  # documents and versions carry whole bodies
SLUG_LENGTH = 50


class _Sink:
    """A write-only stream: zipfile writes into it, export_chunks takes what it holds."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        self.size = 0
        return data


class _Member:
    """One file being written into the archive, hashed and counted as it goes."""

    def __init__(self, archive: zipfile.ZipFile, name: str, when: datetime) -> None:
        info = zipfile.ZipInfo(name, date_time=when.timetuple()[:6])
        info.compress_type = zipfile.ZIP_DEFLATED
        self.name = name
        self._handle = archive.open(info, "w", force_zip64=True)
        self._sha256 = hashlib.sha256()
        self.bytes = 0

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._handle.write(data)
        self._sha256.update(data)
        self.bytes += len(data)

    def close(self) -> dict[str, Any]:
        self._handle.close()
        return {"sha256": self._sha256.hexdigest(), "bytes": self.bytes}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _actor(row: dict[str, Any]) -> dict[str, str | None]:
    return {"type": row["actor_type"], "agent": row["actor_agent__name"]}


def _pages(
    queryset: QuerySet, order: tuple[str, ...], size: int | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of a .values() queryset in `order`, one short query per page (keyset
    pagination on the order's columns; the last one must be unique)."""
    size = size or PAGE_SIZE
    last: dict[str, Any] | None = None
    while True:
        page = queryset.order_by(*order)
        if last is not None:
            page = page.filter(_after(order, last))
        rows = list(page[:size])
        yield from rows
        if len(rows) < size:
            return
        last = rows[-1]


def _after(order: tuple[str, ...], last: dict[str, Any]) -> Q:
    """Rows after `last` in `order`: (a > x) or (a = x and b > y) or …"""
    condition = Q()
    for position, column in enumerate(order):
        equal = {name: last[name] for name in order[:position]}
        condition |= Q(**equal, **{f"{column}__gt": last[column]})
    return condition


def export_counts(user: AbstractBaseUser) -> dict[str, int]:
    """What an export of the account will hold: lines per file, files per folder."""
    return {
        fmt.MEMORIES: Memory.objects.filter(user=user).count(),
        fmt.MEMORY_HISTORY: MemoryHistory.objects.filter(user=user).count(),
        fmt.DOCUMENTS_DIR: Document.objects.filter(user=user).count(),
        fmt.DOCUMENT_VERSIONS: DocumentVersion.objects.filter(user=user).count(),
        fmt.WORK_DIR: WorkItem.objects.live().filter(user=user).count(),
        fmt.ACTIVITY: ActivityEvent.objects.filter(user=user).count(),
        fmt.PROPOSALS: MemoryProposal.objects.filter(user=user).count(),
    }


def export_filename(user: AbstractBaseUser, when: datetime | None = None) -> str:
    when = when or timezone.now()
    return f"mnemo-export-{slugify(user.get_username()) or 'user'}-{when:%Y%m%d-%H%M%S}.zip"


def write_export(user: AbstractBaseUser, fileobj: IO[bytes]) -> None:
    """Write the user's export to a binary file object (it need not be seekable)."""
    for chunk in export_chunks(user):
        fileobj.write(chunk)


def export_chunks(
    user: AbstractBaseUser,
    *,
    chunk_bytes: int = EXPORT_CHUNK_BYTES,
    on_item: Callable[[], None] | None = None,
) -> Iterator[bytes]:
    """The user's export as a zip, in chunks of about `chunk_bytes`. `on_item` is called
    after each line and each file written (what export_counts counts): a job's progress."""
    exported_at = timezone.now().astimezone(UTC)
    step = on_item or (lambda: None)
    sink = _Sink()
    archive = zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED)
    files: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}

    def write_file(
        name: str, parts: Iterable[str], extra: dict[str, Any] | None = None
    ) -> Iterator[bytes]:
        member = _Member(archive, name, exported_at)
        for text in parts:
            member.write(text)
            if sink.size >= chunk_bytes:
                yield sink.take()
        files[name] = {**member.close(), **(extra or {})}
        if sink.size >= chunk_bytes:
            yield sink.take()

    def write_lines(name: str, records: Iterable[dict[str, Any]]) -> Iterator[bytes]:
        counts[name] = 0

        def lines() -> Iterator[str]:
            for record in records:
                counts[name] += 1
                step()
                yield _line(record)

        yield from write_file(name, lines())

    yield from write_file(fmt.PROFILE, [_profile_json(user)])
    yield from write_lines(fmt.MEMORIES, _memories(user))
    yield from write_lines(fmt.MEMORY_HISTORY, _memory_history(user))
    counts[fmt.DOCUMENTS_DIR] = 0
    taken: set[str] = set()
    for document in _documents(user):
        name = _document_member(document, taken)
        counts[fmt.DOCUMENTS_DIR] += 1
        step()
        extra = {"agent": document["agent__name"], "path": document["path"]}
        yield from write_file(name, [document["body"]], extra)
    yield from write_lines(fmt.DOCUMENT_VERSIONS, _document_versions(user))
    counts[fmt.WORK_DIR] = 0
    for item in _work_items(user):
        counts[fmt.WORK_DIR] += 1
        step()
        yield from write_file(_work_member(item), [work_markdown(item)])
    yield from write_lines(fmt.ACTIVITY, _activity(user))
    yield from write_lines(fmt.PROPOSALS, _proposals(user))

    manifest = {
        "format": fmt.FORMAT,
        "format_version": fmt.FORMAT_VERSION,
        "exported_at": exported_at.isoformat(),
        "user": user.get_username(),
        "counts": counts,
        "files": files,
    }
    manifest_text = json.dumps(manifest, ensure_ascii=False, indent=2) + "\n"
    member = _Member(archive, fmt.MANIFEST, exported_at)
    member.write(manifest_text)
    member.close()
    archive.close()
    yield sink.take()


def _profile_json(user: AbstractBaseUser) -> str:
    profile = Profile.objects.filter(user=user).first() or Profile(user=user)
    agents = Agent.objects.filter(user=user).order_by("name").values(*fmt.AGENT_FIELDS)
    data: dict[str, Any] = {field: getattr(profile, field) for field in fmt.PROFILE_FIELDS}
    data["agents"] = [dict(agent) for agent in agents]
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def _records(
    queryset: QuerySet,
    fields: tuple[str, ...],
    *,
    order: tuple[str, ...] = ("created_at", "id"),
    size: int | None = None,
) -> Iterator[dict[str, Any]]:
    """One table's rows as the format's records, a page at a time in `order`: `fields` in
    their order, times as ISO 8601, "actor" and "agent" by the agent's name."""
    columns = {
        "actor": ("actor_type", "actor_agent__name"),
        "agent": ("agent__name",),
        "audience": ("owner_agent__name",),
    }
    wanted = [column for name in fields for column in columns.get(name, (name,))]
    rows = queryset.values("id", *wanted)
    for row in _pages(rows, order, size):
        record: dict[str, Any] = {}
        for name in fields:
            if name == "actor":
                record[name] = _actor(row)
            elif name == "agent":
                record[name] = row["agent__name"]
            elif name == "audience":
                owner = row["owner_agent__name"]
                record[name] = fmt.USER_AUDIENCE if owner is None else {"agent": owner}
            else:
                value = row[name]
                record[name] = _iso(value) if isinstance(value, datetime) else value
        yield record


def _memories(user: AbstractBaseUser) -> Iterator[dict[str, Any]]:
    # By key, then id: a key names one memory per audience (the pages' keyset needs a
    # unique last column).
    return _records(Memory.objects.filter(user=user), fmt.MEMORY_FIELDS, order=("key", "id"))


def _memory_history(user: AbstractBaseUser) -> Iterator[dict[str, Any]]:
    return _records(MemoryHistory.objects.filter(user=user), fmt.MEMORY_HISTORY_FIELDS)


def _documents(user: AbstractBaseUser) -> Iterator[dict[str, Any]]:
    rows = Document.objects.filter(user=user).values("id", "path", "agent__name", "body")
    return _pages(rows, ("id",), DOCUMENT_PAGE_SIZE)


def _document_member(document: dict[str, Any], taken: set[str]) -> str:
    """Where a document goes in the archive; see portability/format.py for clashes."""
    agent = document["agent__name"]
    path = document["path"]
    name = (
        f"{fmt.DOCUMENTS_DIR}{path}"
        if agent is None
        else f"{fmt.AGENT_DOCUMENTS_DIR}{agent}/{path}"
    )
    number = 1
    while name in taken:
        number += 1
        name = f"{fmt.DOCUMENTS_DIR}~{number}/{path}"
    taken.add(name)
    return name


def _document_versions(user: AbstractBaseUser) -> Iterator[dict[str, Any]]:
    versions = DocumentVersion.objects.filter(user=user)
    return _records(versions, fmt.DOCUMENT_VERSION_FIELDS, size=DOCUMENT_PAGE_SIZE)


def _work_items(user: AbstractBaseUser) -> Iterator[dict[str, Any]]:
    # Deleted items (Recently deleted) stay out: an import would bring them back as live.
    rows = (
        WorkItem.objects.live()
        .filter(user=user)
        .values(
            "id",
            "title",
            "kind",
            "status",
            "tags",
            "agent__name",
            "metadata",
            "body",
            "created_at",
            "updated_at",
        )
    )
    return _pages(rows, ("created_at", "id"), DOCUMENT_PAGE_SIZE)


def _work_member(item: dict[str, Any]) -> str:
    slug = slugify(item["title"])[:SLUG_LENGTH].strip("-") or "untitled"
    return f"{fmt.WORK_DIR}{item['id']}-{slug}.md"


def work_markdown(item: dict[str, Any]) -> str:
    """A work item as Markdown with front matter (values JSON-encoded), then its body."""
    values = {
        "title": item["title"],
        "kind": item["kind"],
        "status": item["status"],
        "tags": list(item["tags"]),
        "agent": item["agent__name"],
        "metadata": item["metadata"],
        "created_at": _iso(item["created_at"]),
        "updated_at": _iso(item["updated_at"]),
    }
    fence = fmt.WORK_FRONT_MATTER_FENCE
    lines = [fence]
    lines += [
        f"{key}: {json.dumps(values[key], ensure_ascii=False)}" for key in fmt.WORK_FRONT_MATTER
    ]
    lines.append(fence)
    return "\n".join(lines) + "\n" + item["body"]


def _activity(user: AbstractBaseUser) -> Iterator[dict[str, Any]]:
    return _records(ActivityEvent.objects.filter(user=user), fmt.ACTIVITY_FIELDS)


def _proposals(user: AbstractBaseUser) -> Iterator[dict[str, Any]]:
    return _records(MemoryProposal.objects.filter(user=user), fmt.PROPOSAL_FIELDS)
