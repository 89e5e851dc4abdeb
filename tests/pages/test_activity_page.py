"""The Activity page: the user's log, newest first, paginated and filterable."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent
from memory import review
from memory.entries import memory_rename
from memory.models import MemoryProposal
from memory.outcomes import ReviewRequired
from memory.services import memory_delete, memory_upsert
from tests.factories import AgentFactory
from work.services import work_create

HX = {"HX-Request": "true"}
ROW = re.compile(r'<tr id="event-(\d+)"')


def rows(response):
    return [int(pk) for pk in ROW.findall(response.content.decode())]


@pytest.fixture
def alice_history(alice, alice_agent):
    """Three events: alice writes fact:tea, her agent writes fact:coffee, alice deletes tea."""
    memory_upsert(user=alice, key="fact:tea", value="Likes tea", actor=Actor.for_user(alice))
    memory_upsert(
        user=alice, key="fact:coffee", value="No coffee", actor=Actor.for_agent(alice_agent)
    )
    memory_delete(user=alice, key="fact:tea", actor=Actor.for_user(alice))
    return list(ActivityEvent.objects.filter(user=alice).order_by("-created_at", "-id"))


def test_login_required(client):
    response = client.get("/activity/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/activity/"


def test_full_page_lists_events_newest_first(client, alice, alice_history):
    client.force_login(alice)
    response = client.get("/activity/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html
    assert '<label for="id_event_type">Event type</label>' in html
    assert '<label for="id_agent">Agent</label>' in html
    assert rows(response) == [event.pk for event in alice_history]
    assert "3 events." in html
    deleted, _, written_by_alice = alice_history
    assert f'<tr id="event-{deleted.pk}">' in html
    assert '<td data-label="Event">Memory deleted</td>' in html
    # Each row links to the memory's history; a memory deleted since says where it went.
    deleted_history = f"/history/{deleted.payload['history_id']}/"
    assert (
        f'Deleted <a href="{deleted_history}">“Likes tea”</a> '
        '<span class="muted">(fact:tea)</span> <span class="target-state">— deleted: '
        '<a href="/deleted/">restore from Recently deleted</a></span>'
    ) in html
    coffee = alice_history[1]
    coffee_history = f"/history/{coffee.payload['history_id']}/"
    # A memory is named by what it says; its key follows, as a detail.
    assert (
        f'Created <a href="{coffee_history}">“No coffee”</a> '
        '<span class="muted">(fact:coffee · noted)</span>'
    ) in html
    assert '<bdi class="badge agent" dir="auto">assistant</bdi>' in html
    assert '<span class="badge user">you</span>' in html
    assert f'datetime="{written_by_alice.created_at.isoformat()}"' in html


def test_htmx_request_gets_only_the_list(client, alice, alice_history):
    client.force_login(alice)
    response = client.get("/activity/", headers=HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert html.strip().startswith('<section id="activity-list"')
    assert rows(response) == [event.pk for event in alice_history]


def test_empty_state(client, alice):
    client.force_login(alice)
    response = client.get("/activity/")
    assert "No activity yet." in response.content.decode()
    assert rows(response) == []


def test_sixty_events_make_two_pages(client, alice):
    for number in range(60):
        memory_upsert(
            user=alice, key=f"fact:n-{number:02d}", value="x", actor=Actor.for_user(alice)
        )
    newest_first = list(
        ActivityEvent.objects.filter(user=alice)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
    )
    client.force_login(alice)
    first = client.get("/activity/")
    assert rows(first) == newest_first[:50]
    assert "Page 1 of 2" in first.content.decode()
    assert 'href="/activity/?page=2"' in first.content.decode()
    second = client.get("/activity/?page=2", headers=HX)
    assert "<html" not in second.content.decode()
    assert rows(second) == newest_first[50:]
    assert "Page 2 of 2" in second.content.decode()
    assert "fact:n-00" in second.content.decode()
    # Out-of-range or junk page numbers fall back to a real page.
    assert rows(client.get("/activity/?page=99")) == newest_first[50:]
    assert rows(client.get("/activity/?page=abc")) == newest_first[:50]


def test_filter_by_event_type(client, alice, alice_history):
    client.force_login(alice)
    for headers in ({}, HX):
        response = client.get("/activity/?event_type=memory_deleted", headers=headers)
        assert response.status_code == 200
        assert rows(response) == [alice_history[0].pk]
        assert "1 event matches this filter." in response.content.decode()
    full = client.get("/activity/?event_type=memory_deleted").content.decode()
    assert '<option value="memory_deleted" selected>Memory deleted</option>' in full


def test_filter_by_agent(client, alice, alice_agent, alice_history):
    other = AgentFactory(user=alice, name="notetaker")
    memory_upsert(user=alice, key="fact:pen", value="blue", actor=Actor.for_agent(other))
    client.force_login(alice)
    response = client.get(f"/activity/?agent={alice_agent.pk}", headers=HX)
    assert rows(response) == [alice_history[1].pk]
    both = client.get(f"/activity/?agent={other.pk}&event_type=memory_written")
    assert rows(both) == [ActivityEvent.objects.get(payload__key="fact:pen").pk]
    assert f'<option value="{other.pk}" selected>notetaker</option>' in both.content.decode()


def test_filter_with_no_match(client, alice, alice_history):
    client.force_login(alice)
    response = client.get("/activity/?event_type=heartbeat_ok")
    assert rows(response) == []
    assert "No activity matches this filter." in response.content.decode()


def test_bad_filter_values_are_reported(client, alice, alice_history):
    client.force_login(alice)
    response = client.get("/activity/?event_type=nonsense")
    assert response.status_code == 400
    assert "This filter cannot be used:" in response.content.decode()
    assert rows(response) == []
    htmx = client.get("/activity/?agent=abc", headers=HX)
    assert htmx.status_code == 200
    assert "Agent: Select a valid choice." in htmx.content.decode()


def test_bob_never_sees_alices_events(client, alice, bob, alice_agent, alice_history):
    client.force_login(bob)
    response = client.get("/activity/")
    assert rows(response) == []
    assert "fact:tea" not in response.content.decode()
    assert "No activity yet." in response.content.decode()
    # Filtering by alice's agent id is refused, not a way to peek.
    peek = client.get(f"/activity/?agent={alice_agent.pk}")
    assert peek.status_code == 400
    assert rows(peek) == []
    assert "assistant" not in peek.content.decode().split('id="activity-list"')[1]


def test_agent_written_text_is_escaped(client, alice, alice_agent):
    item = work_create(
        user=alice,
        title="<script>alert(1)</script>",
        body="",
        actor=Actor.for_agent(alice_agent),
    )
    client.force_login(alice)
    html = client.get("/activity/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert f'<a href="/work/{item.pk}/">&lt;script&gt;alert(1)&lt;/script&gt;</a>' in html
    assert "(Report)" in html


def test_system_events_and_unknown_payloads(client, alice):
    ActivityEvent.objects.create(
        user=alice,
        event_type="heartbeat_ok",
        payload={"checked": 3, "note": "<b>ok</b>"},
        **Actor.system().as_fields(),
    )
    client.force_login(alice)
    html = client.get("/activity/").content.decode()
    assert '<span class="badge">system</span>' in html
    assert "Heartbeat OK" in html  # the filter's label
    assert "Heartbeat: nothing needs you" in html  # an unexpected payload changes nothing
    assert "<b>ok</b>" not in html


def test_post_is_not_allowed(client, alice):
    client.force_login(alice)
    assert client.post("/activity/").status_code == 405


def _what(html, event):
    """The What cell of an event's row."""
    row = html.split(f'<tr id="event-{event.pk}">')[1]
    return re.search(r'<td class="what"[^>]*>(.*?)</td>', row, re.S).group(1)


def test_proposals_are_described_readably(client, alice, alice_agent):
    you, agent = Actor.for_user(alice), Actor.for_agent(alice_agent)
    memory_upsert(user=alice, key="fact:tea", value="Likes tea", actor=you)
    memory_upsert(user=alice, key="fact:pen", value="Blue pens", actor=you)
    memory_upsert(user=alice, key="fact:cat", value="Has a cat", actor=you)
    proposals = {}
    for key, value in [("fact:tea", "Likes green tea"), ("fact:pen", "Red pens")]:
        with pytest.raises(ReviewRequired) as waiting:
            memory_upsert(user=alice, key=key, value=value, actor=agent)
        proposals[key] = waiting.value.proposal
    with pytest.raises(ReviewRequired) as waiting:
        memory_delete(user=alice, key="fact:cat", actor=agent)
    proposals["fact:cat"] = waiting.value.proposal
    review.proposal_accept(user=alice, proposal_id=proposals["fact:tea"].pk, actor=you)
    review.proposal_reject(user=alice, proposal_id=proposals["fact:pen"].pk, actor=you)
    MemoryProposal.objects.filter(pk=proposals["fact:cat"].pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert review.proposals_expire() == 1
    events = {
        (event.event_type, event.payload["key"]): event
        for event in ActivityEvent.objects.filter(user=alice, event_type__startswith="proposal_")
    }
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    waits = "waits for your review: it changes what you said"
    by = '<span class="muted">(proposed by agent assistant)</span>'
    # Each links to its proposal in the inbox, among the recently decided ones once decided.
    tea, pen, cat = (f"/context/inbox/#decided-{proposals[key].pk}" for key in proposals)
    assert _what(html, events["proposal_created", "fact:tea"]) == (
        f'Proposed a change to <a href="{tea}"><code>fact:tea</code></a> '
        f'<span class="muted">({waits})</span>'
    )
    assert _what(html, events["proposal_created", "fact:cat"]) == (
        f'Proposed deleting <a href="{cat}"><code>fact:cat</code></a> '
        f'<span class="muted">({waits})</span>'
    )
    assert _what(html, events["proposal_accepted", "fact:tea"]) == (
        f'Accepted <a href="{tea}"><code>fact:tea</code></a> {by}'
    )
    assert _what(html, events["proposal_rejected", "fact:pen"]) == (
        f'Rejected <a href="{pen}"><code>fact:pen</code></a> {by}'
    )
    assert _what(html, events["proposal_expired", "fact:cat"]) == (
        f'Expired <a href="{cat}"><code>fact:cat</code></a> {by}'
    )
    assert '<td data-label="Event">Proposal accepted</td>' in html


def test_a_rename_is_described_with_both_keys(client, alice):
    you = Actor.for_user(alice)
    memory_upsert(user=alice, key="fact:oat-milk", value="Oat milk flat whites", actor=you)
    memory_rename(user=alice, key="fact:oat-milk", new_key="preference:oat-milk", actor=you)
    event = ActivityEvent.objects.filter(user=alice).latest("id")
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    assert _what(html, event) == (
        f'Renamed fact:oat-milk to <a href="/history/{event.payload["history_id"]}/">'
        "<code>preference:oat-milk</code></a>"
    )


def test_workspace_events_read_as_sentences(client, alice, alice_agent):
    from activity import events
    from activity.actors import Actor
    from work.services import work_create

    item = work_create(
        user=alice, title="Q3 <report>", body="x", actor=Actor.for_agent(alice_agent)
    )
    events.work_updated(
        user=alice,
        actor=Actor.for_agent(alice_agent),
        work_id=item.pk,
        title=item.title,
        fields=["body", "status"],
    )
    events.heartbeat_ok(user=alice, run_id=1)
    events.heartbeat_failed(user=alice, run_id=2, reason="the model did not answer")
    events.bootstrap_completed(user=alice, actor=Actor.for_agent(alice_agent), version_id=9)
    client.force_login(alice)

    body = client.get("/activity/").content.decode()

    assert f'Updated <a href="/work/{item.pk}/">Q3 &lt;report&gt;</a>' in body
    assert "(body, status)" in body
    assert "Heartbeat: nothing needs you" in body
    assert "Heartbeat failed" in body
    assert "the model did not answer" in body
    assert "Finished the first-run ritual: deleted <code>BOOTSTRAP.md</code>" in body
