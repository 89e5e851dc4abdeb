"""Changing a work item in the admin goes through work/services.py: one work_updated event
naming what changed; a heartbeat finding keeps its kind."""

import pytest
from django.urls import reverse

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from work.models import WorkItem, WorkKind
from work.services import work_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client, superuser):
    client.force_login(superuser)
    return client


def change(root, item, **fields):
    form = {
        "agent": item.agent_id or "",
        "title": item.title,
        "kind": item.kind,
        "status": item.status,
        "tags": ",".join(item.tags),
        "body": item.body,
        "metadata": "{}",
        "_save": "Save",
        **fields,
    }
    return root.post(reverse("admin:work_workitem_change", args=[item.pk]), form)


def test_change_records_work_updated(root, superuser, alice, alice_agent):
    item = work_create(user=alice, title="Plan", body="# Plan", actor=Actor.for_user(alice))

    response = change(root, item, status="archived", tags="q2,launch", agent=alice_agent.pk)

    assert response.status_code == 302
    item.refresh_from_db()
    assert (item.status, item.tags, item.agent) == ("archived", ["launch", "q2"], alice_agent)
    event = ActivityEvent.objects.get(event_type=EventType.WORK_UPDATED)
    assert (event.user, event.actor_user) == (alice, superuser)
    assert event.payload == {"work_id": item.pk, "title": "Plan", "fields": ["status", "tags"]}


def test_a_finding_keeps_its_kind_in_the_admin(root, alice):
    item = work_create(
        user=alice, title="Late", body="x", kind=WorkKind.HEARTBEAT, actor=Actor.system()
    )

    response = change(root, item, kind="report")

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["kind"] == [
        "Heartbeat findings keep their kind, and no other item becomes one."
    ]
    assert WorkItem.objects.get().kind == WorkKind.HEARTBEAT
    assert not ActivityEvent.objects.filter(event_type=EventType.WORK_UPDATED).exists()
