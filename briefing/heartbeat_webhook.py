"""The heartbeat's webhook: one signed POST of a finding to the user's notification URL
(briefing/heartbeat.py asks for it once a run has recorded a finding and a webhook is set).

Through lib/outbound.py: the URL checked again, the connection pinned to the checked address,
no redirect followed. A few tries with growing pauses, while the receiver may do better; a
heartbeat switched off meanwhile sends nothing. Every try is counted on the run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import F
from django.urls import reverse

from briefing.models import MAX_WEBHOOK_ATTEMPTS, HeartbeatRun, WebhookStatus
from lib import outbound
from profiles.models import Profile

logger = logging.getLogger(__name__)

ERROR_CHARS = 300  # HeartbeatRun.webhook_last_error
WEBHOOK_EVENT = "heartbeat.finding"
SIGNATURE_HEADER = "X-Mnemo-Signature"


def sign(secret: str, body: bytes) -> str:
    """The X-Mnemo-Signature value of a body: "sha256=" and the hex HMAC-SHA256 of the raw
    body bytes keyed with the user's webhook secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_body(run: HeartbeatRun) -> bytes:
    item = run.work_item
    payload = {
        "event": WEBHOOK_EVENT,
        "run_id": run.pk,
        "user": run.user.get_username(),
        "started_at": run.started_at.isoformat(),
        "finding": {
            "work_id": item.pk if item else None,
            "title": item.title if item else "",
            "body": item.body if item else "",
            "path": reverse("work_detail", args=[item.pk]) if item else "",
        },
    }
    return json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()


# What Settings shows of a failed try at an address inside the network that the admin
# allowed through a range or for any port (lib/outbound.py Answer.shown): how each such
# address answers ("connection refused", "answered 403", a timeout) would map the inside.
# The server log has the details for the admin; and every such failure is tried the same
# number of times, so the count of tries says nothing either.
INSIDE_FAILURE = (
    "the delivery failed; the address is inside the network, so the details are only in the "
    "server log"
)
SWITCHED_OFF = "Not sent: the heartbeat was switched off."


@dataclass(frozen=True)
class _Try:
    error: str  # "" when the receiver answered 2xx
    again: bool  # whether another try may do better (no answer, 5xx, 408, 425, 429)


def _post(
    url: str, body: bytes, headers: dict[str, str], resolver: outbound.Resolver | None
) -> _Try:
    """One POST through lib/outbound.py: the URL checked again (DNS may have changed since
    it was saved) and the connection pinned to the checked address, no redirect followed,
    at most MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT seconds from the name lookup to the answer."""
    timeout = settings.MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT
    try:
        answer = outbound.post(
            url,
            body=body,
            headers=headers,
            allow=outbound.allowlist(settings.MNEMO_OUTBOUND_ALLOW),
            timeout=timeout,
            resolver=resolver,
        )
    except outbound.Refused as refusal:  # nothing was sent
        logger.warning("Heartbeat webhook refused: %s", refusal.detail)
        return _Try(f"Not sent: {refusal.message}", again=False)
    except outbound.Failed as failure:
        logger.warning("Heartbeat webhook failed: %s", failure.detail)
        if not failure.shown:
            return _Try(INSIDE_FAILURE, again=True)
        if failure.timeout:
            return _Try(f"the receiver did not answer within {timeout:g} s", again=True)
        return _Try(failure.message, again=failure.again)
    if 200 <= answer.status < 300:
        return _Try("", again=False)
    if not answer.shown:
        logger.warning("Heartbeat webhook at %s answered %s", answer.address, answer.status)
        return _Try(INSIDE_FAILURE, again=True)
    # A redirect (3xx) is not followed: it would send the POST elsewhere.
    again = answer.status >= 500 or answer.status in (408, 425, 429)
    return _Try(f"the receiver answered {answer.status}", again=again)


def webhook_deliver(
    *,
    run_id: int,
    sleep: Callable[[float], object] = time.sleep,
    resolver: outbound.Resolver | None = None,
) -> HeartbeatRun | None:
    """POST the run's finding to the user's webhook: at most
    MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS tries, waiting BACKOFF, then twice as long each time;
    a refusal (a 4xx but 408, 425 and 429, a redirect, a URL lib/outbound.py refuses) is not
    tried again. Before each try the switch and the URL are read again: a heartbeat switched
    off since sends nothing. Every try is counted on the run with its error; the run ends
    `delivered` or `failed`. `resolver` (tests) looks up the webhook's host."""
    run = (
        HeartbeatRun.objects.select_related("user", "work_item")
        .filter(pk=run_id, webhook_status=WebhookStatus.PENDING)
        .first()
    )
    if run is None:
        return None
    body = webhook_body(run)
    attempts = min(settings.MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS, MAX_WEBHOOK_ATTEMPTS)
    wait = settings.MNEMO_HEARTBEAT_WEBHOOK_BACKOFF
    status = WebhookStatus.FAILED
    for attempt in range(1, attempts + 1):
        profile = Profile.objects.filter(user_id=run.user_id).first()
        if profile is None or not profile.heartbeat_enabled:
            HeartbeatRun.objects.filter(pk=run.pk).update(webhook_last_error=SWITCHED_OFF)
            break
        url, secret = profile.notify_webhook_url, profile.webhook_secret
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Mnemo-Heartbeat/1",
            "X-Mnemo-Event": WEBHOOK_EVENT,
            "X-Mnemo-Delivery": str(run.pk),
            SIGNATURE_HEADER: sign(secret, body),
        }
        if url:
            result = _post(url, body, headers, resolver)
        else:
            result = _Try("the webhook URL was removed", again=False)
        HeartbeatRun.objects.filter(pk=run.pk).update(
            webhook_attempts=F("webhook_attempts") + 1, webhook_last_error=_clip(result.error)
        )
        if not result.error:
            status = WebhookStatus.DELIVERED
            break
        if not result.again or attempt == attempts:
            break
        if wait > 0:
            sleep(wait)
        wait *= 2
    HeartbeatRun.objects.filter(pk=run.pk).update(webhook_status=status)
    run.refresh_from_db()
    return run


def _clip(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"
