"""What a caller may read of a user's memories: the one home of that rule.

Every memory has an audience: the user's memory (`owner_agent` empty) or one agent's own
note (`owner_agent` set).

- An agent reads the user's memory its read rule allows (profiles/models.py Agent
  `memory_rule`, set by the user on the Agents page: all of it, all except memories with a
  tag it names, or only memories with a tag it names), and its own notes, whatever their
  tags; never another agent's notes.
- The user (pages) and the system read the user's memory. A page that shows agents' notes
  asks for them by name (memory/selectors.py), never through here.

Reads ask `readable(agent)` (a Q), `readable_memories(...)` (a queryset) or `readable_sql`
(an SQL condition with its parameters, for raw SQL such as memory/block_rows.py);
paths that only ever show the user's memory (the working memory, its as-of view) ask
`readable(agent, own=False)`; an agent's new memory is compared only with the memories it
may read (`rule_sql`, memory/duplicates.py), so what it writes never tells it whether a
hidden memory says the same. Writes ask `tags_refusal` (tags a write may not carry) and
`hidden_key` (a key whose current row the agent may not read: the write answers as if it
did not exist).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db.models import Q

from lib.tags import normalize_tag
from memory.models import Memory
from profiles.models import ReadRule

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

    from profiles.models import Agent

USER_MEMORY = Q(owner_agent__isnull=True)


def _allowed_by_rule(agent: Agent | None) -> Q:
    """The user's memories the agent's tag rule lets through (all, for no agent)."""
    if agent is None or agent.memory_rule == ReadRule.ALL:
        return Q()
    named = Q(tags__overlap=list(agent.memory_tags))
    return named if agent.memory_rule == ReadRule.ONLY else ~named


def reads_all_memory(agent: Agent | None) -> bool:
    """Does the agent read all of the user's memory? Only then is it given what is built
    from all of it: the consolidated profile USER_MEMORY.md (learning/user_memory_doc.py)."""
    return agent is None or agent.memory_rule == ReadRule.ALL


def readable(agent: Agent | None, *, own: bool = True) -> Q:
    """The rows `agent` may read (no agent: the user's memory); with `own=False` only the
    user's memory of them. Combine it with the user's filter."""
    users = USER_MEMORY & _allowed_by_rule(agent)
    if agent is None or not own:
        return users
    return users | Q(owner_agent=agent)


def readable_memories(
    *, user: AbstractBaseUser, agent: Agent | None, own: bool = True
) -> QuerySet[Memory]:
    """The user's rows `agent` may read, as `readable` says."""
    return Memory.objects.filter(user=user).filter(readable(agent, own=own))


def readable_sql(agent: Agent | None, *, own: bool = True) -> tuple[str, list[object]]:
    """`readable` as an SQL condition over user_context's columns, and its parameters."""
    users = "owner_agent_id IS NULL"
    params: list[object] = []
    if agent is not None and agent.memory_rule != ReadRule.ALL:
        overlap = "tags && %s::varchar(40)[]"
        users += f" AND {overlap}" if agent.memory_rule == ReadRule.ONLY else f" AND NOT {overlap}"
        params.append(list(agent.memory_tags))
    if agent is None or not own:
        return f"({users})", params
    return f"(({users}) OR owner_agent_id = %s)", [*params, agent.pk]


def rule_sql(agent: Agent | None) -> tuple[str, dict[str, object]]:
    """The agent's tag rule alone as an SQL condition with named parameters ("" when it
    reads all), for statements written with them (memory/duplicates.py)."""
    if agent is None or agent.memory_rule == ReadRule.ALL:
        return "", {}
    overlap = "tags && %(rule_tags)s::varchar(40)[]"
    condition = overlap if agent.memory_rule == ReadRule.ONLY else f"NOT ({overlap})"
    return condition, {"rule_tags": list(agent.memory_tags)}


def rule_allows_tags(agent: Agent | None, tags: Iterable[str]) -> bool:
    """May `agent` read a memory of the user's carrying these tags?"""
    if agent is None or agent.memory_rule == ReadRule.ALL:
        return True
    named = bool(set(tags) & set(agent.memory_tags))
    return named if agent.memory_rule == ReadRule.ONLY else not named


def may_read(memory: Memory, agent: Agent | None) -> bool:
    """May `agent` (None: the user or the system) read this row?"""
    if memory.owner_agent_id is not None:
        return agent is not None and memory.owner_agent_id == agent.pk
    return rule_allows_tags(agent, memory.tags)


def tags_refusal(agent: Agent | None, tags: Iterable[str]) -> str:
    """Why a write of the user's memory with these tags by `agent` is refused, its rule
    hiding such a memory from it ("" when the write may go ahead)."""
    tags = [normalize_tag(tag) for tag in tags]
    if agent is None or rule_allows_tags(agent, tags):
        return ""
    if agent.memory_rule == ReadRule.EXCEPT:
        hidden = sorted(set(tags) & set(agent.memory_tags))
        return f"Your read rule hides memories tagged {_named(hidden)}, so you cannot write one"
    return (
        f"Your read rule lets you read only memories tagged {_named(agent.memory_tags)}, so "
        "a memory you write needs one of those tags"
    )


def _named(tags: Iterable[str]) -> str:
    return ", ".join(f"#{tag}" for tag in tags)


def hidden_key(*, user: AbstractBaseUser, agent: Agent | None, key: str) -> bool:
    """Does the user's memory hold `key` in a row `agent` may not read? Its writes then
    answer as if there were none."""
    if agent is None or agent.memory_rule == ReadRule.ALL:
        return False
    row = Memory.objects.filter(user=user, key=key).filter(USER_MEMORY).values("tags").first()
    return row is not None and not rule_allows_tags(agent, row["tags"])
