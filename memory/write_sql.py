"""The write path's statements: the row lock (one SQL statement, which also reads the pause
and the review rule), the save of a memory with its history row and event (one statement), and
the unique-key test the retry of a racing write relies on. Used by memory/services.py and
the modules built on it; nothing outside the memory app runs these."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from django.db import IntegrityError, connection
from django.db.models import Field, Model
from django.utils import timezone

from activity.actors import Actor, ActorKind
from activity.models import ActivityEvent
from lib.errors import MemoryPaused
from memory.models import UNIQUE_KEY_CONSTRAINT, Memory, MemoryHistory
from profiles.models import Profile
from profiles.services import MEMORY_PAUSED_MESSAGE
from search.fields import SEARCH_COLUMNS

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

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
    memory: Memory,
    changed: list[str],
    history: MemoryHistory,
    event: ActivityEvent,
    *,
    revived: bool = False,
) -> tuple[Memory, MemoryHistory]:
    """Save the memory (INSERT when it has no id, else an UPDATE of its `changed` fields),
    its history row naming it and the event naming that history row, in one statement
    inside the caller's transaction; the saved memory and history row, as read back.
    `revived`: a deleted memory restored as itself, INSERTed with the id and `created_at`
    it holds (memory/services.py memory_restore).

    One statement, not three ORM saves: a write's round trips and the ORM's compiling were
    a third of its CPU (bench/README.md, issue 29). What it writes is what `save()` would:
    every column but the id and the generated tsvector, the timestamps `save()` would set
    (`updated_at`, and `created_at` on insert) set here, and the rows come back through
    `Model.from_db`, as any queryset's do."""
    now = timezone.now()
    memory.updated_at = now
    insert = revived or memory.pk is None
    if memory.pk is None:
        memory.created_at = now
    elif not insert and "updated_at" not in changed:
        changed = [*changed, "updated_at"]
    event.created_at = now
    statement = _rows_statement(insert, tuple(changed), with_id=revived)
    params = [
        *statement.memory_values(memory),
        *statement.history_values(history),
        *statement.event_values(event),
        _json(event, "payload"),
    ]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        row = cursor.fetchone()
    saved_memory, saved_history = statement.read(row)
    _keep_relations(memory, saved_memory)
    _keep_relations(history, saved_history)
    saved_history.memory = saved_memory
    return saved_memory, saved_history


def _json(instance: Model, name: str) -> object:
    field = type(instance)._meta.get_field(name)
    return field.get_db_prep_save(getattr(instance, field.attname), connection)


def _keep_relations(source: Model, saved: Model) -> None:
    """The related objects the caller's instance already held (its user, agent, turn),
    on the instance read back, so reading them costs no query."""
    for field in type(source)._meta.concrete_fields:
        if field.is_relation and field.is_cached(source):
            field.set_cached_value(saved, field.get_cached_value(source))


class _RowsStatement:
    """The one statement of _write_rows for an insert, or an update of given columns. The
    memory and history rows come back; the event is written and not read (PostgreSQL runs
    a data-modifying WITH part whether or not the query reads it)."""

    def __init__(self, insert: bool, changed: tuple[str, ...], *, with_id: bool = False) -> None:
        history_memory = MemoryHistory._meta.get_field("memory")
        event_payload = ActivityEvent._meta.get_field("payload")
        self.memory_written = _written_fields(
            Memory, changed=None if insert else changed, with_id=with_id
        )
        self.history_written = [
            f for f in _written_fields(MemoryHistory) if f is not history_memory
        ]
        self.event_written = [f for f in _written_fields(ActivityEvent) if f is not event_payload]
        self.read_back = [
            (model, [f for f in model._meta.concrete_fields if f.name not in SEARCH_COLUMNS])
            for model in (Memory, MemoryHistory)
        ]
        memory_id, history_id = (_quote(model._meta.pk.column) for model in (Memory, MemoryHistory))
        returned = [", ".join(_quote(f.column) for f in fields) for _, fields in self.read_back]
        if insert:
            memory_sql = (
                f"INSERT INTO {_table(Memory)} ({_columns(self.memory_written)}) "  # noqa: S608 - names from the models
                f"VALUES ({_slots(self.memory_written)}) RETURNING {returned[0]}"
            )
        else:
            assignments = ", ".join(f"{_quote(f.column)} = %s" for f in self.memory_written)
            memory_sql = (
                f"UPDATE {_table(Memory)} SET {assignments} WHERE {memory_id} = %s "  # noqa: S608 - names from the models
                f"RETURNING {returned[0]}"
            )
        history_columns = _columns(self.history_written)
        event_columns = _columns(self.event_written)
        self.sql = (
            f"WITH memory AS ({memory_sql}), "  # noqa: S608 - names from the models
            f"history AS (INSERT INTO {_table(MemoryHistory)} ({history_columns}, "
            f"{_quote(history_memory.column)}) SELECT {_slots(self.history_written)}, "
            f"memory.{memory_id} FROM memory RETURNING {returned[1]}), "
            f"event AS (INSERT INTO {_table(ActivityEvent)} ({event_columns}, "
            f"{_quote(event_payload.column)}) SELECT {_slots(self.event_written)}, "
            f"jsonb_set(%s::jsonb, '{{history_id}}', to_jsonb(history.{history_id})) "
            "FROM history) "
            "SELECT memory.*, history.* FROM memory, history"
        )
        self.insert = insert

    def memory_values(self, memory: Memory) -> list[object]:
        values = _values(memory, self.memory_written)
        return values if self.insert else [*values, memory.pk]

    def history_values(self, history: MemoryHistory) -> list[object]:
        return _values(history, self.history_written)

    def event_values(self, event: ActivityEvent) -> list[object]:
        return _values(event, self.event_written)

    def read(self, row: tuple) -> list[Model]:
        """The two rows as instances, each value through its field's converters (a
        queryset's compiler applies them; a cursor's row has not had them: JSON is text)."""
        instances, start = [], 0
        for model, fields in self.read_back:
            values = [
                _converted(field, value)
                for field, value in zip(fields, row[start : start + len(fields)], strict=True)
            ]
            instances.append(model.from_db(connection.alias, [f.attname for f in fields], values))
            start += len(fields)
        return instances


def _converted(field: Field, value: object) -> object:
    for converter in field.get_db_converters(connection):
        value = converter(value, field, connection)
    return value


@functools.cache
def _rows_statement(
    insert: bool, changed: tuple[str, ...], *, with_id: bool = False
) -> _RowsStatement:
    return _RowsStatement(insert, changed, with_id=with_id)


def _written_fields(
    model: type[Model], changed: tuple[str, ...] | None = None, *, with_id: bool = False
) -> list[Field]:
    """The columns a save writes: all but the id (unless `with_id`) and generated ones, or
    only `changed`."""
    fields = [
        f for f in model._meta.concrete_fields if (with_id or not f.primary_key) and not f.generated
    ]
    if changed is None:
        return fields
    return [f for f in fields if f.name in changed or f.attname in changed]


def _values(instance: Model, fields: list[Field]) -> list[object]:
    return [f.get_db_prep_save(getattr(instance, f.attname), connection) for f in fields]


def _table(model: type[Model]) -> str:
    return _quote(model._meta.db_table)


def _columns(fields: list[Field]) -> str:
    return ", ".join(_quote(f.column) for f in fields)


def _slots(fields: list[Field]) -> str:
    return ", ".join(["%s"] * len(fields))


def is_memory_id_violation(error: IntegrityError) -> bool:
    """Whether the write broke Memory's primary key: a restore inserting a deleted memory
    again under its id, which a racing restore of it inserted first."""
    diag = getattr(error.__cause__, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name is None or getattr(diag, "table_name", None) != Memory._meta.db_table:
        return False
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Memory._meta.db_table)
    return bool(constraints.get(name, {}).get("primary_key"))


def is_unique_key_violation(error: IntegrityError) -> bool:
    """Whether the write broke the unique (user, audience, key) of memory/models.py."""
    diag = getattr(error.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == UNIQUE_KEY_CONSTRAINT
