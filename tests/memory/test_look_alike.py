"""Agents' notes that look alike (issue 26): found with memory/duplicates.py's rule, within a
kind, among agents' notes only; the Inbox's one line about them, loaded after the page; their
page, where a group is merged (one kept, the others deleted with history, undone as one) or
left as it is."""

import numpy as np
import pytest
from django.contrib.messages import get_messages

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from lib.errors import Forbidden, InvalidInput, NotFound
from memory import look_alike, review_views
from memory.bulk import memory_batch_undo, memory_merge_look_alikes
from memory.entries import look_alike_dismiss
from memory.look_alike import look_alike_groups
from memory.models import LookAlikeDismissal, Memory, MemoryHistory, MemoryProposal
from memory.services import memory_upsert
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

INBOX = "/context/inbox/"
PAGE = "/context/inbox/look-alike/"
HX = {"HX-Request": "true"}

# Three notes about one thing, each adding a word to another (so each was stored as its
# own row), one about another thing.
SUPPORT = [
    "Caroline went to the LGBTQ support group",
    "Caroline went to an LGBTQ support group on Monday",
    "Caroline went to the LGBTQ support group yesterday evening",
]
OTHER = "Jon is opening a dance studio downtown"


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def _notes(alice, actor, texts, kind="fact"):
    return [
        memory_upsert(user=alice, key=f"{kind}:note-{n}", value=text, actor=actor).memory
        for n, text in enumerate(texts)
    ]


def _texts(group):
    return [note.value for note in group.notes]


def text(response):
    return response.content.decode()


# ---------------------------------------------------------------- finding them


def test_agents_notes_that_look_alike_form_a_group(alice, agent):
    notes = _notes(alice, agent, [*SUPPORT, OTHER])

    [group] = look_alike_groups(user=alice)

    assert group.kind == "fact"
    assert group.ids == sorted(note.pk for note in notes[:3])
    # The one that says the most is suggested to keep; the others, newest first.
    assert _texts(group) == [SUPPORT[2], SUPPORT[1], SUPPORT[0]]
    assert group.keep.pk == notes[2].pk


def test_what_the_user_stated_and_other_kinds_are_never_grouped(alice, you, agent):
    _notes(alice, agent, [SUPPORT[1]])
    _notes(alice, agent, [SUPPORT[2]], kind="discovery")
    memory_upsert(user=alice, key="fact:stated", value=SUPPORT[0], actor=you)

    assert look_alike_groups(user=alice) == []


def test_notes_near_in_meaning_but_sharing_few_words_do_not_look_alike(alice, agent):
    _notes(alice, agent, ["Jon is rehearsing a show", "Jon is opening a studio"])

    assert look_alike_groups(user=alice) == []


def test_only_the_most_recent_notes_are_compared(alice, agent, monkeypatch):
    monkeypatch.setattr(look_alike, "NOTES", 2)
    _notes(alice, agent, [SUPPORT[0], OTHER, SUPPORT[1]])  # the oldest falls out

    assert look_alike_groups(user=alice) == []


def test_without_wordllama_nothing_is_suggested(alice, agent, monkeypatch):
    _notes(alice, agent, SUPPORT)
    monkeypatch.setattr(look_alike, "_vectors", lambda texts: None)

    assert look_alike_groups(user=alice) == []


def test_each_users_notes_are_their_own(alice, bob, agent, bob_agent):
    _notes(alice, agent, SUPPORT[:2])
    _notes(bob, Actor.for_agent(bob_agent), SUPPORT[2:])

    assert [len(group.notes) for group in look_alike_groups(user=alice)] == [2]
    assert look_alike_groups(user=bob) == []


# ---------------------------------------------------------------- merging and leaving


def test_merging_keeps_one_and_deletes_the_others_with_history(alice, you, agent):
    notes = _notes(alice, agent, SUPPORT)
    kept = notes[0]

    result = memory_merge_look_alikes(
        user=alice, keep_id=kept.pk, memory_ids=[note.pk for note in notes], actor=you
    )

    assert (result.done, result.refused, result.missing) == (
        ["fact:note-1", "fact:note-2"],
        [],
        0,
    )
    assert list(Memory.objects.filter(user=alice).values_list("key", "value")) == [
        ("fact:note-0", SUPPORT[0])
    ]
    deletions = MemoryHistory.objects.filter(user=alice, action="delete").order_by("key")
    assert [(row.key, row.before["value"], row.batch) for row in deletions] == [
        ("fact:note-1", SUPPORT[1], result.batch),
        ("fact:note-2", SUPPORT[2], result.batch),
    ]
    assert (
        ActivityEvent.objects.filter(user=alice, event_type=EventType.MEMORY_DELETED).count() == 2
    )
    assert not MemoryHistory.objects.filter(memory=kept).exclude(action="create").exists()

    undo = memory_batch_undo(user=alice, batch=result.batch, actor=you)

    assert sorted(undo.done) == ["fact:note-1", "fact:note-2"]
    assert Memory.objects.filter(user=alice).count() == 3


def test_merging_leaves_what_the_user_stated_since(alice, you, agent):
    notes = _notes(alice, agent, SUPPORT[:2])
    memory_upsert(user=alice, key="fact:note-1", value=SUPPORT[1], actor=you)  # stated now

    result = memory_merge_look_alikes(
        user=alice, keep_id=notes[0].pk, memory_ids=[note.pk for note in notes], actor=you
    )

    assert [row.message for row in result.refused] == [
        "You stated 'fact:note-1'; it is left as it is."
    ]
    assert result.batch is None
    assert Memory.objects.filter(user=alice).count() == 2


def test_merging_needs_the_user_a_kept_note_among_them_and_that_note(alice, you, agent):
    notes = _notes(alice, agent, SUPPORT[:2])
    ids = [note.pk for note in notes]

    with pytest.raises(Forbidden):
        memory_merge_look_alikes(user=alice, keep_id=ids[0], memory_ids=ids, actor=agent)
    with pytest.raises(InvalidInput):
        memory_merge_look_alikes(user=alice, keep_id=ids[0] + 100, memory_ids=ids, actor=you)
    Memory.objects.filter(pk=ids[0]).delete()  # gone meanwhile
    with pytest.raises(NotFound):
        memory_merge_look_alikes(user=alice, keep_id=ids[0], memory_ids=ids, actor=you)

    assert Memory.objects.filter(pk=ids[1]).exists()


def test_a_group_left_as_it_is_is_not_suggested_again_until_a_new_note_joins(alice, you, agent):
    notes = _notes(alice, agent, SUPPORT[:2])

    look_alike_dismiss(user=alice, memory_ids=[note.pk for note in notes], actor=you)

    assert look_alike_groups(user=alice) == []
    assert Memory.objects.filter(user=alice).count() == 2
    scout = Actor.for_agent(AgentFactory(user=alice, name="scout"))
    memory_upsert(user=alice, key="fact:note-2", value=SUPPORT[2], actor=scout)
    [group] = look_alike_groups(user=alice)
    assert len(group.notes) == 3


def test_leaving_a_group_needs_the_user_and_two_of_their_notes(alice, bob, you, agent):
    notes = _notes(alice, agent, SUPPORT[:2])
    ids = [note.pk for note in notes]

    with pytest.raises(Forbidden):
        look_alike_dismiss(user=alice, memory_ids=ids, actor=agent)
    with pytest.raises(InvalidInput):
        look_alike_dismiss(user=bob, memory_ids=ids, actor=Actor.for_user(bob))
    assert not LookAlikeDismissal.objects.exists()


# ---------------------------------------------------------------- the Inbox's line and the page


def test_the_inbox_asks_for_the_line_after_it_loads(as_alice, alice, agent, monkeypatch):
    _notes(alice, agent, SUPPORT)
    monkeypatch.setattr(review_views, "look_alike_groups", None)  # never called for the page

    response = as_alice.get(INBOX)

    assert response.status_code == 200
    html = text(response)
    assert f'<div id="look-alike" hx-get="{INBOX}" hx-trigger="load" hx-swap="outerHTML">' in html
    assert f'<a href="{PAGE}">Do some of your agents\' notes look alike?</a>' in html
    assert "notes look alike</strong>" not in html  # not computed for the page itself


def test_the_inbox_line_says_how_many_notes_look_alike(as_alice, alice, agent):
    _notes(alice, agent, [*SUPPORT, OTHER])

    response = as_alice.get(INBOX, headers={**HX, "HX-Target": "look-alike"})

    assert response.status_code == 200
    html = text(response)
    assert html.strip().startswith('<div id="look-alike" class="card">')
    assert "<strong>3 notes look alike</strong>" in html
    assert f'<a href="{PAGE}">merge?</a>' in html
    assert "1 group of your agents" in html
    assert "Review inbox" not in html  # the line alone
    assert not MemoryProposal.objects.exists()  # a suggestion, not a queue


def test_the_inbox_line_is_empty_when_nothing_looks_alike(as_alice, alice, agent):
    _notes(alice, agent, [SUPPORT[0], OTHER])

    response = as_alice.get(INBOX, headers={**HX, "HX-Target": "look-alike"})

    assert text(response).strip() == '<div id="look-alike"></div>'


def test_the_page_shows_each_group_escaped(as_alice, alice, agent, monkeypatch):
    # The same meaning whatever the markup: the words decide (and the page escapes them).
    monkeypatch.setattr(look_alike, "_vectors", lambda texts: np.full((len(texts), 4), 0.5))
    _notes(alice, agent, ["<script>alert(1)</script> likes green tea", "likes green tea <b>"])

    response = as_alice.get(PAGE)

    assert response.status_code == 200
    html = text(response)
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; likes green tea" in html
    assert "likes green tea &lt;b&gt;" in html
    assert "2 fact notes look alike. Keep which?" in html
    assert html.count('name="keep"') == 2
    assert 'noted by <bdi class="badge agent" dir="auto">assistant</bdi>' in html


def test_merging_from_the_page_with_htmx_answers_the_outcome_with_an_undo(as_alice, alice, agent):
    notes = _notes(alice, agent, SUPPORT)
    ids = [note.pk for note in notes]

    response = as_alice.post(
        f"{PAGE}merge/", {"ids": ids, "keep": ids[2]}, headers={**HX, "HX-Target": "x"}
    )

    assert response.status_code == 200
    html = text(response)
    assert html.strip().startswith(f'<li id="look-alike-{min(ids)}"')
    assert "Merged: 2 notes deleted, the one you chose kept." in html
    batch = MemoryHistory.objects.filter(user=alice, action="delete").first().batch
    assert f'action="/memories/batches/{batch}/undo/"' in html
    assert list(Memory.objects.filter(user=alice).values_list("pk", flat=True)) == [ids[2]]


def test_merging_and_leaving_from_the_page_without_javascript(as_alice, alice, agent):
    notes = _notes(alice, agent, SUPPORT)
    ids = [note.pk for note in notes]

    left = as_alice.post(f"{PAGE}dismiss/", {"ids": ids[:2]})
    merged = as_alice.post(f"{PAGE}merge/", {"ids": ids, "keep": ids[0]})

    assert (left.status_code, left["Location"]) == (302, PAGE)
    assert (merged.status_code, merged["Location"]) == (302, PAGE)
    assert [str(m) for m in get_messages(merged.wsgi_request)] == [
        "Left as they are; this group is not suggested again.",
        "Merged: 2 notes deleted, the one you chose kept. Undo brings them all back; each is "
        "also in Recently deleted.",
    ]
    assert LookAlikeDismissal.objects.get().memory_ids == sorted(ids[:2])
    assert Memory.objects.filter(user=alice).count() == 1


def test_bad_requests_change_nothing(as_alice, alice, agent):
    notes = _notes(alice, agent, SUPPORT[:2])
    ids = [note.pk for note in notes]

    for body in ({"ids": ids}, {"ids": ["x"], "keep": ids[0]}, {"keep": ids[0]}):
        assert as_alice.post(f"{PAGE}merge/", body).status_code == 400
    assert as_alice.post(f"{PAGE}dismiss/", {"ids": "x"}).status_code == 400
    assert Memory.objects.filter(user=alice).count() == 2
    assert not LookAlikeDismissal.objects.exists()


def test_bob_cannot_merge_or_leave_alices_notes(client, alice, bob, agent):
    notes = _notes(alice, agent, SUPPORT)
    ids = [note.pk for note in notes]
    client.force_login(bob)

    page = client.get(PAGE)
    merged = client.post(f"{PAGE}merge/", {"ids": ids, "keep": ids[0]}, headers=HX)
    left = client.post(f"{PAGE}dismiss/", {"ids": ids}, headers=HX)

    assert "Caroline" not in text(page)
    assert "The note to keep is gone; nothing was merged." in text(merged)
    assert "Fewer than two of these notes are still there." in text(left)
    assert Memory.objects.filter(user=alice).count() == 3
    assert not LookAlikeDismissal.objects.exists()


def test_login_required(client, db):
    for method, url in [("get", PAGE), ("post", f"{PAGE}merge/"), ("post", f"{PAGE}dismiss/")]:
        response = getattr(client, method)(url)
        assert (response.status_code, response["Location"]) == (302, f"/login/?next={url}")
