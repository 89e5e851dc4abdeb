"""Receiving a turn report: the one write path of Turn rows (the API and tests call it).

The report is stored and answered at once; the work (consolidating the profile, capturing
observations) runs in Celery (learning/tasks.py, learning/pipeline.py). Learning is
opt-in twice: the user's `auto_learn` and the agent's `learns_from_turns`. A report with
learning off is kept as `skipped` with the reason, and nothing else happens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction

from activity import events
from activity.actors import Actor
from llm.models import Turn, TurnStatus
from memory.occurrence import clean_session
from profiles.naming import agent_name
from profiles.services import profile_for_user

if TYPE_CHECKING:
    from profiles.models import Agent, Profile

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnReport:
    turn: Turn
    created: bool  # False: this turn id was reported before; its work is not done again

    @property
    def learning(self) -> bool:
        return self.turn.status != TurnStatus.SKIPPED


def learning_off_reason(profile: Profile, agent: Agent) -> str:
    """Why Mnemo will not learn from this agent's turns, or "" when it will."""
    if profile.memory_paused:
        return "Memory is paused: nothing is learned until the user resumes it."
    if not profile.auto_learn:
        return "Learning from turns is off for this account (Settings → Learning from turns)."
    if not agent.learns_from_turns:
        return f"Learning from turns is off for agent '{agent_name(agent)}' (Agents page)."
    return ""


def turn_report(
    *,
    agent: Agent,
    user_message: str,
    assistant_reply: str,
    tool_outputs: list[dict[str, str]] | None = None,
    client_turn_id: str = "",
    session: str = "",
) -> TurnReport:
    """Store one reported turn and queue its processing when learning is on.

    `session` names the conversation (memory/occurrence.py's rule: one line of at most
    100 characters); what capture learns from the turn carries it. The same
    `client_turn_id` from the same agent again returns the first report, whatever the new
    body says: the work is done once."""
    session = clean_session(session)
    user = agent.user
    with transaction.atomic():
        if client_turn_id:
            existing = Turn.objects.filter(
                user=user, agent=agent, client_turn_id=client_turn_id
            ).first()
            if existing is not None:
                return TurnReport(existing, created=False)
        reason = learning_off_reason(profile_for_user(user), agent)
        fields = {
            "user_message": user_message,
            "assistant_reply": assistant_reply,
            "tool_outputs": tool_outputs or [],
            "session": session,
            "status": TurnStatus.SKIPPED if reason else TurnStatus.QUEUED,
            "skipped_reason": reason,
        }
        if client_turn_id:
            # Two reports of one id at the same instant: the unique constraint lets one
            # insert, and get_or_create finds that row for the other.
            turn, created = Turn.objects.get_or_create(
                user=user, agent=agent, client_turn_id=client_turn_id, defaults=fields
            )
            if not created:
                return TurnReport(turn, created=False)
        else:
            turn = Turn.objects.create(user=user, agent=agent, **fields)
        events.turn_reported(
            user=user,
            actor=Actor.for_agent(agent),
            turn_id=turn.pk,
            learning=not reason,
            reason=reason,
        )
        if not reason:
            transaction.on_commit(lambda: send_turn(turn.pk))
    return TurnReport(turn, created=True)


def send_turn(turn_id: int) -> None:
    """Queue the turn's processing. A broker that is down must not fail the report: the
    turn stays queued and beat's sweep sends it again (learning/tasks.py)."""
    from learning import tasks

    try:
        tasks.process_turn.delay(turn_id)
    except Exception as error:
        logger.warning("Could not queue turn %s (the sweep will): %r", turn_id, error)
