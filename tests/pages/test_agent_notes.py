"""Agents' own notes on the Entries tab (issue 27, item 1): the user's memory as before, a
"Whose" filter listing each agent with notes, each note saying whose it is; the user edits,
deletes (with undo) and moves a note into their memory. Counts count the user's memory."""

import pytest

from activity.actors import Actor
from memory.models import HistoryAction, Memory, MemoryHistory
from memory.services import memory_upsert
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
HOSTILE = '<script>alert("x")</script> builds on ARM'


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def coder(alice):
    return AgentFactory(user=alice, name="coder", display_name="Coder <b>bot</b>")


def _note(alice, agent, key="fact:arm", value=HOSTILE):
    return memory_upsert(
        user=alice, key=key, value=value, actor=Actor.for_agent(agent), owner_agent=agent
    ).memory


def _entry_list(html):
    """The Entries tab's list (the preview beside it is the working memory's: Part B's
    read rules decide what it shows)."""
    return html.split('id="entry-list"', 1)[1].split('class="entry-links"', 1)[0]


def _mine(alice, key="fact:tea", value="Likes tea"):
    return memory_upsert(user=alice, key=key, value=value, actor=Actor.for_user(alice)).memory


def test_the_entries_tab_shows_the_users_memory_and_counts_only_it(as_alice, alice, coder):
    _mine(alice)
    _note(alice, coder)

    html = as_alice.get("/?tab=entries").content.decode()
    listed = _entry_list(html)

    assert "Likes tea" in listed
    assert "builds on ARM" not in listed
    assert "1 of 1 entry" in listed
    # The filter names the agent, escaped, with its count.
    assert "Coder &lt;b&gt;bot&lt;/b&gt;&#x27;s notes (1)" in html
    assert "<b>bot</b>" not in html


def test_the_whose_filter_lists_an_agents_notes_escaped(as_alice, alice, coder):
    _mine(alice)
    _note(alice, coder)

    html = as_alice.get("/?tab=entries&agent=coder").content.decode()

    assert "Likes tea" not in _entry_list(html)
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; builds on ARM" in html
    assert '<script>alert("x")</script>' not in html
    assert "Coder &lt;b&gt;bot&lt;/b&gt;&#x27;s note" in html
    assert "Move into my memory" in html
    assert 'id="entry-bulk"' not in html  # bulk actions are for the user's memory


def test_an_unknown_agent_in_the_filter_shows_the_users_memory(as_alice, alice, bob):
    _mine(alice)
    other = AgentFactory(user=bob, name="spy")
    _note(bob, other, value="Bob's secret note")

    html = as_alice.get("/?tab=entries&agent=spy").content.decode()

    assert "Bob's secret note" not in html
    assert "spy" not in _entry_list(html)


def test_the_user_edits_a_note_and_it_stays_the_agents(as_alice, alice, coder):
    note = _note(alice, coder, value="Builds on ARM")

    response = as_alice.post(
        f"/memories/{note.pk}/edit/",
        {f"edit-{note.pk}-value": "Builds on ARM and x86", f"edit-{note.pk}-tags": "ci"},
        headers=HX,
    )

    assert response.status_code == 200
    assert "Saved." in response.content.decode()
    note.refresh_from_db()
    assert (note.value, note.tags, note.owner_agent_id) == (
        "Builds on ARM and x86",
        ["ci"],
        coder.pk,
    )
    assert not Memory.objects.filter(owner_agent=None).exists()


def test_deleting_a_note_offers_undo_that_puts_it_back_as_a_note(as_alice, alice, coder):
    note = _note(alice, coder, value="Builds on ARM")
    _mine(alice, key="fact:arm", value="The user's own")

    deleted = as_alice.post(f"/memories/{note.pk}/delete/", headers=HX)
    history = MemoryHistory.objects.get(action=HistoryAction.DELETE)
    undo = as_alice.post(f"/history/{history.pk}/restore/", {"then": "row"}, headers=HX)

    assert "Undo" in deleted.content.decode()
    assert undo.status_code == 200
    back = Memory.objects.get(owner_agent=coder, key="fact:arm")
    assert back.value == "Builds on ARM"
    assert Memory.objects.get(owner_agent=None, key="fact:arm").value == "The user's own"


def test_move_into_my_memory(as_alice, alice, coder):
    note = _note(alice, coder, value="Builds on ARM")

    response = as_alice.post(f"/memories/{note.pk}/share/", headers=HX)

    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    assert "Moved “Builds on ARM” into your memory." in response.content.decode()
    memory = Memory.objects.get(user=alice)
    assert (memory.owner_agent_id, memory.source, memory.value) == (
        None,
        "user_stated",
        "Builds on ARM",
    )
    activity = as_alice.get("/activity/").content.decode()
    assert "from Coder &lt;b&gt;bot&lt;/b&gt;&#x27;s note into your memory" in activity


def test_move_onto_a_taken_key_says_so_and_keeps_the_note(as_alice, alice, coder):
    note = _note(alice, coder, value="Builds on ARM")
    _mine(alice, key="fact:arm", value="Mine")

    response = as_alice.post(f"/memories/{note.pk}/share/", headers=HX)
    plain = as_alice.post(f"/memories/{note.pk}/share/")

    assert "Your memory has &#x27;fact:arm&#x27; already" in response.content.decode()
    assert plain.status_code == 302
    assert Memory.objects.get(pk=note.pk).owner_agent_id == coder.pk
    assert Memory.objects.get(owner_agent=None).value == "Mine"


def test_the_users_memory_cannot_be_moved_and_another_users_note_is_404(
    as_alice, alice, bob, coder
):
    mine = _mine(alice)
    bobs = _note(bob, AgentFactory(user=bob, name="spy"), value="Bob's")

    assert as_alice.post(f"/memories/{mine.pk}/share/").status_code == 404
    assert as_alice.post(f"/memories/{bobs.pk}/share/").status_code == 404
    assert as_alice.post(f"/memories/{bobs.pk}/delete/").status_code == 404
    assert Memory.objects.filter(pk=bobs.pk).exists()


def test_the_activity_page_says_whose_note_was_written(as_alice, alice, coder):
    _note(alice, coder, value="Builds on ARM")

    html = as_alice.get("/activity/").content.decode()

    assert "Coder &lt;b&gt;bot&lt;/b&gt;&#x27;s note" in html


def test_deleting_a_note_without_javascript_offers_undo_beside_the_users_key(
    as_alice, alice, coder
):
    note = _note(alice, coder, value="Builds on ARM")
    _mine(alice, key="fact:arm", value="The user's own")

    response = as_alice.post(f"/memories/{note.pk}/delete/", follow=True)

    assert "Undo" in response.content.decode().split('id="entry-list"', 1)[0]


def test_a_notes_history_says_whose_note_it_is_and_shows_only_its_changes(as_alice, alice, coder):
    note = _note(alice, coder, value="Builds on ARM")
    _mine(alice, key="fact:arm", value="The user's own")

    html = as_alice.get(f"/memories/{note.pk}/history/").content.decode()

    assert (
        '<bdi dir="auto">Coder &lt;b&gt;bot&lt;/b&gt;</bdi>\'s own note, not your memory.' in html
    )
    assert "Builds on ARM" in html
    assert "The user&#x27;s own" not in html
