"""Where an imported memory came from, for the pages that say who wrote a memory (issue 30):
"imported from ChatGPT", not "noted by an agent".

An import of another tool's memories (portability/importers.py) writes each memory as the
system, tagged `imported` and the tool's name (`_tags`). The history row that created the
memory keeps those tags as they were, whatever the user changes later, and nothing else
writes as the system with them: so that row says the memory came from that tool. (Were a
tool's name also one of the memory's own tags, say a Claude heading "ChatGPT", the row
names no single tool and the memory is "imported from another tool".) One query per page
of rows, by the rows' ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from activity.actors import ActorKind
from memory.models import HistoryAction, MemoryHistory
from portability.importers import IMPORTED_TAG, TOOL_NAMES

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

# The tool's tag (as memory_clean stores it) -> its name.
TOOL_BY_TAG = {str(kind.value): name for kind, name in TOOL_NAMES.items()}
ANOTHER_TOOL = "another tool"


def _imports(user: AbstractBaseUser) -> QuerySet[MemoryHistory]:
    return MemoryHistory.objects.filter(
        user=user,
        actor_type=ActorKind.SYSTEM,
        action=HistoryAction.CREATE,
        after__tags__contains=[IMPORTED_TAG],
    )


def _named(pairs: Iterable[tuple[int, object]]) -> dict[int, str]:
    named = {}
    for pk, tags in pairs:
        tools = (
            [TOOL_BY_TAG[tag] for tag in tags if tag in TOOL_BY_TAG]
            if isinstance(tags, list)
            else []
        )
        named[pk] = tools[0] if len(tools) == 1 else ANOTHER_TOOL
    return named


def memories_imported_from(*, user: AbstractBaseUser, memory_ids: Iterable[int]) -> dict[int, str]:
    """For each of these memories that an import of another tool created: the tool's name."""
    ids = list(memory_ids)
    if not ids:
        return {}
    rows = _imports(user).filter(memory_id__in=ids).values_list("memory_id", "after__tags")
    return _named(rows)


def changes_imported_from(*, user: AbstractBaseUser, history_ids: Iterable[int]) -> dict[int, str]:
    """For each of these history rows that is an import of another tool creating a memory:
    the tool's name."""
    ids = list(history_ids)
    if not ids:
        return {}
    return _named(_imports(user).filter(pk__in=ids).values_list("pk", "after__tags"))


def imported_who(tool: str) -> tuple[str, str]:
    """Who wrote it, as the pages name an import: the badge's name ("import from ChatGPT")
    and the words after "by" ("an import from ChatGPT")."""
    return f"import from {tool}", f"an import from {tool}"
