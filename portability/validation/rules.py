"""The rules every kind of record in an archive shares: the types of its fields, times,
actors, agents' names and a line's audience. The record kinds' own rules are in
portability/validation/lines.py and portability/validation/files.py."""

from __future__ import annotations

import re
from typing import Any

from activity.actors import ActorKind
from portability import format as fmt
from portability.validation.reading import parse_time
from profiles.models import AGENT_NAME_PATTERN

AGENT_NAME = re.compile(AGENT_NAME_PATTERN)


# --- the shape of what an archive holds -------------------------------------------------

NONE = type(None)
NUMBER: tuple[type, ...] = (int, float)
WHOLE: tuple[type, ...] = (int,)
TEXT: tuple[type, ...] = (str,)
OBJECT: tuple[type, ...] = (dict,)
FLAG: tuple[type, ...] = (bool,)
TEXT_OR_NULL = (str, NONE)
NUMBER_OR_NULL = (int, float, NONE)
WHOLE_OR_NULL = (int, NONE)
OBJECT_OR_NULL = (dict, NONE)
LIST_OR_NULL = (list, NONE)
FLAG_OR_NULL = (bool, NONE)


def _type_name(kinds: tuple[type, ...]) -> str:
    names = {
        int: "a number",
        float: "a number",
        str: "text",
        dict: "an object",
        list: "a list",
        bool: "true or false",
        NONE: "null",
    }
    return " or ".join(dict.fromkeys(names[kind] for kind in kinds))


def fields_problem(
    record: dict[str, Any], spec: dict[str, tuple[type, ...]], required: tuple[str, ...]
) -> str:
    """Why a record's fields are not of the types `spec` gives ("" when they are); fields
    it does not name are not read, so not checked."""
    for name in required:
        if name not in record:
            return f"it has no '{name}'"
    for name, kinds in spec.items():
        if name not in record:
            continue
        value = record[name]
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if wrong_bool or not isinstance(value, kinds):
            return f"its '{name}' is not {_type_name(kinds)}"
    return ""


def time_problem(record: dict[str, Any], *names: str, required: bool = False) -> str:
    for name in names:
        value = record.get(name)
        if value is None and not required:
            continue
        if parse_time(value) is None:
            return f"its '{name}' is not a time with its offset between 1970 and 9999"
    return ""


def actor_problem(actor: object) -> str:
    """Why an archive's actor is not `{"type": user | agent | system, "agent": name or null}`."""
    if not isinstance(actor, dict):
        return "its actor is not an object"
    kind, agent = actor.get("type"), actor.get("agent")
    if kind not in ActorKind.values:
        return "its actor's type is not user, agent or system"
    if agent is None:
        return ""
    if kind != ActorKind.AGENT:
        return "only an agent actor names an agent"
    if not isinstance(agent, str) or not AGENT_NAME.fullmatch(agent):
        return "its actor's agent is not an agent's name"
    return ""


def agent_problem(name: object) -> str:
    if name is not None and (not isinstance(name, str) or not AGENT_NAME.fullmatch(name)):
        return "its agent is not an agent's name (1-64 of a-z, 0-9, '_' and '-')"
    return ""


# Checked by audience_problem; absent in archives made before issue 27.
AUDIENCE_SPEC = {"audience": (str, dict, NONE)}


def audience_problem(audience: object) -> str:
    """Why a line's `audience` is neither "user" (or absent, null) nor {"agent": name}."""
    if audience is None or audience == fmt.USER_AUDIENCE:
        return ""
    if not isinstance(audience, dict) or set(audience) != {"agent"}:
        return 'its audience is not "user" or {"agent": <name>}'
    problem = agent_problem(audience["agent"])
    return problem.replace("its agent", "its audience's agent", 1)


def audience_agent(record: dict[str, Any]) -> str | None:
    """The name of the agent whose note the line is (None: the user's memory), of a line
    whose audience passed audience_problem."""
    audience = record.get("audience")
    return audience["agent"] if isinstance(audience, dict) else None
