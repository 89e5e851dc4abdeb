"""Agents' own notes: moving one into the user's memory (memory_share_note). Writing,
reading and deleting a note is the write path's (memory/services.py, `owner_agent`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from activity import events
from activity.actors import Actor, ActorKind
from lib.errors import Conflict, Forbidden, NotFound
from memory.models import HistoryAction, Memory, MemoryHistory, Source
from memory.outcomes import MemoryWrite
from memory.services import _delete_row
from memory.snapshots import state_fields
from memory.write_sql import _locked, _write_rows, is_unique_key_violation
from search.indexing import request_embedding

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent


def memory_share_note(*, user: AbstractBaseUser, memory_id: int, actor: Actor) -> MemoryWrite:
    """Move an agent's own note into the user's memory, as the user's write: by moving it
    the user vouches for it, so it becomes user_stated (confidence 1.0) under the same key,
    with its text, tags, pin, time and conversation. The user's action only.

    One transaction: the note's row is locked, the key in the user's memory checked free
    under its lock, the user's memory created (its history row and one memory_written
    event naming the agent as `moved_from`) and the note deleted (its history row, kept
    restorable as that agent's note). A key the user's memory has already is a Conflict,
    and nothing changes: the note stays as it was."""
    if actor.kind != ActorKind.USER:
        raise Forbidden("Only the user moves an agent's note into their memory.", field="id")
    note = (
        Memory.objects.filter(user=user, pk=memory_id, owner_agent__isnull=False)
        .select_related("owner_agent")
        .first()
    )
    if note is None:
        raise NotFound("No such note.", field="id")
    agent = note.owner_agent
    try:
        with transaction.atomic():
            return _share_once(user, note.key, agent, actor)
    except IntegrityError as error:  # the user's memory took the key meanwhile
        if not is_unique_key_violation(error):
            raise
    raise _key_taken(note.key)


def _key_taken(key: str) -> Conflict:
    return Conflict(
        f"Your memory has '{key}' already; edit or rename that one first. The note is "
        "left as it is.",
        field="key",
    )


def _share_once(user: AbstractBaseUser, key: str, agent: Agent, actor: Actor) -> MemoryWrite:
    note, _ = _locked(user, key, actor, owner_agent=agent)
    if note is None:
        raise NotFound("No such note.", field="id")
    taken, _ = _locked(user, key, actor)
    if taken is not None:
        raise _key_taken(key)
    state = note.snapshot()
    fields = {
        **state_fields(state),
        "source": Source.USER_STATED,
        "confidence": 1.0,
    }
    memory = Memory(user=user, key=key, **fields)
    history = MemoryHistory(
        user=user,
        key=key,
        memory=None,
        action=HistoryAction.CREATE,
        source=memory.source,
        before=None,
        after=memory.snapshot(),
        **actor.as_fields(),
    )
    event = events.memory_written_event(
        user=user,
        actor=actor,
        key=key,
        action=HistoryAction.CREATE,
        source=memory.source,
        history_id=None,
        moved_from=agent.label,
    )
    # The note goes first: its history row names the agent, so it can be restored as a note.
    _delete_row(user, note, actor, event=False)
    memory, history = _write_rows(memory, [], history, event)
    request_embedding()
    return MemoryWrite(memory=memory, created=True, history=history)
