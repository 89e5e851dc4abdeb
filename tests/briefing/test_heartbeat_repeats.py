"""A heartbeat that remembers (briefing/heartbeat.py): HEARTBEAT_OK is read leniently, the
turn lists the open findings of earlier runs, and a finding with an open one's title is
noted on it instead of making a new Work item and another webhook POST."""

from __future__ import annotations

import datetime

import pytest

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from briefing import heartbeat, heartbeat_findings
from briefing.models import RunOutcome, RunTrigger, WebhookStatus
from tests.briefing.test_heartbeat import CHECKLIST, FINDING, heartbeat_on, prompt_of, write
from tests.fake_openai import ChatReply
from tests.fake_webhook import FakeWebhook
from work.models import WorkItem, WorkKind, WorkStatus
from work.services import work_create, work_delete, work_seen_again, work_update

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
    assert heartbeat_findings.is_ok(answer)


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
    assert not heartbeat_findings.is_ok(answer)


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
    assert "do not report them again" in " ".join(text.split())
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
    assert len(listed) == heartbeat_findings.OPEN_FINDINGS_SHOWN == 10
    # The most recent first; the two oldest are left out.
    assert "Finding number 11:" in listed[0]
    assert "Finding number 0:" not in section
    assert "Finding number 1:" not in section
    assert all(line.endswith("x" * 299 + "…") for line in listed)
    assert all(line.count("x") == heartbeat_findings.OPEN_FINDING_CHARS - 1 for line in listed)


def test_without_open_findings_the_list_says_none(alice, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    run_with(llm_server, alice, "HEARTBEAT_OK")
    assert prompt_of(llm_server.chat_requests[0]).endswith(
        "## Open findings of earlier runs\n\n(none)"
    )


# --- the same finding again ----------------------------------------------------------------------


def test_the_same_finding_again_updates_the_open_item_without_a_webhook(
    client, alice, llm_server, webhook
):
    heartbeat_on(alice, webhook_url=webhook.url)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    first = run_with(llm_server, alice, FINDING)
    item = first.work_item
    WorkItem.objects.filter(pk=item.pk).update(
        updated_at=item.updated_at - datetime.timedelta(hours=1)
    )
    before = WorkItem.objects.get(pk=item.pk).updated_at
    assert len(webhook.received) == 1

    # The same title in another case and punctuation, with other words under it.
    again = run_with(llm_server, alice, "## THE RELEASE IS DUE TOMORROW!\n\nStill due.")

    assert WorkItem.objects.count() == 1
    assert len(webhook.received) == 1  # no second POST
    assert (again.outcome, again.work_item_id, again.webhook_status) == (
        RunOutcome.FINDING,
        item.pk,
        WebhookStatus.NONE,
    )
    assert again.reason == heartbeat_findings.SEEN_AGAIN_REASON
    item.refresh_from_db()
    assert item.body == FINDING  # what the user read stays
    assert item.metadata == {
        "heartbeat_run": first.pk,
        "seen_again": 1,
        "last_seen_run": again.pk,
    }
    assert item.updated_at > before
    finding_events = ActivityEvent.objects.filter(event_type=EventType.HEARTBEAT_FINDING)
    assert [event.payload for event in finding_events.order_by("id")] == [
        {"run_id": first.pk, "work_id": item.pk, "title": "The release is due tomorrow"},
        {
            "run_id": again.pk,
            "work_id": item.pk,
            "title": "The release is due tomorrow",
            "seen_again": True,
        },
    ]
    assert ActivityEvent.objects.get(event_type=EventType.WORK_UPDATED).payload["fields"] == [
        "seen_again"
    ]
    # Not new for the navigation: the count is the first finding's, once.
    assert heartbeat.unseen_findings_count(user=alice) == 1

    run_with(llm_server, alice, FINDING)
    item.refresh_from_db()
    assert item.metadata["seen_again"] == 2
    client.force_login(alice)
    page = client.get(f"/work/{item.pk}/").content.decode()
    assert (
        '<div id="finding-seen-again"><dt>Seen again</dt><dd>2 times by later runs</dd></div>'
    ) in page
    assert "Heartbeat finding seen again:" in client.get("/activity/").content.decode()


def test_a_different_finding_still_makes_a_new_item_and_a_webhook(alice, llm_server, webhook):
    heartbeat_on(alice, webhook_url=webhook.url)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    first = run_with(llm_server, alice, FINDING)

    # About the same subject, but not the same title: its own alert.
    second = run_with(llm_server, alice, "# The release is due today\n\nIt moved.")
    third = run_with(llm_server, alice, OTHER_FINDING)

    items = {run.work_item_id for run in (first, second, third)}
    assert len(items) == WorkItem.objects.count() == 3
    assert len(webhook.received) == 3
    assert [run.webhook_status for run in (first, second, third)] == [WebhookStatus.DELIVERED] * 3
    assert heartbeat.unseen_findings_count(user=alice) == 3


def test_a_closed_or_deleted_finding_seen_again_is_new(alice, llm_server, webhook):
    heartbeat_on(alice, webhook_url=webhook.url)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    first = run_with(llm_server, alice, FINDING)
    work_update(user=alice, pk=first.work_item_id, actor=Actor.for_user(alice), status="done")

    second = run_with(llm_server, alice, FINDING)
    work_delete(user=alice, pk=second.work_item_id, actor=Actor.for_user(alice))
    third = run_with(llm_server, alice, FINDING)

    assert len({first.work_item_id, second.work_item_id, third.work_item_id}) == 3
    assert len(webhook.received) == 3
    assert all("seen_again" not in item.metadata for item in WorkItem.objects.filter(user=alice))


def test_another_users_open_finding_is_never_the_same(alice, bob, llm_server):
    heartbeat_on(alice)
    write(alice, "HEARTBEAT.md", CHECKLIST)
    bobs = open_finding(bob, "The release is due tomorrow")

    run = run_with(llm_server, alice, FINDING)

    assert run.work_item.user == alice
    assert run.work_item_id != bobs.pk
    bobs.refresh_from_db()
    assert "seen_again" not in bobs.metadata


def test_same_title_ignores_case_spacing_and_punctuation_only():
    assert heartbeat_findings.same_title(
        "The release is due tomorrow", "the  release is due tomorrow!"
    )
    assert heartbeat_findings.same_title("Deploy failed: api", "DEPLOY FAILED — API.")
    assert not heartbeat_findings.same_title("The api deploy failed", "The web deploy failed")
    assert not heartbeat_findings.same_title("The release is due", "The release is due tomorrow")
    assert not heartbeat_findings.same_title("—", "…")  # no words: never the same


def test_work_seen_again_counts_only_on_an_open_finding(alice):
    finding = open_finding(alice, "Backup is old")
    WorkItem.objects.filter(pk=finding.pk).update(metadata={"seen_again": "many", "from": "x"})
    report = work_create(user=alice, title="A report", body="x", actor=Actor.for_user(alice))

    seen = work_seen_again(user=alice, pk=finding.pk, actor=Actor.system(), run_id=7)

    # An imported item's odd count restarts; the rest of its metadata stays.
    assert seen.metadata == {"seen_again": 1, "last_seen_run": 7, "from": "x"}
    assert work_seen_again(user=alice, pk=report.pk, actor=Actor.system(), run_id=8) is None
    report.refresh_from_db()
    assert report.metadata == {}
