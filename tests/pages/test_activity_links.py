"""Every Activity row links to what it is about (pages/activity_links.py): a memory's history,
a document version, a work item, a turn, the inbox, Settings' panels; what is deleted says so
and links to its Recently deleted; what is gone altogether says so and links nowhere. One rule
per event type: a type added without one fails here. The rows' targets are looked up a few
queries per page, not one per row."""

import itertools
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from activity import events
from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from context.review import document_proposal_accept, document_proposal_reject
from context.services import DocumentReviewRequired, document_delete, document_write
from llm.models import Turn, TurnStatus
from memory import review
from memory.models import MemoryProposal
from memory.outcomes import ReviewRequired
from memory.services import memory_delete, memory_upsert
from pages.activity_links import LINKS
from work.models import WorkItem
from work.services import work_create, work_delete, work_restore, work_update

pytestmark = pytest.mark.django_db

SERIAL = itertools.count()  # fresh memory keys, so a builder can run again
GONE = '<span class="target-state gone">— gone</span>'


def recover(url):
    link = f'<a href="{url}">restore from Recently deleted</a>'
    return f'<span class="target-state">— deleted: {link}</span>'


def what(html, event):
    """The What cell of an event's row."""
    row = html.split(f'<tr id="event-{event.pk}">')[1]
    return re.search(r'<td class="what"[^>]*>(.*?)</td>', row, re.S).group(1)


def links(cell):
    return re.findall(r'<a href="([^"]*)"', cell)


def latest(user, event_type):
    return ActivityEvent.objects.filter(user=user, event_type=event_type).latest("id")


def make_turn(user, agent=None):
    return Turn.objects.create(
        user=user, agent=agent, user_message="hi", assistant_reply="hello", status=TurnStatus.DONE
    )


def proposal(user, agent, key):
    """An agent's change to a memory the user stated waits in the inbox."""
    key = f"{key}-{next(SERIAL)}"
    memory_upsert(user=user, key=key, value="As the user said", actor=Actor.for_user(user))
    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=user, key=key, value="As the agent says", actor=Actor.for_agent(agent))
    return waiting.value.proposal


# One builder per event type: it makes the thing the event is about and records the event
# through the code that writes it, and answers (event, the link its row must have).


def _memory_written(alice, agent):
    key = f"fact:tea-{next(SERIAL)}"
    memory_upsert(user=alice, key=key, value="Likes tea", actor=Actor.for_user(alice))
    event = latest(alice, EventType.MEMORY_WRITTEN)
    return event, f"/history/{event.payload['history_id']}/"


def _memory_deleted(alice, agent):
    key = f"fact:gone-{next(SERIAL)}"
    memory_upsert(user=alice, key=key, value="Soon gone", actor=Actor.for_user(alice))
    history = memory_delete(user=alice, key=key, actor=Actor.for_user(alice))
    return latest(alice, EventType.MEMORY_DELETED), f"/history/{history.pk}/"


def _proposal_created(alice, agent):
    waiting = proposal(alice, agent, "fact:pending")
    return latest(alice, EventType.PROPOSAL_CREATED), f"/context/inbox/#proposal-{waiting.pk}"


def _proposal_accepted(alice, agent):
    waiting = proposal(alice, agent, "fact:accepted")
    review.proposal_accept(user=alice, proposal_id=waiting.pk, actor=Actor.for_user(alice))
    return latest(alice, EventType.PROPOSAL_ACCEPTED), f"/context/inbox/#decided-{waiting.pk}"


def _proposal_rejected(alice, agent):
    waiting = proposal(alice, agent, "fact:rejected")
    review.proposal_reject(user=alice, proposal_id=waiting.pk, actor=Actor.for_user(alice))
    return latest(alice, EventType.PROPOSAL_REJECTED), f"/context/inbox/#decided-{waiting.pk}"


def _proposal_expired(alice, agent):
    waiting = proposal(alice, agent, "fact:expired")
    MemoryProposal.objects.filter(pk=waiting.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    review.proposals_expire()
    return latest(alice, EventType.PROPOSAL_EXPIRED), f"/context/inbox/#decided-{waiting.pk}"


def _document_written(alice, agent):
    document = document_write(
        user=alice, path="plan.md", content="Plan", actor=Actor.for_user(alice)
    )
    url = f"/documents/versions/{document.written_version.pk}/"
    return latest(alice, EventType.DOCUMENT_WRITTEN), url


def _document_deleted(alice, agent):
    document_write(user=alice, path="old.md", content="Old", actor=Actor.for_user(alice))
    version = document_delete(user=alice, path="old.md", actor=Actor.for_agent(agent))
    return latest(alice, EventType.DOCUMENT_DELETED), f"/documents/versions/{version.pk}/"


def _bootstrap_completed(alice, agent):
    document_write(user=alice, path="BOOTSTRAP.md", content="Hi", actor=Actor.system())
    version = document_delete(
        user=alice, path="BOOTSTRAP.md", actor=Actor.for_agent(agent), ending_bootstrap=True
    )
    events.bootstrap_completed(user=alice, actor=Actor.for_agent(agent), version_id=version.pk)
    return latest(alice, EventType.BOOTSTRAP_COMPLETED), f"/documents/versions/{version.pk}/"


def _work_created(alice, agent):
    item = work_create(user=alice, title="Report", body="", actor=Actor.for_agent(agent))
    return latest(alice, EventType.WORK_CREATED), f"/work/{item.pk}/"


def _work_updated(alice, agent):
    item = work_create(user=alice, title="Draft", body="", actor=Actor.for_agent(agent))
    work_update(user=alice, pk=item.pk, actor=Actor.for_agent(agent), body="Done")
    return latest(alice, EventType.WORK_UPDATED), f"/work/{item.pk}/"


def _work_deleted(alice, agent):
    item = work_create(user=alice, title="Stale", body="", actor=Actor.for_agent(agent))
    work_delete(user=alice, pk=item.pk, actor=Actor.for_agent(agent))
    return latest(alice, EventType.WORK_DELETED), f"/work/{item.pk}/"


def _work_restored(alice, agent):
    item = work_create(user=alice, title="Back", body="", actor=Actor.for_agent(agent))
    work_delete(user=alice, pk=item.pk, actor=Actor.for_user(alice))
    work_restore(user=alice, pk=item.pk, actor=Actor.for_user(alice))
    return latest(alice, EventType.WORK_RESTORED), f"/work/{item.pk}/"


def _heartbeat_finding(alice, agent):
    item = work_create(user=alice, title="Invoice", body="", kind="heartbeat", actor=Actor.system())
    events.heartbeat_finding(user=alice, run_id=1, work_id=item.pk, title="Invoice")
    return latest(alice, EventType.HEARTBEAT_FINDING), f"/work/{item.pk}/"


def _heartbeat_ok(alice, agent):
    events.heartbeat_ok(user=alice, run_id=2)
    return latest(alice, EventType.HEARTBEAT_OK), "/settings/#heartbeat-status"


def _heartbeat_failed(alice, agent):
    events.heartbeat_failed(user=alice, run_id=3, reason="no answer")
    return latest(alice, EventType.HEARTBEAT_FAILED), "/settings/#heartbeat-status"


def _llm_budget_reached(alice, agent):
    events.llm_budget_reached(user=alice, used=10, budget=10)
    return latest(alice, EventType.LLM_BUDGET_REACHED), "/settings/#llm-panel"


def _turn_reported(alice, agent):
    turn = make_turn(alice, agent)
    events.turn_reported(user=alice, actor=Actor.for_agent(agent), turn_id=turn.pk, learning=True)
    return latest(alice, EventType.TURN_REPORTED), f"/turns/{turn.pk}/"


def _turn_processed(alice, agent):
    turn = make_turn(alice, agent)
    events.turn_processed(user=alice, turn_id=turn.pk, outcome={"profile": "noop"})
    return latest(alice, EventType.TURN_PROCESSED), f"/turns/{turn.pk}/"


def _consolidation_applied(alice, agent):
    turn = make_turn(alice, agent)
    document = document_write(user=alice, path="USER_MEMORY.md", content="#", actor=Actor.system())
    events.consolidation_applied(
        user=alice,
        turn_id=turn.pk,
        version_id=document.written_version.pk,
        profile_tokens=1,
        prompt_tokens=1,
        completion_tokens=1,
    )
    return latest(alice, EventType.CONSOLIDATION_APPLIED), f"/turns/{turn.pk}/"


def _learning_failed(event_type):
    def build(alice, agent):
        turn = make_turn(alice, agent)
        events.learning_failed(
            user=alice, event_type=event_type, turn_id=turn.pk, reason="bad", attempt=1
        )
        return latest(alice, event_type), f"/turns/{turn.pk}/"

    return build


BUILDERS = {
    EventType.MEMORY_WRITTEN: _memory_written,
    EventType.MEMORY_DELETED: _memory_deleted,
    EventType.PROPOSAL_CREATED: _proposal_created,
    EventType.PROPOSAL_ACCEPTED: _proposal_accepted,
    EventType.PROPOSAL_REJECTED: _proposal_rejected,
    EventType.PROPOSAL_EXPIRED: _proposal_expired,
    EventType.DOCUMENT_WRITTEN: _document_written,
    EventType.DOCUMENT_DELETED: _document_deleted,
    EventType.BOOTSTRAP_COMPLETED: _bootstrap_completed,
    EventType.WORK_CREATED: _work_created,
    EventType.WORK_UPDATED: _work_updated,
    EventType.WORK_DELETED: _work_deleted,
    EventType.WORK_RESTORED: _work_restored,
    EventType.HEARTBEAT_FINDING: _heartbeat_finding,
    EventType.HEARTBEAT_OK: _heartbeat_ok,
    EventType.HEARTBEAT_FAILED: _heartbeat_failed,
    EventType.LLM_BUDGET_REACHED: _llm_budget_reached,
    EventType.TURN_REPORTED: _turn_reported,
    EventType.TURN_PROCESSED: _turn_processed,
    EventType.CONSOLIDATION_APPLIED: _consolidation_applied,
    EventType.CONSOLIDATION_FAILED: _learning_failed(EventType.CONSOLIDATION_FAILED),
    EventType.CAPTURE_FAILED: _learning_failed(EventType.CAPTURE_FAILED),
}

# What stays deleted after its builder ran: its row says so and links to its Recently deleted.
STILL_DELETED = {
    EventType.MEMORY_DELETED: "/deleted/",
    EventType.DOCUMENT_DELETED: "/documents/deleted/",
    EventType.BOOTSTRAP_COMPLETED: "/documents/deleted/",
    EventType.WORK_DELETED: "/work/deleted/",
}


def test_every_event_type_has_a_link_rule():
    """Adding an event type means saying where its rows link (pages/activity_links.py LINKS)."""
    assert set(LINKS) == set(EventType.values)
    assert set(BUILDERS) == set(EventType.values)


@pytest.fixture
def one_of_each(alice, alice_agent):
    return {kind: builder(alice, alice_agent) for kind, builder in BUILDERS.items()}


def test_every_row_links_to_what_it_is_about(client, alice, one_of_each):
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    for kind, (event, url) in one_of_each.items():
        cell = what(html, event)
        expected = [url, STILL_DELETED[kind]] if kind in STILL_DELETED else [url]
        assert links(cell) == expected, (kind, cell)
        assert GONE not in cell
        if kind in STILL_DELETED:
            assert cell.endswith(recover(STILL_DELETED[kind])), (kind, cell)
        # The target opens (what is deleted still opens: its history, version or page).
        page = client.get(url.split("#")[0])
        assert page.status_code == 200, (kind, url)


def test_an_identity_files_proposal_links_to_its_row_in_the_inbox(client, alice, bob, alice_agent):
    """The proposal events of a document proposal name it (document_proposal_id) and its
    path; their rows say what it asked and link to its row in the inbox."""

    def propose(path, content):
        with pytest.raises(DocumentReviewRequired) as waiting:
            document_write(
                user=alice, path=path, content=content, actor=Actor.for_agent(alice_agent)
            )
        return waiting.value.proposal

    you = Actor.for_user(alice)
    pending = propose("SOUL.md", "pending")
    created = latest(alice, EventType.PROPOSAL_CREATED)
    accepted = propose("USER.md", "accepted")
    document_proposal_accept(user=alice, proposal_id=accepted.pk, actor=you)
    rejected = propose("TOOLS.md", "rejected")
    document_proposal_reject(user=alice, proposal_id=rejected.pk, actor=you)
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    cell = what(html, created)
    assert links(cell) == [f"/context/inbox/#document-proposal-{pending.pk}"]
    assert "Proposed replacing" in cell
    assert "<code>SOUL.md</code>" in cell
    assert "an identity file all your agents read" in cell
    for event_type, proposal in (
        (EventType.PROPOSAL_ACCEPTED, accepted),
        (EventType.PROPOSAL_REJECTED, rejected),
    ):
        cell = what(html, latest(alice, event_type))
        assert links(cell) == [f"/context/inbox/#decided-document-{proposal.pk}"]
        assert f"<code>{proposal.path}</code>" in cell
        assert "proposed by agent assistant" in cell
    # A document proposal that is not alice's (bob's id in her log) is gone.
    bobs = propose_for(bob)
    forged = ActivityEvent.objects.create(
        user=alice,
        event_type=EventType.PROPOSAL_CREATED,
        payload={"document_proposal_id": bobs.pk, "path": "SOUL.md", "action": "write"},
        **Actor.system().as_fields(),
    )
    html = client.get("/activity/").content.decode()
    assert links(what(html, forged)) == []
    assert GONE in what(html, forged)


def propose_for(user):
    from tests.factories import AgentFactory

    agent = AgentFactory(user=user, name=f"agent-{next(SERIAL)}")
    with pytest.raises(DocumentReviewRequired) as waiting:
        document_write(user=user, path="SOUL.md", content="x", actor=Actor.for_agent(agent))
    return waiting.value.proposal


def test_what_is_back_or_gone_since_is_told_as_it_is_now(client, alice, alice_agent):
    you = Actor.for_user(alice)
    memory_upsert(user=alice, key="fact:tea", value="Likes tea", actor=you)
    memory_delete(user=alice, key="fact:tea", actor=you)
    memory_upsert(user=alice, key="fact:tea", value="Likes tea again", actor=you)
    deleted_then_back = latest(alice, EventType.MEMORY_DELETED)
    document = document_write(user=alice, path="a.md", content="A", actor=you)
    written_then_deleted = latest(alice, EventType.DOCUMENT_WRITTEN)
    document_delete(user=alice, path="a.md", actor=you)
    item = work_create(user=alice, title="Purged", body="", actor=you)
    created_then_purged = latest(alice, EventType.WORK_CREATED)
    WorkItem.objects.filter(pk=item.pk).delete()  # the admin's delete: gone for good
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    back = what(html, deleted_then_back)
    assert links(back) == [f"/history/{deleted_then_back.payload['history_id']}/"]
    assert "target-state" not in back
    version = document.written_version.pk
    assert links(what(html, written_then_deleted)) == [
        f"/documents/versions/{version}/",
        "/documents/deleted/",
    ]
    purged = what(html, created_then_purged)
    assert purged == f'Purged <span class="muted">(Report)</span> {GONE}'
    assert links(purged) == []


def test_ids_that_are_not_the_users_or_missing_are_gone(client, alice, bob):
    """An event naming bob's rows (an import of another account's log, say) or no id at all
    links nowhere and tells nothing of bob's."""
    bobs_item = work_create(user=bob, title="Bob's", body="", actor=Actor.for_user(bob))
    bobs_doc = document_write(user=bob, path="b.md", content="B", actor=Actor.for_user(bob))
    bobs_turn = make_turn(bob)
    memory_upsert(user=bob, key="fact:bob", value="Bob's", actor=Actor.for_user(bob))
    bobs_history = latest(bob, EventType.MEMORY_WRITTEN).payload["history_id"]
    system = Actor.system().as_fields()
    made = [
        ActivityEvent.objects.create(user=alice, event_type=kind, payload=payload, **system)
        for kind, payload in [
            (EventType.WORK_CREATED, {"work_id": bobs_item.pk, "title": "x", "kind": "report"}),
            (
                EventType.DOCUMENT_WRITTEN,
                {"path": "b.md", "version_id": bobs_doc.written_version.pk},
            ),
            (EventType.TURN_PROCESSED, {"turn_id": bobs_turn.pk}),
            (EventType.MEMORY_WRITTEN, {"key": "fact:bob", "history_id": bobs_history}),
            (EventType.PROPOSAL_CREATED, {"key": "fact:x"}),
            (EventType.CONSOLIDATION_APPLIED, {"turn_id": None, "version_id": "7"}),
        ]
    ]
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    for event in made:
        cell = what(html, event)
        assert links(cell) == [], (event.event_type, cell)
        assert cell.endswith(GONE)


def test_the_links_cost_a_few_queries_per_page_not_per_row(client, alice, alice_agent):
    for builder in BUILDERS.values():
        builder(alice, alice_agent)
    client.force_login(alice)
    with CaptureQueriesContext(connection) as one_each:
        assert client.get("/activity/").status_code == 200

    for _round in range(2):
        for builder in BUILDERS.values():
            builder(alice, alice_agent)
    assert ActivityEvent.objects.filter(user=alice).count() > 50  # a full page of rows
    with CaptureQueriesContext(connection) as full_page:
        assert client.get("/activity/").status_code == 200

    assert len(full_page) == len(one_each)
