"""Entries (`kind:slug`) and their keys: making a key from the text, adding an entry
(the Entries tab's form, the memory_store tool, capture), renaming one, and leaving a group
of look-alike entries as they are. Every write goes through memory/services.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from activity import events
from activity.actors import Actor, ActorKind
from lib.errors import Conflict, Forbidden, InvalidInput, NotFound
from memory.keys import ENTRY_KINDS, SLUG_PATTERN, KeyFamily, parse_key
from memory.models import (
    HistoryAction,
    LookAlikeDismissal,
    Memory,
    MemoryHistory,
    MemoryProposal,
    ProposalAction,
    ProposalStatus,
)
from memory.outcomes import DuplicateMemory, MemoryWrite, ReviewRequired
from memory.services import _write
from memory.validation import (
    _check_audience,
    _checks_near,
    _clean_reason,
    _link_turn,
    _refuse_credentials,
    memory_clean,
)
from memory.write_sql import _locked, _write_rows, is_unique_key_violation

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.contrib.auth.models import AbstractBaseUser

    from llm.models import Turn
    from profiles.models import Agent


SLUG_MAX = 60  # slugs made from the text stay short; typed ones may use the full 80


def derive_slug(text: str) -> str:
    """A readable slug from an entry's text: its first words, a-z, 0-9 and '-'."""
    full = slugify(text)
    base = full[:SLUG_MAX]
    if len(full) > SLUG_MAX and "-" in base:
        base = base.rsplit("-", 1)[0]  # end on a whole word
    return base.strip("-_")


def entry_create(
    *,
    user: AbstractBaseUser,
    kind: str,
    value: str,
    actor: Actor,
    slug: str = "",
    tags: list[str] | None = None,
    pinned: bool = False,
    turn: Turn | None = None,
    occurred_at: object = None,
    session: str | None = None,
) -> MemoryWrite:
    """Add a new entry. Its key is `kind:slug`, the slug made from the text when not given
    (with -2, -3… if the user has it already). A typed slug that is taken is a Conflict:
    adding never replaces an entry. `occurred_at` and `session` as memory_upsert's.

    Adding what is there already (no slug typed, and the key made from the text, or one of
    its numbered keys, holds this very text) adds nothing: DuplicateMemory names the entry
    that has it, as the agent API's `duplicate` does, rather than a second entry under
    `…-2` saying the same."""
    _check_kind(kind)
    slug = slug.strip().lower() if isinstance(slug, str) else ""
    if slug and not re.fullmatch(SLUG_PATTERN, slug):
        raise InvalidInput(
            "A key starts with a-z or 0-9 and uses only a-z, 0-9, '_' and '-' "
            "(e.g. weekly-review).",
            field="slug",
        )
    base = slug or derive_slug(value if isinstance(value, str) else "")
    if not base:
        raise InvalidInput(
            "Could not make a key from the text; type one (e.g. note-1).", field="slug"
        )
    fields = memory_clean(
        key=f"{kind}:{base}",
        value=value,
        actor=actor,
        tags=tags or [],
        user=user,
        occurred_at=occurred_at,
        session=session,
    )
    fields["pinned"] = bool(pinned)
    _link_turn(fields, turn)
    taken = None
    if not slug:
        stored, _, taken = _notes_under(user, f"{kind}:{base}", fields["value"])
        if stored is not None:
            raise DuplicateMemory(stored, 1.0)
    keys = _candidate_keys(user, kind, base, derived=not slug, taken=taken)
    return _add_entry(user, keys, fields, actor, typed=bool(slug))


def _check_kind(kind: object) -> None:
    if kind not in ENTRY_KINDS:
        raise InvalidInput(
            f"Unknown kind '{kind}'; expected one of {', '.join(ENTRY_KINDS)}.", field="kind"
        )


def _add_entry(
    user: AbstractBaseUser,
    keys: list[str],
    fields: dict[str, Any],
    actor: Actor,
    *,
    typed: bool,
    reason: str = "",
    near_check: bool = False,
    owner_agent: Agent | None = None,
) -> MemoryWrite:
    """Write a new entry under the first of `keys` still free: adding never replaces. A
    typed key that is taken is a Conflict; a derived one moves on to the next number.
    `near_check`: compared first with the entries of its kind (_near_entry)."""
    for key in keys:
        try:
            return _write(
                user=user,
                key=key,
                fields=fields,
                actor=actor,
                action=HistoryAction.CREATE,
                only_new=True,
                reason=reason,
                near_check=near_check,
                owner_agent=owner_agent,
            )
        except Conflict:
            if typed:
                raise
    raise Conflict(f"Could not find a free key for '{keys[0]}'.", field="slug")


# The slug of a text with no a-z or 0-9 to make one from (Chinese, say): numbered notes.
FALLBACK_SLUG = "note"


@dataclass(frozen=True)
class StoreResult:
    """What memory_store did.

    `status` is created, duplicate (an entry of the kind says it already: no row added, the
    text kept in that entry's history), unchanged (this text is stored under a key made
    from it already) or pending_review (`proposal` waits for the user). `key` is the memory
    written, the one that already says it, or the one the proposal would add or change.
    """

    status: str
    key: str
    memory: Memory | None = None  # written or found; None while the proposal waits
    proposal: MemoryProposal | None = None
    similarity: float | None = None  # for a duplicate: how near (1.0: the same text)


def memory_store(
    *,
    user: AbstractBaseUser,
    actor: Actor,
    kind: str,
    text: str,
    tags: list[str] | None = None,
    source: str | None = None,
    confidence: float | None = None,
    turn: Turn | None = None,
    reason: str = "",
    occurred_at: object = None,
    session: str | None = None,
    owner_agent: Agent | None = None,
) -> StoreResult:
    """Note something new, as an agent (or the system) does: the key is made from the text.

    `owner_agent`: as that agent's own note (the memory_store tool's default), numbered
    among its notes; it never waits for review and is merged into nothing.

    The memory_store tool and learning/capture.py come here. Adding never replaces: the key
    is `kind:<its first words>`, numbered when the user has that key already. For anyone
    but the user, a new entry meets memory_upsert's rules: one of its kind that already says
    it makes this a duplicate (merged into that one's history), one that adds to a memory
    the user stated gets a proposal to update it instead, one that adds to an agent's note
    is stored beside it (memory/duplicates.py, _near_entry), and while the user reviews
    agents' new memories it waits as a proposal. Refusals (bad text or tags, a credential,
    memory paused) raise ServiceError. `occurred_at` and `session` as memory_upsert's.
    """
    _refuse_credentials(actor, value=text, tags=tags, reason=reason, session=session)
    _check_audience(user, actor, owner_agent, key=kind, creating=True)
    _check_kind(kind)
    base = derive_slug(text if isinstance(text, str) else "") or FALLBACK_SLUG
    first = f"{kind}:{base}"
    fields = memory_clean(
        key=first,
        value=text,
        actor=actor,
        source=source,
        confidence=confidence,
        tags=tags or [],
        user=user,
        occurred_at=occurred_at,
        session=session,
    )
    _link_turn(fields, turn)
    reason = _clean_reason(reason)
    stored, waiting_note, taken = _notes_under(user, first, fields["value"], owner_agent)
    # The same note again (an agent's retry, the same words in a later turn) is found
    # where it was put, whether or not near-duplicates are merged: never a second one.
    if stored is not None:
        return StoreResult(status="unchanged", key=stored.key, memory=stored)
    if waiting_note is not None:
        return StoreResult(status="pending_review", key=waiting_note.key, proposal=waiting_note)
    keys = _candidate_keys(user, kind, base, derived=True, taken=taken)
    near_check = owner_agent is None and _checks_near(actor, KeyFamily.ENTRY)
    try:
        write = _add_entry(
            user,
            keys,
            fields,
            actor,
            typed=False,
            reason=reason,
            near_check=near_check,
            owner_agent=owner_agent,
        )
    except DuplicateMemory as duplicate:
        existing = duplicate.existing
        return StoreResult(
            status="duplicate",
            key=existing.key,
            memory=existing,
            similarity=duplicate.similarity,
        )
    except ReviewRequired as waiting:
        proposal = waiting.proposal
        return StoreResult(status="pending_review", key=proposal.key, proposal=proposal)
    return StoreResult(status="created", key=write.memory.key, memory=write.memory)


def _notes_under(
    user: AbstractBaseUser, first: str, value: str, owner_agent: Agent | None = None
) -> tuple[Memory | None, MemoryProposal | None, set[str]]:
    """Under `first` and the numbered keys after it, in the audience written (the user's
    memory, or `owner_agent`'s notes): the memory holding `value`, else the pending
    proposal to add it; and the keys taken there. A pending proposal to add an entry takes
    its key too: a second proposal for that key would replace the first. Notes are never
    proposed, so none waits for them."""
    rows = list(
        Memory.objects.filter(user=user, owner_agent=owner_agent, key__startswith=first).order_by(
            "pk"
        )
    )
    if owner_agent is not None:
        stored = next((row for row in rows if row.value == value), None)
        return stored, None, {row.key for row in rows}
    waiting = list(
        MemoryProposal.objects.filter(
            user=user,
            key__startswith=first,
            action=ProposalAction.CREATE,
            status=ProposalStatus.PENDING,
            expires_at__gt=timezone.now(),
        ).order_by("pk")
    )
    stored = next((row for row in rows if row.value == value), None)
    waiting_note = next((p for p in waiting if (p.after or {}).get("value") == value), None)
    taken = {row.key for row in rows} | {proposal.key for proposal in waiting}
    return stored, waiting_note, taken


def _candidate_keys(
    user: AbstractBaseUser,
    kind: str,
    base: str,
    *,
    derived: bool,
    taken: set[str] | None = None,
) -> list[str]:
    """`kind:base`, then for a derived slug the next free numbered ones (a few spare, in
    case another write takes one first). `taken`: the keys in use there, if known."""
    first = f"{kind}:{base}"
    if not derived:
        return [first]
    if taken is None:
        taken = set(
            Memory.objects.filter(user=user, owner_agent=None, key__startswith=first).values_list(
                "key", flat=True
            )
        )
    keys: list[str] = []
    number = 1
    while len(keys) < 3:
        key = first if number == 1 else f"{first}-{number}"
        if key not in taken:
            keys.append(key)
        number += 1
    return keys


# As many as a bulk action takes (memory/bulk.py MAX_SELECTED): more than any group of
# look-alikes memory/look_alike.py finds among the notes it compares.
MAX_LOOK_ALIKES = 500


def look_alike_dismiss(
    *, user: AbstractBaseUser, memory_ids: Iterable[int], actor: Actor
) -> LookAlikeDismissal:
    """Leave a group of look-alike notes as they are (memory/look_alike.py): a group made
    only of these notes is not suggested again. The user's choice only. No memory changes,
    so no history row or activity event is written; ids that name no memory of the user's
    (deleted since, or never theirs) are left out."""
    if actor.kind != ActorKind.USER:
        raise Forbidden("Only the user tidies their notes.", field="ids")
    wanted = {int(pk) for pk in memory_ids}
    if len(wanted) > MAX_LOOK_ALIKES:
        raise InvalidInput(f"At most {MAX_LOOK_ALIKES} notes at a time.", field="ids")
    notes = Memory.objects.filter(user=user, owner_agent=None, pk__in=wanted)
    ids = sorted(notes.values_list("pk", flat=True))
    if len(ids) < 2:
        raise InvalidInput("Fewer than two of these notes are still there.", field="ids")
    return LookAlikeDismissal.objects.create(user=user, memory_ids=ids)


def memory_rename(*, user: AbstractBaseUser, key: str, new_key: str, actor: Actor) -> MemoryWrite:
    """Give an entry another key (another kind, or another slug); the row, its history,
    uses and vector stay. The user's action only: agents write keys, they do not move the
    user's. A key the user already has is a Conflict."""
    if actor.kind != ActorKind.USER:
        raise Forbidden("Only the user renames memories.", field="key")
    old, new = parse_key(key), parse_key(new_key)
    if old.family != KeyFamily.ENTRY or new.family != KeyFamily.ENTRY:
        raise InvalidInput("Only entries (<kind>:<slug>) can be renamed.", field="key")
    if key == new_key:
        raise InvalidInput("The new key is the key it has.", field="key")
    try:
        with transaction.atomic():
            return _rename_once(user, key, new_key, actor)
    except IntegrityError as error:
        if not is_unique_key_violation(error):
            raise
    raise Conflict(f"You already have '{new_key}'; edit that one instead.", field="key")


def _rename_once(user: AbstractBaseUser, key: str, new_key: str, actor: Actor) -> MemoryWrite:
    memory, _ = _locked(user, key, actor)
    if memory is None:
        raise NotFound(f"No memory with key '{key}'.", field="key")
    if Memory.objects.filter(user=user, owner_agent=None, key=new_key).exists():
        raise Conflict(f"You already have '{new_key}'; edit that one instead.", field="key")
    before = {**memory.snapshot(), "key": key}
    memory.key = new_key
    memory.updated_at = timezone.now()
    history = MemoryHistory(
        user=user,
        key=new_key,
        memory=memory,
        action=HistoryAction.RENAME,
        source=memory.source,
        before=before,
        after={**memory.snapshot(), "key": new_key},
        **actor.as_fields(),
    )
    event = events.memory_written_event(
        user=user,
        actor=actor,
        key=new_key,
        action=HistoryAction.RENAME,
        source=memory.source,
        history_id=None,
        renamed_from=key,
    )
    memory, history = _write_rows(memory, ["key", "updated_at"], history, event)
    return MemoryWrite(memory=memory, created=False, history=history)
