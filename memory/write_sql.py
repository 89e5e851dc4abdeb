"""The write path's SQL statements: the row lock (which also reads the pause and the review
rule), the one statement that writes a memory with its history row and event, and the
unique-key test the retry of a racing write relies on. Used by memory/services.py and the
modules built on it; nothing outside the memory app runs these."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from django.db import IntegrityError, connection

from activity.actors import Actor, ActorKind
from lib.errors import MemoryPaused
from memory.models import Memory, MemoryHistory
from profiles.models import Profile
from profiles.services import MEMORY_PAUSED_MESSAGE
from search.fields import SEARCH_COLUMNS

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import Model

    from activity.models import ActivityEvent
    from profiles.models import Agent


# The write path's statements are SQL put together from the models: building them with
# the ORM on every write cost more CPU than PostgreSQL spends running them (bench/README.md,
# issue 12). Values still go through each field's pre_save and get_db_prep_save, as in the
# ORM's own INSERT and UPDATE.


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
    """In one statement: INSERT the memory (no `changed`) or UPDATE its `changed` fields,
    INSERT its history row, and INSERT the event with the history row's id in its payload."""
    if memory.pk is None:
        memory_sql, memory_params = _insert_sql(memory)
        history_sql, history_params = _insert_sql(
            history, {"memory_id": "(SELECT id FROM written)"}
        )
    else:
        memory_sql, memory_params = _update_sql(memory, changed)
        history_sql, history_params = _insert_sql(history)
    event_sql, event_params = _insert_sql(
        event, {"payload": "jsonb_set(%s, '{history_id}', to_jsonb((SELECT id FROM history)))"}
    )
    sql = (
        f"WITH written AS ({memory_sql} RETURNING id), history AS ({history_sql} RETURNING id) "  # noqa: S608 - statements built above
        f"{event_sql} RETURNING (SELECT id FROM written), (SELECT id FROM history), id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*memory_params, *history_params, *event_params])
        memory.pk, history.pk, event.pk = cursor.fetchone()
    for instance in (memory, history, event):
        instance._state.adding = False
        instance._state.db = connection.alias
    history.memory = memory
    event.payload["history_id"] = history.pk


def _insert_sql(instance: Model, expressions: dict[str, str] | None = None) -> tuple[str, list]:
    """The INSERT the ORM would send for `instance`, and its parameters.

    `expressions` puts SQL in place of a column's value; a %s in it stands for the value.
    """
    expressions = expressions or {}
    columns, placeholders, params = [], [], []
    for field in type(instance)._meta.concrete_fields:
        if field.primary_key or field.generated:
            continue
        value = field.get_db_prep_save(field.pre_save(instance, add=True), connection)
        placeholder = expressions.get(field.attname, "%s")
        columns.append(_quote(field.column))
        placeholders.append(placeholder)
        if "%s" in placeholder:
            params.append(value)
    table = _quote(type(instance)._meta.db_table)
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(placeholders)})"  # noqa: S608 - names from the models
    return sql, params


def _update_sql(memory: Memory, changed: list[str]) -> tuple[str, list]:
    """The UPDATE of the `changed` fields of `memory`, and its parameters."""
    sets, params = [], []
    for name in changed:
        field = Memory._meta.get_field(name)
        sets.append(f"{_quote(field.column)} = %s")
        params.append(field.get_db_prep_save(getattr(memory, field.attname), connection))
    table = _quote(Memory._meta.db_table)
    sql = f"UPDATE {table} SET {', '.join(sets)} WHERE id = %s"  # noqa: S608 - names from the models
    return sql, [*params, memory.pk]


def _is_unique_key_violation(error: IntegrityError) -> bool:
    """Whether the write broke the unique (user, audience, key) of memory/models.py."""
    diag = getattr(error.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == "user_context_unique_key"
