"""History replay for imports: an earlier account's history of a memory, checked
(past_change_problem) and kept as history rows with their own times and actors
(memory_history_replay). Nothing current changes. portability/ is the caller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from lib.errors import ServiceError
from memory.keys import parse_key
from memory.models import HistoryAction, Memory, MemoryHistory, Source
from memory.snapshots import merged_problem, state_problem

if TYPE_CHECKING:
    from datetime import datetime

    from django.contrib.auth.models import AbstractBaseUser

    from activity.actors import Actor
    from profiles.models import Agent


@dataclass(frozen=True)
class PastChange:
    """One change from an earlier account's history of a memory (an import brings it)."""

    key: str
    action: str
    source: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    actor: Actor
    created_at: datetime
    owner_agent: Agent | None = None  # the agent whose own note it changed; None: the user's


# Which states a history row holds for each action (the model's history_states_match_action).
_STATES = {
    HistoryAction.CREATE: (False, True),
    HistoryAction.DELETE: (True, False),
    HistoryAction.UPDATE: (None, True),
    HistoryAction.RESTORE: (None, True),
    HistoryAction.RENAME: (True, True),
    HistoryAction.MERGE: (True, True),
}


def past_change_problem(change: PastChange) -> str:
    """Why the change cannot be kept in the history ("" when it can)."""
    try:
        parse_key(change.key)
    except ServiceError as error:
        return error.message
    if change.action not in HistoryAction.values:
        return f"'{change.action}' is not a history action."
    if change.source not in Source.values:
        return f"'{change.source}' is not a source."
    needs_before, needs_after = _STATES[HistoryAction(change.action)]
    has = (change.before is not None, change.after is not None)
    if (needs_before is not None and has[0] != needs_before) or has[1] != needs_after:
        return f"A '{change.action}' change with these states cannot have happened."
    # Each state as live rows hold it (memory/snapshots.py): the readers of history rely
    # on it, and the row's source is the source of the state it leaves (or removed).
    for name, state in (("before", change.before), ("after", change.after)):
        renamed = change.action == HistoryAction.RENAME
        if state is not None and (problem := state_problem(state, renamed=renamed)):
            return f"The state {name} the change: {problem}."
    if change.action == HistoryAction.MERGE and (problem := merged_problem(change.after)):
        return f"The note it merged: {problem}."
    last = change.after if change.after is not None else change.before
    if last is not None and last["source"] != change.source:
        return "Its source is not the source of the state it records."
    if change.created_at > timezone.now():
        return "It is dated in the future."
    return ""


def memory_history_replay(*, user: AbstractBaseUser, changes: list[PastChange]) -> int:
    """Keep an earlier account's history of the user's memories: each change becomes a
    history row with its own time and actor, linked to the memory under its key.

    For an import, of the memories it created, so the history page shows where a memory
    came from before the import's own row. Nothing current changes, so no event is
    recorded and nothing is embedded. Every change must pass past_change_problem."""
    rows_now = Memory.objects.filter(user=user, key__in={change.key for change in changes})
    memories = {
        (owner_id, key): pk
        for owner_id, key, pk in rows_now.values_list("owner_agent", "key", "pk")
    }
    rows = [
        MemoryHistory(
            user=user,
            key=change.key,
            memory_id=memories.get((_agent_id(change.owner_agent), change.key)),
            owner_agent=change.owner_agent,
            action=change.action,
            source=change.source,
            before=change.before,
            after=change.after,
            created_at=change.created_at,
            **change.actor.as_fields(),
        )
        for change in changes
    ]
    MemoryHistory.objects.bulk_create(rows)
    return len(rows)


def _agent_id(agent: Agent | None) -> int | None:
    return None if agent is None else agent.pk
