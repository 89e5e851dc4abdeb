"""The check an uploaded Mnemo export passes before the import writes anything, over the
whole archive (portability/applying.py applies what it accepts).

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
portability/applying.py `may_replace`).
"""

from __future__ import annotations

import hashlib
import re
import stat
import unicodedata
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from django.conf import settings

from context.paths import REFUSED_CATEGORIES, normalize_path
from context.services import MAX_BODY_BYTES
from lib.errors import ServiceError
from portability import format as fmt
from portability.validation.files import (
    MAX_WORK_FILE_BYTES,
    DocumentEntry,
    document_body,
    profile_problems,
    read_work_file,
)
from portability.validation.lines import VersionLines, checked_lines, line_checks
from portability.validation.reading import (
    ArchiveRefused,
    member_digest,
    parse_json,
    read_member,
    shown,
)
from portability.validation.rules import agent_problem

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from portability.report import Report

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
# The manifest's values per member of the archive (a file's entry holds about 13): its
# memory once parsed then follows the archive's own size.
MANIFEST_VALUES_PER_MEMBER = 20
# How many names a refusal quotes.
QUOTED_NAMES = 3

SHA256 = re.compile(r"[0-9a-f]{64}")
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


def _quoted(names: list[str]) -> str:
    quoted = ", ".join(f"'{shown(name, 80)}'" for name in names[:QUOTED_NAMES])
    return quoted + (", …" if len(names) > QUOTED_NAMES else "")


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
