"""Reads of LLM use: what a user's calls cost, per period and per turn, for the pages."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Avg, Count, Sum
from django.utils import timezone

from llm.client import daily_budget, day_start
from llm.models import LLMCall, Turn

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet


@dataclass(frozen=True)
class Usage:
    """A user's LLM calls over one period, their tries included."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    average_latency_ms: float | None  # None without calls

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class UsageSummary:
    """Today's (UTC) and this month's (UTC) use, and today's against the daily budget."""

    today: Usage
    month: Usage
    daily_budget: int
    day_start: datetime.datetime
    month_start: datetime.datetime

    @property
    def budget_left(self) -> int:
        return max(self.daily_budget - self.today.total_tokens, 0)

    @property
    def budget_percent(self) -> int:
        """Today's share of the budget, 0 to 100 (a budget is never 0: the minimum is 1,000)."""
        return min(100, self.today.total_tokens * 100 // max(self.daily_budget, 1))

    @property
    def budget_reached(self) -> bool:
        return self.today.total_tokens >= self.daily_budget


def month_start(now: datetime.datetime | None = None) -> datetime.datetime:
    """Midnight UTC on the first of `now`'s month (UTC)."""
    return day_start(now).replace(day=1)


def llm_usage_since(*, user: AbstractBaseUser, since: datetime.datetime) -> Usage:
    """The user's calls made at or after `since`, in one aggregate query."""
    totals = LLMCall.objects.filter(user=user, created_at__gte=since).aggregate(
        calls=Count("id"),
        prompt=Sum("prompt_tokens"),
        completion=Sum("completion_tokens"),
        latency=Avg("latency_ms"),
    )
    return Usage(
        calls=totals["calls"],
        prompt_tokens=totals["prompt"] or 0,
        completion_tokens=totals["completion"] or 0,
        average_latency_ms=totals["latency"],
    )


def llm_usage_summary(
    *, user: AbstractBaseUser, now: datetime.datetime | None = None
) -> UsageSummary:
    now = now or timezone.now()
    today, month = day_start(now), month_start(now)
    return UsageSummary(
        today=llm_usage_since(user=user, since=today),
        month=llm_usage_since(user=user, since=month),
        daily_budget=daily_budget(user),
        day_start=today,
        month_start=month,
    )


def llm_calls_for_turn(*, turn: Turn) -> QuerySet[LLMCall]:
    """The calls made about one turn, in the order they were made."""
    return LLMCall.objects.filter(turn=turn, user_id=turn.user_id).order_by("created_at", "id")


def turns_existing(*, user: AbstractBaseUser, ids: Iterable[int]) -> set[int]:
    """Which of these ids are turns of the user's (for links to their pages). One query."""
    wanted = {pk for pk in ids if isinstance(pk, int) and not isinstance(pk, bool)}
    if not wanted:
        return set()
    return set(Turn.objects.filter(user=user, pk__in=wanted).values_list("pk", flat=True))
