"""Who made a change: the user (through a page), one of their agents, or the system."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import models

from profiles.naming import agent_name

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent


class ActorKind(models.TextChoices):
    USER = "user", "User"
    AGENT = "agent", "Agent"
    SYSTEM = "system", "System"


@dataclass(frozen=True)
class Actor:
    kind: ActorKind
    user: AbstractBaseUser | None = None
    agent: Agent | None = None

    @classmethod
    def for_user(cls, user: AbstractBaseUser) -> Actor:
        return cls(ActorKind.USER, user=user)

    @classmethod
    def for_agent(cls, agent: Agent) -> Actor:
        return cls(ActorKind.AGENT, agent=agent)

    @classmethod
    def system(cls) -> Actor:
        return cls(ActorKind.SYSTEM)

    @property
    def label(self) -> str:
        if self.kind == ActorKind.USER:
            return str(self.user)
        if self.kind == ActorKind.AGENT:
            return f"agent {agent_name(self.agent)}"
        return "system"

    def as_fields(self) -> dict[str, object]:
        """The actor columns of ActorMixin, ready for a model constructor."""
        return {"actor_type": self.kind, "actor_user": self.user, "actor_agent": self.agent}


class ActorMixin(models.Model):
    """Columns recording an Actor; the check constraint keeps them consistent."""

    actor_type = models.CharField(max_length=8, choices=ActorKind.choices)
    actor_user = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_agent = models.ForeignKey(
        "profiles.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        abstract = True

    @property
    def actor_name(self) -> str:
        """The actor's own name: an agent's as every page names it (profiles/naming.py),
        "a deleted agent" when it is gone; a user's username; "system"."""
        if self.actor_type == ActorKind.AGENT:
            return agent_name(self.actor_agent)
        return self.actor_label

    @property
    def actor_label(self) -> str:
        if self.actor_type == ActorKind.AGENT:
            return (
                f"agent {agent_name(self.actor_agent)}" if self.actor_agent else "a deleted agent"
            )
        if self.actor_type == ActorKind.USER:
            return str(self.actor_user) if self.actor_user else "a deleted user"
        return "system"

    @staticmethod
    def actor_constraint(name: str) -> models.CheckConstraint:
        # SET_NULL on delete may blank the FK later, so only the wrong one is forbidden.
        return models.CheckConstraint(
            condition=models.Q(actor_type__in=ActorKind.values)
            & (models.Q(actor_type=ActorKind.AGENT) | models.Q(actor_agent__isnull=True))
            & (models.Q(actor_type=ActorKind.USER) | models.Q(actor_user__isnull=True)),
            name=name,
        )
