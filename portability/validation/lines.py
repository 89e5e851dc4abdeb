"""The rules of the archive's JSON Lines members, a line at a time: memories, their
history, document versions, activity and proposals. Each rule is deterministic, so the
import's second reading (portability/applying.py, portability/replaying.py) skips the lines
the check refused."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from activity.actors import Actor
from context.history import PastVersion, past_version_problem
from context.paths import normalize_path
from lib.errors import ServiceError
from memory.replay import PastChange, past_change_problem
from memory.validation import memory_clean
from portability import format as fmt
from portability.validation.reading import jsonl_records, parse_time
from portability.validation.rules import (
    AUDIENCE_SPEC,
    FLAG_OR_NULL,
    LIST_OR_NULL,
    NUMBER_OR_NULL,
    OBJECT,
    OBJECT_OR_NULL,
    TEXT,
    TEXT_OR_NULL,
    WHOLE_OR_NULL,
    actor_problem,
    agent_problem,
    audience_agent,
    audience_problem,
    fields_problem,
    time_problem,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent


MEMORY_SPEC = {
    "key": TEXT,
    "value": TEXT,
    "source": TEXT_OR_NULL,
    "confidence": NUMBER_OR_NULL,
    "tags": LIST_OR_NULL,
    "pinned": FLAG_OR_NULL,
    "access_count": WHOLE_OR_NULL,
    "last_accessed_at": TEXT_OR_NULL,
    "occurred_at": TEXT_OR_NULL,
    "session": TEXT_OR_NULL,
    "created_at": TEXT_OR_NULL,
    "updated_at": TEXT_OR_NULL,
}
HISTORY_SPEC = {
    "key": TEXT,
    "action": TEXT,
    "source": TEXT,
    "before": OBJECT_OR_NULL,
    "after": OBJECT_OR_NULL,
    "actor": OBJECT,
    "created_at": TEXT,
}
VERSION_SPEC = {
    "path": TEXT,
    "agent": TEXT_OR_NULL,
    "action": TEXT,
    "body": TEXT,
    "actor": OBJECT,
    "created_at": TEXT,
}
ACTIVITY_SPEC = {"event_type": TEXT, "payload": OBJECT, "actor": OBJECT, "created_at": TEXT}
PROPOSAL_SPEC = {
    "key": TEXT,
    "action": TEXT,
    "trigger": TEXT,
    "status": TEXT,
    "before": OBJECT_OR_NULL,
    "after": OBJECT_OR_NULL,
    "reason": TEXT_OR_NULL,
    "requested_key": TEXT_OR_NULL,
    "actor": OBJECT,
    "created_at": TEXT,
    "expires_at": TEXT_OR_NULL,
    "decided_at": TEXT_OR_NULL,
}


class LineCheck:
    """The rule of one JSON Lines member: `problem(record)` says why a line is refused ("" when
    it is accepted). Deterministic, so the import's second reading skips the same lines."""

    section = ""

    def problem(self, record: dict[str, Any]) -> str:
        raise NotImplementedError


class MemoryLines(LineCheck):
    section = "memories"

    def __init__(self, user: AbstractBaseUser) -> None:
        self.user = user
        self.actor = Actor.for_user(user)
        self.keys: set[tuple[str | None, str]] = set()

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, {**MEMORY_SPEC, **AUDIENCE_SPEC}, ("key", "value"))
            or audience_problem(record.get("audience"))
            or time_problem(record, "updated_at", "created_at", "last_accessed_at")
        )
        if problem:
            return f"Refused: {problem}."
        try:
            # The rules of the write itself (memory/services.py memory_upsert).
            memory_clean(
                key=record["key"],
                value=record["value"],
                actor=self.actor,
                source=record.get("source"),
                confidence=record.get("confidence"),
                tags=record.get("tags") or [],
                user=self.user,
                occurred_at=record.get("occurred_at"),
                session=record.get("session"),
            )
        except ServiceError as error:
            return error.message
        where = (audience_agent(record), record["key"])
        if where in self.keys:
            return "An earlier line has the same key (in the same audience)."
        self.keys.add(where)
        return ""


class HistoryLines(LineCheck):
    section = "memory history"

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, {**HISTORY_SPEC, **AUDIENCE_SPEC}, tuple(HISTORY_SPEC))
            or audience_problem(record.get("audience"))
            or time_problem(record, "created_at", required=True)
            or actor_problem(record["actor"])
        )
        if problem:
            return f"Refused: {problem}."
        return past_change_problem(past_change(record, Actor.system()))


def past_change(
    record: dict[str, Any], actor: Actor, owner_agent: Agent | None = None
) -> PastChange:
    """`owner_agent`: the account's agent the line's audience names (None: the user's)."""
    when = parse_time(record["created_at"])
    assert when is not None  # HistoryLines checked it
    return PastChange(
        key=record["key"],
        action=record["action"],
        source=record["source"],
        before=record["before"],
        after=record["after"],
        actor=actor,
        created_at=when,
        owner_agent=owner_agent,
    )


class VersionLines(LineCheck):
    section = "document versions"

    def __init__(self) -> None:
        # When each document (agent name, path) last changed: merge's "newer wins".
        self.latest: dict[tuple[str | None, str], datetime] = {}

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, VERSION_SPEC, tuple(VERSION_SPEC))
            or time_problem(record, "created_at", required=True)
            or actor_problem(record["actor"])
            or agent_problem(record["agent"])
        )
        if problem:
            return f"Refused: {problem}."
        try:
            path = normalize_path(record["path"])
        except ServiceError as error:
            return error.message
        version = past_version(record, Actor.system())
        if problem := past_version_problem(version):
            return problem
        where = (record["agent"], path)
        if where not in self.latest or version.created_at > self.latest[where]:
            self.latest[where] = version.created_at
        return ""


def past_version(record: dict[str, Any], actor: Actor) -> PastVersion:
    when = parse_time(record["created_at"])
    assert when is not None  # VersionLines checked it
    return PastVersion(action=record["action"], body=record["body"], actor=actor, created_at=when)


class ActivityLines(LineCheck):
    """Checked, never replayed: the account's activity records the import itself."""

    section = "activity"

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, ACTIVITY_SPEC, tuple(ACTIVITY_SPEC))
            or time_problem(record, "created_at", required=True)
            or actor_problem(record["actor"])
        )
        return f"Refused: {problem}." if problem else ""


class ProposalLines(LineCheck):
    """Checked, never replayed: a proposal waits for the account it was made to."""

    section = "proposals"

    def problem(self, record: dict[str, Any]) -> str:
        problem = (
            fields_problem(record, PROPOSAL_SPEC, ("key", "action", "actor", "created_at"))
            or time_problem(record, "created_at", required=True)
            or time_problem(record, "expires_at", "decided_at")
            or actor_problem(record["actor"])
        )
        return f"Refused: {problem}." if problem else ""


def checked_lines(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, check: LineCheck
) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """jsonl_records with `check` applied: (number, the accepted record or None, why not)."""
    for number, record, problem in jsonl_records(archive, info):
        if record is None:
            yield number, None, f"Line {number} is {problem}."
            continue
        problem = check.problem(record)
        yield number, None if problem else record, problem


def line_checks(user: AbstractBaseUser) -> dict[str, LineCheck]:
    """A fresh rule for each JSON Lines member (the import's second reading makes its own)."""
    return {
        fmt.MEMORIES: MemoryLines(user),
        fmt.MEMORY_HISTORY: HistoryLines(),
        fmt.DOCUMENT_VERSIONS: VersionLines(),
        fmt.ACTIVITY: ActivityLines(),
        fmt.PROPOSALS: ProposalLines(),
    }
