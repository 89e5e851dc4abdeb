"""A small builder of hostile zips for tests/portability/test_hostile_archives.py: archives
whose manifest hashes what they hold (so only the attack is wrong), and byte-level patches
for what zipfile will not write (a NUL in a name, a lying central directory)."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterable
from typing import Any

from portability import format as fmt

LOCAL = struct.Struct("<IHHHHHIIIHH")
CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
CENTRAL_SIGNATURE = 0x02014B50
DOS_DATE = 33  # 1980-01-01


def manifest(files: dict[str, bytes], **overrides: Any) -> dict[str, Any]:
    """A manifest hashing `files`; documents name the path under documents/."""
    entries: dict[str, Any] = {}
    for name, data in files.items():
        entries[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        if name.startswith(fmt.DOCUMENTS_DIR):
            entries[name].update(agent=None, path=name.removeprefix(fmt.DOCUMENTS_DIR))
    return {
        "format": fmt.FORMAT,
        "format_version": fmt.FORMAT_VERSION,
        "exported_at": "2025-01-01T00:00:00+00:00",
        "user": "someone",
        "counts": {},
        "files": entries,
        **overrides,
    }


def build(
    files: dict[str, bytes],
    *,
    listed: dict[str, Any] | None = None,
    unlisted: dict[str, bytes] | None = None,
    manifest_bytes: bytes | None = None,
    infos: Iterable[tuple[zipfile.ZipInfo, bytes]] = (),
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    """An archive of `files` and a manifest hashing them. `listed` changes manifest entries
    (by name), `unlisted` adds members the manifest does not name, `manifest_bytes` replaces
    the manifest, `infos` adds members as given (modes, flags), duplicates allowed."""
    body = manifest(files)
    body["files"].update(listed or {})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in {**files, **(unlisted or {})}.items():
            archive.writestr(name, data)
        for info, data in infos:
            archive.writestr(info, data)
        archive.writestr(fmt.MANIFEST, manifest_bytes or json.dumps(body).encode())
    return buffer.getvalue()


def member(name: str, *, mode: int = 0o100644, flags: int = 0) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = mode << 16
    info.flag_bits |= flags
    info.create_system = 3
    return info


def symlink(name: str) -> zipfile.ZipInfo:
    return member(name, mode=stat.S_IFLNK | 0o777)


def rename(data: bytes, old: str, new: str) -> bytes:
    """Rename a member in its local header and the central directory (same length), for
    names zipfile will not write, such as one holding NUL."""
    before, after = old.encode(), new.encode()
    assert len(before) == len(after)
    assert data.count(before) >= 2
    return data.replace(before, after)


def patch_central(data: bytes, name: str, **fields: int) -> bytes:
    """Change the central directory's `flag_bits`, `crc`, `compress_size` or `file_size` of
    a member (the local header keeps the truth): a directory that lies."""
    at = data.index(struct.pack("<I", CENTRAL_SIGNATURE) + b"", _central_start(data))
    encoded = name.encode()
    while True:
        record = list(CENTRAL.unpack_from(data, at))
        name_length, extra, comment = record[10], record[11], record[12]
        if data[at + CENTRAL.size : at + CENTRAL.size + name_length] == encoded:
            break
        at += CENTRAL.size + name_length + extra + comment
    for field, index in (("flag_bits", 3), ("crc", 7), ("compress_size", 8), ("file_size", 9)):
        if field in fields:
            record[index] = fields[field]
    return data[:at] + CENTRAL.pack(*record) + data[at + CENTRAL.size :]


def _central_start(data: bytes) -> int:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.start_dir


def many_members(count: int, *, files: dict[str, bytes] | None = None) -> bytes:
    """An archive of `count` empty members nobody lists (`junk/<n>`) beside `files` and
    their manifest, written directly: zipfile takes seconds for 100,000 members."""
    members = dict(files or {})
    members[fmt.MANIFEST] = json.dumps(manifest(files or {})).encode()
    members.update({f"junk/{n:06d}": b"" for n in range(count)})
    out = io.BytesIO()
    central = []
    for name, data in members.items():
        encoded = name.encode()
        crc = zlib.crc32(data)
        offset = out.tell()
        out.write(
            LOCAL.pack(
                0x04034B50, 20, 0, 0, 0, DOS_DATE, crc, len(data), len(data), len(encoded), 0
            )
        )
        out.write(encoded + data)
        central.append(
            CENTRAL.pack(
                CENTRAL_SIGNATURE,
                20,
                20,
                0,
                0,
                0,
                DOS_DATE,
                crc,
                len(data),
                len(data),
                len(encoded),
                0,
                0,
                0,
                0,
                0o100644 << 16,
                offset,
            )
            + encoded
        )
    start = out.tell()
    out.write(b"".join(central))
    size = out.tell() - start
    end64 = out.tell()
    total = len(members)
    out.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, total, total, size, start))
    out.write(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
    return out.getvalue()
