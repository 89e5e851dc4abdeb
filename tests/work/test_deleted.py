"""Deleting a work item is recoverable: work_delete marks the row deleted (the Work pages, the
tools, export and the heartbeat's count leave it out) with its work_deleted event, and
work_restore brings it back as it was with work_restored. From the pages: Delete on the
item's page (asked first), Recently deleted work, Restore."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from briefing.heartbeat import unseen_findings_count
from briefing.models import HeartbeatRun, RunOutcome
from lib.errors import NotFound
from portability.export import export_counts
from work.models import WorkItem, WorkKind, WorkStatus
from work.selectors import (
    deleted_work_list,
    heartbeat_finding_count,
    work_deleted_states,
    work_get,
    work_list,
)
from work.services import work_create, work_delete, work_restore, work_update

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


@pytest.fixture
def report(alice, alice_agent):
    return work_create(
        user=alice,
        title="Weekly report",
        body="# Findings\n\n- one\n",
        actor=Actor.for_agent(alice_agent),
        tags=["weekly"],
        status=WorkStatus.IN_PROGRESS,
    )


def state(item):
    """Everything a restore must bring back as it was."""
    row = WorkItem.objects.get(pk=item.pk)
    return (row.title, row.body, row.kind, row.status, row.tags, row.agent_id, row.updated_at)


def work_events(user):
    return list(
        ActivityEvent.objects.filter(
            user=user, event_type__in=[EventType.WORK_DELETED, EventType.WORK_RESTORED]
        )
        .order_by("id")
        .values_list("event_type", "payload", "actor_type")
    )


# ---------------------------------------------------------------- the services


def test_delete_keeps_the_row_marked_and_records_who(alice, alice_agent, report):
    before = state(report)

    item = work_delete(user=alice, pk=report.pk, actor=Actor.for_agent(alice_agent))

    row = WorkItem.objects.get(pk=report.pk)
    assert row.deleted_at is not None
    assert row.deleted_at == item.deleted_at
    assert state(report) == before
    assert work_events(alice) == [
        ("work_deleted", {"work_id": report.pk, "title": "Weekly report"}, "agent")
    ]
    assert list(work_list(user=alice)) == []
    assert work_get(user=alice, pk=report.pk) is None
    assert work_get(user=alice, pk=report.pk, include_deleted=True) == row


def test_restore_brings_it_back_as_it_was(alice, report):
    before = state(report)
    work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))

    item = work_restore(user=alice, pk=report.pk, actor=Actor.for_user(alice))

    assert item.deleted_at is None
    assert WorkItem.objects.get(pk=report.pk).deleted_at is None
    assert state(report) == before
    assert list(work_list(user=alice)) == [item]
    assert [kind for kind, _, _ in work_events(alice)] == ["work_deleted", "work_restored"]
    assert work_events(alice)[1] == (
        "work_restored",
        {"work_id": report.pk, "title": "Weekly report"},
        "user",
    )


def test_a_deleted_item_is_not_deleted_again_changed_or_restored_twice(alice, report):
    work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))
    with pytest.raises(NotFound):
        work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))
    with pytest.raises(NotFound):
        work_update(user=alice, pk=report.pk, actor=Actor.for_user(alice), title="Sneaky")
    work_restore(user=alice, pk=report.pk, actor=Actor.for_user(alice))
    with pytest.raises(NotFound):
        work_restore(user=alice, pk=report.pk, actor=Actor.for_user(alice))

    assert WorkItem.objects.get(pk=report.pk).title == "Weekly report"
    assert [kind for kind, _, _ in work_events(alice)] == ["work_deleted", "work_restored"]


def test_bob_can_neither_delete_nor_restore_alices_item(alice, bob, report):
    with pytest.raises(NotFound):
        work_delete(user=bob, pk=report.pk, actor=Actor.for_user(bob))
    assert WorkItem.objects.get(pk=report.pk).deleted_at is None
    work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))
    with pytest.raises(NotFound):
        work_restore(user=bob, pk=report.pk, actor=Actor.for_user(bob))

    assert WorkItem.objects.get(pk=report.pk).deleted_at is not None
    assert work_events(bob) == []


def test_a_delete_whose_event_fails_deletes_nothing(alice, report, monkeypatch):
    def fail(**kwargs):
        raise RuntimeError("the log is down")

    monkeypatch.setattr("work.services.events.work_deleted", fail)
    with pytest.raises(RuntimeError):
        work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))

    assert WorkItem.objects.get(pk=report.pk).deleted_at is None


def test_recently_deleted_lists_the_deletions_with_who_newest_first(alice, alice_agent, bob):
    items = [
        work_create(user=alice, title=f"Item {n}", body="", actor=Actor.for_user(alice))
        for n in range(3)
    ]
    bobs = work_create(user=bob, title="Bob's", body="", actor=Actor.for_user(bob))
    work_delete(user=alice, pk=items[0].pk, actor=Actor.for_user(alice))
    work_delete(user=alice, pk=items[2].pk, actor=Actor.for_agent(alice_agent))
    work_delete(user=bob, pk=bobs.pk, actor=Actor.for_user(bob))
    old = work_create(user=alice, title="Old", body="", actor=Actor.for_user(alice))
    work_delete(user=alice, pk=old.pk, actor=Actor.for_user(alice))
    WorkItem.objects.filter(pk=old.pk).update(deleted_at=timezone.now() - timedelta(days=31))

    rows = deleted_work_list(user=alice, since=timezone.now() - timedelta(days=30))

    assert [row.item.pk for row in rows] == [items[2].pk, items[0].pk]
    assert [row.event.actor_type for row in rows] == ["agent", "user"]
    assert rows[0].event.actor_agent == alice_agent


def test_deleted_states_tell_deleted_from_there_from_gone(alice, bob, report):
    kept = work_create(user=alice, title="Kept", body="", actor=Actor.for_user(alice))
    bobs = work_create(user=bob, title="Bob's", body="", actor=Actor.for_user(bob))
    work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))

    states = work_deleted_states(user=alice, ids=[report.pk, kept.pk, bobs.pk, 999_999, True])

    assert states == {report.pk: True, kept.pk: False}


def test_counts_and_export_leave_deleted_items_out(alice):
    finding = work_create(
        user=alice, title="Invoice overdue", body="", kind=WorkKind.HEARTBEAT, actor=Actor.system()
    )
    now = timezone.now()
    HeartbeatRun.objects.create(
        user=alice,
        started_at=now,
        finished_at=now,
        next_due_at=now,
        outcome=RunOutcome.FINDING,
        work_item=finding,
    )
    assert (heartbeat_finding_count(user=alice), unseen_findings_count(user=alice)) == (1, 1)
    assert export_counts(alice)["work/"] == 1

    work_delete(user=alice, pk=finding.pk, actor=Actor.for_user(alice))

    assert (heartbeat_finding_count(user=alice), unseen_findings_count(user=alice)) == (0, 0)
    assert export_counts(alice)["work/"] == 0


def test_the_tools_no_longer_see_a_deleted_item(call_tool, alice, alice_token, report):
    work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))

    assert call_tool(alice_token, "get_work", {"id": report.pk}).status_code == 404
    assert call_tool(alice_token, "list_work", {}).json() == {"results": []}
    update = call_tool(alice_token, "update_work", {"id": report.pk, "title": "Sneaky"})
    assert update.status_code == 404
    assert WorkItem.objects.get(pk=report.pk).title == "Weekly report"


# ---------------------------------------------------------------- the pages


@pytest.mark.parametrize("path", ["/work/deleted/", "/work/1/delete/", "/work/1/restore/"])
def test_login_required(client, path):
    response = client.post(path) if path.endswith(("delete/", "restore/")) else client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"


def test_the_items_page_asks_before_deleting(client, alice, report):
    client.force_login(alice)
    html = client.get(f"/work/{report.pk}/").content.decode()

    confirm = html[html.index('<details class="confirm-delete" id="work-delete">') :]
    confirm = confirm[: confirm.index("</details>")]
    assert "<summary>Delete this item…</summary>" in confirm
    assert "Delete “Weekly report”?" in confirm
    assert f'<form method="post" action="/work/{report.pk}/delete/">' in confirm
    assert 'href="/work/deleted/"' in confirm
    assert client.get(f"/work/{report.pk}/delete/").status_code == 405


def test_delete_from_the_page_then_restore_from_it(client, alice, report):
    client.force_login(alice)

    response = client.post(f"/work/{report.pk}/delete/", follow=True)

    assert response.redirect_chain == [(f"/work/{report.pk}/", 302)]
    html = response.content.decode()
    assert "Deleted “Weekly report”. It waits in Recently deleted work" in html
    assert '<div class="notice deleted-note" id="work-deleted" role="status">' in html
    assert 'Deleted by <span class="badge user" dir="auto">you</span>' in html
    assert f'<form class="inline" method="post" action="/work/{report.pk}/restore/">' in html
    assert 'id="work-delete"' not in html  # no second Delete
    assert WorkItem.objects.get(pk=report.pk).deleted_at is not None
    assert f'id="work-{report.pk}"' not in client.get("/work/").content.decode()

    restored = client.post(f"/work/{report.pk}/restore/", follow=True)

    assert restored.redirect_chain == [(f"/work/{report.pk}/", 302)]
    assert "Restored “Weekly report”." in restored.content.decode()
    assert 'id="work-deleted"' not in restored.content.decode()
    assert WorkItem.objects.get(pk=report.pk).deleted_at is None
    assert f'id="work-{report.pk}"' in client.get("/work/").content.decode()


def test_recently_deleted_work_lists_and_restores_in_place(client, alice, alice_agent, report):
    work_delete(user=alice, pk=report.pk, actor=Actor.for_agent(alice_agent))
    client.force_login(alice)

    html = client.get("/work/deleted/").content.decode()

    row = re.search(rf'<li id="deleted-work-{report.pk}".*?</li>', html, re.S).group(0)
    assert f'<a href="/work/{report.pk}/" dir="auto">Weekly report</a>' in row
    assert 'Deleted by <span class="badge agent" dir="auto">agent assistant</span>' in row
    assert f'hx-post="/work/{report.pk}/restore/"' in row
    assert '<a href="/work/deleted/" aria-current="page">Work</a>' in html
    assert '<a href="/documents/deleted/">Documents</a>' in html
    assert '<a href="/deleted/">Memories</a>' in html
    assert 'href="/work/deleted/"' in client.get("/work/").content.decode()

    swapped = client.post(f"/work/{report.pk}/restore/", {"then": "trash"}, headers=HX)

    part = swapped.content.decode()
    assert "<html" not in part
    assert part.strip().startswith(f'<li id="deleted-work-{report.pk}" class="deleted-item">')
    assert f'Restored <a href="/work/{report.pk}/">Weekly report</a>.' in part
    assert WorkItem.objects.get(pk=report.pk).deleted_at is None
    assert "No work deleted in the last 30 days." in client.get("/work/deleted/").content.decode()


def test_restore_without_javascript_goes_back_to_the_list(client, alice, report):
    work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))
    client.force_login(alice)

    response = client.post(f"/work/{report.pk}/restore/", {"then": "trash"})

    assert response.status_code == 302
    assert response["Location"] == "/work/deleted/"
    assert WorkItem.objects.get(pk=report.pk).deleted_at is None


def test_bob_gets_404_for_alices_item_and_nothing_changes(client, alice, bob, report):
    gone = work_create(user=alice, title="Gone", body="", actor=Actor.for_user(alice))
    work_delete(user=alice, pk=gone.pk, actor=Actor.for_user(alice))
    client.force_login(bob)

    assert client.get(f"/work/{gone.pk}/").status_code == 404
    assert client.post(f"/work/{report.pk}/delete/").status_code == 404
    assert client.post(f"/work/{gone.pk}/restore/").status_code == 404
    assert "Gone" not in client.get("/work/deleted/").content.decode()
    assert WorkItem.objects.get(pk=report.pk).deleted_at is None
    assert WorkItem.objects.get(pk=gone.pk).deleted_at is not None


def test_the_admin_refuses_to_edit_a_deleted_item(client, superuser, alice, report):
    work_delete(user=alice, pk=report.pk, actor=Actor.for_user(alice))
    client.force_login(superuser)
    form = {
        "agent": report.agent_id,
        "title": "Changed",
        "kind": report.kind,
        "status": report.status,
        "tags": "weekly",
        "body": report.body,
        "metadata": "{}",
        "_save": "Save",
    }

    response = client.post(f"/admin/work/workitem/{report.pk}/change/", form)

    assert response.status_code == 200
    assert "This item is deleted: restore it from Recently deleted work first." in (
        response.content.decode()
    )
    assert WorkItem.objects.get(pk=report.pk).title == "Weekly report"
