"""An agent's read rule (memory/visibility.py) on its tool calls: which audience a call
addresses (`own`), a read of a key the rule hides, and the refusals that depend only on a
write's input (its tags). Whether a write's existing row is hidden is decided by the write
path on the locked row (memory/services.py `_refuse_hidden`, given the agent as `reader`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lib.errors import Forbidden, NotFound
from memory import visibility

if TYPE_CHECKING:
    from rest_framework.request import Request

    from memory.models import Memory
    from profiles.models import Agent


def _owner(request: Request, data: dict[str, Any]) -> Agent | None:
    """The audience a tool call addresses, `own` taken out of `data`: the calling agent's
    own notes with own: true, else the user's memory (None)."""
    return request.auth.agent if data.pop("own", False) else None


# An agent's read rule (memory/visibility.py) binds its writes of the user's memory too.
HIDDEN_DUPLICATE_MESSAGE = (
    "A memory you may not read already says this. The user sets what you read on the Agents page."
)


def _refuse_unreadable(request: Request, key: str, data: dict[str, Any]) -> None:
    """A read (get_memory) of a key of the user's memory whose row the agent may not read
    answers as if there were none, naming nothing of it. (`own`: the agent's own note,
    always its to read.)"""
    if data.get("own"):
        return
    if visibility.hidden_key(user=request.user, agent=request.auth.agent, key=key):
        raise NotFound(f"No memory with key '{key}'.", field="key")


def _refuse_hidden_tags(request: Request, data: dict[str, Any]) -> None:
    """403 for a write into the user's memory with tags the agent's read rule hides (not
    for its own note: `own`)."""
    if data.get("own"):
        return
    refusal = visibility.tags_refusal(request.auth.agent, data.get("tags") or [])
    if refusal:
        raise Forbidden(f"{refusal}: the user sets what you read on the Agents page.", field="tags")


def _refuse_unreadable_duplicate(request: Request, existing: Memory) -> None:
    """403, that memory unnamed, when the one a new memory was merged into is hidden from
    the agent. An agent's write is compared only with what it may read
    (memory/duplicates.py), so this answers only a rule or tag changed during the write."""
    if not visibility.may_read(existing, request.auth.agent):
        raise Forbidden(HIDDEN_DUPLICATE_MESSAGE, field="value")
