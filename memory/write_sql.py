"""The write path's statements: the row lock (one SQL statement, which also reads the pause
and the review rule), the saves of a memory with its history row and event (the ORM's), and
the unique-key test the retry of a racing write relies on. Used by memory/services.py and
the modules built on it; nothing outside the memory app runs these."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from django.db import IntegrityError, connection

from activity.actors import Actor, ActorKind
from lib.errors import MemoryPaused
from memory.models import UNIQUE_KEY_CONSTRAINT, Memory, MemoryHistory
from profiles.models import Profile
from profiles.services import MEMORY_PAUSED_MESSAGE
from search.fields import SEARCH_COLUMNS

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from activity.models import ActivityEvent
    from profiles.models import Agent


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


# New entries' locks are (NEW_ENTRY_LOCKS, a hash of the user and the kind): the two-key
# form of PostgreSQL's advisory locks, as briefing/heartbeat.py's, in a space of their own.
# Two (user, kind) pairs that share a hash only wait for each other a little more.
NEW_ENTRY_LOCKS = 0x4E45  # "NE"


@functools.cache
def _lock_sql(*, new_entry: bool = False, own: bool = False) -> tuple[str, list[str], int]:
    """One row always: whether agents are refused (the user paused memory), whether their
    new memories wait for review, and the memory row, locked FOR UPDATE, when the key has
    one. `new_entry`: when the key has none, also the lock on the user's new entries of its
    kind (_near_entry), held until the transaction ends. `own`: the row is an agent's own
    note (%(owner)s), else the user's memory (owner_agent_id IS NULL, so the unique
    index's btree serves both)."""
    fields = [f for f in Memory._meta.concrete_fields if f.name not in SEARCH_COLUMNS]
    columns = ", ".join(_quote(field.column) for field in fields)
    profile = _quote(Profile._meta.db_table)
    # Taken after the row lock and only without a row: a writer that holds a row lock never
    # waits for this lock, so a holder of this lock waiting for a row lock cannot deadlock.
    # The next statement (the check) sees every note committed before it was granted.
    kind_lock = (
        "CASE WHEN memory.id IS NULL THEN (SELECT true FROM pg_advisory_xact_lock("
        "%(locks)s, hashtext(%(kind_lock)s))) END"
        if new_entry
        else "NULL"
    )
    # The user's profile row is read once for both flags (a user without one has neither).
    sql = (
        "SELECT %(guarded)s AND coalesce(profile.memory_paused, false), "  # noqa: S608 - names from the models
        f"%(guarded)s AND coalesce(profile.review_agent_memories, false), {kind_lock}, "
        f"memory.* FROM (SELECT) AS one LEFT JOIN {profile} AS profile "
        f"ON profile.user_id = %(user)s LEFT JOIN (SELECT {columns} "
        f"FROM {_quote(Memory._meta.db_table)}"
        " WHERE user_id = %(user)s AND key = %(key)s AND "
        + ("owner_agent_id = %(owner)s" if own else "owner_agent_id IS NULL")
        + " FOR UPDATE) AS memory ON true"
    )
    names = [field.attname for field in fields]
    return sql, names, names.index(Memory._meta.pk.attname)


def _locked(
    user: AbstractBaseUser,
    key: str,
    actor: Actor,
    *,
    new_entry: bool = False,
    owner_agent: Agent | None = None,
) -> tuple[Memory | None, bool]:
    """The memory under `key`, locked until the transaction ends (None if there is none),
    and whether the actor's new memories wait for the user's review.

    MemoryPaused when an agent (or the system) writes for a user who paused memory, as
    profiles.services.check_agents_may_write says, read in this same statement: a pause
    that committed before it stops the write. `new_entry`: an entry's key with no memory
    also takes the lock on the user's new entries of its kind (_lock_sql). `owner_agent`:
    that agent's note under the key rather than the user's memory.
    """
    sql, names, pk_index = _lock_sql(new_entry=new_entry, own=owner_agent is not None)
    params = {"guarded": actor.kind != ActorKind.USER, "user": user.pk, "key": key}
    if owner_agent is not None:
        params["owner"] = owner_agent.pk
    if new_entry:
        params |= {"locks": NEW_ENTRY_LOCKS, "kind_lock": f"{user.pk}:{key.partition(':')[0]}"}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        paused, review, _, *values = cursor.fetchone()
    if paused:
        raise MemoryPaused(MEMORY_PAUSED_MESSAGE)
    if values[pk_index] is None:
        return None, review
    memory = Memory.from_db(connection.alias, names, values)
    memory.user = user
    memory.owner_agent = owner_agent
    return memory, review


def _write_rows(
    memory: Memory, changed: list[str], history: MemoryHistory, event: ActivityEvent
) -> None:
    """Save the memory (INSERT when it has no id, else an UPDATE of its `changed` fields),
    then its history row naming it, then the event naming that history row; inside the
    caller's transaction."""
    if memory.pk is None:
        memory.save(force_insert=True)
    else:
        memory.save(update_fields=changed)
    history.memory = memory
    history.save(force_insert=True)
    event.payload["history_id"] = history.pk
    event.save(force_insert=True)


def is_unique_key_violation(error: IntegrityError) -> bool:
    """Whether the write broke the unique (user, audience, key) of memory/models.py."""
    diag = getattr(error.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == UNIQUE_KEY_CONSTRAINT
