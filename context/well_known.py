"""The well-known files of a scope, which tools and pages name without a path: MEMORY.md
(the long-term notes), the daily logs daily/YYYY-MM-DD.md (one stamped line at a time, the
date and time in the user's timezone) and AGENT_MEMORY.md (an agent's own notes, or with no
agent the global scope's, the system token's). Every change goes through
context/services.py document_append, so each line is a version and an activity event.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from context.models import Document
from context.services import (
    AGENT_MEMORY_PATH,
    MEMORY_PATH,
    document_append,
    scope_columns,
)
from lib.errors import InvalidInput
from memory.selectors import user_zone

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from activity.actors import Actor
    from profiles.models import Agent

DAILY_FOLDER = "daily"


def append_memory(
    *, user: AbstractBaseUser | None, agent: Agent | None = None, content: str, actor: Actor
) -> Document:
    """Add a line to the scope's long-term notes, MEMORY.md."""
    return document_append(user=user, agent=agent, path=MEMORY_PATH, content=content, actor=actor)


def append_daily_memory(
    *,
    user: AbstractBaseUser | None,
    agent: Agent | None = None,
    content: str,
    actor: Actor,
    now: datetime.datetime | None = None,
) -> Document:
    """Add "- HH:MM content" to daily/YYYY-MM-DD.md, date and time in the user's timezone.

    The content is one line (_one_line): a line break would start lines the stamp does not
    own, such as a heading."""
    path, line = daily_log_line(user=user, content=content, now=now)
    return document_append(user=user, agent=agent, path=path, content=line, actor=actor)


def daily_log_line(
    *, user: AbstractBaseUser | None, content: str, now: datetime.datetime | None = None
) -> tuple[str, str]:
    """Today's daily log and the line "- HH:MM content" for it, date and time in the user's
    timezone (UTC for the global scope). InvalidInput for content that is not one line of
    text."""
    if not isinstance(content, str):
        raise InvalidInput("Content must be text.", field="content")
    content = content.strip()
    if not content:
        raise InvalidInput("Nothing to append: the content is empty.", field="content")
    _one_line(content, what="A daily log entry")
    local = (now or timezone.now()).astimezone(user_zone(user))
    return daily_path(local.date()), f"- {local:%H:%M} {content}"


def daily_path(day: datetime.date) -> str:
    """The daily log of a local date: daily/YYYY-MM-DD.md."""
    return f"{DAILY_FOLDER}/{day:%Y-%m-%d}.md"


def append_agent_memory(*, agent: Agent | None, content: str, actor: Actor) -> Document:
    """Add a line to AGENT_MEMORY.md (one line: _one_line): the agent's own, private to it,
    or with agent None the global (company) scope's, the system token's notes. Both go
    through document_append, so each line is a version and an activity event."""
    if isinstance(content, str):
        _one_line(content.strip(), what="A note appended to AGENT_MEMORY.md")
    return document_append(
        user=_agent_memory_user(agent),
        agent=agent,
        path=AGENT_MEMORY_PATH,
        content=content,
        actor=actor,
    )


def agent_memory_get(*, agent: Agent | None) -> Document | None:
    """The agent's own AGENT_MEMORY.md, or with agent None the global scope's; None until
    the first line is appended."""
    return Document.objects.filter(
        **scope_columns(_agent_memory_user(agent), agent), path=AGENT_MEMORY_PATH
    ).first()


def _agent_memory_user(agent: Agent | None) -> AbstractBaseUser | None:
    """Whose scope an AGENT_MEMORY.md is in: the agent's user, or none (the global scope)."""
    return agent.user if agent is not None else None


# What ends a line: what str.splitlines() splits at (LF, CR, VT, FF, the file, group and
# record separators, NEL, and the Unicode line and paragraph separators).
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")


def _one_line(content: str, *, what: str) -> None:
    """InvalidInput when content holds a line break: tools documented as adding one line
    add exactly one, so their text cannot open lines (a heading, a list) of its own."""
    for position, char in enumerate(content):
        if char in LINE_BREAKS:
            raise InvalidInput(
                f"{what} is one line, and this content has a line break (U+{ord(char):04X}) "
                f"at position {position}. Send each line as its own call, or write the "
                "block with memory_append.",
                field="content",
            )
