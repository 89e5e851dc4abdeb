"""A heartbeat that remembers (learning/heartbeat.py): HEARTBEAT_OK is read leniently, and
the turn lists the open findings of earlier runs."""

from __future__ import annotations

import pytest

from activity.actors import Actor
from learning import heartbeat
from learning.models import RunOutcome, RunTrigger, WebhookStatus
from tests.fake_openai import ChatReply
from tests.fake_webhook import FakeWebhook
from tests.learning.test_heartbeat import CHECKLIST, FINDING, heartbeat_on, prompt_of, write
from work.models import WorkItem, WorkKind, WorkStatus
from work.services import work_create, work_delete

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


# --- the open findings in the turn -------------------------------------------------------------


def test_the_turn_lists_the_open_findings_quoted_as_data(alice, bob, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    open_finding(alice, "Old and open", "# Old and open\n\nThe ```backup``` is 3 days old.")
    open_finding(alice, "Done already", status=WorkStatus.DONE)
    open_finding(alice, "Archived already", status=WorkStatus.ARCHIVED)
    deleted = open_finding(alice, "Deleted already")
    work_delete(user=alice, pk=deleted.pk, actor=Actor.for_user(alice))
    open_finding(bob, "Bob's open finding")
    work_create(user=alice, title="A report", body="x", actor=Actor.for_user(alice))

    run_with(llm_server, alice, "HEARTBEAT_OK")

    text = prompt_of(llm_server.chat_requests[0])
    assert "do not report them again" in text
    section = text.split("## Open findings of earlier runs\n\n", 1)[1]
    # A fence longer than the body's own run of backticks: the quote cannot be ended early.
    assert section.startswith("````text\n- ")
    assert section.endswith(" Old and open: The ```backup``` is 3 days old.\n````")
    for other in ("Done already", "Archived already", "Deleted already", "Bob's", "A report"):
        assert other not in text


def test_the_list_is_bounded_in_number_and_length(alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    for number in range(12):
        open_finding(alice, f"Finding number {number}", f"# Finding {number}\n\n" + "x" * 1000)

    run_with(llm_server, alice, "HEARTBEAT_OK")

    section = prompt_of(llm_server.chat_requests[0]).split("## Open findings of earlier runs")[1]
    listed = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(listed) == heartbeat.OPEN_FINDINGS_SHOWN == 10
    # The most recent first; the two oldest are left out.
    assert "Finding number 11:" in listed[0]
    assert "Finding number 0:" not in section
    assert "Finding number 1:" not in section
    assert all(line.endswith("x" * 299 + "…") for line in listed)
    assert all(line.count("x") == heartbeat.OPEN_FINDING_CHARS - 1 for line in listed)


def test_without_open_findings_the_list_says_none(alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    run_with(llm_server, alice, "HEARTBEAT_OK")
    assert prompt_of(llm_server.chat_requests[0]).endswith(
        "## Open findings of earlier runs\n\n(none)"
    )
