"""The rules of the archive's members that are not JSON Lines: documents, work files
(front matter and body) and profile.json (settings and agents)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from context.services import MAX_BODY_BYTES
from lib.errors import ServiceError
from lib.tags import clean_tags
from portability import format as fmt
from portability.validation.reading import parse_json, shown
from portability.validation.rules import (
    FLAG,
    FLAG_OR_NULL,
    LIST_OR_NULL,
    OBJECT_OR_NULL,
    TEXT,
    TEXT_OR_NULL,
    WHOLE,
    agent_problem,
    fields_problem,
    time_problem,
)
from work.models import MAX_BODY_LENGTH as MAX_WORK_BODY_LENGTH
from work.models import MAX_TAGS as MAX_WORK_TAGS
from work.models import MAX_TITLE_LENGTH, WorkKind, WorkStatus

MAX_WORK_FILE_BYTES = 8 * 1024 * 1024  # a report's body and the metadata an agent gave it
SETTINGS_SPEC: dict[str, tuple[type, ...]] = {
    "token_budget": WHOLE,
    "memory_paused": FLAG,
    "review_agent_memories": FLAG,
    "auto_learn": FLAG,
    "profile_budget": WHOLE,
    "llm_daily_tokens": WHOLE,
    "heartbeat_enabled": FLAG,
    "notify_webhook_url": TEXT,
}
AGENT_SPEC = {
    "name": TEXT,
    "display_name": TEXT_OR_NULL,
    "description": TEXT_OR_NULL,
    "learns_from_turns": FLAG_OR_NULL,
}
WORK_SPEC = {
    "title": TEXT,
    "kind": TEXT,
    "status": TEXT,
    "tags": LIST_OR_NULL,
    "agent": TEXT_OR_NULL,
    "metadata": OBJECT_OR_NULL,
    "created_at": TEXT_OR_NULL,
    "updated_at": TEXT_OR_NULL,
}


@dataclass(frozen=True)
class DocumentEntry:
    member: str
    agent: str | None
    path: str  # normalized (context/paths.py)

    @property
    def item(self) -> str:
        return f"{self.agent}: {self.path}" if self.agent else self.path


def document_body(raw: bytes | None) -> tuple[str, str]:
    """(the body, "") of a document member's bytes, or ("", why it is refused)."""
    if raw is None or len(raw) > MAX_BODY_BYTES:
        return "", f"Larger than {MAX_BODY_BYTES:,} bytes."
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "", "Not UTF-8 text."
    if "\x00" in body:
        return "", "It contains a NUL character (U+0000)."
    return body, ""


def parse_work_file(text: str) -> tuple[dict[str, Any], str]:
    """A work file's front matter (JSON values) and body; ValueError saying what is wrong."""
    fence = fmt.WORK_FRONT_MATTER_FENCE
    head, sep, rest = text.partition("\n")
    if head != fence or not sep:
        raise ValueError(f"it does not start with a '{fence}' line")
    values: dict[str, Any] = {}
    while True:
        line, sep, rest = rest.partition("\n")
        if line == fence:
            return values, rest
        if not sep:
            raise ValueError(f"its front matter has no closing '{fence}' line")
        name, colon, raw = line.partition(": ")
        if not colon or name not in fmt.WORK_FRONT_MATTER:
            raise ValueError(f"'{shown(line, 60)}' is not a front matter line")
        value, problem = parse_json(raw)
        if problem:
            raise ValueError(f"the value of '{name}' is {problem}")
        values[name] = value


def read_work_file(raw: bytes | None) -> tuple[dict[str, Any], str, str]:
    """(front matter, body, "") of a work member's bytes, or ({}, "", why it is refused)."""
    try:
        if raw is None or len(raw) > MAX_WORK_FILE_BYTES:
            raise ValueError("it is too large")
        values, body = parse_work_file(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        return {}, "", f"Not a work file: {shown(error, 200)}."
    problem = (
        fields_problem(values, WORK_SPEC, ("title", "kind", "status"))
        or time_problem(values, "created_at", "updated_at")
        or agent_problem(values.get("agent"))
        or _work_problem(values, body)
    )
    return (values, body, "") if not problem else ({}, "", f"Refused: {problem}.")


def _work_problem(values: dict[str, Any], body: str) -> str:
    """The rules of work/services.py work_create, on a work file's values."""
    title = values["title"].strip()
    if not title or len(title) > MAX_TITLE_LENGTH or "\x00" in title:
        return f"its title is empty, holds NUL or is longer than {MAX_TITLE_LENGTH} characters"
    if values["kind"] not in WorkKind.values or values["status"] not in WorkStatus.values:
        return "its kind or status is not one Mnemo knows"
    if len(body) > MAX_WORK_BODY_LENGTH or "\x00" in body:
        return f"its body holds NUL or is longer than {MAX_WORK_BODY_LENGTH:,} characters"
    try:
        clean_tags(values.get("tags") or [], limit=MAX_WORK_TAGS)
    except ServiceError as error:
        return error.message.rstrip(".")
    return ""


def profile_problems(data: object) -> tuple[str, list[dict[str, Any]], list[tuple[str, str]]]:
    """Of profile.json: why its settings are refused ("" when they are not), the agents
    accepted, and each agent refused as (its name or position, why)."""
    if not isinstance(data, dict):
        return "Refused: it is not a JSON object.", [], []
    settings_problem = fields_problem(data, SETTINGS_SPEC, ())
    settings_problem = f"Refused: {settings_problem}." if settings_problem else ""
    agents = data.get("agents")
    if agents is not None and not isinstance(agents, list):
        return settings_problem or "Refused: its 'agents' is not a list.", [], []
    accepted: list[dict[str, Any]] = []
    refused: list[tuple[str, str]] = []
    names: set[str] = set()
    for position, agent in enumerate(agents or [], start=1):
        label, problem = f"agent {position}", "it is not an object"
        if isinstance(agent, dict):
            problem = fields_problem(agent, AGENT_SPEC, ("name",))
            if not problem:
                label = agent["name"]
                problem = agent_problem(agent["name"])
            if not problem and agent["name"] in names:
                problem = "an earlier agent has the same name"
        if problem:
            refused.append((label, f"Refused: {problem}."))
        else:
            names.add(agent["name"])
            accepted.append(agent)
    return settings_problem, accepted, refused
