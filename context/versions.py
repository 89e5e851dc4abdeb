"""Which version of a document is current, and the one rule of optimistic concurrency.

A document's versions (DocumentVersion) are written one at a time under its row lock
(context/services.py), so "the newest" is exact: NEWEST_FIRST orders them for every reader
of that question (the pages, the agent API's version_id and ETag, USER_MEMORY.md's history).
A change made from a version the caller read (base_version, or the If-Match ETag) applies only
while that version is still the newest: check_base_version, for writes, deletions and
agents' proposals alike.
"""

from __future__ import annotations

from context.models import Document, DocumentVersion
from lib.errors import VersionConflict

# Which of a document's versions is its newest, for every reader of that question.
NEWEST_FIRST = ("-created_at", "-id")


def document_latest_version_id(document: Document) -> int | None:
    """The id of the document's newest version: what an editor passes back as base_version
    (None for a document not saved yet, or with no recorded version)."""
    if document.pk is None:
        return None
    return (
        DocumentVersion.objects.filter(document=document)
        .order_by(*NEWEST_FIRST)
        .values_list("pk", flat=True)
        .first()
    )


def check_base_version(document: Document | None, *, path: str, base_version: int) -> None:
    """Optimistic concurrency, one rule for the pages and the API: a change made from the
    version base_version applies only while that is still the newest version of the document
    (which the caller holds locked); a document that does not exist (None) has no version.
    Otherwise VersionConflict, and the caller's transaction writes nothing."""
    if document is None:
        raise VersionConflict(
            f"'{path}' does not exist (any more): there is no version {base_version} of it to "
            "change.",
            field="base_version",
        )
    current = document_latest_version_id(document)
    if current != base_version:
        now = "has no recorded version" if current is None else f"is now version {current}"
        raise VersionConflict(
            f"'{path}' changed since you opened it: you started from version {base_version}, "
            f"and it {now}. Reload it and apply your edit again.",
            field="base_version",
            current_version=current,
        )
