"""The review inbox page (issue 14, point 1): agents' proposals with a diff, accept, edit then
accept, reject, keep both, bulk decisions, the navigation's count, the review setting, and
the read-only profile API. Agents act through the API; the user through the pages."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import get_messages
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from memory import review
from memory.models import Memory, MemoryHistory, MemoryProposal
from memory.review_views import Part, word_diff
from memory.services import memory_upsert
from pages.context_processors import nav_counts
from profiles.models import Profile
from profiles.services import agent_set_learning, profile_update

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
INBOX = "/context/inbox/"
KEY = "preference:report-format"
STATED = "Prefers bullet points in reports"
PROPOSED = "Prefers short bullet points in reports"


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def stated(user, key=KEY, value=STATED, **extra):
    return memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user), **extra)


def propose_update(call_tool, token, key=KEY, value=PROPOSED, **extra):
    response = call_tool(token, "update_memory", {"key": key, "value": value, **extra})
    assert response.status_code == 202
    assert response.json()["status"] == "pending_review"
    return MemoryProposal.objects.get(pk=response.json()["proposal"]["id"])


def text(response):
    return response.content.decode()


def flashes(response):
    return [str(message) for message in get_messages(response.wsgi_request)]


def row_ids(html):
    return [int(pk) for pk in re.findall(r'<li id="proposal-(\d+)"', html)]


def value_of(user, key):
    memory = Memory.objects.filter(user=user, key=key).first()
    return None if memory is None else (memory.value, memory.source)


# ---------------------------------------------------------------- the page


def test_login_required(client, db):
    for method, url in [
        ("get", INBOX),
        ("get", f"{INBOX}count/"),
        ("post", f"{INBOX}1/accept/"),
        ("post", f"{INBOX}1/reject/"),
        ("post", f"{INBOX}decide/"),
    ]:
        response = getattr(client, method)(url)
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={url}"


def test_an_agents_change_to_what_the_user_said_waits_with_a_diff(
    as_alice, alice, alice_token, call_tool
):
    stated(alice)
    proposal = propose_update(
        call_tool, alice_token, tags=["work"], pinned=True, reason="Said so <b>today</b>"
    )

    response = as_alice.get(INBOX)

    html = text(response)
    assert response.status_code == 200
    assert row_ids(html) == [proposal.pk]
    assert '<p class="value diff">Prefers<ins> short</ins> bullet points in reports</p>' in html
    assert "<li>Adds tag work</li><li>Pins it</li>" in html
    assert 'Proposed by <span class="badge agent">assistant</span>' in html
    assert "Why it waits: changes what you said" in html
    assert "The agent's reason: “Said so &lt;b&gt;today&lt;/b&gt;”" in html
    assert f'<textarea id="edit-{proposal.pk}" name="value" rows="3">{PROPOSED}</textarea>' in html
    assert value_of(alice, KEY) == (STATED, "user_stated")  # nothing applied yet


def test_a_deletion_is_struck_through_and_a_new_memory_shown(
    as_alice, alice, alice_token, call_tool
):
    stated(alice, key="instruction:tldr", value="Always include a TL;DR")
    deleting = call_tool(alice_token, "delete_memory", {"key": "instruction:tldr"})
    assert deleting.status_code == 202
    profile_update(user=alice, review_agent_memories=True)
    adding = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "Likes tea"})
    assert adding.status_code == 202

    html = text(as_alice.get(INBOX))

    assert '<p class="value diff"><del>Always include a TL;DR</del></p>' in html
    assert "Why it waits: deletes what you said" in html
    assert '<p class="value diff"><ins>Likes tea</ins></p>' in html
    assert "Why it waits: new memory (you review agents&#x27; new memories)" in html
    # Newest first; a deletion has nothing to edit.
    ids = [adding.json()["proposal"]["id"], deleting.json()["proposal"]["id"]]
    assert row_ids(html) == ids
    assert f'id="edit-{ids[1]}"' not in html


def test_the_diff_is_word_by_word():
    assert word_diff("Prefers bullet points", "Prefers numbered points") == [
        Part("same", "Prefers "),
        Part("del", "bullet"),
        Part("gap", " "),
        Part("ins", "numbered"),
        Part("same", " points"),
    ]
    assert word_diff("Kevin", "Kevin") == [Part("same", "Kevin")]
    assert word_diff("", "New text") == [Part("ins", "New text")]
    assert word_diff("a b c", "a c") == [Part("same", "a "), Part("del", "b "), Part("same", "c")]


def test_a_replaced_word_is_struck_through_beside_its_replacement(
    as_alice, alice, alice_token, call_tool
):
    stated(alice, key="name", value="Kevin")
    propose_update(call_tool, alice_token, key="name", value="Kev")

    html = text(as_alice.get(INBOX))

    assert '<p class="value diff"><del>Kevin</del> <ins>Kev</ins></p>' in html


def test_agent_text_is_escaped_in_the_diff(as_alice, alice, alice_token, call_tool):
    stated(alice)
    propose_update(call_tool, alice_token, value="<script>alert(1)</script>")

    html = text(as_alice.get(INBOX))

    assert "<script>alert(1)</script>" not in html
    assert "<ins>&lt;script&gt;alert(1)&lt;/script&gt;</ins>" in html


def test_empty_inbox_says_what_it_is_for(as_alice):
    html = text(as_alice.get(INBOX))
    assert "No change to your memories waits for your review." in html
    assert "No agent's change to your identity files waits for you." in html
    assert 'id="inbox-bulk"' not in html
    assert "Nothing decided in the last 30 days." in html


# ---------------------------------------------------------------- one at a time


def test_accept_applies_it_as_the_user_and_links_the_proposal(
    as_alice, alice, alice_agent, alice_token, call_tool
):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)

    response = as_alice.post(f"{INBOX}{proposal.pk}/accept/")

    assert response.status_code == 302
    assert response["Location"] == INBOX
    assert flashes(response) == [f"Accepted: “{PROPOSED}” is now in your memory."]
    assert value_of(alice, KEY) == (PROPOSED, "user_stated")
    history = MemoryHistory.objects.filter(user=alice, key=KEY).latest("id")
    assert (history.actor_type, history.actor_user, history.actor_agent) == ("user", alice, None)
    assert (history.before["value"], history.after["value"]) == (STATED, PROPOSED)
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by, proposal.applied) == (
        "accepted",
        alice,
        history,
    )
    (event,) = ActivityEvent.objects.filter(user=alice, event_type=EventType.PROPOSAL_ACCEPTED)
    assert event.actor_user == alice
    assert event.payload == {
        "proposal_id": proposal.pk,
        "key": KEY,
        "proposed_by": f"agent {alice_agent.name}",
        "history_id": history.pk,
    }
    page = text(as_alice.get(INBOX))
    assert row_ids(page) == []
    assert f'<li id="decided-{proposal.pk}" class="entry">' in page
    assert "Accepted — now in your memory" in page


def test_accept_with_htmx_swaps_the_row_and_signals_the_count(
    as_alice, alice, alice_token, call_tool
):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)

    response = as_alice.post(f"{INBOX}{proposal.pk}/accept/", headers=HX)

    html = text(response)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "inbox-changed"
    assert "<html" not in html
    assert html.strip().startswith(f'<li id="proposal-{proposal.pk}" class="entry proposal">')
    applied = MemoryProposal.objects.get(pk=proposal.pk).applied
    assert (
        '<p class="saved" role="status" data-focus>Accepted — now in your memory. '
        f'<a href="/history/{applied.pk}/">See the change</a></p>'
    ) in html
    assert 'name="ids"' not in html  # decided: no more actions
    assert "/accept/" not in html
    assert value_of(alice, KEY) == (PROPOSED, "user_stated")


def test_edit_then_accept_stores_the_edited_text_as_stated(as_alice, alice, alice_token, call_tool):
    profile_update(user=alice, review_agent_memories=True)
    created = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "Likes tea"})
    assert created.status_code == 202
    pk = created.json()["proposal"]["id"]

    response = as_alice.post(
        f"{INBOX}{pk}/accept/", {"value": "Likes green tea\r\nin the morning"}, headers=HX
    )

    # The row shows what was saved, the agent's text beside it.
    shown = text(response)
    assert "Accepted with your edit — now in your memory" in shown
    assert "<ins>Likes green tea\nin the morning</ins>" in shown
    assert 'The agent proposed: “<span dir="auto">Likes tea</span>”' in shown
    # Out of band, the list's count and bulk bar as they are now: nothing waits.
    assert '<span id="inbox-pending-count" hx-swap-oob="true"></span>' in shown
    assert '<div id="inbox-bulk" hidden hx-swap-oob="true"></div>' in shown
    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert (memory.value, memory.source, memory.confidence) == (
        "Likes green tea\nin the morning",
        "user_stated",
        1.0,
    )
    assert MemoryProposal.objects.get(pk=pk).status == "accepted"


def test_edit_then_accept_without_javascript_says_the_saved_text(
    as_alice, alice, alice_token, call_tool
):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)

    response = as_alice.post(f"{INBOX}{proposal.pk}/accept/", {"value": "Prefers tables"})

    assert response.status_code == 302
    assert flashes(response) == ["Accepted: “Prefers tables” is now in your memory."]
    assert value_of(alice, KEY) == ("Prefers tables", "user_stated")


def test_accepting_an_agents_new_memory_unedited_keeps_it_the_agents_note(
    as_alice, alice, alice_token, call_tool
):
    profile_update(user=alice, review_agent_memories=True)
    created = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "Likes tea"})
    pk = created.json()["proposal"]["id"]

    as_alice.post(f"{INBOX}{pk}/accept/")

    assert value_of(alice, "fact:tea") == ("Likes tea", "tp_extracted")


def test_edited_text_the_memory_cannot_take_keeps_the_text(as_alice, alice, alice_token, call_tool):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)
    too_long = "x" * 2001

    htmx = as_alice.post(f"{INBOX}{proposal.pk}/accept/", {"value": too_long}, headers=HX)
    plain = as_alice.post(f"{INBOX}{proposal.pk}/accept/", {"value": too_long})

    for response in (htmx, plain):
        html = text(response)
        assert '<p class="error" role="alert">' in html
        assert f'aria-invalid="true">{too_long}</textarea>' in html
        assert '<details class="edit" open data-cancel>' in html
    assert htmx.status_code == 200
    assert plain.status_code == 400
    assert "<html" in text(plain)
    assert value_of(alice, KEY) == (STATED, "user_stated")
    assert MemoryProposal.objects.get(pk=proposal.pk).status == "pending_review"


def test_reject_leaves_the_memory(as_alice, alice, alice_token, call_tool):
    stated(alice)
    stated(alice, key="name", value="Kevin")
    first = propose_update(call_tool, alice_token)
    second = propose_update(call_tool, alice_token, key="name", value="Kev")

    htmx = as_alice.post(f"{INBOX}{first.pk}/reject/", headers=HX)
    plain = as_alice.post(f"{INBOX}{second.pk}/reject/")

    assert htmx["HX-Trigger"] == "inbox-changed"
    assert "Rejected — your memory stays as it was." in text(htmx)
    assert plain["Location"] == INBOX
    assert flashes(plain) == ["Rejected the change to name; your memory stays as it was."]
    assert value_of(alice, KEY) == (STATED, "user_stated")
    assert value_of(alice, "name") == ("Kevin", "user_stated")
    assert set(MemoryProposal.objects.values_list("status", flat=True)) == {"rejected"}
    events = ActivityEvent.objects.filter(user=alice, event_type=EventType.PROPOSAL_REJECTED)
    assert sorted(event.payload["proposal_id"] for event in events) == [first.pk, second.pk]


def test_a_decided_proposal_cannot_be_decided_again(as_alice, alice, alice_token, call_tool):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)
    as_alice.post(f"{INBOX}{proposal.pk}/reject/")

    htmx = as_alice.post(f"{INBOX}{proposal.pk}/accept/", headers=HX)
    plain = as_alice.post(f"{INBOX}{proposal.pk}/accept/")

    assert f"Proposal {proposal.pk} was rejected already." in text(htmx)
    assert "Rejected — your memory stays as it was." in text(htmx)
    assert plain["Location"] == INBOX
    assert flashes(plain)[-1] == f"Proposal {proposal.pk} was rejected already."
    assert value_of(alice, KEY) == (STATED, "user_stated")


def test_an_expired_proposal_says_so(as_alice, alice, alice_token, call_tool):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)
    MemoryProposal.objects.filter(pk=proposal.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )

    assert row_ids(text(as_alice.get(INBOX))) == []
    response = as_alice.post(f"{INBOX}{proposal.pk}/accept/", headers=HX)

    assert f"Proposal {proposal.pk} has expired." in text(response)
    assert "Expired — it waited too long; nothing changed." in text(response)
    assert value_of(alice, KEY) == (STATED, "user_stated")


def test_keep_both_adds_the_near_duplicate_beside_the_entry(as_alice, alice, alice_agent):
    stated(alice)
    proposal = MemoryProposal.objects.create(
        user=alice,
        key=KEY,
        action="update",
        trigger="near_duplicate",
        before={
            "value": STATED,
            "source": "user_stated",
            "confidence": 1.0,
            "tags": [],
            "pinned": False,
        },
        after={
            "value": PROPOSED,
            "source": "tp_extracted",
            "confidence": 0.8,
            "tags": [],
            "pinned": False,
        },
        requested_key="preference:short-bullets",
        expires_at=timezone.now() + timedelta(days=1),
        **Actor.for_agent(alice_agent).as_fields(),
    )

    page = text(as_alice.get(INBOX))
    response = as_alice.post(f"{INBOX}{proposal.pk}/accept/", {"keep_both": "1"})

    assert f"Why it waits: overlaps “{STATED}”" in page
    assert "The agent asked to add this as <code>preference:short-bullets</code>." in page
    assert ">Keep both<span class=" in page
    assert flashes(response) == [f"Kept both: preference:short-bullets added beside {KEY}."]
    assert value_of(alice, KEY) == (STATED, "user_stated")
    assert Memory.objects.get(user=alice, key="preference:short-bullets").value == PROPOSED
    decided = text(as_alice.get(INBOX))
    assert "Accepted — both kept (added as <code>preference:short-bullets</code>)" in decided


# ---------------------------------------------------------------- several at once


def test_bulk_accept_skips_one_already_decided(as_alice, alice, alice_token, call_tool):
    stated(alice)
    stated(alice, key="name", value="Kevin")
    first = propose_update(call_tool, alice_token)
    second = propose_update(call_tool, alice_token, key="name", value="Kev")
    review.proposal_reject(user=alice, proposal_id=second.pk, actor=Actor.for_user(alice))

    response = as_alice.post(
        f"{INBOX}decide/", {"ids": [first.pk, second.pk], "decision": "accept"}
    )

    assert response["Location"] == INBOX
    assert flashes(response) == [
        f"Accepted 1 proposal. Skipped 1: Proposal {second.pk} was rejected already."
    ]
    assert value_of(alice, KEY) == (PROPOSED, "user_stated")
    assert value_of(alice, "name") == ("Kevin", "user_stated")
    assert MemoryProposal.objects.get(pk=first.pk).status == "accepted"


def test_bulk_reject_with_htmx_shows_each_outcome(as_alice, alice, alice_token, call_tool):
    stated(alice)
    stated(alice, key="name", value="Kevin")
    stated(alice, key="role", value="Head of Growth")
    first = propose_update(call_tool, alice_token)
    second = propose_update(call_tool, alice_token, key="name", value="Kev")
    third = propose_update(call_tool, alice_token, key="role", value="CEO")
    review.proposal_accept(user=alice, proposal_id=second.pk, actor=Actor.for_user(alice))

    response = as_alice.post(
        f"{INBOX}decide/", {"ids": [first.pk, second.pk], "decision": "reject"}, headers=HX
    )

    html = text(response)
    assert response["HX-Trigger"] == "inbox-changed"
    assert html.strip().startswith('<section id="inbox-list"')
    assert (
        '<p class="error" role="alert" data-focus>Rejected 1 proposal. '
        f"Skipped 1: Proposal {second.pk} was accepted already.</p>"
    ) in html
    assert row_ids(html) == [third.pk, second.pk, first.pk]
    first_row = html.split(f'id="proposal-{first.pk}"')[1]
    assert "Rejected — your memory stays as it was." in first_row
    second_row = html.split(f'id="proposal-{second.pk}"')[1].split(f'id="proposal-{first.pk}"')[0]
    assert "Accepted — now in your memory" in second_row
    assert f"Proposal {second.pk} was accepted already." in second_row
    assert f'name="ids" value="{third.pk}"' in html  # still waiting
    assert MemoryProposal.objects.get(pk=first.pk).status == "rejected"
    assert value_of(alice, "name") == ("Kev", "user_stated")


def test_bulk_without_a_selection_or_with_junk_changes_nothing(
    as_alice, alice, alice_token, call_tool
):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)

    empty = as_alice.post(f"{INBOX}decide/", {"decision": "accept"})
    junk = as_alice.post(f"{INBOX}decide/", {"ids": ["1x"], "decision": "accept"})
    no_decision = as_alice.post(f"{INBOX}decide/", {"ids": [proposal.pk], "decision": "maybe"})

    assert flashes(empty) == ["Select at least one proposal first."]
    assert junk.status_code == 400
    assert no_decision.status_code == 400
    assert "That request could not be understood." in text(no_decision)
    assert MemoryProposal.objects.get(pk=proposal.pk).status == "pending_review"


# ---------------------------------------------------------------- isolation


def test_bob_cannot_see_or_decide_alices_proposals(client, alice, bob, alice_token, call_tool):
    stated(alice)
    proposal = propose_update(call_tool, alice_token)
    client.force_login(bob)

    assert row_ids(text(client.get(INBOX))) == []
    assert client.post(f"{INBOX}{proposal.pk}/accept/").status_code == 404
    assert client.post(f"{INBOX}{proposal.pk}/reject/", headers=HX).status_code == 404
    bulk = client.post(f"{INBOX}decide/", {"ids": [proposal.pk], "decision": "accept"})
    assert flashes(bulk) == [f"Skipped 1: No proposal {proposal.pk}."]

    assert MemoryProposal.objects.get(pk=proposal.pk).status == "pending_review"
    assert value_of(alice, KEY) == (STATED, "user_stated")
    assert not ActivityEvent.objects.filter(event_type=EventType.PROPOSAL_ACCEPTED).exists()


# ---------------------------------------------------------------- the count in the navigation


def test_the_navigation_counts_pending_proposals(as_alice, alice, alice_token, call_tool):
    html = text(as_alice.get("/activity/"))
    assert '<a id="nav-inbox" href="/context/inbox/"' in html
    assert 'hx-trigger="inbox-changed from:body"' in html
    assert "waiting" not in html.split('id="nav-inbox"')[1].split("</a>")[0]

    stated(alice)
    stated(alice, key="name", value="Kevin")
    first = propose_update(call_tool, alice_token)
    propose_update(call_tool, alice_token, key="name", value="Kev")
    link = text(as_alice.get("/activity/")).split('id="nav-inbox"')[1].split("</a>")[0]
    assert 'aria-label="Inbox, 2 waiting"' in link
    assert '>Inbox <span class="badge" aria-hidden="true">2</span>' in link

    as_alice.post(f"{INBOX}{first.pk}/accept/", headers=HX)
    count = as_alice.get(
        f"{INBOX}count/",
        headers={**HX, "HX-Current-URL": "http://testserver/context/inbox/"},
    )
    assert text(count) == (
        '<a id="nav-inbox" href="/context/inbox/" hx-get="/context/inbox/count/" '
        'hx-trigger="inbox-changed from:body" hx-swap="outerHTML" '
        'aria-label="Inbox, 1 waiting" aria-current="page">'
        'Inbox <span class="badge" aria-hidden="true">1</span></a>'
    )
    assert as_alice.get(f"{INBOX}count/")["Location"] == INBOX  # without htmx: the page


def test_the_count_is_two_queries_and_none_for_visitors(alice, bob, alice_token, call_tool):
    stated(alice)
    propose_update(call_tool, alice_token)
    proposed = call_tool(alice_token, "memory_write", {"path": "SOUL.md", "content": "x"})
    assert proposed.status_code == 202
    request = RequestFactory().get("/")
    request.user = alice

    with CaptureQueriesContext(connection) as queries:
        context = nav_counts(request)
        assert len(queries) == 0  # only when a template shows it
        assert (context["inbox_count"](), context["inbox_count"]()) == (2, 2)
    assert len(queries) == 2  # the memories' proposals and the identity files'

    request.user = bob
    assert nav_counts(request)["inbox_count"]() == 0
    request.user = AnonymousUser()
    assert nav_counts(request) == {}


# ---------------------------------------------------------------- the review setting


def test_the_setting_makes_new_agent_memories_wait(as_alice, alice, alice_token, call_tool):
    on = as_alice.post("/settings/", {"setting": "review", "review_agent_memories": "on"})
    assert on["Location"] == "/settings/"
    assert Profile.objects.get(user=alice).review_agent_memories is True

    waiting = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "Likes tea"})
    assert waiting.status_code == 202
    assert waiting.json()["proposal"]["trigger"] == "new_memory"
    assert not Memory.objects.filter(user=alice, key="fact:tea").exists()

    off = as_alice.post("/settings/", {"setting": "review"})
    assert off["Location"] == "/settings/"
    assert Profile.objects.get(user=alice).review_agent_memories is False

    applied = call_tool(alice_token, "create_memory", {"key": "fact:pen", "value": "Blue pens"})
    assert applied.status_code == 201
    assert value_of(alice, "fact:pen") == ("Blue pens", "tp_extracted")


# ---------------------------------------------------------------- the profile API


def test_the_profile_api_reads_the_settings(client, alice, alice_agent, alice_token, call_tool):
    stated(alice)
    propose_update(call_tool, alice_token)
    profile_update(user=alice, token_budget=1500, review_agent_memories=True)
    headers = {"Authorization": f"Bearer {alice_token}"}

    response = client.get("/api/v1/profile", headers=headers)

    assert response.status_code == 200
    assert response.json() == {
        "token_budget": 1500,
        "memory_paused": False,
        "review_agent_memories": True,
        "auto_learn": False,
        "agent_learns_from_turns": False,
        "pending_proposals": 1,
    }
    agent_set_learning(agent=alice_agent, learns_from_turns=True)
    assert client.get("/api/v1/profile", headers=headers).json()["agent_learns_from_turns"]


def test_the_profile_api_cannot_change_anything(client, alice, alice_token):
    profile_update(user=alice, review_agent_memories=True)
    headers = {"Authorization": f"Bearer {alice_token}"}
    body = '{"review_agent_memories": false}'

    for method in ("post", "patch", "put", "delete"):
        response = getattr(client, method)(
            "/api/v1/profile", body, content_type="application/json", headers=headers
        )
        assert response.status_code == 405, method
        assert response.json()["error"]["code"] == "method_not_allowed"
        assert "GET" in response["Allow"]

    assert Profile.objects.get(user=alice).review_agent_memories is True


def test_the_profile_api_needs_a_token_and_is_per_user(client, alice, bob, bob_token):
    profile_update(user=alice, memory_paused=True)

    assert client.get("/api/v1/profile").status_code == 401
    bobs = client.get("/api/v1/profile", headers={"Authorization": f"Bearer {bob_token}"})

    assert bobs.json()["memory_paused"] is False
    assert bobs.json()["pending_proposals"] == 0
