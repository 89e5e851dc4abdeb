"""A heartbeat that remembers (learning/heartbeat.py): HEARTBEAT_OK is read leniently."""

from __future__ import annotations

import pytest

from activity.actors import Actor
from learning import heartbeat
from learning.models import RunOutcome, RunTrigger, WebhookStatus
from tests.fake_openai import ChatReply
from tests.fake_webhook import FakeWebhook
from tests.learning.test_heartbeat import CHECKLIST, FINDING, heartbeat_on, write
from work.models import WorkItem, WorkKind, WorkStatus
from work.services import work_create

pytestmark = pytest.mark.django_db

OTHER_FINDING = "# A deploy failed\n\nThe api deploy of 09:00 failed."


@pytest.fixture
def webhook(settings):
    settings.MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT = 2.0
    with FakeWebhook() as fake:
        settings.MNEMO_OUTBOUND_ALLOW = f"127.0.0.1:{fake.port}"
        yield fake


def run_with(llm_server, user, answer: str):
    llm_server.script_chat(ChatReply(answer))
    run = heartbeat.heartbeat_run(user=user, trigger=RunTrigger.MANUAL)
    assert run is not None
    return run


def open_finding(user, title: str, body: str = "", *, status=WorkStatus.IN_PROGRESS):
    return work_create(
        user=user,
        title=title,
        body=body or f"# {title}",
        actor=Actor.system(),
        kind=WorkKind.HEARTBEAT,
        status=status,
    )


# --- what counts as OK ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "HEARTBEAT_OK",
        "HEARTBEAT_OK.",
        "heartbeat_ok",
        "  Heartbeat_Ok!\n",
        "**HEARTBEAT_OK**",
        "`HEARTBEAT_OK`",
        "_HEARTBEAT_OK_",
        "HEARTBEAT\\_OK",  # Markdown's escaped underscore
        '"HEARTBEAT_OK"',
        "All good — HEARTBEAT_OK",
        "HEARTBEAT_OK: nothing on the checklist needs you today.",
        "HEARTBEAT_OK\n\nNothing is due.",
        "One two three four five six seven eight nine ten eleven twelve. HEARTBEAT_OK",
    ],
)
def test_ok_is_the_token_as_a_word_with_at_most_a_one_line_remark(answer):
    assert heartbeat.is_ok(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "HEARTBEAT",
        "HEARTBEAT_OKAY",
        "NOT_HEARTBEAT_OK",
        "HEARTBEAT_OK_NOT",
        "HEARTBEATOK",
        # one word over the remark's limit
        "One two three four five six seven eight nine ten eleven twelve thirteen. HEARTBEAT_OK",
        # a title with an explanation under it: a finding that also says the token
        "# A deploy failed\n\nThe api deploy failed at 09:00.\n\nHEARTBEAT_OK",
        FINDING + "\n\nEverything else on the checklist is HEARTBEAT_OK.",
    ],
)
def test_a_text_that_says_more_than_the_token_is_a_finding(answer):
    assert not heartbeat.is_ok(answer)


@pytest.mark.parametrize("answer", ["HEARTBEAT_OK.", "All good — HEARTBEAT_OK", "heartbeat_ok"])
def test_a_lenient_ok_records_ok_and_makes_no_work_item(alice, llm_server, webhook, answer):
    heartbeat_on(alice, webhook_url=webhook.url)
    write(alice, "HEARTBEAT.md", CHECKLIST)

    run = run_with(llm_server, alice, answer)

    assert (run.outcome, run.work_item, run.webhook_status) == (
        RunOutcome.OK,
        None,
        WebhookStatus.NONE,
    )
    assert WorkItem.objects.count() == 0
    assert webhook.received == []


def test_a_long_finding_that_mentions_the_token_is_still_a_finding(alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    answer = FINDING + "\n\nThe rest of the checklist is HEARTBEAT_OK."

    run = run_with(llm_server, alice, answer)

    assert run.outcome == RunOutcome.FINDING
    item = WorkItem.objects.get()
    assert (item.title, item.body) == ("The release is due tomorrow", answer)
