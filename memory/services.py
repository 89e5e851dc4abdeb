"""The only functions that change memory.

Each one validates, writes the row, a history row and an activity event in one
transaction. Pages, the agent API, tasks and the admin all come through here.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.utils import timezone
from django.utils.text import slugify

from activity import events
from activity.actors import Actor, ActorKind
from activity.models import ActivityEvent
from lib.credentials import Credential, find_credential, refuse_credentials
from lib.errors import Conflict, Forbidden, InvalidInput, MemoryPaused, NotFound, ServiceError
from lib.tags import clean_tags
from memory.duplicates import find_near_duplicate
from memory.keys import ENTRY_KINDS, SLUG_PATTERN, KeyFamily, parse_key
from memory.models import (
    MAX_REASON_LENGTH,
    MAX_TAGS,
    MAX_VALUE_LENGTH,
    HistoryAction,
    LookAlikeDismissal,
    Memory,
    MemoryHistory,
    MemoryProposal,
    ProposalAction,
    ProposalStatus,
    ProposalTrigger,
    Source,
)
from memory.occurrence import as_stored, clean_session, parse_occurred_at
from memory.selectors import user_zone
from memory.snapshots import (
    SNAPSHOT_FIELDS,
    merged_problem,
    same_state,
    state_fields,
    state_problem,
)
from profiles.models import Profile
from profiles.services import MEMORY_PAUSED_MESSAGE
from search.fields import SEARCH_COLUMNS
from search.indexing import request_embedding
from search.services import RELAXED_CTE, SearchLogRow, relaxed_commit

if TYPE_CHECKING:
    from collections.abc import Iterable
    from uuid import UUID

    from django.contrib.auth.models import AbstractBaseUser

    from llm.models import Turn
    from profiles.models import Agent

DEFAULT_AGENT_CONFIDENCE = 0.8


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


SLUG_MAX = 60  # slugs made from the text stay short; typed ones may use the full 80


@dataclass(frozen=True)
class MemoryWrite:
    memory: Memory
    created: bool
    history: MemoryHistory | None  # None: the write changed nothing, so nothing was recorded

    @property
    def changed(self) -> bool:
        return self.history is not None

    @property
    def status(self) -> str:
        """ "created", "updated" or "unchanged", as the API and memory_set report it."""
        if self.created:
            return "created"
        return "updated" if self.changed else "unchanged"

    @property
    def credential(self) -> Credential | None:
        """What looks like a credential in the memory's text or tags. Only the user's
        writes can hold one (agents' are refused: _refuse_credentials); the pages warn."""
        texts = [self.memory.value, *self.memory.tags]
        return next(filter(None, map(find_credential, texts)), None)


class ReviewRequired(ServiceError):
    """An agent's write did not apply: it waits in the user's review inbox as `proposal`
    (it would change or delete what the user stated, adds to a memory the user stated, or
    the user reviews agents' new memories). The API answers 202 pending_review."""

    code = "pending_review"

    def __init__(self, proposal: MemoryProposal) -> None:
        super().__init__(
            f"'{proposal.key}' waits for the user's review (proposal {proposal.pk}).",
            field="key",
        )
        self.proposal = proposal


class DuplicateMemory(ServiceError):
    """An agent's new memory says what `existing` already says: no row was added, and the
    note is kept in `existing`'s history as `history`, a merge (None when the same agent
    had said it there already)."""

    code = "duplicate"

    def __init__(
        self, existing: Memory, similarity: float, history: MemoryHistory | None = None
    ) -> None:
        super().__init__(f"'{existing.key}' already says this; nothing was added.", field="value")
        self.existing = existing
        self.similarity = similarity
        self.history = history


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
    raise ReviewRequired with the proposal made instead. A new entry near one of its kind
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
    )


def _check_audience(
    user: AbstractBaseUser,
    actor: Actor,
    owner_agent: Agent | None,
    *,
    key: str,
    creating: bool = False,
) -> None:
    """Who may write an agent's own note: that agent, and the user (or the system, for an
    import). Another agent's note, or an agent that is not the user's, is answered as if
    there were no such note (NotFound, naming nothing but the key asked for); adding a note
    for another agent is Forbidden."""
    if owner_agent is None:
        return
    if owner_agent.user_id != user.pk:
        raise NotFound(f"No memory with key '{key}'.", field="key")
    if actor.kind == ActorKind.AGENT and actor.agent.pk != owner_agent.pk:
        if creating:
            raise Forbidden("An agent writes only its own notes.", field="key")
        raise NotFound(f"No memory with key '{key}'.", field="key")


def _checks_near(actor: Actor, family: KeyFamily) -> bool:
    """Whether a new key of this write is first compared with the entries of its kind:
    an agent's (or the system's) entry, while near-duplicates are merged."""
    return (
        actor.kind != ActorKind.USER
        and family == KeyFamily.ENTRY
        and settings.MNEMO_MERGE_NEAR_DUPLICATES
    )


def _link_turn(fields: dict[str, Any], turn: Turn | None) -> None:
    """Carry the turn a write was learned from in its fields: the row takes it like any
    other field, a proposal made instead takes it from there. It is not part of the row's
    snapshot, so history and the review gate never compare it."""
    if turn is not None:
        fields["turn"] = turn


def memory_clean(
    *,
    key: str,
    value: object,
    actor: Actor,
    source: str | None = None,
    confidence: float | None = None,
    tags: object = None,
    user: AbstractBaseUser | None = None,
    occurred_at: object = None,
    session: object = None,
) -> dict[str, Any]:
    """Validate a write as memory_upsert does and return the cleaned fields.

    Raises InvalidInput naming the first field that is wrong. Forms call it to show
    errors before anything is written. `occurred_at` and `session` are taken when given
    (None: not given); an `occurred_at` without an offset is in `user`'s time zone
    (memory/occurrence.py).
    """
    parsed = parse_key(key)
    source, confidence = _source_and_confidence(actor, source, confidence)
    fields: dict[str, Any] = {
        "value": _clean_value(value, family=parsed.family, key=key),
        "source": source,
        "confidence": confidence,
    }
    if tags is not None:
        fields["tags"] = _clean_tags(tags)
    fields.update(_when_and_where(user, occurred_at, session))
    return fields


def _when_and_where(
    user: AbstractBaseUser | None, occurred_at: object, session: object
) -> dict[str, Any]:
    """The cleaned `occurred_at` and `session` of those given (None or UNSET: not given)."""
    fields: dict[str, Any] = {}
    if occurred_at is not None and occurred_at is not UNSET:
        fields["occurred_at"] = parse_occurred_at(occurred_at, zone=lambda: user_zone(user))
    if session is not None and session is not UNSET:
        fields["session"] = clean_session(session)
    return fields


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
) -> MemoryWrite:
    """Change an existing memory; NotFound if the key has none. `owner_agent`: that
    agent's own note under the key instead (_check_audience), never waiting for review.

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
    )


def memory_delete(
    *,
    user: AbstractBaseUser,
    key: str,
    actor: Actor,
    reason: str = "",
    batch: UUID | None = None,
    owner_agent: Agent | None = None,
) -> MemoryHistory:
    """Delete a memory; its last state stays in history so it can be restored.
    `owner_agent`: that agent's own note under the key instead (_check_audience).

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
    (memory_share_note), its event."""
    key = memory.key
    history = MemoryHistory.objects.create(
        user=user,
        key=key,
        memory=None,
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
    adding never replaces an entry. `occurred_at` and `session` as memory_upsert's."""
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
    keys = _candidate_keys(user, kind, base, derived=not slug)
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
        if not _is_unique_key_violation(error):
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
    _write_rows(memory, ["key", "updated_at"], history, event)
    return MemoryWrite(memory=memory, created=False, history=history)


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
        if not _is_unique_key_violation(error):
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
    _write_rows(memory, [], history, event)
    request_embedding()
    return MemoryWrite(memory=memory, created=True, history=history)


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
    # A note's history row names its agent: it comes back as that agent's note.
    return _write(
        user=user,
        key=key,
        fields=state_fields(state),
        actor=actor,
        action=HistoryAction.RESTORE,
        expected=expected,
        owner_agent=entry.owner_agent,
    )


def restore_target(entry: MemoryHistory) -> tuple[str, Any]:
    """What memory_restore (not undoing) writes back for a history row, as (key, state):
    the state the change produced, or for a deletion the state it removed; under the key
    its memory has now (a memory renamed since comes back under that, not beside it under
    the old one), else the row's key. The state is as stored: check it with state_problem.
    The history page offers a restore by this (pages/views/context_history.py)."""
    key = entry.memory.key if entry.memory is not None else entry.key
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
    a note merged into one of them is committed and DuplicateMemory raised.
    """
    write = (
        user,
        key,
        fields,
        actor,
        action,
        create,
        only_new,
        reason,
        unless_changed_since,
        batch,
        expected,
        near_check,
        owner_agent,
    )
    try:
        with transaction.atomic():
            result = _write_once(*write)
    except IntegrityError as error:
        if not _is_unique_key_violation(error):
            raise
        with transaction.atomic():
            result = _write_once(*write)
    if isinstance(result, MemoryProposal):
        raise ReviewRequired(result)
    if isinstance(result, _Merged):
        raise DuplicateMemory(result.memory, result.similarity, result.history)
    return result


def _write_once(
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
) -> MemoryWrite | MemoryProposal | _Merged:
    # Two statements: the row lock, which also reads the pause and the review rule, and
    # one that writes the row (INSERT or UPDATE), its history row and its activity event;
    # for a new entry compared with its kind, the near-duplicate check between them.
    memory, review_new = _locked(user, key, actor, new_entry=near_check, owner_agent=owner_agent)
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
    if near_check and memory is None and create:
        near = _near_entry(user, key, fields, actor, reason, review_new)
        if near is not None:
            return near
    if actor.kind != ActorKind.USER and owner_agent is None:
        gated = _review_gate(user, key, fields, actor, memory, review_new, create, reason)
        if gated is not None:
            return gated
    created = memory is None
    if memory is None:
        if not create:
            raise NotFound(f"No memory with key '{key}'.", field="key")
        memory = Memory(user=user, owner_agent=owner_agent, key=key, **fields)
        before = None
        if action == HistoryAction.UPDATE:
            action = HistoryAction.CREATE
        changed: list[str] = []
    else:
        before = memory.snapshot()
        for name, new in fields.items():
            setattr(memory, name, new)
        memory.updated_at = timezone.now()
        changed = [*fields, "updated_at"]
        if memory.value != before["value"]:
            # The old vector no longer describes the value; search/tasks.py makes a new one.
            memory.embedding, memory.embedding_model, memory.embedded_hash = None, "", ""
            changed += ["embedding", "embedding_model", "embedded_hash"]
    history = MemoryHistory(
        user=user,
        key=key,
        memory=None if created else memory,
        owner_agent=owner_agent,
        action=action,
        source=memory.source,
        before=before,
        after=memory.snapshot(),
        batch=batch,
        **actor.as_fields(),
    )
    # history_id is filled in by the statement that inserts the history row.
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
    _write_rows(memory, changed, history, event)
    if before is None or before["value"] != memory.value:
        request_embedding()
    return MemoryWrite(memory=memory, created=created, history=history)


def _changes_nothing(memory: Memory, fields: dict[str, Any]) -> bool:
    """Whether writing `fields` leaves the memory's state (its snapshot) as it is."""
    before = memory.snapshot()
    return before == {**before, **_snapshot_fields(fields)}


def _review_gate(
    user: AbstractBaseUser,
    key: str,
    fields: dict[str, Any],
    actor: Actor,
    memory: Memory | None,
    review_new: bool,
    create: bool,
    reason: str,
) -> MemoryWrite | MemoryProposal | None:
    """What an agent's write becomes instead of applying, if anything: the proposal it
    must wait as, or (a user-stated row it would leave as it is) an unchanged write."""
    if memory is not None and memory.source == Source.USER_STATED:
        before = memory.snapshot()
        after = {**before, **_snapshot_fields(fields)}
        # A new time or session changes what the user said as much as a new text does.
        if all(after[name] == before[name] for name in GATED_FIELDS):
            return MemoryWrite(memory=memory, created=False, history=None)
        return _propose(
            user,
            key,
            actor,
            ProposalAction.UPDATE,
            ProposalTrigger.USER_STATED,
            before=before,
            after=after,
            reason=reason,
            turn=fields.get("turn"),
        )
    if memory is None and create and review_new:
        return _propose_new(user, key, fields, actor, reason)
    return None


def _propose_new(
    user: AbstractBaseUser, key: str, fields: dict[str, Any], actor: Actor, reason: str
) -> MemoryProposal:
    """Propose adding a memory with these fields."""
    return _propose(
        user,
        key,
        actor,
        ProposalAction.CREATE,
        ProposalTrigger.NEW_MEMORY,
        before=None,
        after=_new_snapshot(fields),
        reason=reason,
        turn=fields.get("turn"),
    )


# What an agent's write to a user-stated memory may not change without the user's review
# (source and confidence follow who wrote it; the value says the rest).
GATED_FIELDS = ("value", "tags", "pinned", "occurred_at", "session")


@dataclass(frozen=True)
class _Merged:
    """An agent's new note merged into `memory`, which says it already: raised as
    DuplicateMemory once committed. `history`: the merge row (None: kept there already)."""

    memory: Memory
    similarity: float
    history: MemoryHistory | None


def _near_entry(
    user: AbstractBaseUser,
    key: str,
    fields: dict[str, Any],
    actor: Actor,
    reason: str,
    review_new: bool,
) -> _Merged | MemoryProposal | None:
    """What an agent's new entry becomes when one of its kind is near (memory/duplicates.py),
    if not its own row (None).

    Run under the lock _locked took on the user's new entries of the kind, until the
    transaction ends: two agents writing the same note at once cannot both find nothing
    near and both add it. A note that adds nothing is merged into the near one (its history
    keeps the text). One that adds something is a proposal to update the near one only when
    that would change what the user stated, or the user reviews agents' new memories;
    beside an agent's note it is stored as its own row (an Inbox of agents' notes about
    each other is a queue the user never asked for: issue 26), and the Inbox suggests
    tidying such look-alikes later (memory/look_alike.py).
    """
    agent = actor.agent if actor.kind == ActorKind.AGENT else None
    match = find_near_duplicate(user=user, key=key, value=fields["value"], agent=agent)
    if match is None:
        return None
    near, _ = _locked(user, match.memory.key, actor)
    if near is None or near.value != match.memory.value:
        return None  # deleted or changed since the check: nothing to merge into now
    if not match.adds_something:
        return _merge_note(user, near, fields, actor, match.similarity)
    if near.source != Source.USER_STATED and not review_new:
        return None
    before = near.snapshot()
    return _propose(
        user,
        near.key,
        actor,
        ProposalAction.UPDATE,
        ProposalTrigger.NEAR_DUPLICATE,
        before=before,
        after={**before, **_snapshot_fields(fields)},
        reason=reason,
        requested_key=key,
        turn=fields.get("turn"),
    )


def _merge_note(
    user: AbstractBaseUser, memory: Memory, fields: dict[str, Any], actor: Actor, similarity: float
) -> _Merged:
    """Keep an agent's note that adds nothing to the locked `memory` in its history: a
    `merge` row (memory/models.py HistoryAction) and its memory_written event.

    The memory itself is left as it was, updated_at included: its text did not change, and
    updated_at is what an import's "newer change wins" and search's freshness read. The note
    keeps when it was said and in which conversation when the agent gave them (the memory
    keeps its own). The same note from the same actor again (a retry) is kept once."""
    said = {name: fields[name] for name in ("occurred_at", "session") if fields.get(name)}
    note = {"value": fields["value"], **_snapshot_fields(said)}
    kept = MemoryHistory.objects.filter(
        memory=memory, action=HistoryAction.MERGE, after__merged=note, **actor.as_fields()
    )
    if kept.exists():
        return _Merged(memory, similarity, None)
    state = memory.snapshot()
    history = MemoryHistory.objects.create(
        user=user,
        key=memory.key,
        memory=memory,
        action=HistoryAction.MERGE,
        source=memory.source,
        before=state,
        after={**state, "merged": note},
        **actor.as_fields(),
    )
    events.memory_written_event(
        user=user,
        actor=actor,
        key=memory.key,
        action=HistoryAction.MERGE,
        source=memory.source,
        history_id=history.pk,
    ).save()
    return _Merged(memory, similarity, history)


def _snapshot_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Written fields as a snapshot holds them (memory/snapshots.py)."""
    shown = {name: value for name, value in fields.items() if name in SNAPSHOT_FIELDS}
    if "tags" in shown:
        shown["tags"] = list(shown["tags"])
    if "occurred_at" in shown:
        shown["occurred_at"] = as_stored(shown["occurred_at"])
    return shown


def _new_snapshot(fields: dict[str, Any]) -> dict[str, Any]:
    """The snapshot a new row with these fields would have. Without a time of its own,
    a proposed memory takes the proposal's when accepted (memory/review.py), so that an
    agent's retry proposes the same state."""
    return {"tags": [], "pinned": False, "session": "", **_snapshot_fields(fields)}


def _propose(
    user: AbstractBaseUser,
    key: str,
    actor: Actor,
    action: ProposalAction,
    trigger: ProposalTrigger,
    *,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    reason: str,
    requested_key: str = "",
    turn: Turn | None = None,
) -> MemoryProposal:
    """Put the write in the user's review inbox, inside the caller's transaction.

    The same proposal again (an agent retrying) is the pending one; a different one from
    the same proposer for the same key replaces it (the older is marked superseded).
    """
    now = timezone.now()
    pending = MemoryProposal.objects.filter(
        user=user,
        key=key,
        status=ProposalStatus.PENDING,
        actor_type=actor.kind,
        actor_agent=actor.agent,
    ).select_for_update()
    for proposal in pending:
        if (proposal.action, proposal.after, proposal.requested_key) == (
            action,
            after,
            requested_key,
        ):
            return proposal
    pending.update(status=ProposalStatus.SUPERSEDED, decided_at=now)
    proposal = MemoryProposal.objects.create(
        user=user,
        key=key,
        action=action,
        trigger=trigger,
        before=before,
        after=after,
        requested_key=requested_key,
        reason=reason,
        turn=turn,
        expires_at=now + timedelta(days=settings.MNEMO_PROPOSAL_TTL_DAYS),
        **actor.as_fields(),
    )
    events.proposal_created(
        user=user,
        actor=actor,
        proposal_id=proposal.pk,
        key=key,
        action=action,
        trigger=trigger,
    )
    return proposal


def _clean_reason(reason: object) -> str:
    if reason is None:
        return ""
    if not isinstance(reason, str):
        raise InvalidInput("Reason must be text.", field="reason")
    reason = " ".join(reason.split())
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidInput(
            f"Reason is {len(reason)} characters long; the longest allowed is {MAX_REASON_LENGTH}.",
            field="reason",
        )
    return reason


def _refuse_credentials(actor: Actor, **texts: object) -> None:
    """Secrets never become memories: an agent's or the system's write whose key, value,
    tags or reason looks like a credential (lib/credentials.py) raises SecretRefused
    naming that field, before anything (a row, a proposal) is written. The user may store
    one (MemoryWrite.credential lets the pages warn)."""
    if actor.kind == ActorKind.USER:
        return
    for field, text in texts.items():
        refuse_credentials(text, field=field)


# The write path's statements are SQL put together from the models: building them with
# the ORM on every write cost more CPU than PostgreSQL spends running them (bench/README.md,
# issue 12). Values still go through each field's pre_save and get_db_prep_save, as in the
# ORM's own INSERT and UPDATE.


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


# New entries' locks are (NEW_ENTRY_LOCKS, a hash of the user and the kind): the two-key
# form of PostgreSQL's advisory locks, as learning/heartbeat.py's, in a space of their own.
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


def _source_and_confidence(
    actor: Actor, source: str | None, confidence: float | None
) -> tuple[str, float]:
    if source is None:
        source = Source.USER_STATED if actor.kind == ActorKind.USER else Source.TP_EXTRACTED
    if source not in Source.values:
        raise InvalidInput(
            f"Unknown source '{source}'; expected one of {', '.join(Source.values)}.",
            field="source",
        )
    if source == Source.USER_STATED:
        if actor.kind == ActorKind.AGENT:
            raise InvalidInput(
                "Agents cannot write 'user_stated' memories; only the user states facts. "
                "Use 'tp_extracted'.",
                field="source",
            )
        if confidence is not None and confidence != 1.0:
            raise InvalidInput(
                "A 'user_stated' memory has confidence exactly 1.0.", field="confidence"
            )
        return source, 1.0
    if confidence is None:
        return source, DEFAULT_AGENT_CONFIDENCE
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise InvalidInput("Confidence must be a number.", field="confidence")
    if not 0.0 < confidence < 1.0:
        raise InvalidInput(
            f"Confidence for a '{source}' memory must be greater than 0 and less than 1.",
            field="confidence",
        )
    return source, float(confidence)


def _clean_value(value: object, *, family: KeyFamily, key: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput("Value must be text.", field="value")
    value = value.strip()
    if not value:
        raise InvalidInput("Value is empty.", field="value")
    if len(value) > MAX_VALUE_LENGTH:
        raise InvalidInput(
            f"Value is {len(value)} characters long; the longest allowed is {MAX_VALUE_LENGTH}.",
            field="value",
        )
    if family == KeyFamily.PROFILE and key == "timezone":
        _check_timezone(value)
    return value


@functools.cache
def _timezones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _check_timezone(value: str) -> None:
    if value not in _timezones():
        raise InvalidInput(
            f"'{value}' is not an IANA time zone (e.g. Europe/Paris, Asia/Singapore, UTC).",
            field="value",
        )


def _clean_tags(tags: object) -> list[str]:
    return clean_tags(tags, limit=MAX_TAGS)


def memory_record_access(
    *, user: AbstractBaseUser, key: str, owner_agent: Agent | None = None
) -> Memory:
    """Read one memory as an agent does: the read counts as a use (memory_count_uses).
    `owner_agent`: that agent's own note under the key, else the user's memory.

    Not a change to the memory, so no history or activity is written.
    """
    parse_key(key)
    rows = Memory.objects.filter(user=user, owner_agent=owner_agent, key=key)
    ids = list(rows.values_list("pk", flat=True))
    used = memory_count_uses(user=user, memory_ids=ids)
    if not used:  # no such key, or deleted since
        raise NotFound(f"No memory with key '{key}'.", field="key")
    (memory,) = used.values()
    return memory


def memory_count_uses(
    *, user: AbstractBaseUser, memory_ids: list[int], search: SearchLogRow | None = None
) -> dict[int, Memory]:
    """Count a use of each of the user's memories in `memory_ids` (access_count + 1,
    last_accessed_at now): an agent read it, or a search returned it to an agent. The only
    code that changes access_count. Returns those memories as they are after it, by id (a
    row deleted meanwhile is not among them).

    With `search`, the same statement logs that search (search/services.py), its result
    count being the memories counted. On its own (not inside a caller's transaction) the
    statement commits without waiting for the disk (synchronous_commit off for its
    transaction only): a crash of the machine, not of PostgreSQL, may lose the last fraction
    of a second of counts and logs, never a memory, and no read waits for a flush."""
    relaxed = relaxed_commit()
    sql, params = _count_uses_sql(relaxed=relaxed, search=search)
    params |= {"user": user.pk, "ids": list(memory_ids), "now": timezone.now()}
    return {memory.pk: memory for memory in Memory.objects.raw(sql, params)}


def _count_uses_sql(*, relaxed: bool, search: SearchLogRow | None) -> tuple[str, dict[str, Any]]:
    columns = ", ".join(
        _quote(field.column)
        for field in Memory._meta.concrete_fields
        if field.name not in SEARCH_COLUMNS  # as Memory.objects reads rows
    )
    parts = [RELAXED_CTE] if relaxed else []
    parts.append(
        f"used AS (UPDATE {_quote(Memory._meta.db_table)} "  # noqa: S608 - names from the models
        "SET access_count = access_count + 1, last_accessed_at = %(now)s"
        + (" FROM relaxed" if relaxed and search is None else "")
        + f" WHERE id = ANY(%(ids)s) AND user_id = %(user)s RETURNING {columns})"
    )
    params: dict[str, Any] = {}
    if search is not None:  # its INSERT reads relaxed, which sets the commit mode
        log, params = search.insert_sql(results="(SELECT count(*) FROM used)", relaxed=relaxed)
        parts.append(f"logged AS ({log})")
    return f"WITH {', '.join(parts)} SELECT {columns} FROM used", params  # noqa: S608 - names from the models
