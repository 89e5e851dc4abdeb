"""Acting on many memories at once: the Context page's bulk delete, re-tag and pin, "Delete
all my memories", merging look-alike notes (the Inbox's suggestion), and undoing any of
them as one action.

Every row goes through memory/services.py (`memory_delete`, `memory_update`,
`memory_restore`), so each gets its own history row and activity event, and each in its own
transaction, under its row lock: a row that is refused (too many tags, changed since) is
reported beside the others, which stand. One request holds no lock longer than one row's
write, and a request cut short leaves every row it reached done, with its history.

The changes of one action share a batch id (`MemoryHistory.batch`, `batch` in the events'
payload). Undoing names the batch: each change that is still its memory's last word is put
back through `memory_restore(undo=True)`, which checks that under the row lock (a key
added again since, or an entry changed since, is left as it is and said so), for
MNEMO_UNDO_DAYS days.

The user's own actions only: an agent's change of what the user stated waits for the
user's review one memory at a time (memory/services.py). On the user's memory only: an id
of an agent's own note is counted as missing, and "Delete all" leaves agents' notes (the
Entries tab's "Agents' notes" deletes them one at a time).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from activity.actors import Actor, ActorKind
from lib.errors import Conflict, Forbidden, InvalidInput, NotFound, ServiceError
from lib.tags import clean_tags
from memory.models import MAX_TAGS, HistoryAction, Memory, MemoryHistory, Source
from memory.services import memory_delete, memory_restore, memory_update
from memory.snapshots import same_state

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from django.contrib.auth.models import AbstractBaseUser

# More than a page of the entry list (50) with room to spare; everything at once is
# memory_delete_all.
MAX_SELECTED = 500


class BulkAction(StrEnum):
    DELETE = "delete"
    TAG = "tag"
    PIN = "pin"
    UNPIN = "unpin"
    DELETE_ALL = "delete_all"
    UNDO = "undo"
    MERGE = "merge"  # look-alike notes: one kept, the others deleted


class RowStatus(StrEnum):
    DONE = "done"
    UNCHANGED = "unchanged"  # nothing to do for it (already so, or back already)
    REFUSED = "refused"  # the service refused it: `message` says why


@dataclass(frozen=True)
class RowOutcome:
    key: str
    status: RowStatus
    message: str = ""


@dataclass
class BulkResult:
    """What one bulk action did, row by row. `batch` names it for an undo (None when it
    changed nothing, and for an undo itself); `missing` counts the ids that name no memory
    of the user's (deleted meanwhile, or never theirs)."""

    action: BulkAction
    batch: uuid.UUID | None
    rows: list[RowOutcome] = field(default_factory=list)
    missing: int = 0

    def _keys(self, status: RowStatus) -> list[str]:
        return [row.key for row in self.rows if row.status == status]

    @property
    def done(self) -> list[str]:
        return self._keys(RowStatus.DONE)

    @property
    def unchanged(self) -> list[str]:
        return self._keys(RowStatus.UNCHANGED)

    @property
    def refused(self) -> list[RowOutcome]:
        return [row for row in self.rows if row.status == RowStatus.REFUSED]


def memory_bulk_delete(
    *, user: AbstractBaseUser, memory_ids: Iterable[int], actor: Actor
) -> BulkResult:
    """Delete each of the user's memories in `memory_ids` (memory_delete), as one batch."""
    _check_user(actor)
    batch = uuid.uuid4()

    def delete(memory: Memory) -> bool:
        memory_delete(user=user, key=memory.key, actor=actor, batch=batch)
        return True

    return _each(user, _ids(memory_ids), BulkAction.DELETE, batch, delete)


def memory_bulk_tag(
    *,
    user: AbstractBaseUser,
    memory_ids: Iterable[int],
    actor: Actor,
    add: list[str] | tuple[str, ...] = (),
    remove: list[str] | tuple[str, ...] = (),
) -> BulkResult:
    """Add the tags `add` and take away the tags `remove` on each of the user's memories in
    `memory_ids` (memory_update), as one batch. Tags are taken as typed and kept normalised
    (lib/tags.py: 'Morning Routine' is morning-routine). A tag that keeps nothing refuses
    the whole action before any row; a row left with more than MAX_TAGS is refused alone."""
    _check_user(actor)
    added = set(clean_tags(list(add), limit=MAX_TAGS))
    removed = set(clean_tags(list(remove), limit=MAX_TAGS))
    if not added and not removed:
        raise InvalidInput("Type a tag to add or remove.", field="tags")
    batch = uuid.uuid4()

    def retag(memory: Memory) -> bool:
        tags = sorted((set(memory.tags) | added) - removed)
        if tags == sorted(memory.tags):
            return False
        memory_update(user=user, key=memory.key, actor=actor, tags=tags, batch=batch)
        return True

    return _each(user, _ids(memory_ids), BulkAction.TAG, batch, retag)


def memory_bulk_pin(
    *, user: AbstractBaseUser, memory_ids: Iterable[int], actor: Actor, pinned: bool
) -> BulkResult:
    """Pin (or unpin) each of the user's memories in `memory_ids` (memory_update), as one
    batch; one that already is so is left alone."""
    _check_user(actor)
    batch = uuid.uuid4()

    def pin(memory: Memory) -> bool:
        if memory.pinned == pinned:
            return False
        memory_update(user=user, key=memory.key, actor=actor, pinned=pinned, batch=batch)
        return True

    action = BulkAction.PIN if pinned else BulkAction.UNPIN
    return _each(user, _ids(memory_ids), action, batch, pin)


def memory_merge_look_alikes(
    *, user: AbstractBaseUser, keep_id: int, memory_ids: Iterable[int], actor: Actor
) -> BulkResult:
    """Tidy a group of look-alike notes (memory/look_alike.py): keep the memory `keep_id`
    and delete the others in `memory_ids` (memory_delete), as one batch that one undo brings
    back; each also stays restorable from its history. A note the user has stated since is
    refused and left as it is: only agents' notes are tidied away. The kept one is not
    changed. NotFound when the one to keep is gone: then nothing is deleted."""
    _check_user(actor)
    ids = _ids(memory_ids)
    if keep_id not in ids or len(ids) < 2:
        raise InvalidInput("Choose which of the notes to keep.", field="keep")
    if not Memory.objects.filter(user=user, owner_agent=None, pk=keep_id).exists():
        raise NotFound("The note to keep is gone; nothing was merged.", field="keep")
    batch = uuid.uuid4()

    def delete(memory: Memory) -> bool:
        if memory.source == Source.USER_STATED:
            raise Conflict(f"You stated '{memory.key}'; it is left as it is.", field="ids")
        memory_delete(user=user, key=memory.key, actor=actor, batch=batch)
        return True

    others = [pk for pk in ids if pk != keep_id]
    return _each(user, others, BulkAction.MERGE, batch, delete)


def memory_delete_all(*, user: AbstractBaseUser, actor: Actor) -> BulkResult:
    """Delete every memory the user has (profile, styles and entries), as one batch that
    one undo brings back. Documents, work items, proposals waiting for review, agents and
    the account are not memories and stay. Memories written after this starts are kept."""
    _check_user(actor)
    batch = uuid.uuid4()
    ids = list(
        Memory.objects.filter(user=user, owner_agent=None)
        .order_by("pk")
        .values_list("pk", flat=True)
    )

    def delete(memory: Memory) -> bool:
        memory_delete(user=user, key=memory.key, actor=actor, batch=batch)
        return True

    return _each(user, ids, BulkAction.DELETE_ALL, batch, delete)


def memory_batch_undo(*, user: AbstractBaseUser, batch: uuid.UUID, actor: Actor) -> BulkResult:
    """Undo a bulk action of the user's: put back each memory it deleted or changed, through
    memory_restore(undo=True), newest change first, each in its own transaction.

    A change that is no longer its memory's last word is left as it is, with the reason
    (a key added again since, an entry changed or deleted since); one put back already
    (an earlier undo, a restore from history) is unchanged. NotFound for a batch that is
    not the user's; InvalidInput once it is older than MNEMO_UNDO_DAYS days."""
    _check_user(actor)
    changes = list(
        MemoryHistory.objects.filter(user=user, batch=batch)
        .select_related("memory")
        .order_by("-pk")
    )
    if not changes:
        raise NotFound("No such bulk action.", field="batch")
    days = settings.MNEMO_UNDO_DAYS
    if changes[-1].created_at < timezone.now() - timedelta(days=days):
        raise InvalidInput(
            f"That was more than {days} days ago and can no longer be undone as one; "
            "each memory can still be restored from its history.",
            field="batch",
        )
    # What each deleted key holds now, and when it was last deleted, read once for the batch:
    # the restores below check again under each row's lock.
    deleted_keys = [change.key for change in changes if change.action == HistoryAction.DELETE]
    present = {
        memory.key: memory
        for memory in Memory.objects.filter(user=user, owner_agent=None, key__in=deleted_keys)
    }
    last_deleted = dict(
        MemoryHistory.objects.filter(
            user=user, owner_agent=None, key__in=deleted_keys, action=HistoryAction.DELETE
        )
        .order_by("key", "-pk")
        .distinct("key")
        .values_list("key", "pk")
    )
    result = BulkResult(action=BulkAction.UNDO, batch=None)
    for change in changes:
        result.rows.append(_undo_one(user, change, actor, present, last_deleted))
    return result


def _undo_one(
    user: AbstractBaseUser,
    change: MemoryHistory,
    actor: Actor,
    present: dict[str, Memory],
    last_deleted: dict[str, int],
) -> RowOutcome:
    if change.action == HistoryAction.DELETE:
        key = change.key
        current = present.get(key)
        # Deleted again after it came back: putting back the older state would pass over
        # that later deletion.
        if current is None and last_deleted.get(key, change.pk) > change.pk:
            return RowOutcome(
                key,
                RowStatus.REFUSED,
                f"'{key}' was added again and deleted since; restore it from Recently deleted.",
            )
    else:
        current = change.memory
        key = current.key if current is not None else change.key
        if current is None:
            return RowOutcome(
                key, RowStatus.REFUSED, f"'{key}' was deleted since; it is left as it is."
            )
    if current is not None and same_state(current.snapshot(), change.before):
        return RowOutcome(key, RowStatus.UNCHANGED)
    try:
        memory_restore(user=user, history_id=change.pk, actor=actor, undo=True)
    except ServiceError as error:  # added again or changed since, seen under the row lock
        return RowOutcome(key, RowStatus.REFUSED, error.message)
    return RowOutcome(key, RowStatus.DONE)


def _check_user(actor: Actor) -> None:
    if actor.kind != ActorKind.USER:
        raise Forbidden("Only the user acts on many memories at once.")


def _ids(memory_ids: Iterable[int]) -> list[int]:
    ids = sorted({int(pk) for pk in memory_ids})
    if not ids:
        raise InvalidInput("Select at least one memory.", field="ids")
    if len(ids) > MAX_SELECTED:
        raise InvalidInput(
            f"Select at most {MAX_SELECTED} memories at a time; there are {len(ids)}.",
            field="ids",
        )
    return ids


def _each(
    user: AbstractBaseUser,
    ids: list[int],
    action: BulkAction,
    batch: uuid.UUID,
    apply: Callable[[Memory], bool],
) -> BulkResult:
    """`apply` to each of the user's memories in `ids`, in id order, each locked in its own
    transaction; `apply` says whether it changed the memory. An id that names no memory of
    the user's is counted as missing; a ServiceError refuses that row alone."""
    result = BulkResult(action=action, batch=batch)
    for pk in ids:
        key = ""
        try:
            with transaction.atomic():
                memory = (
                    Memory.objects.select_for_update()
                    .filter(user=user, owner_agent=None, pk=pk)
                    .only("pk", "key", "source", "tags", "pinned")  # what `apply` reads
                    .first()
                )
                if memory is None:
                    result.missing += 1
                    continue
                key = memory.key
                changed = apply(memory)
        except ServiceError as error:
            result.rows.append(RowOutcome(key, RowStatus.REFUSED, error.message))
            continue
        result.rows.append(RowOutcome(key, RowStatus.DONE if changed else RowStatus.UNCHANGED))
    if not result.done:
        result.batch = None  # nothing to undo
    return result
