"""What the memory tools share in their schema and answers: the input fields with their
help (key, value, tags, confidence, source, occurred_at, session, reason, own), the
serializers of a memory and of a proposal and the functions that render them, and the
answer of a write that waits for the user's review."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response

from lib.api import FlagField, NumberField, TextField, TextListField, ToolInput
from lib.tags import TAG_RULE, TYPED_TAG_LENGTH, tag_notes
from memory import visibility
from memory.keys import KEY_PATTERN, MAX_KEY_LENGTH, normalize_key
from memory.models import (
    MAX_REASON_LENGTH,
    MAX_SESSION_LENGTH,
    MAX_TAGS,
    MAX_VALUE_LENGTH,
    Memory,
    MemoryProposal,
    ProposalAction,
    ProposalStatus,
    ProposalTrigger,
    Source,
)
from memory.occurrence import MAX_YEAR, MIN_YEAR

KEY_HELP = (
    "A memory key. Profile: name, role, company, timezone, summary. Style: "
    "tone_<platform> or verbosity_<platform>, the platform as you name it ('tone_Microsoft "
    "Teams' is kept as tone_microsoft_teams: a-z, 0-9 and '_'). Entry: <kind>:<slug> with "
    "kind one of fact, instruction, preference, decision, discovery, pattern, task, bugfix "
    "and a slug of a-z, 0-9, '_' and '-' (e.g. preference:report-format)."
)


AGENT_SOURCES = [Source.TP_EXTRACTED.value, Source.DOCUMENT.value]


# A memory's audience as the API names it: the user's memory, or the caller's own note (an
# agent is never answered with another agent's note).
AUDIENCES = ["user", "own"]


OWN_HELP = (
    "true: your own note under the key (memory_store's default) instead of the user's "
    "memory. Default false."
)


def _own_field() -> FlagField:
    return FlagField(required=False, default=False, help_text=OWN_HELP)


# The pattern is of keys as stored, which agents are asked to write; a style key's
# platform written as people name it is taken too (MemoryKeyField).
@extend_schema_field(
    {"type": "string", "pattern": KEY_PATTERN, "maxLength": MAX_KEY_LENGTH, "description": KEY_HELP}
)
class MemoryKeyField(TextField):
    """A key as the agent wrote it, a style key's platform normalised ("tone_Microsoft
    Teams" is tone_microsoft_teams) on every tool that takes a key, writes and reads alike."""

    def to_internal_value(self, data: object) -> str:
        return normalize_key(super().to_internal_value(data))


NOTES_HELP = (
    'Present when something was kept other than as written, one line each: "Key '
    "'tone_Microsoft Teams' saved as 'tone_microsoft_teams'\", \"'Morning Routine' saved as "
    '#morning-routine", "\'🍣\' left out: a tag needs a letter or a digit", "Time zone '
    "'europe/berlin' saved as 'Europe/Berlin'\"."
)


def notes_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(), required=False, help_text=NOTES_HELP
    )


def written_notes(raw: object, memory: Memory | None = None) -> list[str]:
    """What of a write's input (`raw`, the request's JSON) was kept other than as written:
    its key (a style key's platform), its tags, and a time zone's name (`memory`: the row
    as written, when it was)."""
    if not isinstance(raw, dict):
        return []
    notes = []
    key = raw.get("key")
    if isinstance(key, str) and normalize_key(key) != key:
        notes.append(f"Key '{key}' saved as '{normalize_key(key)}'")
    tags = raw.get("tags")
    if isinstance(tags, list) and all(isinstance(tag, str) for tag in tags):
        notes.extend(tag_notes(tags))
    value = raw.get("value")
    if (
        memory is not None
        and memory.key == "timezone"
        and isinstance(value, str)
        and value.strip() != memory.value
    ):
        notes.append(f"Time zone '{value.strip()}' saved as '{memory.value}'")
    return notes


def with_notes(body: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`body` with its `notes` when there are any (NOTES_HELP)."""
    if notes:
        body["notes"] = notes
    return body


@extend_schema_field(
    {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "exclusiveMinimum": True,
        "exclusiveMaximum": True,
        "description": "How sure the agent is, between 0 and 1 (exclusive). Default 0.8.",
    }
)
class ConfidenceField(NumberField):
    pass


@extend_schema_field(
    {
        "type": "string",
        "enum": AGENT_SOURCES,
        "description": "Where the memory came from. Agents write 'tp_extracted' (the default) "
        "or 'document'; only the user states facts ('user_stated').",
    }
)
class AgentSourceField(TextField):
    pass


OCCURRED_AT_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)


OCCURRED_AT_HELP = (
    "When what the memory says happened or was said, in ISO 8601: a date (2023-05-08, "
    "the start of that day) or a date-time (2023-05-08T13:56:00, with or without Z or an "
    "offset such as +02:00). Without an offset it is the user's local time (their "
    f"timezone memory). Years {MIN_YEAR}-{MAX_YEAR}; a planned event may be in the future. "
    "Default: the time of writing."
)


SESSION_HELP = (
    f"The conversation you are in, up to {MAX_SESSION_LENGTH} characters on one line (your "
    "chat or thread id): memories written in one session form an episode, and search "
    "brings them back together. Default: none."
)


@extend_schema_field(
    {
        "type": "string",
        "maxLength": 40,
        "pattern": OCCURRED_AT_PATTERN,
        "description": OCCURRED_AT_HELP,
    }
)
class OccurredAtField(TextField):
    """Parsed by the service (memory/occurrence.py), which knows the user's time zone."""


def _occurred_at_field() -> OccurredAtField:
    return OccurredAtField(required=False, max_length=40)


def _session_field() -> TextField:
    return TextField(
        required=False,
        allow_blank=True,
        max_length=MAX_SESSION_LENGTH,
        help_text=SESSION_HELP,
        error_messages={
            "max_length": f"Longer than {MAX_SESSION_LENGTH} characters; shorten the session."
        },
    )


def _value_field(**kwargs: Any) -> TextField:
    return TextField(
        max_length=MAX_VALUE_LENGTH,
        help_text=f"The memory itself, 1–{MAX_VALUE_LENGTH} characters of plain text.",
        error_messages={
            "max_length": f"Longer than {MAX_VALUE_LENGTH} characters; shorten the value."
        },
        **kwargs,
    )


def _tags_field() -> TextListField:
    return TextListField(
        child=TextField(max_length=TYPED_TAG_LENGTH, allow_blank=False),
        max_length=MAX_TAGS,
        required=False,
        help_text=(
            f"Up to {MAX_TAGS} labels, stored as {TAG_RULE}: 'Morning Routine' is kept as "
            "'morning-routine', 'café' as 'café'; a label with no letter or digit (an emoji "
            "alone) is left out, and the answer's `notes` say so."
        ),
    )


class MemorySerializer(serializers.Serializer):
    """A memory row as agents see it. Plain fields: a ModelSerializer rebuilds them per call."""

    key = serializers.CharField()
    kind = serializers.CharField(help_text="profile, style, or the entry kind (fact, …).")
    value = serializers.CharField()
    source = serializers.ChoiceField(choices=Source.choices)
    confidence = serializers.FloatField()
    tags = serializers.ListField(child=serializers.CharField())
    pinned = serializers.BooleanField()
    access_count = serializers.IntegerField()
    last_accessed_at = serializers.DateTimeField(allow_null=True)
    occurred_at = serializers.DateTimeField(
        help_text="When what it says happened or was said (ISO 8601, UTC); for a memory "
        "written without one, when it was written."
    )
    session = serializers.CharField(
        help_text="The conversation it came from; empty when none was given."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    audience = serializers.ChoiceField(
        choices=AUDIENCES,
        help_text="user: the user's memory; own: your own note (only you, and the user, see it).",
    )


# Responses are built by the functions below, not by instantiating the serializers that
# describe them (in the schema): DRF deep-copies every field of a serializer per instance,
# ≈ 0.4 ms of CPU a response (bench/README.md, issue 12). The fields' own
# to_representation is used, from one shared instance (it keeps no state), so the output
# is the serializers' to the byte; tests/memory/test_write_path.py compares them.
_DATETIME = serializers.DateTimeField()


def memory_body(memory: Memory) -> dict[str, Any]:
    """A memory as MemorySerializer renders it."""
    return {
        "key": memory.key,
        "kind": memory.kind,
        "value": memory.value,
        "source": str(memory.source),
        "confidence": float(memory.confidence),
        "tags": [str(tag) for tag in memory.tags],
        "pinned": bool(memory.pinned),
        "access_count": int(memory.access_count),
        "last_accessed_at": _DATETIME.to_representation(memory.last_accessed_at),
        "occurred_at": _DATETIME.to_representation(memory.occurred_at),
        "session": memory.session,
        "created_at": _DATETIME.to_representation(memory.created_at),
        "updated_at": _DATETIME.to_representation(memory.updated_at),
        "audience": memory.audience,
    }


def _reason_field() -> TextField:
    return TextField(
        required=False,
        allow_blank=True,
        max_length=MAX_REASON_LENGTH,
        help_text="Why, in a sentence; shown to the user if the change waits for review.",
    )


class ProposalSerializer(serializers.Serializer):
    """A change waiting in (or decided in) the user's review inbox."""

    id = serializers.IntegerField()
    key = serializers.CharField(help_text="The memory it would change.")
    action = serializers.ChoiceField(choices=ProposalAction.choices)
    status = serializers.ChoiceField(choices=ProposalStatus.choices)
    trigger = serializers.ChoiceField(
        choices=ProposalTrigger.choices,
        help_text="Why it waits: user_stated (it changes what the user said), new_memory "
        "(the user reviews agents' new memories), near_duplicate (it adds to an entry the "
        "user stated, or to any entry while the user reviews agents' new memories).",
    )
    before = serializers.JSONField(allow_null=True, help_text="The memory when proposed.")
    after = serializers.JSONField(allow_null=True, help_text="What it would become; null: delete.")
    requested_key = serializers.CharField(
        help_text="For a near-duplicate: the key the agent asked to create."
    )
    reason = serializers.CharField()
    agent = serializers.CharField(allow_null=True, help_text="The agent that proposed it.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class KeySerializer(ToolInput):
    key = MemoryKeyField()
    own = _own_field()


def proposal_body(proposal: MemoryProposal) -> dict[str, Any]:
    """A proposal as ProposalSerializer renders it, to the agent that proposed it: the
    states of a memory its read rule hides (a near duplicate of one) are left out."""
    agent = proposal.actor_agent
    shown = all(
        visibility.rule_allows_tags(agent, (state or {}).get("tags") or [])
        for state in (proposal.before, proposal.after)
    )
    return {
        "id": proposal.pk,
        # A hidden memory a near duplicate would update is not named: the key asked for is.
        "key": proposal.key if shown else proposal.requested_key or proposal.key,
        "action": str(proposal.action),
        "status": str(proposal.status),
        "trigger": str(proposal.trigger),
        "before": proposal.before if shown else None,
        "after": proposal.after if shown else None,
        "requested_key": proposal.requested_key,
        "reason": proposal.reason,
        "agent": agent.name if agent is not None else None,
        "created_at": _DATETIME.to_representation(proposal.created_at),
        "expires_at": _DATETIME.to_representation(proposal.expires_at),
        "decided_at": _DATETIME.to_representation(proposal.decided_at),
    }


def _pending_review(proposal: MemoryProposal, **extra: Any) -> Response:
    body = {"status": "pending_review", **extra, "proposal": proposal_body(proposal)}
    return Response(body, status=status.HTTP_202_ACCEPTED)


ROW_EXAMPLE = {
    "key": "preference:report-format",
    "kind": "preference",
    "value": "bullet points in reports",
    "source": "tp_extracted",
    "confidence": 0.8,
    "tags": ["work"],
    "pinned": False,
    "access_count": 0,
    "last_accessed_at": None,
    "occurred_at": "2026-11-20T18:00:00Z",
    "session": "chat-42",
    "created_at": "2026-11-21T09:30:00Z",
    "updated_at": "2026-11-21T09:30:00Z",
    "audience": "user",
}


TOOL_TAG = "memory tools"
