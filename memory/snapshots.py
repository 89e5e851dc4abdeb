"""A memory's state as history keeps it, and the check every reader of a stored state runs.

History rows hold the state before and after a change as JSON (Memory.snapshot: `value`,
`source`, `confidence`, `tags`, `pinned`, `occurred_at` and `session`; a rename's states
also carry the `key`, a merge's `after` the note it merged, `merged`). States stored before
memories had a time and a session (issue 26) lack those two: they say nothing about them,
so a restore leaves them as they are and a comparison with a live row ignores them
(`same_state`). The
database checks only that the states a change needs are there, not what they hold, and an
import before issue 25 replayed other accounts' history without looking inside them. So
nothing that reads a stored state (the working memory as of a past time, a restore, the
history pages) uses one before `state_problem` has passed it, and the import checks each
archive state here too, against the rules live rows obey (memory/models.py constraints,
memory/keys.py, lib/tags.py).
"""

from __future__ import annotations

import re
from typing import Any

from lib.errors import ServiceError
from lib.tags import MAX_TAG_LENGTH, normalize_tag
from memory.keys import parse_key
from memory.models import MAX_TAGS, MAX_VALUE_LENGTH, Source
from memory.occurrence import as_stored, from_stored, session_problem, stored_problem

# What every stored state holds, and what states stored since issue 26 hold too.
REQUIRED_FIELDS = ("value", "source", "confidence", "tags", "pinned")
LATER_FIELDS = ("occurred_at", "session")
SNAPSHOT_FIELDS = REQUIRED_FIELDS + LATER_FIELDS
# What PostgreSQL cannot keep in text or jsonb: NUL, and lone surrogates (not UTF-8).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def state_problem(state: object, *, renamed: bool = False) -> str:
    """Why `state` is not a memory's state as live rows hold it ("" when it is one).

    `renamed`: the state of a rename, which also names its key."""
    if not isinstance(state, dict):
        return "the stored state is not an object"
    missing = [name for name in REQUIRED_FIELDS if name not in state]
    if renamed and "key" not in state:
        missing.append("key")
    if missing:
        return f"the stored state has no {', '.join(missing)}"
    problem = (
        _value_problem(state["value"])
        or _source_problem(state["source"], state["confidence"])
        or _tags_problem(state["tags"])
    )
    if problem:
        return problem
    if not isinstance(state["pinned"], bool):
        return "its 'pinned' is not true or false"
    if "occurred_at" in state and (problem := stored_problem(state["occurred_at"])):
        return problem
    if "session" in state and (problem := session_problem(state["session"])):
        return f"its session {problem}"
    if renamed:
        try:
            parse_key(state["key"])
        except ServiceError as error:
            return f"its key is not valid ({error.message})"
    return ""


def merged_problem(state: object) -> str:
    """Why the state a merge left (HistoryAction.MERGE: the memory's state, and under
    "merged" the note merged into it, {"value": its text} and, when the agent gave them, its
    "occurred_at" and "session") holds no readable note ("" when it holds one). The state
    itself is checked by state_problem."""
    note = state.get("merged") if isinstance(state, dict) else None
    if not isinstance(note, dict) or "value" not in note:
        return "the merged note is not an object with a value"
    if "occurred_at" in note and (problem := stored_problem(note["occurred_at"])):
        return problem
    if "session" in note and (problem := session_problem(note["session"])):
        return f"its session {problem}"
    return _value_problem(note["value"])


def state_fields(state: dict[str, Any]) -> dict[str, Any]:
    """The fields of a state that passed state_problem, as a write takes them (an older
    state without a time or a session leaves the row's as they are)."""
    fields = {name: state[name] for name in SNAPSHOT_FIELDS if name in state}
    fields["tags"] = _normal_tags(fields["tags"])
    if "occurred_at" in fields:
        fields["occurred_at"] = from_stored(fields["occurred_at"])
    return fields


def same_state(current: dict[str, Any] | None, stored: dict[str, Any] | None) -> bool:
    """Whether a live row's snapshot (None: no row) is the `stored` state (None: none).
    What an older state does not hold (its time, its session) is not compared."""
    if current is None or stored is None:
        return current is None and stored is None
    compared = {
        name: value for name, value in current.items() if name in stored or name not in LATER_FIELDS
    }
    return _comparable(compared) == _comparable(stored)


def _normal_tags(tags: list[str]) -> list[str]:
    """Tags of a stored state as live rows hold them: a state stored before the tags' rule
    changed ("data_model", memory/migrations/0017_tags_by_one_rule.py) is in today's form."""
    return sorted({normalize_tag(tag) for tag in tags} - {""})


def _comparable(state: dict[str, Any]) -> dict[str, Any]:
    """The state with its time as an instant: an imported state may write UTC as Z; its
    tags in today's form (_normal_tags)."""
    tags = state.get("tags")
    if isinstance(tags, list) and all(isinstance(tag, str) for tag in tags):
        state = {**state, "tags": _normal_tags(tags)}
    moment = state.get("occurred_at")
    if stored_problem(moment):
        return state
    return {**state, "occurred_at": from_stored(moment)}


def _value_problem(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        return "its value is not text, or empty"
    if len(value) > MAX_VALUE_LENGTH:
        return f"its value is {len(value):,} characters long (at most {MAX_VALUE_LENGTH:,})"
    if UNSTORABLE.search(value):
        return "its value holds a NUL character or an unpaired surrogate"
    return ""


def _source_problem(source: object, confidence: object) -> str:
    if source not in Source.values:
        return f"its source {str(source)[:40]!r} is not one of {', '.join(Source.values)}"
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        return "its confidence is not a number"
    if source == Source.USER_STATED and confidence != 1.0:
        return "a 'user_stated' state has confidence exactly 1.0"
    if source != Source.USER_STATED and not 0.0 < confidence < 1.0:
        return f"a '{source}' state has a confidence between 0 and 1"
    return ""


def _tags_problem(tags: object) -> str:
    if not isinstance(tags, list) or len(tags) > MAX_TAGS:
        return f"its tags are not a list of at most {MAX_TAGS}"
    # A tag stored by an earlier rule ("data_model") is still a tag; a write of it keeps
    # it by today's rule (lib/tags.py).
    if not all(isinstance(tag, str) and 0 < len(tag) <= MAX_TAG_LENGTH for tag in tags):
        return f"its tags are not all tags (at most {MAX_TAG_LENGTH} characters)"
    return ""


def _snapshot_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Written fields as a snapshot holds them (SNAPSHOT_FIELDS, times as stored)."""
    shown = {name: value for name, value in fields.items() if name in SNAPSHOT_FIELDS}
    if "tags" in shown:
        shown["tags"] = list(shown["tags"])
    if "occurred_at" in shown:
        shown["occurred_at"] = as_stored(shown["occurred_at"])
    return shown
