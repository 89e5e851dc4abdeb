"""The heartbeat: the user's HEARTBEAT.md checklist, run by the model on a schedule.

For each user whose heartbeat is on (Settings) and whose own HEARTBEAT.md is not empty,
at most once per MNEMO_HEARTBEAT_INTERVAL: one LLM turn with the checklist, the working
memory, today's and yesterday's daily logs (the user's time zone) and the findings of
earlier runs still open (so the model does not report them again; the turn and what its
answer becomes are briefing/heartbeat_findings.py's). An OK answer (is_ok: HEARTBEAT_OK,
leniently) records `heartbeat_ok` and nothing else; any other answer is a finding: a Work
item of kind heartbeat holding the answer as Markdown, a `heartbeat_finding` event, and one
signed POST to the user's notification webhook when one is set (briefing/heartbeat_webhook.py,
through lib/outbound.py: the URL checked again, the connection pinned to the checked
address). A finding with the title of an open one (same_title) is that one seen again: it
is noted on the open item (work/services.py work_seen_again), with no new item and no
webhook.
A heartbeat that is off does nothing: neither the schedule nor Run now runs it, and a
delivery still pending when it is switched off is not sent.

The schedule is the database's: each finished HeartbeatRun says when the user is due again
(`next_due_at`). Beat's tick (every minute, briefing/tasks.py) sends a run for each due
user; a run first claims, under a per-user advisory lock, by inserting a `running` row
(at most one per user: a partial unique constraint), and only if the user is still due.
So however many ticks or "Run now" clicks send runs, one runs at a time and the schedule
runs a user at most once per interval. A run that fails is due again at once (the next
tick), then after growing pauses up to the interval while it keeps failing; a run whose
worker died is failed by the tick after RUN_LEASE and so retried too.

The model call and the webhook are made outside any transaction (llm/client.py).
Documents are read from the user's own scope only (user, no agent): never an agent's
private notes, a shared scope or the global one.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from activity import events
from briefing.heartbeat_findings import (
    HEARTBEAT_PATH,
    checklist,
    heartbeat_messages,
    is_ok,
    record_finding,
)
from briefing.heartbeat_webhook import webhook_deliver
from briefing.models import HeartbeatRun, RunOutcome, RunTrigger, WebhookStatus
from context.models import Document
from lib.errors import LLMNotConfigured, ServiceError
from llm.client import LLMBudgetReached, LLMUnavailable, complete, llm_configured
from profiles.models import Profile

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)

PURPOSE = "heartbeat"  # LLMCall.purpose
TICK_SECONDS = 60  # briefing/schedule.py's "heartbeat-tick"
# A run still `running` after this is a dead worker's: the tick fails it, and it is retried.
# Well above one run's bounds (the model's timeout and retries, the webhook's tries).
RUN_LEASE = datetime.timedelta(minutes=15)
# What the model may answer, so one checklist cannot spend the daily budget.
ANSWER_TOKENS = 1000
# Lock keys are (LOCK_SPACE, user id): the two-key form of PostgreSQL's advisory locks,
# apart from the one-key locks other code takes.
LOCK_SPACE = 0x4842  # "HB"

EMPTY_REASON = f"{HEARTBEAT_PATH} is empty or missing in your documents: nothing to check."
SWITCHED_OFF_RUN = (
    "The heartbeat is off, so it does not run: switch it on in the form above and save, "
    "then Run now."
)


# --- the schedule and the claim ---------------------------------------------------------------


def interval() -> datetime.timedelta:
    return datetime.timedelta(seconds=settings.MNEMO_HEARTBEAT_INTERVAL)


def _latest_finished() -> Subquery:
    return Subquery(
        HeartbeatRun.objects.filter(user=OuterRef("user"))
        .exclude(outcome=RunOutcome.RUNNING)
        .order_by("-started_at", "-id")
        .values("next_due_at")[:1]
    )


def due_user_ids(*, now: datetime.datetime | None = None) -> list[int]:
    """Users the schedule should run now: heartbeat on, their own HEARTBEAT.md not blank,
    nothing running, and their last run's next due time reached (or no run yet)."""
    now = now or timezone.now()
    own_checklist = Document.objects.filter(
        user=OuterRef("user"), agent__isnull=True, path=HEARTBEAT_PATH, body__regex=r"\S"
    )
    running = HeartbeatRun.objects.filter(user=OuterRef("user"), outcome=RunOutcome.RUNNING)
    profiles = (
        Profile.objects.filter(heartbeat_enabled=True, user__is_active=True)
        .filter(Exists(own_checklist), ~Exists(running))
        .annotate(next_due=_latest_finished())
        .filter(Q(next_due__isnull=True) | Q(next_due__lte=now))
        .order_by("user_id")
    )
    return list(profiles.values_list("user_id", flat=True))


def _lock_user(user_id: int) -> None:
    """Serialize claims for one user until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_SPACE, user_id])


def heartbeat_claim(
    *,
    user: AbstractBaseUser,
    trigger: str = RunTrigger.SCHEDULE,
    requested_at: datetime.datetime | None = None,
    now: datetime.datetime | None = None,
) -> HeartbeatRun | None:
    """Insert the user's `running` row and return it, or None when this run must not
    happen: the heartbeat is off (Run now too: it may have been switched off since the
    click) or one is running, or (schedule) the checklist is blank or the user is not due
    yet, or (Run now) a run already started since `requested_at` (the same request
    delivered twice)."""
    now = now or timezone.now()
    with transaction.atomic():
        _lock_user(user.pk)
        if not Profile.objects.filter(user=user, heartbeat_enabled=True).exists():
            return None
        if HeartbeatRun.objects.filter(user=user, outcome=RunOutcome.RUNNING).exists():
            return None
        if trigger == RunTrigger.SCHEDULE:
            if not checklist(user=user):
                return None
            last = (
                HeartbeatRun.objects.filter(user=user)
                .order_by("-started_at", "-id")
                .values_list("next_due_at", flat=True)
                .first()
            )
            if last is not None and last > now:
                return None
        elif (
            requested_at is not None
            and HeartbeatRun.objects.filter(user=user, started_at__gte=requested_at).exists()
        ):
            return None
        try:
            with transaction.atomic():
                return HeartbeatRun.objects.create(user=user, trigger=trigger, started_at=now)
        except IntegrityError:  # the partial unique constraint: one is running after all
            return None


def expire_stale_runs(*, now: datetime.datetime | None = None) -> int:
    """Fail the runs a dead worker left `running` (retried at once, like any failure), and
    the webhook deliveries it left pending. Returns how many runs were failed."""
    now = now or timezone.now()
    stale = HeartbeatRun.objects.filter(
        outcome=RunOutcome.RUNNING, started_at__lt=now - RUN_LEASE
    ).select_related("user")
    failed = 0
    for run in stale:
        reason = (
            f"The run did not finish within {RUN_LEASE.seconds // 60} minutes (its worker "
            "stopped); it is tried again."
        )
        if _finish(run, RunOutcome.FAILED, reason=reason, now=now) is not None:
            failed += 1
    HeartbeatRun.objects.filter(
        webhook_status=WebhookStatus.PENDING, finished_at__lt=now - RUN_LEASE
    ).update(
        webhook_status=WebhookStatus.FAILED,
        webhook_last_error="The delivery was interrupted (its worker stopped).",
    )
    return failed


def _next_due(run: HeartbeatRun, outcome: str, now: datetime.datetime) -> datetime.datetime:
    """When the schedule may run this user again after `run` ends with `outcome`."""
    if outcome != RunOutcome.FAILED:
        return max(run.started_at + interval(), now)
    # Retried on the next tick; while it keeps failing, after 1, 3, 7… ticks, up to the
    # interval, so an outage costs a few calls, not one a minute.
    failures = 1
    for earlier in (
        HeartbeatRun.objects.filter(user_id=run.user_id, started_at__lt=run.started_at)
        .order_by("-started_at", "-id")
        .values_list("outcome", flat=True)[:16]
    ):
        if earlier != RunOutcome.FAILED:
            break
        failures += 1
    pause = datetime.timedelta(seconds=TICK_SECONDS * (2 ** (failures - 1) - 1))
    return now + min(pause, interval())


# --- one run ----------------------------------------------------------------------------------


def heartbeat_run(
    *,
    user: AbstractBaseUser,
    trigger: str = RunTrigger.SCHEDULE,
    requested_at: datetime.datetime | None = None,
) -> HeartbeatRun | None:
    """Claim and run the user's heartbeat; None when it must not run now (see
    heartbeat_claim). Never raises for the model's or the webhook's failures: they are
    recorded on the run."""
    run = heartbeat_claim(user=user, trigger=trigger, requested_at=requested_at)
    if run is None:
        return None
    run = _execute(run)
    if run.webhook_status == WebhookStatus.PENDING:
        webhook_deliver(run_id=run.pk)
        run.refresh_from_db()
    return run


def _execute(run: HeartbeatRun) -> HeartbeatRun:
    user = run.user
    try:
        text = checklist(user=user)
        if not text:
            return _finish(run, RunOutcome.SKIPPED, reason=EMPTY_REASON) or run
        if not llm_configured():
            return _finish(run, RunOutcome.SKIPPED, reason=LLMNotConfigured().message) or run
        messages = heartbeat_messages(user=user, checklist_text=text, now=run.started_at)
        answer = complete(
            user=user, purpose=PURPOSE, messages=messages, max_tokens=ANSWER_TOKENS
        ).text.strip()
    except LLMNotConfigured as error:
        return _finish(run, RunOutcome.SKIPPED, reason=error.message) or run
    except LLMBudgetReached as error:
        reason = f"Skipped: {error.reason}."
        return _finish(run, RunOutcome.SKIPPED, reason=reason) or run
    except LLMUnavailable as error:
        return _finish(run, RunOutcome.FAILED, reason=f"The model failed: {error.reason}.") or run
    except Exception as error:  # a bug or the database: still recorded, and retried
        logger.exception("Heartbeat run %s failed", run.pk)
        reason = f"Mnemo could not run it: {type(error).__name__}."
        return _finish(run, RunOutcome.FAILED, reason=reason) or run
    if is_ok(answer):
        return _finish(run, RunOutcome.OK) or run
    if not answer:
        return _finish(run, RunOutcome.FAILED, reason="The model gave an empty answer.") or run
    try:
        return _finish(run, RunOutcome.FINDING, answer=answer) or run
    except ServiceError as error:  # the answer could not be stored as a work item
        return _finish(run, RunOutcome.FAILED, reason=f"The finding was refused: {error}") or run


def _finish(
    run: HeartbeatRun,
    outcome: str,
    *,
    reason: str = "",
    answer: str = "",
    now: datetime.datetime | None = None,
) -> HeartbeatRun | None:
    """End the run with its outcome, its event and (a finding) its work item, in one
    transaction; None when the run was already ended (the tick failed it as stale)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = (
            HeartbeatRun.objects.select_for_update()
            .select_related("user")
            .filter(pk=run.pk, outcome=RunOutcome.RUNNING)
            .first()
        )
        if locked is None:
            return None
        run = locked
        user = run.user
        run.outcome = outcome
        run.reason = reason
        run.finished_at = now
        run.next_due_at = _next_due(run, outcome, now)
        if outcome == RunOutcome.FINDING:
            record_finding(run, answer, now)
        elif outcome == RunOutcome.OK:
            events.heartbeat_ok(user=user, run_id=run.pk)
        elif outcome == RunOutcome.FAILED:
            events.heartbeat_failed(user=user, run_id=run.pk, reason=reason)
        run.save()
    return run


# --- the tick ---------------------------------------------------------------------------------


def heartbeat_tick(*, send: Callable[[int], object], now: datetime.datetime | None = None) -> int:
    """Beat's minute: fail stale runs, then `send` a run for each due user. Sending is cheap
    and may repeat: the claim decides."""
    now = now or timezone.now()
    expire_stale_runs(now=now)
    user_ids = due_user_ids(now=now)
    for user_id in user_ids:
        send(user_id)
    return len(user_ids)


def heartbeat_run_for_user_id(
    user_id: int, *, requested_at: datetime.datetime | None = None
) -> HeartbeatRun | None:
    """The task's body: the user by id, a scheduled run, or Run now's when `requested_at`."""
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return None
    trigger = RunTrigger.MANUAL if requested_at is not None else RunTrigger.SCHEDULE
    return heartbeat_run(user=user, trigger=trigger, requested_at=requested_at)


@dataclass(frozen=True)
class SendNow:
    queued: bool
    message: str


def heartbeat_send_now(*, user: AbstractBaseUser) -> SendNow:
    """Run now: send the user's run to the worker, stamped with this moment so a message
    delivered twice runs once. Refused while the heartbeat is off (an off heartbeat sends
    nothing, to the model or to the webhook), while a run is going or without a checklist."""
    if not Profile.objects.filter(user=user, heartbeat_enabled=True).exists():
        return SendNow(False, SWITCHED_OFF_RUN)
    if HeartbeatRun.objects.filter(user=user, outcome=RunOutcome.RUNNING).exists():
        return SendNow(False, "A heartbeat is running now; its outcome shows here when it ends.")
    if not checklist(user=user):
        return SendNow(False, EMPTY_REASON)
    from briefing import tasks  # tasks import this module

    try:
        tasks.run_heartbeat.delay(user.pk, timezone.now().isoformat())
    except Exception as error:  # the broker is down: say so, nothing was started
        logger.warning("Could not send a heartbeat run for user %s: %r", user.pk, error)
        return SendNow(False, "The worker could not be reached; try again in a moment.")
    return SendNow(True, "Your checklist is running; its outcome shows here in a moment.")


# --- what the pages show ----------------------------------------------------------------------


@dataclass(frozen=True)
class HeartbeatStatus:
    enabled: bool
    has_checklist: bool
    llm_on: bool
    webhook_set: bool
    running: HeartbeatRun | None
    last: HeartbeatRun | None  # the latest finished run
    next_run_at: datetime.datetime | None  # None: not scheduled (off, no checklist, running)
    webhook_failures: list[HeartbeatRun]
    interval_minutes: int


def heartbeat_status(*, user: AbstractBaseUser) -> HeartbeatStatus:
    """The Settings panel's facts: the switch, the last run and the next one, the webhook's
    recent failures."""
    profile = Profile.objects.filter(user=user).first()
    enabled = bool(profile and profile.heartbeat_enabled)
    has_checklist = bool(checklist(user=user))
    runs = HeartbeatRun.objects.filter(user=user).select_related("work_item")
    running = runs.filter(outcome=RunOutcome.RUNNING).first()
    last = runs.exclude(outcome=RunOutcome.RUNNING).first()
    next_run_at = None
    if enabled and has_checklist and running is None:
        # Due now means the next tick, within a minute.
        next_run_at = max(last.next_due_at, timezone.now()) if last else timezone.now()
    failures = list(runs.filter(webhook_status=WebhookStatus.FAILED)[:5])
    return HeartbeatStatus(
        enabled=enabled,
        has_checklist=has_checklist,
        llm_on=llm_configured(),
        webhook_set=bool(profile and profile.notify_webhook_url),
        running=running,
        last=last,
        next_run_at=next_run_at,
        webhook_failures=failures,
        interval_minutes=settings.MNEMO_HEARTBEAT_INTERVAL // 60,
    )


def unseen_findings_count(*, user: AbstractBaseUser) -> int:
    """Findings the user has not opened yet (the navigation's count): a finding's run is
    seen once the user follows the count's link, whatever happens to the work item after; a
    deleted one no longer counts. A finding seen again is not new (record_finding marks its
    run seen)."""
    return HeartbeatRun.objects.filter(
        user=user,
        outcome=RunOutcome.FINDING,
        work_item__isnull=False,
        work_item__deleted_at__isnull=True,
        finding_seen_at__isnull=True,
    ).count()


def findings_mark_seen(*, user: AbstractBaseUser) -> int:
    return HeartbeatRun.objects.filter(
        user=user, outcome=RunOutcome.FINDING, finding_seen_at__isnull=True
    ).update(finding_seen_at=timezone.now())
