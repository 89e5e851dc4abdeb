"""The heartbeat's webhook through lib/outbound.py: refused inside the network when saved and
when sent, each allowed exception delivers, rebinding and redirects lead nowhere, failures
inside say only that they failed, and an off heartbeat neither runs nor sends."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re

import pytest
from django.utils import timezone

from briefing import heartbeat, heartbeat_webhook, tasks
from briefing.heartbeat import SWITCHED_OFF_RUN
from briefing.heartbeat_webhook import INSIDE_FAILURE, SWITCHED_OFF
from briefing.models import HeartbeatRun, RunOutcome, WebhookStatus
from lib.errors import InvalidInput
from lib.outbound import INSIDE_MESSAGE
from profiles.models import Profile
from profiles.services import profile_set_heartbeat
from tests.briefing.test_heartbeat import CHECKLIST, FINDING, HX, heartbeat_on, write
from tests.fake_openai import ChatReply
from tests.fake_webhook import FakeWebhook
from tests.lib.test_outbound import PUBLIC_V4, SSRF_URLS, RawServer, resolving_to, silent

pytestmark = pytest.mark.django_db

ISSUE_URLS = SSRF_URLS[:7]  # the list in issue 25, in its order


def pending_run(user) -> HeartbeatRun:
    """A finished finding whose webhook POST is due (as heartbeat._finish leaves it)."""
    now = timezone.now()
    return HeartbeatRun.objects.create(
        user=user,
        started_at=now,
        finished_at=now,
        next_due_at=now,
        outcome=RunOutcome.FINDING,
        webhook_status=WebhookStatus.PENDING,
    )


def deliver(run: HeartbeatRun, **kwargs) -> HeartbeatRun:
    kwargs.setdefault("sleep", lambda seconds: None)
    return heartbeat_webhook.webhook_deliver(run_id=run.pk, **kwargs)


@pytest.fixture
def canary():
    """A receiver on 127.0.0.1 that must get nothing."""
    with FakeWebhook() as fake:
        yield fake


# --- refused by default, when saved and when sent ------------------------------------------------


def test_every_ssrf_url_is_refused_when_saved(alice):
    profile_set_heartbeat(user=alice, enabled=False, webhook_url="")
    accepted, fields = [], set()
    for url in SSRF_URLS:
        try:
            profile_set_heartbeat(
                user=alice, enabled=True, webhook_url=url, resolver=resolving_to(["10.0.0.1"])
            )
        except InvalidInput as error:
            fields.add(error.field)
            continue
        accepted.append(url)
    assert accepted == []
    assert fields == {"notify_webhook_url"}
    profile = Profile.objects.get(user=alice)
    assert (profile.heartbeat_enabled, profile.notify_webhook_url, profile.webhook_secret) == (
        False,
        "",
        "",
    )


@pytest.mark.parametrize("url", ISSUE_URLS)
def test_the_issues_urls_are_refused_with_the_reason(alice, url):
    with pytest.raises(InvalidInput) as refused:
        profile_set_heartbeat(user=alice, enabled=True, webhook_url=url)
    if "@" in url:
        assert refused.value.message == "The URL may not contain a user name or password."
    else:
        assert refused.value.message == INSIDE_MESSAGE
        assert "addresses inside the network are not allowed; an admin can allow them with " in (
            refused.value.message
        )
        assert "MNEMO_OUTBOUND_ALLOW" in refused.value.message


def test_every_ssrf_url_saved_before_the_guard_is_refused_when_sent(alice, canary):
    """URLs stored before this check existed (or by hand in the database) are checked
    again at every POST: none is sent, none is tried twice."""
    heartbeat_on(alice)
    sent = []
    for url in SSRF_URLS:
        Profile.objects.filter(user=alice).update(notify_webhook_url=url, webhook_secret="s")
        run = deliver(pending_run(alice), resolver=resolving_to([canary.host]))
        if run.webhook_status != WebhookStatus.FAILED or not run.webhook_last_error.startswith(
            "Not sent: "
        ):
            sent.append(url)
        assert run.webhook_attempts == 1
    assert sent == []
    assert canary.received == []


# --- allowed by the admin ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allow", "host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.0/8", "127.0.0.1"),
        ("127.0.0.1:{port}", "127.0.0.1"),
        ("localhost:{port}", "localhost"),  # a trusted name, looked up by the system
        ("10.0.0.0/8, hooks.corp", "hooks.corp"),
    ],
)
def test_each_allowed_exception_receives_the_signed_post(alice, llm_server, settings, allow, host):
    with FakeWebhook() as receiver:
        settings.MNEMO_OUTBOUND_ALLOW = allow.format(port=receiver.port)
        resolver = resolving_to(["127.0.0.1"]) if host == "hooks.corp" else None
        url = f"http://{host}:{receiver.port}/hooks/mnemo"
        secret = profile_set_heartbeat(
            user=alice, enabled=True, webhook_url=url, resolver=resolver
        ).new_secret
        write(alice, "HEARTBEAT.md", CHECKLIST)
        llm_server.script_chat(ChatReply(FINDING))
        run = heartbeat.heartbeat_claim(user=alice)
        heartbeat._execute(run)

        run = deliver(run, resolver=resolver)

        assert (run.webhook_status, run.webhook_attempts, run.webhook_last_error) == (
            WebhookStatus.DELIVERED,
            1,
            "",
        )
        (post,) = receiver.received
        expected = "sha256=" + hmac.new(secret.encode(), post.body, hashlib.sha256).hexdigest()
        assert post.headers["x-mnemo-signature"] == expected
        assert post.headers["host"] == f"{host}:{receiver.port}"


def test_allowed_once_then_no_longer_is_refused_when_sent(alice, settings, canary):
    settings.MNEMO_OUTBOUND_ALLOW = "127.0.0.1"
    heartbeat_on(alice, webhook_url=canary.url)
    settings.MNEMO_OUTBOUND_ALLOW = ""  # the admin takes it back

    run = deliver(pending_run(alice))

    assert (run.webhook_status, run.webhook_attempts) == (WebhookStatus.FAILED, 1)
    assert run.webhook_last_error == f"Not sent: {INSIDE_MESSAGE}"
    assert canary.received == []


# --- rebinding, redirects ----------------------------------------------------------------------


def test_dns_rebinding_public_when_saved_private_when_sent_reaches_nothing(alice, canary):
    resolver = resolving_to([PUBLIC_V4], [canary.host])
    url = f"http://rebind.example:{canary.port}/hooks/mnemo"
    profile_set_heartbeat(user=alice, enabled=True, webhook_url=url, resolver=resolver)

    run = deliver(pending_run(alice), resolver=resolver)

    assert resolver.asked == ["rebind.example", "rebind.example"]
    assert (run.webhook_status, run.webhook_attempts) == (WebhookStatus.FAILED, 1)
    assert run.webhook_last_error == f"Not sent: {INSIDE_MESSAGE}"
    assert canary.received == []


def test_a_redirect_is_not_followed(alice, settings, canary):
    with FakeWebhook() as receiver:
        settings.MNEMO_OUTBOUND_ALLOW = f"127.0.0.1:{receiver.port},127.0.0.1:{canary.port}"
        receiver.script(307)
        receiver.redirect_to = canary.url
        heartbeat_on(alice, webhook_url=receiver.url)

        run = deliver(pending_run(alice))

        assert len(receiver.received) == 1
    assert (run.webhook_status, run.webhook_attempts) == (WebhookStatus.FAILED, 1)
    assert run.webhook_last_error == "the receiver answered 307"
    assert canary.received == []


# --- what a failure inside shows ---------------------------------------------------------------


def test_failures_inside_say_only_that_they_failed(client, alice, settings, caplog):
    """Allowed through a range, three inside services that answer 403, refuse the
    connection, and never answer look the same on Settings: one sentence, as many tries."""
    settings.MNEMO_OUTBOUND_ALLOW = "127.0.0.0/8"
    settings.MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS = 3
    settings.MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT = 0.3
    heartbeat_on(alice)
    with FakeWebhook() as closed:
        refusing = closed.url  # nobody listens there once it is closed
    seen = []
    caplog.set_level(logging.WARNING, logger="briefing.heartbeat_webhook")
    with FakeWebhook() as forbidding, RawServer(silent) as hanging:
        forbidding.script(403, 403, 403)
        for url in (forbidding.url, refusing, hanging.url):
            Profile.objects.filter(user=alice).update(notify_webhook_url=url)
            run = deliver(pending_run(alice))
            seen.append((run.webhook_status, run.webhook_attempts, run.webhook_last_error))
        assert len(forbidding.received) == 3
    assert seen == [(WebhookStatus.FAILED, 3, INSIDE_FAILURE)] * 3

    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert html.count(f'<td data-label="Last error">{INSIDE_FAILURE}</td>') == 3
    failures = html.split('id="heartbeat-webhook-failures"')[1]
    # Without the times, whose digits may hold "403" (17:41:01.604033).
    failures = re.sub(r"<time[^>]*>.*?</time>", "", failures, flags=re.DOTALL)
    for detail in ("403", "refused", "Refused", "reached", "in time", "within", "Errno"):
        assert detail not in failures
    # The admin finds the details in the server's log.
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "answered 403" in logged
    assert "ConnectionRefusedError" in logged
    assert "TimeoutError" in logged


def test_a_public_or_exactly_allowed_receivers_answer_is_shown(alice, settings):
    with FakeWebhook() as receiver:
        settings.MNEMO_OUTBOUND_ALLOW = f"127.0.0.1:{receiver.port}"
        receiver.script(403)
        heartbeat_on(alice, webhook_url=receiver.url)
        run = deliver(pending_run(alice))
    assert (run.webhook_attempts, run.webhook_last_error) == (1, "the receiver answered 403")


# --- an off heartbeat neither runs nor sends ---------------------------------------------------


def test_run_now_is_refused_while_the_heartbeat_is_off(client, alice, llm_server, monkeypatch):
    sent: list[tuple] = []
    monkeypatch.setattr(tasks.run_heartbeat, "delay", lambda *args: sent.append(args))
    write(alice, "HEARTBEAT.md", CHECKLIST)
    client.force_login(alice)

    response = client.post("/heartbeat/run/", headers=HX)

    html = response.content.decode()
    assert response.status_code == 200
    assert f'<p class="error" role="alert">{SWITCHED_OFF_RUN}</p>' in html
    assert '<button type="submit" class="secondary" disabled>Run now</button>' in html
    assert sent == []
    # A Run now sent while it was on, and arriving after it was switched off, runs nothing.
    tasks.run_heartbeat(alice.pk, timezone.now().isoformat())
    assert HeartbeatRun.objects.count() == 0
    assert llm_server.chat_requests == []


def test_a_delivery_pending_when_switched_off_is_not_sent(alice, llm_server, webhook_on):
    receiver, _ = webhook_on
    profile_set_heartbeat(user=alice, enabled=False, webhook_url=receiver.url)

    run = deliver(pending_run(alice))

    assert (run.webhook_status, run.webhook_attempts, run.webhook_last_error) == (
        WebhookStatus.FAILED,
        0,
        SWITCHED_OFF,
    )
    assert receiver.received == []


def test_switched_off_between_tries_stops_the_tries(alice, webhook_on):
    receiver, _ = webhook_on
    receiver.script(503, 503, 503)

    def switch_off(seconds: float) -> None:
        profile_set_heartbeat(user=alice, enabled=False, webhook_url=receiver.url)

    run = deliver(pending_run(alice), sleep=switch_off)

    assert len(receiver.received) == 1
    assert (run.webhook_status, run.webhook_attempts, run.webhook_last_error) == (
        WebhookStatus.FAILED,
        1,
        SWITCHED_OFF,
    )


@pytest.fixture
def webhook_on(alice, settings):
    with FakeWebhook() as receiver:
        settings.MNEMO_OUTBOUND_ALLOW = f"127.0.0.1:{receiver.port}"
        settings.MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS = 3
        yield receiver, heartbeat_on(alice, webhook_url=receiver.url)
