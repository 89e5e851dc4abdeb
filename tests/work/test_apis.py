"""The work tools over HTTP: create_work, list_work, get_work and update_work, with their
events, validation, isolation between users and authentication."""

import pytest

from activity.actors import Actor, ActorKind
from activity.models import ActivityEvent, EventType
from tests.factories import AgentFactory
from work.models import MAX_BODY_LENGTH, WorkItem, WorkKind, WorkStatus
from work.services import work_create

pytestmark = pytest.mark.django_db


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


def work_events(user):
    return list(
        ActivityEvent.objects.filter(
            user=user, event_type__in=[EventType.WORK_CREATED, EventType.WORK_UPDATED]
        ).order_by("id")
    )


@pytest.fixture
def alice_report(alice, alice_agent):
    return work_create(
        user=alice,
        title="Weekly report",
        body="# Findings\n\n- one\n",
        actor=Actor.for_agent(alice_agent),
        tags=["weekly"],
    )


@pytest.fixture
def alice_finding(alice):
    return work_create(
        user=alice,
        title="Invoice overdue",
        body="The **ACME** invoice is 10 days overdue.",
        kind=WorkKind.HEARTBEAT,
        actor=Actor.system(),
    )


# --- create_work ------------------------------------------------------------------------


def test_create_work_stores_the_item_and_its_event(call_tool, alice, alice_agent, alice_token):
    body = "# Pricing\n\n<script>alert(1)</script>\n- Acme: $29\n"
    response = call_tool(
        alice_token,
        "create_work",
        {"title": " Pricing, June ", "body": body, "kind": "report", "tags": ["Pricing", "q2"]},
    )

    assert response.status_code == 201, response.content
    item = WorkItem.objects.get(user=alice)
    work = response.json()["work"]
    assert {key: work[key] for key in work if not key.endswith("_at")} == {
        "id": item.pk,
        "title": "Pricing, June",
        "kind": "report",
        "status": "done",
        "tags": ["pricing", "q2"],
        "agent": "assistant",
        "url": f"/work/{item.pk}/",
        "body": body,
    }
    assert (item.title, item.body, item.agent, item.tags) == (
        "Pricing, June",
        body,  # stored as sent; the page sanitizes it when it renders
        alice_agent,
        ["pricing", "q2"],
    )
    [event] = work_events(alice)
    assert event.event_type == EventType.WORK_CREATED
    assert event.payload == {"work_id": item.pk, "title": "Pricing, June", "kind": "report"}
    assert (event.actor_type, event.actor_agent) == (ActorKind.AGENT, alice_agent)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"body": "x", "kind": "report"}, "title"),
        ({"title": "  ", "body": "x", "kind": "report"}, "title"),
        ({"title": "t" * 201, "body": "x", "kind": "report"}, "title"),
        ({"title": "T", "kind": "report"}, "body"),
        ({"title": "T", "body": "x" * (MAX_BODY_LENGTH + 1), "kind": "report"}, "body"),
        ({"title": "T", "body": "a\x00b", "kind": "report"}, "body"),
        ({"title": "T", "body": "x"}, "kind"),
        ({"title": "T", "body": "x", "kind": "heartbeat"}, "kind"),
        ({"title": "T", "body": "x", "kind": "memo"}, "kind"),
        ({"title": "T", "body": "x", "kind": "report", "tags": ["x" * 101]}, "tags"),
        ({"title": "T", "body": "x", "kind": "report", "tags": "pricing"}, "tags"),
        (
            {"title": "T", "body": "x", "kind": "report", "tags": [str(n) for n in range(11)]},
            "tags",
        ),
        ({"title": 7, "body": "x", "kind": "report"}, "title"),
        ({"title": "T", "body": "x", "kind": "report", "status": "done"}, "status"),
    ],
)
def test_create_work_refuses_bad_input(call_tool, alice, alice_token, payload, field):
    response = call_tool(alice_token, "create_work", payload)

    assert response.status_code == 400, response.content
    assert error(response)["code"] == "invalid"
    assert error(response)["field"] == field
    assert not WorkItem.objects.exists()
    assert work_events(alice) == []


# --- list_work --------------------------------------------------------------------------


def test_list_work_is_newest_first_without_bodies(
    call_tool, alice_token, alice_report, alice_finding
):
    response = call_tool(alice_token, "list_work")

    assert response.status_code == 200
    results = response.json()["results"]
    assert [row["id"] for row in results] == [alice_finding.pk, alice_report.pk]
    assert results[0]["kind"] == "heartbeat"
    assert results[0]["agent"] is None
    assert results[1]["tags"] == ["weekly"]
    assert all("body" not in row for row in results)


def test_list_work_filters_by_kind_and_limits(call_tool, alice, alice_token, alice_finding):
    for number in range(3):
        work_create(user=alice, title=f"Report {number}", body="x", actor=Actor.for_user(alice))

    findings = call_tool(alice_token, "list_work", {"kind": "heartbeat"}).json()["results"]
    two = call_tool(alice_token, "list_work", {"kind": "report", "limit": 2}).json()["results"]

    assert [row["id"] for row in findings] == [alice_finding.pk]
    assert [row["title"] for row in two] == ["Report 2", "Report 1"]


def test_list_work_defaults_to_twenty(call_tool, alice, alice_token):
    for number in range(25):
        work_create(user=alice, title=f"Report {number}", body="x", actor=Actor.for_user(alice))

    results = call_tool(alice_token, "list_work").json()["results"]

    assert len(results) == 20
    assert results[0]["title"] == "Report 24"


@pytest.mark.parametrize(
    ("payload", "field"),
    [({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"kind": "memo"}, "kind")],
)
def test_list_work_refuses_bad_input(call_tool, alice_token, payload, field):
    response = call_tool(alice_token, "list_work", payload)
    assert response.status_code == 400
    assert error(response)["field"] == field


# --- get_work ---------------------------------------------------------------------------


def test_get_work_returns_the_body(call_tool, alice_token, alice_report):
    response = call_tool(alice_token, "get_work", {"id": alice_report.pk})

    assert response.status_code == 200
    work = response.json()["work"]
    assert (work["id"], work["title"], work["body"]) == (
        alice_report.pk,
        "Weekly report",
        "# Findings\n\n- one\n",
    )


def test_get_work_missing_is_404(call_tool, alice_token):
    response = call_tool(alice_token, "get_work", {"id": 999999})
    assert response.status_code == 404
    assert error(response) == {
        "code": "not_found",
        "message": "No work item with id 999999.",
        "field": "id",
    }


def test_get_work_refuses_a_non_number(call_tool, alice_token):
    response = call_tool(alice_token, "get_work", {"id": "7"})
    assert response.status_code == 400
    assert error(response)["field"] == "id"


# --- update_work ------------------------------------------------------------------------


def test_update_work_changes_the_fields_given_and_records_them(
    call_tool, alice, alice_token, alice_report
):
    response = call_tool(
        alice_token,
        "update_work",
        {"id": alice_report.pk, "body": "# Findings\n\n- two\n", "status": "in_progress"},
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "updated"
    assert body["changed"] == ["body", "status"]
    assert body["work"]["body"] == "# Findings\n\n- two\n"
    alice_report.refresh_from_db()
    assert (alice_report.title, alice_report.body, alice_report.status, alice_report.tags) == (
        "Weekly report",
        "# Findings\n\n- two\n",
        WorkStatus.IN_PROGRESS,
        ["weekly"],
    )
    event = work_events(alice)[-1]
    assert event.event_type == EventType.WORK_UPDATED
    assert event.payload == {
        "work_id": alice_report.pk,
        "title": "Weekly report",
        "fields": ["body", "status"],
    }


def test_update_work_with_the_same_values_changes_nothing(
    call_tool, alice, alice_token, alice_report
):
    before = alice_report.updated_at
    response = call_tool(
        alice_token,
        "update_work",
        {"id": alice_report.pk, "title": "Weekly report", "tags": ["WEEKLY"]},
    )

    assert response.status_code == 200
    assert (response.json()["status"], response.json()["changed"]) == ("unchanged", [])
    alice_report.refresh_from_db()
    assert alice_report.updated_at == before
    assert [event.event_type for event in work_events(alice)] == [EventType.WORK_CREATED]


def test_any_agent_of_the_user_may_update_and_is_named(call_tool, alice, alice_report):
    from profiles.services import token_create

    other = AgentFactory(user=alice, name="researcher")
    response = call_tool(
        token_create(agent=other).raw, "update_work", {"id": alice_report.pk, "tags": []}
    )

    assert response.status_code == 200
    alice_report.refresh_from_db()
    assert alice_report.tags == []
    assert alice_report.agent.name == "assistant"  # who wrote it stays
    assert work_events(alice)[-1].actor_agent == other


def test_a_heartbeat_finding_keeps_its_kind_but_takes_a_status(
    call_tool, alice, alice_token, alice_finding
):
    refused = call_tool(alice_token, "update_work", {"id": alice_finding.pk, "kind": "report"})
    done = call_tool(alice_token, "update_work", {"id": alice_finding.pk, "status": "done"})

    assert refused.status_code == 400
    assert error(refused)["field"] == "kind"
    assert done.status_code == 200
    alice_finding.refresh_from_db()
    assert (alice_finding.kind, alice_finding.status) == (WorkKind.HEARTBEAT, WorkStatus.DONE)


def test_nothing_becomes_a_heartbeat_finding(call_tool, alice_token, alice_report):
    response = call_tool(alice_token, "update_work", {"id": alice_report.pk, "kind": "heartbeat"})
    assert response.status_code == 400
    alice_report.refresh_from_db()
    assert alice_report.kind == WorkKind.REPORT


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"title": ""}, "title"),
        ({"status": "finished"}, "status"),
        ({"tags": ["a", "x" * 101]}, "tags"),
        ({"body": "x" * (MAX_BODY_LENGTH + 1)}, "body"),
        ({"agent": "other"}, "agent"),
    ],
)
def test_update_work_refuses_bad_input(call_tool, alice, alice_token, alice_report, payload, field):
    response = call_tool(alice_token, "update_work", {"id": alice_report.pk, **payload})

    assert response.status_code == 400
    assert error(response)["field"] == field
    alice_report.refresh_from_db()
    assert (alice_report.title, alice_report.status, alice_report.tags) == (
        "Weekly report",
        WorkStatus.DONE,
        ["weekly"],
    )
    assert len(work_events(alice)) == 1


# --- isolation and authentication --------------------------------------------------------


def test_bob_cannot_see_or_change_alices_work(call_tool, alice, bob, bob_token, alice_report):
    listed = call_tool(bob_token, "list_work").json()["results"]
    read = call_tool(bob_token, "get_work", {"id": alice_report.pk})
    changed = call_tool(bob_token, "update_work", {"id": alice_report.pk, "title": "Mine now"})
    created = call_tool(bob_token, "create_work", {"title": "Bob's", "body": "x", "kind": "draft"})

    assert listed == []
    assert read.status_code == 404
    assert error(read)["code"] == "not_found"
    assert changed.status_code == 404
    alice_report.refresh_from_db()
    assert alice_report.title == "Weekly report"
    assert len(work_events(alice)) == 1
    assert created.status_code == 201
    assert list(WorkItem.objects.filter(user=alice)) == [alice_report]
    assert call_tool(bob_token, "list_work").json()["results"][0]["title"] == "Bob's"


@pytest.mark.parametrize("name", ["create_work", "list_work", "get_work", "update_work"])
@pytest.mark.parametrize(
    ("token", "code"), [(None, "not_authenticated"), ("nope", "invalid_token")]
)
def test_work_tools_need_a_valid_token(call_tool, alice_report, name, token, code):
    payload = {"id": alice_report.pk, "title": "X", "body": "x", "kind": "report"}
    if name == "list_work":
        payload = {}
    elif name == "get_work":
        payload = {"id": alice_report.pk}

    response = call_tool(token, name, payload)

    assert response.status_code == 401
    assert error(response)["code"] == code
    alice_report.refresh_from_db()
    assert alice_report.title == "Weekly report"
    assert WorkItem.objects.count() == 1


def test_work_tools_are_in_the_manifest(client):
    names = {tool["function"]["name"] for tool in client.get("/api/v1/tools").json()}
    assert {"create_work", "list_work", "get_work", "update_work"} <= names
