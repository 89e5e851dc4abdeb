"""USER_MEMORY.md, the consolidated user-memory document: its format, one Markdown document
per user in the user's own scope (learning/user_memory_loading.py serves it within the
user's budget; learning/consolidation.py rewrites it after a turn).

The format is fixed: YAML frontmatter (`user_id`, `schema_version: 1`, `last_updated`,
`turn_count`), the title `# User Memory`, then the six SECTIONS in order, each holding
`- ` bullets or the line `_(empty)_`. `render_profile` writes it, `parse_profile` reads it
and says what is wrong in words the model can act on (`validate_profile`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import yaml
from django.utils import timezone

from llm.models import Turn, TurnStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

SCHEMA_VERSION = 1
TITLE = "# User Memory"
SECTIONS = (
    "Identity",
    "Communication Preferences",
    "Work Context",
    "Skills & Expertise",
    "Recent Topics",
    "Open Questions / Follow-ups",
)
EMPTY_MARK = "_(empty)_"
BULLET = "- "
FRONTMATTER_FENCE = "---"
FRONTMATTER_KEYS = ("user_id", "schema_version", "last_updated", "turn_count")
# How many problems the model (and the activity log) is told about; the first few are
# enough to fix an answer, and a long list of a garbled one helps nobody.
MAX_PROBLEMS = 8
MAX_QUOTE_CHARS = 60
# Four short keys fit in far less; a longer frontmatter is not parsed at all.
MAX_FRONTMATTER_CHARS = 1000

_KEY_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):[ \t]*(.*?)[ \t]*")
# The tags PyYAML resolves a plain or quoted value to; any other is written in the answer
# (`!!python/object`...) and refused, although the loader is never asked to build one.
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp")
)
_WHOLE_NUMBER = re.compile(r"\d{1,18}")


@dataclass(frozen=True)
class ParsedProfile:
    """A profile that follows the format: its frontmatter values (as text) and the bullets of
    each section, in order, without their `- `."""

    frontmatter: dict[str, str]
    sections: dict[str, list[str]]


# --- the format -------------------------------------------------------------------------------


def render_profile(
    *, frontmatter: Mapping[str, object], sections: Mapping[str, Sequence[str]]
) -> str:
    """The profile in its exact format: Mnemo's one way of writing it, whatever the model's
    spacing was."""
    lines = [FRONTMATTER_FENCE]
    lines += [f"{key}: {frontmatter[key]}" for key in FRONTMATTER_KEYS]
    lines += [FRONTMATTER_FENCE, "", TITLE]
    for name in SECTIONS:
        bullets = sections.get(name) or []
        lines += ["", f"## {name}"]
        lines += [f"{BULLET}{bullet}" for bullet in bullets] if bullets else [EMPTY_MARK]
    return "\n".join(lines) + "\n"


def empty_profile(user: AbstractBaseUser, *, now: datetime.datetime | None = None) -> str:
    """The profile with every section `_(empty)_`: what a user without one starts from."""
    return render_profile(
        frontmatter=profile_frontmatter(user, turn_count=processed_turn_count(user), now=now),
        sections={},
    )


def profile_frontmatter(
    user: AbstractBaseUser, *, turn_count: int, now: datetime.datetime | None = None
) -> dict[str, object]:
    """The frontmatter values, which Mnemo sets itself (the model only copies the keys)."""
    return {
        "user_id": user.pk,
        "schema_version": SCHEMA_VERSION,
        "last_updated": iso_timestamp(now or timezone.now()),
        "turn_count": turn_count,
    }


def iso_timestamp(moment: datetime.datetime) -> str:
    """ISO 8601 with its offset, to the second, e.g. 2025-06-03T09:00:00+00:00."""
    return moment.astimezone(datetime.UTC).isoformat(timespec="seconds")


def processed_turn_count(user: AbstractBaseUser) -> int:
    """How many of the user's reported turns were processed (status done)."""
    return Turn.objects.filter(user=user, status=TurnStatus.DONE).count()


def validate_profile(text: str) -> list[str]:
    """What is wrong with a profile's format, in words the model can act on; [] when it
    follows the format exactly."""
    return parse_profile(text)[1]


def parse_profile(text: str) -> tuple[ParsedProfile | None, list[str]]:
    """The profile's parts, or None and the problems found (at most MAX_PROBLEMS)."""
    lines = text.splitlines()
    problems: list[str] = []
    frontmatter: dict[str, str] = {}
    body_start = 0
    if not lines or lines[0].strip() != FRONTMATTER_FENCE:
        problems.append(
            "The profile must start with its frontmatter: a line '---', the keys "
            f"{', '.join(FRONTMATTER_KEYS)} (one 'key: value' line each), and a line '---'."
        )
    else:
        closing = next(
            (i for i in range(1, len(lines)) if lines[i].strip() == FRONTMATTER_FENCE), None
        )
        if closing is None:
            problems.append("The frontmatter is not closed by a line '---'.")
            return None, problems
        frontmatter, frontmatter_problems = _parse_frontmatter(lines[1:closing])
        problems += frontmatter_problems
        body_start = closing + 1
    sections, body_problems = _parse_body(lines, start=body_start)
    problems += body_problems
    if problems:
        return None, problems[:MAX_PROBLEMS]
    return ParsedProfile(frontmatter=frontmatter, sections=sections), []


def _parse_frontmatter(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """The frontmatter's values, as text, read with PyYAML's safe loader (composed, never
    constructed: no tag in the answer makes an object).

    The model's answer is untrusted, so before anything is built from it the YAML must be
    small and one flat mapping of plain values: no nesting, lists or aliases, only the
    FRONTMATTER_KEYS, each once (PyYAML would keep the last of two silently)."""
    source = "\n".join(lines)
    if len(source) > MAX_FRONTMATTER_CHARS:
        return {}, [f"The frontmatter is longer than {MAX_FRONTMATTER_CHARS} characters."]
    try:
        node = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        return {}, [f"The frontmatter is not 'key: value' lines of YAML ({_yaml_problem(error)})."]
    if node is None:
        node = yaml.MappingNode("tag:yaml.org,2002:map", [])
    if not isinstance(node, yaml.MappingNode):
        return {}, ["The frontmatter is not 'key: value' lines of YAML."]
    values: dict[str, str] = {}
    seen: set[str] = set()
    problems: list[str] = []
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key in seen:
            problems.append(f"The frontmatter key '{key}' appears twice.")
        elif key not in FRONTMATTER_KEYS:
            problems.append(
                f"The frontmatter key '{short_quote(str(key))}' is not allowed; the keys are "
                f"{', '.join(FRONTMATTER_KEYS)}."
            )
        elif not isinstance(value_node, yaml.ScalarNode) or value_node.tag not in _PLAIN_TAGS:
            problems.append(f"The frontmatter's {key} must be one plain value.")
        else:
            # The value as written (a quoted one without its quotes); the checks below read
            # it as text, so a YAML time or number is held to the format's own spelling.
            values[key] = value_node.value
        if key is not None:
            seen.add(key)
    for key in FRONTMATTER_KEYS:
        if key not in seen:
            problems.append(f"The frontmatter key '{key}' is missing.")
    problems += _frontmatter_value_problems(values)
    return values, problems


def _frontmatter_value_problems(values: dict[str, str]) -> list[str]:
    problems = []
    for key in ("user_id", "turn_count"):
        if key in values and not _WHOLE_NUMBER.fullmatch(values[key]):
            problems.append(f"The frontmatter's {key} must be a whole number, not '{values[key]}'.")
    if "schema_version" in values and values["schema_version"] != str(SCHEMA_VERSION):
        problems.append(
            f"The frontmatter's schema_version must be {SCHEMA_VERSION}, "
            f"not '{values['schema_version']}'."
        )
    if "last_updated" in values:
        try:
            moment = datetime.datetime.fromisoformat(values["last_updated"])
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            problems.append(
                "The frontmatter's last_updated must be an ISO 8601 time with its offset "
                f"(e.g. 2025-06-03T09:00:00+00:00), not '{short_quote(values['last_updated'])}'."
            )
    return problems


def _yaml_problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or "unreadable"
    return f"{problem}, line {mark.line + 1}" if mark is not None else problem


def _parse_body(lines: list[str], *, start: int) -> tuple[dict[str, list[str]], list[str]]:
    problems: list[str] = []
    sections: dict[str, list[str]] = {}
    marked_empty: set[str] = set()
    order: list[str] = []
    title_seen = False
    # The section whose lines are being read; "" before the first one, None inside a
    # section that is refused as a whole (its lines are not complained about one by one).
    current: str | None = ""
    for number, line in enumerate(lines[start:], start=start + 1):
        text = line.rstrip()
        if not text.strip():
            continue
        if text == TITLE:
            if title_seen or order:
                problems.append(f"Line {number}: '{TITLE}' must come once, before the sections.")
            title_seen = True
            continue
        if text.startswith("## "):
            name = text[3:].strip()
            if name not in SECTIONS:
                problems.append(
                    f"Line {number}: '## {short_quote(name)}' is not one of the sections; "
                    f"there are exactly six: {section_list()}."
                )
                current = None
            elif name in sections:
                problems.append(f"Line {number}: the section '## {name}' appears twice.")
                current = None
            else:
                sections[name] = []
                order.append(name)
                current = name
            continue
        if current is None:
            continue
        if not current:
            problems.append(
                f"Line {number}: '{short_quote(text)}' is outside the sections; only the "
                f"frontmatter, '{TITLE}' and the six sections are allowed."
            )
        elif text == EMPTY_MARK:
            marked_empty.add(current)
        elif text.startswith(BULLET) and text[len(BULLET) :].strip():
            sections[current].append(text[len(BULLET) :].strip())
        else:
            problems.append(
                f"Line {number} in '## {current}': '{short_quote(text)}' is neither a '- ' bullet "
                f"nor '{EMPTY_MARK}'."
            )
    if not title_seen:
        problems.append(f"The title '{TITLE}' is missing (after the frontmatter).")
    missing = [name for name in SECTIONS if name not in sections]
    problems += [f"The section '## {name}' is missing." for name in missing]
    if order != [name for name in SECTIONS if name in sections]:
        problems.append(f"The sections are out of order; their order is: {section_list()}.")
    for name in order:
        if sections[name] and name in marked_empty:
            problems.append(f"The section '## {name}' has bullets and '{EMPTY_MARK}' both.")
        elif not sections[name] and name not in marked_empty:
            problems.append(
                f"The section '## {name}' is blank; write '{EMPTY_MARK}' when it has nothing."
            )
    return sections, problems


def section_list() -> str:
    return ", ".join(f"'## {name}'" for name in SECTIONS)


def short_quote(text: str) -> str:
    """A piece of an answer, short enough to quote in a problem."""
    text = text.strip()
    return text if len(text) <= MAX_QUOTE_CHARS else text[: MAX_QUOTE_CHARS - 1] + "…"


def with_turn_count(text: str, turn_count: int) -> str:
    """The text with its frontmatter's turn_count line saying turn_count; unchanged when it
    has no frontmatter or no such line (a user's edit may have removed them)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != FRONTMATTER_FENCE:
        return text
    for index in range(1, len(lines)):
        line = lines[index]
        if line.strip() == FRONTMATTER_FENCE:
            break
        match = _KEY_VALUE.fullmatch(line.rstrip("\r\n"))
        if match is not None and match.group(1) == "turn_count":
            ending = line[len(line.rstrip("\r\n")) :]
            lines[index] = f"turn_count: {turn_count}{ending}"
            break
    return "".join(lines)
