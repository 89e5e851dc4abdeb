"""Read queries for memory."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import TYPE_CHECKING, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    Value,
    When,
    Window,
)
from django.utils import timezone

from activity.actors import ActorKind
from lib.tags import normalize_tag
from memory.keys import ENTRY_KINDS, PROFILE_KEYS, STYLE_ASPECTS
from memory.models import HistoryAction, Memory, MemoryHistory, MemoryProposal, ProposalStatus
from memory.snapshots import state_problem
from profiles.naming import agent_name

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime
    from uuid import UUID

    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

    from profiles.models import Agent

KINDS = ("profile", "style", *ENTRY_KINDS)


def memory_list(
    *,
    user: AbstractBaseUser,
    kind: str | None = None,
    tag: str | None = None,
    source: str | None = None,
    updated_since: datetime | None = None,
    after_key: str | None = None,
    owner_agent: Agent | None = None,
) -> QuerySet[Memory]:
    """The user's memories in key order, optionally filtered; `after_key` pages on.
    `owner_agent`: that agent's own notes instead of the user's memory."""
    memories = of_kind(Memory.objects.filter(user=user, owner_agent=owner_agent), kind)
    if tag is not None:
        # Typed as tags are stored (lib/tags.py): "Morning Routine" finds #morning-routine.
        memories = memories.filter(tags__contains=[normalize_tag(tag)])
    if source is not None:
        memories = memories.filter(source=source)
    if updated_since is not None:
        memories = memories.filter(updated_at__gte=updated_since)
    if after_key is not None:
        memories = memories.filter(key__gt=after_key)
    return memories.order_by("key")


def of_kind(memories: QuerySet[Memory], kind: str | None) -> QuerySet[Memory]:
    """Those of the memories of one kind ("profile", "style", an entry kind; None: all)."""
    if kind == "profile":
        return memories.filter(key__in=PROFILE_KEYS)
    if kind == "style":
        return memories.filter(key__regex=rf"^({'|'.join(STYLE_ASPECTS)})_")
    if kind is not None:
        return memories.filter(key__startswith=f"{kind}:")
    return memories


def entry_list(
    *,
    user: AbstractBaseUser,
    kind: str = "",
    tag: str = "",
    q: str = "",
    owner_agent: Agent | None = None,
) -> QuerySet[Memory]:
    """The user's entries as the Context page lists them: by kind (in ENTRY_KINDS order, the
    `kind_order` annotation), pinned first, then the most recently changed; optionally of
    one kind, with one tag, or with `q` in the text or the key. `owner_agent`: that agent's
    own notes instead of the user's memory. Page it."""
    entries = memory_list(
        user=user, kind=kind or None, tag=tag or None, owner_agent=owner_agent
    ).select_related("owner_agent")
    entries = entries.filter(key__contains=":")
    if q:
        entries = entries.filter(Q(value__icontains=q) | Q(key__icontains=q))
    kind_order = Case(
        *(When(key__startswith=f"{name}:", then=Value(i)) for i, name in enumerate(ENTRY_KINDS)),
        default=Value(len(ENTRY_KINDS)),
    )
    return entries.annotate(kind_order=kind_order).order_by(
        "kind_order", "-pinned", "-updated_at", "key"
    )


def agents_with_notes(*, user: AbstractBaseUser) -> list[tuple[Agent, int]]:
    """The user's agents that have own notes (entries), with how many, by name: the Entries
    tab's "Agents' notes" filter."""
    from profiles.models import Agent

    agents = (
        Agent.objects.filter(user=user)
        .annotate(notes=Count("own_notes", filter=Q(own_notes__key__contains=":")))
        .filter(notes__gt=0)
        .order_by("name")
    )
    return [(agent, agent.notes) for agent in agents]


def entry_counts_by_kind(entries: QuerySet[Memory]) -> dict[str, int]:
    """How many of `entries` (from entry_list) there are of each kind."""
    counts = entries.order_by().values_list("kind_order").annotate(count=Count("pk"))
    return {ENTRY_KINDS[order]: count for order, count in counts if order < len(ENTRY_KINDS)}


def memory_counts(*, user: AbstractBaseUser) -> dict[str, int]:
    """How many memories the user has: "profile" fields, "style" keys over "platforms",
    "entry" rows, and "all"."""
    keys = list(Memory.objects.filter(user=user, owner_agent=None).values_list("key", flat=True))
    kinds = [Memory(key=key).kind for key in keys]
    styles = [key for key, kind in zip(keys, kinds, strict=True) if kind == "style"]
    return {
        "profile": kinds.count("profile"),
        "style": len(styles),
        "platforms": len({key.split("_", 1)[1] for key in styles}),
        "entry": len(keys) - kinds.count("profile") - len(styles),
        "all": len(keys),
    }


def user_zone(user: AbstractBaseUser | None) -> ZoneInfo:
    """The zone of the user's `timezone` memory; UTC when unset, unknown, or no user."""
    if user is None or not user.is_authenticated:
        return ZoneInfo("UTC")
    name = (
        Memory.objects.filter(user=user, owner_agent=None, key="timezone")
        .values_list("value", flat=True)
        .first()
    )
    with contextlib.suppress(ZoneInfoNotFoundError, ValueError, TypeError):
        return ZoneInfo(name or "UTC")
    return ZoneInfo("UTC")


# The agent-memory design promotes a memory to the scratchpad once it was accessed 3 times
# (docs/api.md, the scratchpad): read with get_memory or returned by a search,
# both counted by memory/uses.py memory_count_uses.
SCRATCHPAD_USES = 3
# The design's scratchpad is filled by recency over the last 7 days: an older note that was
# not promoted (by use or by promote_memory) is left out of it.
SCRATCHPAD_RECENT_DAYS = 7


def memory_list_recent(*, user: AbstractBaseUser, agent: Agent | None) -> QuerySet[Memory]:
    """The calling agent's own notes (entries) as memory_list_recent and the scratchpad
    list them: first the promoted ones (used at least SCRATCHPAD_USES times, or pinned with
    promote_memory), then the others changed in the last SCRATCHPAD_RECENT_DAYS days; each
    group the most recently added or changed first. Without an agent (the user, or the
    system) there are no own notes: nothing. Slice it."""
    if agent is None or agent.user_id != user.pk:
        return Memory.objects.none()
    promoted = Q(access_count__gte=SCRATCHPAD_USES) | Q(pinned=True)
    recent = Q(updated_at__gte=timezone.now() - timedelta(days=SCRATCHPAD_RECENT_DAYS))
    return (
        Memory.objects.filter(user=user, owner_agent=agent, key__contains=":")
        .filter(promoted | recent)
        .alias(promoted=Case(When(promoted, then=Value(1)), default=Value(0)))
        .order_by("-promoted", "-updated_at", "-id")
    )


def memory_history_for_key(
    *,
    user: AbstractBaseUser,
    key: str,
    memory_id: int | None = None,
    owner_agent_id: int | None = None,
) -> QuerySet[MemoryHistory]:
    """Every change to one key of the user's, newest first, with who made it: of the
    user's memory, or (`owner_agent_id`) of that agent's own note under the key.

    With `memory_id`, also the changes to that memory under the keys it had before a
    rename (memory_rename keeps the row, so its older history rows name the old key).
    """
    matches = Q(key=key, owner_agent_id=owner_agent_id)
    if memory_id is not None:
        matches |= Q(memory_id=memory_id)
    return (
        MemoryHistory.objects.filter(matches, user=user)
        .select_related("actor_user", "actor_agent")
        .order_by("-created_at", "-id")
    )


def memory_agent_names(*, user: AbstractBaseUser, keys: Iterable[str]) -> dict[str, str]:
    """For each key, the name of the agent that last wrote it, as pages name agents
    (profiles/naming.py; keys no agent wrote are absent). An agent whose note was merged
    into it (HistoryAction.MERGE) only said it again."""
    from profiles.models import Agent

    rows = (
        MemoryHistory.objects.filter(
            user=user,
            owner_agent=None,
            key__in=list(keys),
            actor_type=ActorKind.AGENT,
            actor_agent__isnull=False,
        )
        .exclude(action=HistoryAction.MERGE)
        .order_by("key", "-created_at", "-id")
        .distinct("key")
        .values_list("key", "actor_agent")
    )
    last = dict(rows)
    agents = Agent.objects.in_bulk(set(last.values()))
    return {key: agent_name(agents.get(agent_id)) for key, agent_id in last.items()}


def deleted_memory_list(
    *, user: AbstractBaseUser, since: datetime, limit: int = 200
) -> list[MemoryHistory]:
    """The latest deletion of each key that has no memory now, newest first: per audience
    (the user's memory, each agent's own notes), so a deleted note is listed while the
    user's memory has its key, and its `owner_agent` says whose it was."""
    rows = (
        MemoryHistory.objects.filter(user=user, action=HistoryAction.DELETE, created_at__gte=since)
        .exclude(_key_there(user))
        .select_related("actor_user", "actor_agent", "owner_agent")
        .order_by("owner_agent_id", "key", "-created_at", "-id")
        .distinct("owner_agent_id", "key")
    )
    return sorted(rows, key=lambda row: (row.created_at, row.pk), reverse=True)[:limit]


class MemoryBatch(NamedTuple):
    """A bulk action of the user's (memory/bulk.py), as the pages offer to undo it."""

    batch: UUID
    deleted: bool  # deletions (a bulk delete, delete all); else changes (re-tag, pin)
    count: int  # the memories it deleted or changed
    gone: int  # of the keys it deleted, those with no memory now (0 for changes)
    created_at: datetime  # when it started
    keys: list[str]  # in key order


def _batches(user: AbstractBaseUser, **filters: object) -> QuerySet[MemoryHistory]:
    back = Exists(Memory.objects.filter(user=user, owner_agent=None, key=OuterRef("key")))
    return (
        MemoryHistory.objects.filter(user=user, owner_agent=None, batch__isnull=False, **filters)
        .values("batch")
        .annotate(
            deletions=Count("id", filter=Q(action=HistoryAction.DELETE)),
            count=Count("id"),
            gone=Count("id", filter=Q(action=HistoryAction.DELETE) & ~Q(back)),
            started=Min("created_at"),
            keys=ArrayAgg("key", order_by="key"),
        )
    )


def _batch(row: dict) -> MemoryBatch:
    return MemoryBatch(
        batch=row["batch"],
        deleted=row["deletions"] > 0,
        count=row["count"],
        gone=row["gone"],
        created_at=row["started"],
        keys=row["keys"],
    )


def memory_batch(*, user: AbstractBaseUser, batch: UUID) -> MemoryBatch | None:
    """One bulk action of the user's, or None (none by that id, or not theirs)."""
    row = _batches(user, batch=batch).order_by("batch").first()
    return _batch(row) if row is not None else None


def deleted_batch_list(
    *, user: AbstractBaseUser, since: datetime, limit: int = 20
) -> list[MemoryBatch]:
    """The user's bulk deletions since `since` that left some key without a memory still,
    newest first."""
    rows = (
        _batches(user, action=HistoryAction.DELETE, created_at__gte=since)
        .filter(gone__gt=0)
        .order_by("-started")[:limit]
    )
    return [_batch(row) for row in rows]


class MemoryState(NamedTuple):
    """A key's state at some past time, as memory_states_as_of rebuilds it from history."""

    key: str
    value: str
    source: str
    confidence: float
    pinned: bool
    changed_at: datetime  # the change that left it in this state
    created_id: int  # the history row that created it: keys numbered in creation order
    # Its tags then: an agent's read rule is applied to them (memory/visibility.py).
    tags: tuple[str, ...] = ()


class StatesAsOf(NamedTuple):
    states: list[MemoryState]
    # Keys whose state then is not one a memory can have (memory/snapshots.py): an older
    # import stored it. Left out, and named, rather than trusted.
    damaged: list[str]


def memory_states_as_of(*, user: AbstractBaseUser, as_of: datetime) -> StatesAsOf:
    """The user's memories as they were at `as_of` (an aware datetime), from history.

    For each key, the latest history row created at or before `as_of` holds its state:
    the row's `after`, or no memory at all if that row is a deletion (`after` is null).
    Keys first written after `as_of` are absent, so a time before the user's first
    memory gives nothing. A state that fails memory/snapshots.py `state_problem` is not
    read: its key is listed as damaged.

    Uses are not historical: history keeps no access count or last access, so a state's
    recency is `changed_at`, the time of that change. Tags are kept for an agent's read
    rule (the working memory does not show them). A merge changed no state
    (HistoryAction.MERGE), so it is not the change that left one. One query, in key order.
    """
    # The user's memory only: an agent's own note is never shown as what the user keeps.
    rows = (
        MemoryHistory.objects.filter(user=user, owner_agent=None, created_at__lte=as_of)
        .exclude(action=HistoryAction.MERGE)
        .annotate(
            created_id=Window(Max("id", filter=Q(before__isnull=True)), partition_by=[F("key")])
        )
        .order_by("key", "-created_at", "-id")
        .distinct("key")
        .values_list("key", "action", "after", "created_at", "created_id", "id")
    )
    result = StatesAsOf([], [])
    for key, action, after, created_at, created_id, row_id in rows:
        if after is None:
            continue
        if state_problem(after, renamed=action == HistoryAction.RENAME):
            result.damaged.append(key)
            continue
        result.states.append(
            MemoryState(
                key=key,
                value=after["value"],
                source=after["source"],
                confidence=after["confidence"],
                pinned=after["pinned"],
                changed_at=created_at,
                created_id=created_id if created_id is not None else row_id,
                tags=tuple(after.get("tags") or ()),
            )
        )
    return result


def proposal_list(
    *,
    user: AbstractBaseUser,
    status: str | None = None,
    agent_id: int | None = None,
    ids: Iterable[int] | None = None,
) -> QuerySet[MemoryProposal]:
    """The user's proposals, newest first; only one status, one proposing agent or some ids
    if given. A pending one past its expiry that beat has not swept yet is left out of
    the pending ones."""
    proposals = MemoryProposal.objects.filter(user=user).select_related(
        "actor_agent", "decided_by", "applied"
    )
    if status == ProposalStatus.PENDING:
        proposals = proposals.filter(status=status, expires_at__gt=timezone.now())
    elif status is not None:
        proposals = proposals.filter(status=status)
    if agent_id is not None:
        proposals = proposals.filter(actor_agent_id=agent_id)
    if ids is not None:
        proposals = proposals.filter(pk__in=list(ids))
    return proposals.order_by("-created_at", "-id")


def pending_proposal_count(*, user: AbstractBaseUser) -> int:
    """How many proposals wait for the user (the count in the navigation)."""
    return MemoryProposal.objects.filter(
        user=user, status=ProposalStatus.PENDING, expires_at__gt=timezone.now()
    ).count()


def history_states(*, user: AbstractBaseUser, ids: Iterable[int]) -> dict[int, bool]:
    """For each of these ids that is one of the user's history rows: whether its memory is
    there now (the row's own memory, under whatever key it has, or a memory under the row's
    key) or not (deleted since). An id missing from the answer is no row of theirs. One
    query."""
    wanted = {pk for pk in ids if isinstance(pk, int) and not isinstance(pk, bool)}
    if not wanted:
        return {}
    # A row keeps its memory's id after the memory is deleted: whether that memory is
    # there is asked of the memory table, not read from the id.
    its_memory = Exists(Memory.objects.filter(user=user, pk=OuterRef("memory_id")))
    rows = (
        MemoryHistory.objects.filter(user=user, pk__in=wanted)
        .annotate(
            its_memory=its_memory,
            key_there=ExpressionWrapper(_key_there(user), output_field=BooleanField()),
        )
        .values_list("pk", "its_memory", "key_there")
    )
    return {pk: its_memory or key_there for pk, its_memory, key_there in rows}


def _key_there(user: AbstractBaseUser) -> Q:
    """For a history row: a memory holds its key now in the row's audience (the user's
    memory, or that agent's notes). Two tests, as an equality with the row's owner would
    never hold for the user's memory, whose owner is NULL."""
    mine = Memory.objects.filter(user=user, key=OuterRef("key"), owner_agent=None)
    note = Memory.objects.filter(
        user=user, key=OuterRef("key"), owner_agent_id=OuterRef("owner_agent_id")
    )
    return (Q(owner_agent__isnull=True) & Exists(mine)) | (
        Q(owner_agent__isnull=False) & Exists(note)
    )


def proposal_states(*, user: AbstractBaseUser, ids: Iterable[int]) -> dict[int, str]:
    """The status of each of these ids that is one of the user's proposals. One query."""
    wanted = {pk for pk in ids if isinstance(pk, int) and not isinstance(pk, bool)}
    if not wanted:
        return {}
    rows = MemoryProposal.objects.filter(user=user, pk__in=wanted).values_list("pk", "status")
    return dict(rows)


def history_texts(*, user: AbstractBaseUser, ids: Iterable[int]) -> dict[int, str]:
    """For each of these ids that is one of the user's history rows: the text its change
    left (or, for a deletion, removed), for pages that name a change by what it says rather
    than by its key (pages/views/activity.py). A stored state is not trusted: a value that is
    not text is left out. One query."""
    wanted = {pk for pk in ids if isinstance(pk, int) and not isinstance(pk, bool)}
    if not wanted:
        return {}
    rows = MemoryHistory.objects.filter(user=user, pk__in=wanted).values_list(
        "pk", "after__value", "before__value"
    )
    texts = {}
    for pk, after, before in rows:
        text = after if after is not None else before
        if isinstance(text, str) and text.strip():
            texts[pk] = text
    return texts
