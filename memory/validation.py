"""The checks a write of memory passes before anything is written: its fields cleaned
(value, source and confidence, tags, time and conversation, reason), credentials refused
for agents, and who may write an agent's own note. memory/services.py and
memory/entries.py run them; forms call memory_clean to show errors first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from activity.actors import Actor, ActorKind
from lib.credentials import refuse_credentials
from lib.errors import Forbidden, InvalidInput, NotFound
from lib.tags import clean_tags
from lib.timezones import canonical_timezone
from memory.keys import KeyFamily, parse_key
from memory.models import MAX_REASON_LENGTH, MAX_TAGS, MAX_VALUE_LENGTH, Source
from memory.occurrence import clean_session, parse_occurred_at
from memory.selectors import user_zone

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from llm.models import Turn
    from profiles.models import Agent


DEFAULT_AGENT_CONFIDENCE = 0.8


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


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
        # Stored by its canonical name whatever the case typed: "europe/berlin" is
        # Europe/Berlin (lib/timezones.py), on the pages, the API and imports alike.
        return canonical_timezone(value)
    return value


def _clean_tags(tags: object) -> list[str]:
    return clean_tags(tags, limit=MAX_TAGS)
