"""The heartbeat (briefing/heartbeat.py): the schedule, one run, its finding and webhook,
the Settings section, Run now and the navigation count."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import threading
from zoneinfo import ZoneInfo

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from briefing import heartbeat, tasks
from briefing.models import HeartbeatRun, RunOutcome, RunTrigger, WebhookStatus
from context.services import document_write
from llm.models import LLMCall
from memory.selectors import user_zone
from memory.services import memory_upsert
from profiles.models import Profile
from profiles.services import profile_set_heartbeat, profile_update
from tests.factories import MemoryFactory
from tests.fake_openai import ChatReply
from tests.fake_webhook import FakeWebhook
from work.models import WorkItem, WorkKind, WorkStatus

pytestmark = pytest.mark.django_db

CHECKLIST = "- Is anything in my daily log due tomorrow?\n- Did a deploy fail?"
FINDING = "# The release is due tomorrow\n\nYour daily log says the **v2 release** is due."
HX = {"HX-Request": "true"}


def write(user, path: str, content: str, *, agent=None) -> None:
    actor = Actor.for_user(user) if user is not None else Actor.system()
    document_write(user=user, agent=agent, path=path, content=content, actor=actor)


def heartbeat_on(user, *, webhook_url: str = "") -> str:
    """Switch the user's heartbeat on; the webhook's secret when a URL is given."""
    return profile_set_heartbeat(user=user, enabled=True, webhook_url=webhook_url).new_secret


def events_of(user) -> list[str]:
    return list(
        ActivityEvent.objects.filter(user=user, event_type__startswith="heartbeat")
        .order_by("id")
        .values_list("event_type", flat=True)
    )


def prompt_of(request) -> str:
    return "\n".join(message["content"] for message in request.json["messages"])


@pytest.fixture
def webhook(settings):
    """A receiver on 127.0.0.1, which the admin allows exactly (address and port): its
    answers are shown on Settings like a public receiver's (lib/outbound.py Answer.shown)."""
    settings.MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT = 2.0
    with FakeWebhook() as fake:
        settings.MNEMO_OUTBOUND_ALLOW = f"127.0.0.1:{fake.port}"
        yield fake


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The webhook's backoff waits, recorded instead of slept."""
    waited: list[float] = []
    real = heartbeat.webhook_deliver
    monkeypatch.setattr(
        heartbeat,
        "webhook_deliver",
        lambda *, run_id: real(run_id=run_id, sleep=waited.append),
    )
    return waited


@pytest.fixture
def sent(monkeypatch) -> list[tuple]:
    """The heartbeat runs sent to Celery (the suite's broker has no worker)."""
    calls: list[tuple] = []
    monkeypatch.setattr(tasks.run_heartbeat, "delay", lambda *args: calls.append(args))
    return calls


# --- one run ----------------------------------------------------------------------------------


def test_heartbeat_ok_records_the_event_and_nothing_else(alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.script_chat(ChatReply("  HEARTBEAT_OK\n"))

    run = heartbeat.heartbeat_run(user=alice)

    assert run.outcome == RunOutcome.OK
    assert run.reason == ""
    assert run.work_item is None
    assert run.webhook_status == WebhookStatus.NONE
    assert events_of(alice) == [EventType.HEARTBEAT_OK]
    assert ActivityEvent.objects.get(event_type=EventType.HEARTBEAT_OK).payload == {
        "run_id": run.pk
    }
    assert WorkItem.objects.count() == 0
    assert LLMCall.objects.get().purpose == "heartbeat"
    assert run.next_due_at == run.started_at + datetime.timedelta(seconds=1800)


def test_the_turn_holds_the_checklist_working_memory_and_two_daily_logs(alice, llm_server):
    heartbeat_on(alice)
    MemoryFactory(user=alice, key="timezone", value="Pacific/Auckland")
    MemoryFactory(user=alice, key="fact:editor", value="Alice uses Helix")
    local = timezone.now().astimezone(user_zone(alice))
    today, yesterday = local.date(), local.date() - datetime.timedelta(days=1)
    before = today - datetime.timedelta(days=2)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    write(alice, f"daily/{today:%Y-%m-%d}.md", "- 09:00 today's note")
    write(alice, f"daily/{yesterday:%Y-%m-%d}.md", "- 17:00 yesterday's note")
    write(alice, f"daily/{before:%Y-%m-%d}.md", "- 10:00 an older note")
    llm_server.script_chat(ChatReply("HEARTBEAT_OK"))

    heartbeat.heartbeat_run(user=alice)

    (request,) = llm_server.chat_requests
    system, user = request.json["messages"]
    assert system["role"] == "system"
    assert "answer exactly HEARTBEAT_OK" in system["content"]
    text = user["content"]
    assert f"## Checklist (HEARTBEAT.md)\n\n{CHECKLIST}" in text
    assert "## Working memory\n\n" in text
    assert "Alice uses Helix" in text
    assert f"## Daily log {today:%Y-%m-%d} (today)\n\n- 09:00 today's note" in text
    assert f"## Daily log {yesterday:%Y-%m-%d} (yesterday)\n\n- 17:00 yesterday's note" in text
    assert "an older note" not in text
    assert "(Pacific/Auckland)" in text


def test_a_finding_makes_a_work_item_an_event_and_one_signed_webhook_post(
    alice, llm_server, webhook, waits
):
    secret = heartbeat_on(alice, webhook_url=webhook.url)
    assert len(secret) == 64
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.script_chat(ChatReply(FINDING))

    run = heartbeat.heartbeat_run(user=alice)

    item = WorkItem.objects.get()
    assert (item.user, item.kind, item.title, item.body) == (
        alice,
        WorkKind.HEARTBEAT,
        "The release is due tomorrow",
        FINDING,
    )
    assert item.status == WorkStatus.IN_PROGRESS
    assert run.outcome == RunOutcome.FINDING
    assert run.work_item == item
    assert events_of(alice) == [EventType.HEARTBEAT_FINDING]
    assert ActivityEvent.objects.get(event_type=EventType.HEARTBEAT_FINDING).payload == {
        "run_id": run.pk,
        "work_id": item.pk,
        "title": "The release is due tomorrow",
    }
    (post,) = webhook.received
    expected = "sha256=" + hmac.new(secret.encode(), post.body, hashlib.sha256).hexdigest()
    assert post.headers["x-mnemo-signature"] == expected
    assert post.headers["content-type"] == "application/json"
    assert post.headers["x-mnemo-event"] == "heartbeat.finding"
    assert post.headers["x-mnemo-delivery"] == str(run.pk)
    assert json.loads(post.body) == {
        "event": "heartbeat.finding",
        "run_id": run.pk,
        "user": "alice",
        "started_at": run.started_at.isoformat(),
        "finding": {
            "work_id": item.pk,
            "title": "The release is due tomorrow",
            "body": FINDING,
            "path": f"/work/{item.pk}/",
        },
    }
    assert (run.webhook_status, run.webhook_attempts, run.webhook_last_error) == (
        WebhookStatus.DELIVERED,
        1,
        "",
    )
    assert waits == []


def test_a_finding_without_a_webhook_posts_nothing(alice, llm_server, webhook):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.script_chat(ChatReply(FINDING))
    run = heartbeat.heartbeat_run(user=alice)
    assert run.outcome == RunOutcome.FINDING
    assert run.webhook_status == WebhookStatus.NONE
    assert webhook.received == []


def test_a_failing_webhook_is_tried_a_bounded_number_of_times_and_shown_on_settings(
    client, alice, llm_server, webhook, waits, settings
):
    settings.MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS = 3
    settings.MNEMO_HEARTBEAT_WEBHOOK_BACKOFF = 0.5
    heartbeat_on(alice, webhook_url=webhook.url)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    webhook.script(503, 500, 502, 200)
    llm_server.script_chat(ChatReply(FINDING))

    run = heartbeat.heartbeat_run(user=alice)

    assert len(webhook.received) == 3  # the fourth status is never asked for
    assert len({post.body for post in webhook.received}) == 1  # the same signed body
    assert waits == [0.5, 1.0]  # backoff, doubling; none after the last try
    assert (run.webhook_status, run.webhook_attempts, run.webhook_last_error) == (
        WebhookStatus.FAILED,
        3,
        "the receiver answered 502",
    )
    assert run.outcome == RunOutcome.FINDING  # the finding stands; only its POST failed
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert '<table class="list" id="heartbeat-webhook-failures">' in html
    assert (
        '<td data-label="Tries">3</td>\n        '
        '<td data-label="Last error">the receiver answered 502</td>'
    ) in html


def test_a_refusing_webhook_is_not_tried_again(alice, llm_server, webhook, waits):
    heartbeat_on(alice, webhook_url=webhook.url)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    webhook.script(404)
    llm_server.script_chat(ChatReply(FINDING))
    run = heartbeat.heartbeat_run(user=alice)
    assert len(webhook.received) == 1
    assert (run.webhook_status, run.webhook_attempts) == (WebhookStatus.FAILED, 1)
    assert run.webhook_last_error == "the receiver answered 404"


def test_an_unreachable_webhook_is_recorded(alice, llm_server, waits, settings):
    settings.MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS = 2
    with FakeWebhook() as gone:
        url = gone.url  # a port nobody listens on once it is closed
        settings.MNEMO_OUTBOUND_ALLOW = f"127.0.0.1:{gone.port}"
    heartbeat_on(alice, webhook_url=url)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.script_chat(ChatReply(FINDING))
    run = heartbeat.heartbeat_run(user=alice)
    assert (run.webhook_status, run.webhook_attempts) == (WebhookStatus.FAILED, 2)
    assert run.webhook_last_error == "the receiver could not be reached"


# --- who runs, and when -----------------------------------------------------------------------


def test_an_empty_checklist_or_the_heartbeat_off_runs_nothing(alice, bob, charlie, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", " \n\n ")  # blank
    write(bob, "HEARTBEAT.md", CHECKLIST)  # bob's heartbeat is off (the default)
    heartbeat_on(charlie)  # on, with no HEARTBEAT.md at all

    assert heartbeat.due_user_ids() == []
    for user in (alice, bob, charlie):
        assert heartbeat.heartbeat_run(user=user) is None
    assert HeartbeatRun.objects.count() == 0
    assert llm_server.chat_requests == []


def test_no_llm_skips_the_run_with_the_reason_and_settings_say_how_to_turn_it_on(
    client, alice, no_llm
):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)

    run = heartbeat.heartbeat_run(user=alice)

    assert run.outcome == RunOutcome.SKIPPED
    assert run.reason.startswith("No LLM is configured: set MNEMO_LLM_MODEL and")
    assert run.next_due_at == run.started_at + datetime.timedelta(seconds=1800)
    assert events_of(alice) == []
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert "No LLM is configured, so the heartbeat cannot run" in html
    assert '<strong class="outcome-skipped">Skipped</strong>' in html


def test_a_spent_budget_skips_the_run_with_the_reason(alice, llm_server):
    heartbeat_on(alice)
    profile_update(user=alice, llm_daily_tokens=1000)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    LLMCall.objects.create(
        user=alice, purpose="capture", model="m", outcome="ok", prompt_tokens=1000
    )
    run = heartbeat.heartbeat_run(user=alice)
    assert run.outcome == RunOutcome.SKIPPED
    assert run.reason.startswith("Skipped: today's LLM budget is spent (1,000 of 1,000 tokens)")
    assert llm_server.chat_requests == []


def test_two_heartbeats_for_one_user_never_run_at_once(alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    first = heartbeat.heartbeat_claim(user=alice)
    assert first is not None
    # While it runs, neither the schedule nor Run now starts another.
    assert heartbeat.heartbeat_claim(user=alice) is None
    assert heartbeat.heartbeat_run(user=alice, trigger=RunTrigger.MANUAL) is None
    assert heartbeat.due_user_ids() == []
    # And the database refuses a second running row whoever inserts it.
    with pytest.raises(IntegrityError), transaction.atomic():
        HeartbeatRun.objects.create(user=alice, started_at=timezone.now())
    assert HeartbeatRun.objects.filter(user=alice).count() == 1
    assert llm_server.chat_requests == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_for_one_user_run_once(alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    asked, release = threading.Event(), threading.Event()

    def answer(request: dict) -> str:
        asked.set()
        release.wait(10)
        return "HEARTBEAT_OK"

    llm_server.chat_default = answer
    results: list = []

    def run_in_thread() -> None:
        from django.db import connection

        try:
            results.append(heartbeat.heartbeat_run(user=alice))
        finally:
            connection.close()

    worker = threading.Thread(target=run_in_thread)
    worker.start()
    try:
        assert asked.wait(10), "the first run never asked the model"
        # The first run holds its claim while the model thinks: a second one is refused.
        assert heartbeat.heartbeat_run(user=alice) is None
        assert heartbeat.heartbeat_run(user=alice, trigger=RunTrigger.MANUAL) is None
    finally:
        release.set()
        worker.join(15)
    assert [run.outcome for run in results] == [RunOutcome.OK]
    assert len(llm_server.chat_requests) == 1
    assert HeartbeatRun.objects.filter(user=alice).count() == 1


def test_a_failed_run_is_recorded_and_retried_on_the_next_tick(alice, llm_server, sent):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.script_chat(ChatReply(status=500), ChatReply("HEARTBEAT_OK"))

    failed = heartbeat.heartbeat_run(user=alice)

    assert failed.outcome == RunOutcome.FAILED
    assert failed.reason.startswith("The model failed: the model server answered 500")
    assert events_of(alice) == [EventType.HEARTBEAT_FAILED]
    assert failed.next_due_at == failed.finished_at  # due again at once
    # The next tick sends it again, and it runs.
    assert tasks.heartbeat_tick() == 1
    assert sent == [(alice.pk,)]
    retried = heartbeat.heartbeat_run_for_user_id(alice.pk)
    assert retried.outcome == RunOutcome.OK
    assert events_of(alice) == [EventType.HEARTBEAT_FAILED, EventType.HEARTBEAT_OK]


def test_a_model_timeout_fails_the_run(alice, llm_server, settings):
    settings.MNEMO_LLM_TIMEOUT = 0.3
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.script_chat(ChatReply("late", delay=3))
    run = heartbeat.heartbeat_run(user=alice)
    assert run.outcome == RunOutcome.FAILED
    assert run.reason == "The model failed: the model did not answer within 0.3 s."


def test_failures_in_a_row_wait_longer_up_to_the_interval(alice, settings):
    settings.MNEMO_HEARTBEAT_INTERVAL = 600
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    start = timezone.now() - datetime.timedelta(hours=2)
    pauses = []
    for minute in range(6):
        at = start + datetime.timedelta(minutes=minute * 11)
        run = HeartbeatRun.objects.create(user=alice, started_at=at)
        finished = heartbeat._finish(run, RunOutcome.FAILED, reason="x", now=at)
        pauses.append((finished.next_due_at - at).total_seconds())
    assert pauses == [0, 60, 180, 420, 600, 600]


def test_a_run_left_by_a_dead_worker_is_failed_and_retried(alice, llm_server, sent):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    stale = HeartbeatRun.objects.create(
        user=alice, started_at=timezone.now() - datetime.timedelta(minutes=16)
    )
    assert heartbeat.due_user_ids() == []  # still "running"

    assert tasks.heartbeat_tick() == 1

    stale.refresh_from_db()
    assert stale.outcome == RunOutcome.FAILED
    assert "did not finish within 15 minutes" in stale.reason
    assert sent == [(alice.pk,)]


def test_the_interval_is_respected(alice, llm_server, sent, settings):
    settings.MNEMO_HEARTBEAT_INTERVAL = 1800
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.chat_default = "HEARTBEAT_OK"
    assert heartbeat.due_user_ids() == [alice.pk]  # never ran: due

    run = heartbeat.heartbeat_run(user=alice)
    later = run.started_at + datetime.timedelta(minutes=29)
    due = run.started_at + datetime.timedelta(minutes=30)

    # Every tick before the interval sends nothing, and a run sent anyway does not run.
    assert heartbeat.due_user_ids(now=later) == []
    assert tasks.heartbeat_tick() == 0
    assert heartbeat.heartbeat_claim(user=alice, now=later) is None
    assert heartbeat.heartbeat_run(user=alice) is None
    # Once it is reached, the next tick runs it, once.
    assert heartbeat.due_user_ids(now=due) == [alice.pk]
    assert heartbeat.heartbeat_claim(user=alice, now=due) is not None
    assert len(llm_server.chat_requests) == 1
    assert sent == []


def test_isolation_bobs_and_the_global_and_an_agents_checklist_never_run_for_alice(
    alice, bob, alice_agent, llm_server
):
    heartbeat_on(alice)
    write(bob, "HEARTBEAT.md", "- BOB'S SECRET CHECK")
    write(None, "HEARTBEAT.md", "- THE COMPANY'S CHECK")
    write(alice, "HEARTBEAT.md", "- THE AGENT'S OWN CHECK", agent=alice_agent)
    write(bob, "daily/2020-01-01.md", "- bob")

    # Alice has no checklist of her own: nothing runs, whoever else has one.
    assert heartbeat.due_user_ids() == []
    assert heartbeat.heartbeat_run(user=alice) is None

    write(alice, "HEARTBEAT.md", CHECKLIST)
    heartbeat_on(bob)
    llm_server.chat_default = "HEARTBEAT_OK"
    assert heartbeat.due_user_ids() == sorted([alice.pk, bob.pk])
    heartbeat.heartbeat_run(user=alice)
    text = prompt_of(llm_server.chat_requests[0])
    assert CHECKLIST in text
    for other in ("BOB'S SECRET CHECK", "THE COMPANY'S CHECK", "THE AGENT'S OWN CHECK"):
        assert other not in text
    assert HeartbeatRun.objects.filter(user=bob).count() == 0


# --- the settings, Run now and the navigation -------------------------------------------------


def test_settings_save_the_switch_and_the_webhook_and_show_the_secret_once(client, alice):
    client.force_login(alice)
    response = client.post(
        "/settings/",
        {
            "setting": "heartbeat",
            "heartbeat_enabled": "on",
            "notify_webhook_url": "https://h.example/x",
        },
        headers=HX,
    )
    html = response.content.decode()
    profile = Profile.objects.get(user=alice)
    assert response.status_code == 200
    assert html.strip().startswith('<div id="heartbeat">')
    assert (profile.heartbeat_enabled, profile.notify_webhook_url) == (True, "https://h.example/x")
    assert len(profile.webhook_secret) == 64
    assert f'<code class="token">{profile.webhook_secret}</code>' in html
    assert "no-store" in response["Cache-Control"]
    # The page later shows it masked, and saving again keeps it.
    page = client.get("/settings/").content.decode()
    assert profile.webhook_secret not in page
    assert f"<code>{profile.webhook_secret[:4]}…</code>" in page
    client.post(
        "/settings/",
        {"setting": "heartbeat", "notify_webhook_url": "http://h.example/y"},
        headers=HX,
    )
    again = Profile.objects.get(user=alice)
    assert (again.heartbeat_enabled, again.notify_webhook_url) == (False, "http://h.example/y")
    assert again.webhook_secret == profile.webhook_secret


def test_settings_rotate_the_secret(client, alice):
    old = heartbeat_on(alice, webhook_url="https://h.example/x")
    client.force_login(alice)
    response = client.post("/settings/", {"setting": "heartbeat-secret"}, headers=HX)
    new = Profile.objects.get(user=alice).webhook_secret
    assert new != old
    assert len(new) == 64
    assert f'<code class="token">{new}</code>' in response.content.decode()


@pytest.mark.parametrize(
    "url", ["ftp://h.example/x", "file:///etc/passwd", "javascript:alert(1)", "not a url"]
)
def test_settings_refuse_a_webhook_that_is_not_http(client, alice, url):
    client.force_login(alice)
    response = client.post(
        "/settings/", {"setting": "heartbeat", "heartbeat_enabled": "on", "notify_webhook_url": url}
    )
    assert response.status_code == 400
    assert "The webhook URL must be an http:// or https:// address" in response.content.decode()
    profile = Profile.objects.get(user=alice)
    assert (profile.heartbeat_enabled, profile.notify_webhook_url) == (False, "")
    assert profile.webhook_secret == ""


def test_settings_show_the_last_run_and_the_next(client, alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    llm_server.script_chat(ChatReply(FINDING))
    run = heartbeat.heartbeat_run(user=alice)
    memory_upsert(user=alice, key="timezone", value="Asia/Tokyo", actor=Actor.for_user(alice))
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert '<strong class="outcome-finding">Finding</strong>' in html
    assert f'<a href="/work/{run.work_item_id}/">The release is due tomorrow</a>' in html
    local = run.next_due_at.astimezone(ZoneInfo("Asia/Tokyo"))  # the user's zone, not UTC
    assert f"{local:%b} {local.day}, {local:%H:%M}</time>" in html
    assert "(then every 30 minutes)" in html


def test_run_now_sends_a_run_that_runs_once(client, alice, llm_server, sent):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    client.force_login(alice)
    response = client.post("/heartbeat/run/", headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.strip().startswith('<section id="heartbeat-status"')
    assert "Your checklist is running" in html
    ((user_id, requested_at),) = sent
    assert user_id == alice.pk

    llm_server.script_chat(ChatReply("HEARTBEAT_OK"))
    tasks.run_heartbeat(user_id, requested_at)
    tasks.run_heartbeat(user_id, requested_at)  # the same message delivered twice

    run = HeartbeatRun.objects.get(user=alice)
    assert (run.trigger, run.outcome) == (RunTrigger.MANUAL, RunOutcome.OK)
    assert len(llm_server.chat_requests) == 1


def test_run_now_without_a_checklist_is_refused(client, alice, sent):
    heartbeat_on(alice)
    client.force_login(alice)
    response = client.post("/heartbeat/run/")
    assert response.status_code == 302
    assert sent == []
    assert "HEARTBEAT.md is empty or missing" in client.get("/settings/").content.decode()


def test_run_now_needs_a_post_and_a_login(client, alice, sent):
    assert client.post("/heartbeat/run/").status_code == 302  # to the login page
    client.force_login(alice)
    assert client.get("/heartbeat/run/").status_code == 405
    assert sent == []


def test_the_navigation_counts_unseen_findings_until_opened(client, alice, bob, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    # Two different findings (the same one again is not new: test_heartbeat_repeats.py).
    llm_server.script_chat(ChatReply(FINDING), ChatReply("# A deploy failed\n\nThe api's."))
    for _ in range(2):
        run = heartbeat.heartbeat_run(user=alice, trigger=RunTrigger.MANUAL)
        assert run.outcome == RunOutcome.FINDING
    client.force_login(alice)
    html = client.get("/activity/").content.decode()
    assert (
        '<a id="nav-work" href="/heartbeat/findings/" aria-label="Work, 2 new heartbeat '
        'findings">Work <span class="badge" aria-hidden="true">2</span></a>'
    ) in html
    client.force_login(bob)  # bob sees none of alice's
    assert '<a id="nav-work" href="/work/">Work</a>' in client.get("/activity/").content.decode()

    client.force_login(alice)
    response = client.get("/heartbeat/findings/")
    assert response.status_code == 302
    assert response["Location"] == "/work/?kind=heartbeat"
    assert '<a id="nav-work" href="/work/">Work</a>' in client.get("/activity/").content.decode()
    assert heartbeat.unseen_findings_count(user=alice) == 0
