"""The only functions that change memory.

Each one validates, writes the row, a history row and an activity event in one
transaction. Pages, the agent API, tasks and the admin all come through here.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from activity import events
from activity.actors import Actor, ActorKind
from lib.errors import InvalidInput, NotFound
from memory.keys import KeyFamily, parse_key
from memory.models import MAX_VALUE_LENGTH, HistoryAction, Memory, MemoryHistory, Source
from profiles.services import check_agents_may_write
from search.indexing import schedule_memory_embedding

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

DEFAULT_AGENT_CONFIDENCE = 0.8
MAX_TAGS = 20
TAG_PATTERN = r"[a-z0-9][a-z0-9_-]{0,39}"


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class MemoryWrite:
    memory: Memory
    created: bool
    history: MemoryHistory


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
) -> MemoryWrite:
    """Create the memory, or replace its value if the key exists (last write wins)."""
    fields = memory_clean(
        key=key, value=value, actor=actor, source=source, confidence=confidence, tags=tags
    )
    if pinned is not None:
        fields["pinned"] = pinned
    return _write(user=user, key=key, fields=fields, actor=actor, action=HistoryAction.UPDATE)


def memory_clean(
    *,
    key: str,
    value: object,
    actor: Actor,
    source: str | None = None,
    confidence: float | None = None,
    tags: object = None,
) -> dict[str, Any]:
    """Validate a write as memory_upsert does and return the cleaned fields.

    Raises InvalidInput naming the first field that is wrong. Forms call it to show
    errors before anything is written.
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
) -> MemoryWrite:
    """Change an existing memory; NotFound if the key has none.

    A new value or confidence also records who stands behind it now (the source).
    """
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
    if not fields:
        raise InvalidInput("Nothing to update: give a value, confidence, tags or pinned.")
    return _write(
        user=user, key=key, fields=fields, actor=actor, action=HistoryAction.UPDATE, create=False
    )


def memory_delete(*, user: AbstractBaseUser, key: str, actor: Actor) -> MemoryHistory:
    """Delete a memory; its last state stays in history so it can be restored."""
    parse_key(key)
    with transaction.atomic():
        check_agents_may_write(user=user, actor=actor)
        memory = _locked(user, key)
        if memory is None:
            raise NotFound(f"No memory with key '{key}'.", field="key")
        history = MemoryHistory.objects.create(
            user=user,
            key=key,
            memory=None,
            action=HistoryAction.DELETE,
            source=memory.source,
            before=memory.snapshot(),
            after=None,
            **actor.as_fields(),
        )
        memory.delete()
        events.memory_deleted(user=user, actor=actor, key=key, history_id=history.pk)
    return history


def memory_restore(*, user: AbstractBaseUser, history_id: int, actor: Actor) -> MemoryWrite:
    """Bring a memory back to the state a history row recorded.

    For a change that is the state it produced; for a deletion, the state it removed.
    """
    entry = MemoryHistory.objects.filter(user=user, pk=history_id).first()
    if entry is None:
        raise NotFound(f"No history entry {history_id}.", field="history_id")
    state = entry.after if entry.after is not None else entry.before
    return _write(
        user=user,
        key=entry.key,
        fields={name: state[name] for name in ("value", "source", "confidence", "tags", "pinned")},
        actor=actor,
        action=HistoryAction.RESTORE,
    )


def _write(
    *,
    user: AbstractBaseUser,
    key: str,
    fields: dict[str, Any],
    actor: Actor,
    action: HistoryAction,
    create: bool = True,
) -> MemoryWrite:
    with transaction.atomic():
        check_agents_may_write(user=user, actor=actor)
        if create:
            # get_or_create on the unique (user, key) under FOR UPDATE: concurrent
            # writers of one key serialize on the row instead of racing.
            memory, created = Memory.objects.select_for_update().get_or_create(
                user=user, key=key, defaults=fields
            )
        else:
            memory, created = _locked(user, key), False
            if memory is None:
                raise NotFound(f"No memory with key '{key}'.", field="key")
        before = None if created else memory.snapshot()
        if not created:
            for name, new in fields.items():
                setattr(memory, name, new)
            changed = [*fields, "updated_at"]
            if memory.value != before["value"]:
                # The old vector no longer describes the value; search/tasks.py makes a new one.
                memory.embedding, memory.embedding_model, memory.embedded_hash = None, "", ""
                changed += ["embedding", "embedding_model", "embedded_hash"]
            memory.save(update_fields=changed)
        if created and action == HistoryAction.UPDATE:
            action = HistoryAction.CREATE
        history = MemoryHistory.objects.create(
            user=user,
            key=key,
            memory=memory,
            action=action,
            source=memory.source,
            before=before,
            after=memory.snapshot(),
            **actor.as_fields(),
        )
        events.memory_written(
            user=user,
            actor=actor,
            key=key,
            action=action,
            source=memory.source,
            history_id=history.pk,
        )
        if before is None or before["value"] != memory.value:
            schedule_memory_embedding(memory)
    return MemoryWrite(memory=memory, created=created, history=history)


def _locked(user: AbstractBaseUser, key: str) -> Memory | None:
    return Memory.objects.select_for_update().filter(user=user, key=key).first()


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
    if not isinstance(tags, list | tuple) or not all(isinstance(tag, str) for tag in tags):
        raise InvalidInput("Tags must be a list of text labels.", field="tags")
    cleaned = sorted({tag.strip().lower() for tag in tags if tag.strip()})
    if len(cleaned) > MAX_TAGS:
        raise InvalidInput(f"At most {MAX_TAGS} tags.", field="tags")
    for tag in cleaned:
        if not re.fullmatch(TAG_PATTERN, tag):
            raise InvalidInput(
                f"Tag '{tag}' must be 1–40 characters of a-z, 0-9, '_' and '-'.", field="tags"
            )
    return cleaned


def memory_record_access(*, user: AbstractBaseUser, key: str) -> Memory:
    """Read one memory as an agent does: the read counts as a use (access_count, last_accessed_at).

    Not a change to the memory, so no history or activity is written.
    """
    parse_key(key)
    updated = Memory.objects.filter(user=user, key=key).update(
        access_count=F("access_count") + 1, last_accessed_at=timezone.now()
    )
    if not updated:
        raise NotFound(f"No memory with key '{key}'.", field="key")
    return Memory.objects.get(user=user, key=key)
