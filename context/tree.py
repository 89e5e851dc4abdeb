"""The tree listing of documents, like `ls`: the folders and files under a path, down to a
depth. Folders are implicit: one exists while a document lives in it.

document_tree lists one scope (the pages); context/workspace.py workspace_tree lists what an
API caller sees across scopes from the same rows (tree_rows, tree_entries).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models.functions import Length

from context.models import Document
from context.paths import normalize_folder
from context.services import scope_columns
from lib.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

    from context.models import SharedScope
    from profiles.models import Agent


@dataclass(frozen=True)
class TreeEntry:
    """One line of a tree listing: a folder or a file under the listed path."""

    path: str
    name: str
    kind: str  # "folder" or "file"
    depth: int  # 1 for direct children of the listed path
    scope: str = "user"  # "user", "agent", "global" or "shared:<slug>", as Document.scope
    document_id: int | None = None
    size: int | None = None  # characters, files only
    updated_at: datetime.datetime | None = None


@dataclass(frozen=True)
class TreeRow:
    """A document as a tree listing takes it: where it shows and what it is."""

    path: str
    scope: str
    document_id: int
    size: int
    updated_at: datetime.datetime


def document_tree(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    shared_scope: SharedScope | None = None,
    path: str = "",
    depth: int = 1,
) -> list[TreeEntry]:
    """Folders and files under path down to depth levels, like `ls` (folders are implicit).

    NotFound when path is given and no document lives under it.
    """
    scope = scope_columns(user, agent, shared_scope)
    folder = normalize_folder(path)
    prefix = f"{folder}/" if folder else ""
    rows = tree_rows(Document.objects.filter(**scope, path__startswith=prefix))
    entries = tree_entries(rows, folder=folder, depth=depth)
    if folder and not entries:
        raise NotFound(f"No folder '{folder}'.", field="path")
    return entries


def tree_rows(documents: QuerySet[Document], *, under: str = "") -> list[TreeRow]:
    """The documents as tree rows, each path shown under the folder `under` ("" for as is)."""
    values = (
        documents.annotate(size=Length("body"))
        .order_by("path")
        .values_list(
            "pk", "path", "size", "updated_at", "user_id", "agent_id", "shared_scope__slug"
        )
    )
    return [
        TreeRow(
            path=f"{under}{path}",
            scope=Document.scope_of(user_id=user_id, agent_id=agent_id, shared_slug=slug),
            document_id=pk,
            size=size,
            updated_at=updated_at,
        )
        for pk, path, size, updated_at, user_id, agent_id, slug in values
    ]


def tree_entries(rows: list[TreeRow], *, folder: str, depth: int) -> list[TreeEntry]:
    """The folders and files that rows under `folder` (normalized, "" for the top) make,
    down to depth levels, sorted as `ls -R` would list them. A folder takes the scope of
    the first row inside it."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidInput("Depth must be a whole number of at least 1.", field="depth")
    prefix = f"{folder}/" if folder else ""
    entries: dict[tuple[str, str], TreeEntry] = {}  # a file 'a' and a folder 'a' may both exist
    for row in rows:
        if not row.path.startswith(prefix):
            continue
        parts = row.path[len(prefix) :].split("/")
        for level in range(min(depth, len(parts))):
            entry_path = prefix + "/".join(parts[: level + 1])
            if level == len(parts) - 1:
                entries[entry_path, "file"] = TreeEntry(
                    path=entry_path,
                    name=parts[level],
                    kind="file",
                    depth=level + 1,
                    scope=row.scope,
                    document_id=row.document_id,
                    size=row.size,
                    updated_at=row.updated_at,
                )
            else:
                entries.setdefault(
                    (entry_path, "folder"),
                    TreeEntry(
                        path=entry_path,
                        name=parts[level],
                        kind="folder",
                        depth=level + 1,
                        scope=row.scope,
                    ),
                )
    return sorted(entries.values(), key=lambda entry: (entry.path.split("/"), entry.kind))
