"""The write path: the only functions that change one memory.

Creating, updating, deleting and restoring a memory each validate (memory/validation.py),
write the row, a history row and an activity event in one transaction (the row lock and
the saves are memory/write_sql.py's), and let the review gate (memory/review_gate.py) turn
an agent's write into a proposal or a merge instead. Pages, the agent API, tasks and the admin all
come through here, or through the modules built on it: memory/entries.py (entries and their
keys), memory/notes.py (moving an agent's note into the user's memory), memory/replay.py
(an import's past history) and memory/uses.py (counting reads).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from activity import events
from activity.actors import Actor, ActorKind
from lib.errors import Conflict, InvalidInput, NotFound, ServiceError
from memory import visibility
from memory.keys import parse_key
from memory.models import (
    HistoryAction,
    Memory,
    MemoryHistory,
    MemoryProposal,
    ProposalAction,
    ProposalTrigger,
    Source,
)
from memory.outcomes import DuplicateMemory, MemoryWrite, ReviewRequired
from memory.review_gate import _Merged, _near_entry, _propose, _review_gate
from memory.snapshots import _snapshot_fields, same_state, state_fields, state_problem
from memory.validation import (
    UNSET,
    _check_audience,
    _checks_near,
    _clean_reason,
    _clean_tags,
    _clean_value,
    _link_turn,
    _refuse_credentials,
    _source_and_confidence,
    _when_and_where,
    memory_clean,
)
from memory.write_sql import (
    _locked,
    _write_rows,
    is_memory_id_violation,
    is_unique_key_violation,
)
from search.indexing import request_embedding

if TYPE_CHECKING:
    from datetime import datetime
    from uuid import UUID

    from django.contrib.auth.models import AbstractBaseUser

    from llm.models import Turn
    from profiles.models import Agent


def memory_upsert(
    *,
    user: AbstractBaseUser,
    key: str,
    value: str,
    actor: Actor,
    source: str | None = None,
    confidence: float | None = None,
    tags: list[str] | None = None,
    pinned: bool | None = None,
    reason: str = "",
    turn: Turn | None = None,
    unless_changed_since: datetime | None = None,
    occurred_at: object = None,
    session: str | None = None,
    owner_agent: Agent | None = None,
    reader: Agent | None = None,
) -> MemoryWrite:
    """Create the memory, or replace its value if the key exists (last write wins).

    `owner_agent`: write that agent's own note under the key instead of the user's memory
    (_check_audience says who may); a note never waits for review and is compared with
    nothing (it does not change the user's memory).

    `occurred_at` (when what it says happened or was said) and `session` (the conversation
    it came from) are memory_clean's; left out, a new memory takes now and no session, and
    an existing one keeps its own.

    `unless_changed_since` (an import's merge, where the newer change wins): a memory under
    the key that changed at or after this time, or that already holds these values, is
    left as it is (the write is "unchanged"); decided under the row lock.

    Except that the user is in charge. For an agent (or the system): a change of a
    user-stated memory, and a new memory while the user reviews agents' new memories,
    raise ReviewRequired with the proposal made instead. `reader`: the agent whose tool call
    this is, bound by its read rule (memory/visibility.py): a row of the user's memory it
    may not read answers NotFound, as if there were none, decided on the locked row
    (_refuse_hidden). A new entry near one of its kind
    (memory/duplicates.py) that adds nothing to it raises DuplicateMemory, its text kept in
    that one's history; one that adds something is stored as its own row, unless it would
    change what the user stated (or the user reviews agents' new memories): then
    ReviewRequired with a proposal to update that one (_near_entry). `reason` is shown to
    the user beside a proposal. `turn`, the reported turn it was learned from, is linked
    from the row (or from the proposal made instead).
    """
    _refuse_credentials(actor, key=key, value=value, tags=tags, reason=reason, session=session)
    _check_audience(user, actor, owner_agent, key=key, creating=True)
    parsed = parse_key(key)
    fields = memory_clean(
        key=key,
        value=value,
        actor=actor,
        source=source,
        confidence=confidence,
        tags=tags,
        user=user,
        occurred_at=occurred_at,
        session=session,
    )
    if pinned is not None:
        fields["pinned"] = pinned
    _link_turn(fields, turn)
    reason = _clean_reason(reason)
    return _write(
        user=user,
        key=key,
        fields=fields,
        actor=actor,
        action=HistoryAction.UPDATE,
        reason=reason,
        unless_changed_since=unless_changed_since,
        near_check=owner_agent is None and _checks_near(actor, parsed.family),
        owner_agent=owner_agent,
        reader=reader,
    )


def memory_update(
    *,
    user: AbstractBaseUser,
    key: str,
    actor: Actor,
    value: str = UNSET,
    source: str | None = None,
    confidence: float | None = UNSET,
    tags: list[str] = UNSET,
    pinned: bool = UNSET,
    reason: str = "",
    batch: UUID | None = None,
    occurred_at: object = UNSET,
    session: str = UNSET,
    owner_agent: Agent | None = None,
    reader: Agent | None = None,
) -> MemoryWrite:
    """Change an existing memory; NotFound if the key has none, or only a row `reader` may
    not read (memory_upsert). `owner_agent`: that agent's own note under the key instead
    (_check_audience), never waiting for review.

    A new value or confidence also records who stands behind it now (the source). An
    agent's change of a user-stated memory raises ReviewRequired (memory_upsert), a change
    of only its time or session too: it changes what the user said. `batch`: the bulk
    action it is part of (memory/bulk.py), kept on its history row and event.
    """
    _refuse_credentials(actor, value=value, tags=tags, reason=reason, session=session)
    _check_audience(user, actor, owner_agent, key=key)
    parsed = parse_key(key)
    fields: dict[str, Any] = {}
    if value is not UNSET:
        fields["value"] = _clean_value(value, family=parsed.family, key=key)
    if value is not UNSET or confidence is not UNSET or source is not None:
        fields["source"], fields["confidence"] = _source_and_confidence(
            actor, source, None if confidence is UNSET else confidence
        )
    if tags is not UNSET:
        fields["tags"] = _clean_tags(tags)
    if pinned is not UNSET:
        fields["pinned"] = bool(pinned)
    fields.update(_when_and_where(user, occurred_at, session))
    if not fields:
        raise InvalidInput(
            "Nothing to update: give a value, confidence, tags, pinned, occurred_at or session."
        )
    return _write(
        user=user,
        key=key,
        fields=fields,
        actor=actor,
        action=HistoryAction.UPDATE,
        create=False,
        reason=_clean_reason(reason),
        batch=batch,
        owner_agent=owner_agent,
        reader=reader,
    )


def memory_delete(
    *,
    user: AbstractBaseUser,
    key: str,
    actor: Actor,
    reason: str = "",
    batch: UUID | None = None,
    owner_agent: Agent | None = None,
    reader: Agent | None = None,
) -> MemoryHistory:
    """Delete a memory; its last state stays in history so it can be restored.
    `owner_agent`: that agent's own note under the key instead (_check_audience). NotFound
    when there is none, or only a row `reader` may not read (memory_upsert).

    An agent's deletion of a user-stated memory raises ReviewRequired (memory_upsert).
    `batch`: the bulk action it is part of (memory/bulk.py), kept on its history row and
    event.
    """
    _refuse_credentials(actor, reason=reason)
    _check_audience(user, actor, owner_agent, key=key)
    parse_key(key)
    reason = _clean_reason(reason)
    with transaction.atomic():
        memory, _ = _locked(user, key, actor, owner_agent=owner_agent)
        _refuse_hidden(memory, reader, key)
        if memory is None:
            raise NotFound(f"No memory with key '{key}'.", field="key")
        gated = owner_agent is None and actor.kind != ActorKind.USER
        if gated and memory.source == Source.USER_STATED:
            proposal = _propose(
                user,
                key,
                actor,
                ProposalAction.DELETE,
                ProposalTrigger.USER_STATED,
                before=memory.snapshot(),
                after=None,
                reason=reason,
            )
        else:
            proposal = None
            history = _delete_row(user, memory, actor, batch)
    if proposal is not None:
        raise ReviewRequired(proposal)
    return history


def _delete_row(
    user: AbstractBaseUser,
    memory: Memory,
    actor: Actor,
    batch: UUID | None = None,
    *,
    event: bool = True,
) -> MemoryHistory:
    """Delete the locked row, with its history row (naming whose note it was, so restore
    puts it back there) and, unless `event` is off for a change whose one event says more
    (memory_share_note), its event. The history row keeps the memory's id and creation
    time, so a restore brings back this same memory (memory_restore)."""
    key = memory.key
    history = MemoryHistory.objects.create(
        user=user,
        key=key,
        memory_id=memory.pk,
        memory_created_at=memory.created_at,
        owner_agent=memory.owner_agent,
        action=HistoryAction.DELETE,
        source=memory.source,
        before=memory.snapshot(),
        after=None,
        batch=batch,
        **actor.as_fields(),
    )
    memory.delete()
    if not event:
        return history
    events.memory_deleted(
        user=user,
        actor=actor,
        key=key,
        history_id=history.pk,
        batch=batch,
        note_of=_note_of(memory.owner_agent),
    )
    return history


def _note_of(owner_agent: Agent | None) -> str | None:
    """The name an activity event gives the agent whose note it is (None: the user's)."""
    return None if owner_agent is None else owner_agent.label


def memory_set(
    *, user: AbstractBaseUser, key: str, value: str, actor: Actor
) -> tuple[str, MemoryWrite | MemoryHistory | None]:
    """Set a key from a form field: empty text deletes it, the same text changes nothing.

    Returns (status, what was written): "created"/"updated" with the MemoryWrite,
    "deleted" with the history row, or "unchanged" with None. The pages' one rule for
    fields that map to one key (profile fields, style aspects).
    """
    value = value.strip() if isinstance(value, str) else value
    current = Memory.objects.filter(user=user, owner_agent=None, key=key).only("value").first()
    if not value:
        if current is None:
            return "unchanged", None
        try:
            return "deleted", memory_delete(user=user, key=key, actor=actor)
        except NotFound:  # deleted meanwhile
            return "unchanged", None
    if current is not None and current.value == value:
        return "unchanged", None
    write = memory_upsert(user=user, key=key, value=value, actor=actor)
    return write.status, write


def memory_set_many(
    *, user: AbstractBaseUser, values: dict[str, str], actor: Actor
) -> dict[str, tuple[str, MemoryWrite | MemoryHistory | None]]:
    """Set several keys from one form's Save (the profile form), all of them or none:
    each through memory_set, so each key that changes gets its own history row and event,
    and all of them in one transaction. A key refused (a ServiceError) undoes the keys
    written before it and is raised with its `field` naming that key; nothing is saved.

    One transaction, not one per key: a reader between two keys' commits saw the new name
    beside the old role, and each commit's after-commit work (asking for embeddings,
    search/indexing.py) came between the keys. The keys are taken in their sorted order,
    so two Saves of the same form lock the same rows in the same order.

    Returns each key's (status, what was written) as memory_set says it, in `values`' order.
    """
    results: dict[str, tuple[str, MemoryWrite | MemoryHistory | None]] = {}
    with transaction.atomic():
        for key in sorted(values):
            try:
                results[key] = memory_set(user=user, key=key, value=values[key], actor=actor)
            except ServiceError as error:
                error.field = key
                raise
    return {key: results[key] for key in values}


def memory_restore(
    *, user: AbstractBaseUser, history_id: int, actor: Actor, undo: bool = False
) -> MemoryWrite:
    """Bring a memory back to the state a history row recorded.

    For a change that is the state it produced; for a deletion, the state it removed (for a
    merge, the memory's state then, not the note it merged). A memory renamed since is
    restored under its key now, not beside it under the old one.

    With `undo` (undoing a bulk action, memory/bulk.py): the state before the change, and
    only while that change is still the memory's last word, decided under the row lock. A
    deleted memory comes back only while its key has none, a changed one goes back only
    while it holds what the change left; otherwise Conflict, and nothing is written.
    """
    entry = (
        MemoryHistory.objects.filter(user=user, pk=history_id)
        .select_related("memory", "owner_agent")
        .first()
    )
    if entry is None:
        raise NotFound(f"No history entry {history_id}.", field="history_id")
    expected: Any = UNSET
    key, state = restore_target(entry)
    if undo:
        if entry.before is None or entry.action in (HistoryAction.RENAME, HistoryAction.MERGE):
            raise InvalidInput(
                f"History entry {history_id} cannot be undone this way.", field="history_id"
            )
        state = entry.before
        expected = entry.after  # None for a deletion: the key must have no memory
    # A stored state is not trusted (memory/snapshots.py): an older import kept any shape.
    if problem := state_problem(state, renamed=entry.action == HistoryAction.RENAME):
        raise InvalidInput(
            f"History entry {history_id} cannot be restored: {problem}.", field="history_id"
        )
    # A note's history row names its agent: it comes back as that agent's note. A memory
    # deleted since comes back as itself: its id and creation time.
    return _write(
        user=user,
        key=key,
        fields=state_fields(state),
        actor=actor,
        action=HistoryAction.RESTORE,
        expected=expected,
        owner_agent=entry.owner_agent,
        revive=_identity(entry),
    )


def _identity(entry: MemoryHistory) -> tuple[int, datetime] | None:
    """The id and creation time of the memory `entry` changed, when that memory is deleted
    now (its deletion's history row keeps both, _delete_row), so that restoring brings it back
    as the same memory: its history and the links to it stay whole. None when the memory is
    there (the write finds it under its key) or was unlinked before issue 30."""
    if entry.memory_id is None or _memory_of(entry) is not None:
        return None
    created_at = (
        MemoryHistory.objects.filter(
            user_id=entry.user_id,
            memory_id=entry.memory_id,
            action=HistoryAction.DELETE,
            memory_created_at__isnull=False,
        )
        .order_by("-pk")
        .values_list("memory_created_at", flat=True)
        .first()
    )
    return None if created_at is None else (entry.memory_id, created_at)


def _memory_of(entry: MemoryHistory) -> Memory | None:
    """The memory a history row changed, if it is there now (a deleted one's id stays on
    its rows, with no row behind it)."""
    try:
        return entry.memory
    except Memory.DoesNotExist:
        return None


def restore_target(entry: MemoryHistory) -> tuple[str, Any]:
    """What memory_restore (not undoing) writes back for a history row, as (key, state):
    the state the change produced, or for a deletion the state it removed; under the key
    its memory has now (a memory renamed since comes back under that, not beside it under
    the old one), else the row's key. The state is as stored: check it with state_problem.
    The history page offers a restore by this (pages/views/context_history.py)."""
    memory = _memory_of(entry)
    key = memory.key if memory is not None else entry.key
    return key, entry.after if entry.after is not None else entry.before


def _check_expected(key: str, memory: Memory | None, expected: dict[str, Any] | None) -> None:
    """Conflict unless the locked `memory` is in the `expected` state (None: no memory)."""
    if same_state(memory.snapshot() if memory is not None else None, expected):
        return
    if expected is None:
        message = f"'{key}' was added again since; it is left as it is."
    elif memory is None:
        message = f"'{key}' was deleted since; it is left as it is."
    else:
        message = f"'{key}' was changed since; it is left as it is."
    raise Conflict(message, field="key")


def _write(
    *,
    user: AbstractBaseUser,
    key: str,
    fields: dict[str, Any],
    actor: Actor,
    action: HistoryAction,
    create: bool = True,
    only_new: bool = False,
    reason: str = "",
    unless_changed_since: datetime | None = None,
    batch: UUID | None = None,
    expected: Any = UNSET,
    near_check: bool = False,
    owner_agent: Agent | None = None,
    reader: Agent | None = None,
    revive: tuple[int, datetime] | None = None,
) -> MemoryWrite:
    """Write one memory with its history row and activity event, in one transaction.

    The row is (user, `owner_agent`, key): the user's memory, or that agent's own note,
    which no review gate stops (it changes nothing of the user's memory).

    Concurrent writers of one key serialize on its row lock, and each records the state
    the previous one left. Two that both find the key new race to insert it: the loser's
    INSERT fails on the unique (user, audience, key), its transaction is rolled back, and it runs
    once more, this time updating the winner's row (or, `only_new`, failing with Conflict).
    When the user must review it first, the proposal is committed and ReviewRequired raised.
    `batch` goes on the history row and the event; `expected` (a snapshot, or None for no
    memory) makes the write a Conflict unless the locked row is in that state.
    `near_check`: a new key is first compared with the entries of its kind (_near_entry);
    a note merged into one of them is committed and DuplicateMemory raised. `revive` (a
    restore of a deleted memory: its id and creation time): when the key has no row, the
    row is inserted again with these, unless another memory holds the id now. Two restores
    racing to insert it are retried as two racing inserts are.
    """
    write_once = functools.partial(
        _write_once,
        user=user,
        key=key,
        fields=fields,
        actor=actor,
        action=action,
        create=create,
        only_new=only_new,
        reason=reason,
        unless_changed_since=unless_changed_since,
        batch=batch,
        expected=expected,
        near_check=near_check,
        owner_agent=owner_agent,
        reader=reader,
        revive=revive,
    )
    try:
        with transaction.atomic():
            result = write_once()
    except IntegrityError as error:
        if not (is_unique_key_violation(error) or (revive and is_memory_id_violation(error))):
            raise
        with transaction.atomic():
            result = write_once()
    if isinstance(result, MemoryProposal):
        raise ReviewRequired(result)
    if isinstance(result, _Merged):
        raise DuplicateMemory(result.memory, result.similarity, result.history)
    return result


def _refuse_hidden(memory: Memory | None, reader: Agent | None, key: str) -> None:
    """NotFound, naming nothing of it, when the locked row is one of the user's memory that
    `reader`'s read rule hides: its tool call cannot change, or learn of, what it may not
    read. Decided on the locked row, so a row tagged hidden by a write that committed first
    is refused too. An agent's own note is always its to read."""
    if reader is not None and memory is not None and not visibility.may_read(memory, reader):
        raise NotFound(f"No memory with key '{key}'.", field="key")


def _write_once(
    *,
    user: AbstractBaseUser,
    key: str,
    fields: dict[str, Any],
    actor: Actor,
    action: HistoryAction,
    create: bool,
    only_new: bool,
    reason: str,
    unless_changed_since: datetime | None,
    batch: UUID | None,
    expected: Any,
    near_check: bool,
    owner_agent: Agent | None,
    reader: Agent | None,
    revive: tuple[int, datetime] | None = None,
) -> MemoryWrite | MemoryProposal | _Merged:
    """One attempt of _write, inside its transaction: lock, decide, write, embed."""
    # 1. Lock the row (for a new entry compared with its kind, also the kind's new
    #    entries), reading the pause and the review rule in the same statement.
    memory, review_new = _locked(user, key, actor, new_entry=near_check, owner_agent=owner_agent)
    _refuse_hidden(memory, reader, key)

    # 2. Decide what the write becomes: a Conflict, nothing, a merge or a proposal, or a
    #    write of the row.
    if expected is not UNSET:
        _check_expected(key, memory, expected)
    if only_new and memory is not None:
        raise Conflict(f"You already have '{key}'; edit it in the list instead.", field="slug")
    if memory is not None and (
        _changes_nothing(memory, fields)
        or (unless_changed_since is not None and memory.updated_at >= unless_changed_since)
    ):
        # Pinning what is pinned, saving what is there (or, for an import, an older change):
        # no history row, no event, no proposal, and updated_at (which orders the
        # scratchpad) stays as it was.
        return MemoryWrite(memory=memory, created=False, history=None)
    if memory is None and not create:
        raise NotFound(f"No memory with key '{key}'.", field="key")
    if near_check and memory is None:
        near = _near_entry(user, key, fields, actor, reason, review_new)
        if near is not None:
            return near
    if actor.kind != ActorKind.USER and owner_agent is None:
        gated = _review_gate(user, key, fields, actor, memory, review_new, create, reason)
        if gated is not None:
            return gated

    # 3. Write the row (INSERT or UPDATE), its history row and its activity event.
    created = memory is None
    revived = False
    if created:
        memory = Memory(user=user, owner_agent=owner_agent, key=key, **fields)
        if revive is not None and not Memory.objects.filter(pk=revive[0]).exists():
            memory.pk, memory.created_at = revive
            revived = True
        before = None
        if action == HistoryAction.UPDATE:
            action = HistoryAction.CREATE
        changed: list[str] = []
    else:
        before = memory.snapshot()
        for name, new in fields.items():
            setattr(memory, name, new)
        changed = [*fields, "updated_at"]  # updated_at: auto_now sets it on save
        if memory.value != before["value"]:
            # The old vector no longer describes the value; search/tasks.py makes a new one.
            memory.embedding, memory.embedding_model, memory.embedded_hash = None, "", ""
            changed += ["embedding", "embedding_model", "embedded_hash"]
    history = MemoryHistory(
        user=user,
        key=key,
        owner_agent=owner_agent,
        action=action,
        source=memory.source,
        before=before,
        after=memory.snapshot(),
        batch=batch,
        **actor.as_fields(),
    )
    # history_id is filled in once the history row is saved (_write_rows).
    event = events.memory_written_event(
        user=user,
        actor=actor,
        key=key,
        action=action,
        source=memory.source,
        history_id=None,
        batch=batch,
        note_of=_note_of(owner_agent),
    )
    memory, history = _write_rows(memory, changed, history, event, revived=revived)

    # 4. A new text needs a new vector: the embedding worker is asked after the commit.
    if before is None or before["value"] != memory.value:
        request_embedding()
    return MemoryWrite(memory=memory, created=created, history=history)


def _changes_nothing(memory: Memory, fields: dict[str, Any]) -> bool:
    """Whether writing `fields` leaves the memory's state (its snapshot) as it is."""
    before = memory.snapshot()
    return before == {**before, **_snapshot_fields(fields)}
