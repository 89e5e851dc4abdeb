"""Many entries on the Context page: 50 at a time with the filters kept, the bulk form (with
and without htmx), undoing a bulk action, and "Delete all my memories" behind a typed
confirmation."""

import re
import uuid

import pytest
from django.contrib.messages import get_messages

from activity.actors import Actor
from memory.bulk import memory_bulk_delete
from memory.models import Memory, MemoryHistory
from memory.services import memory_upsert
from tests.factories import MemoryFactory

HX = {"HX-Request": "true"}


def hx(target):
    return {**HX, "HX-Target": target}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def say(user, key, value, **kwargs):
    return memory_upsert(
        user=user, key=key, value=value, actor=Actor.for_user(user), **kwargs
    ).memory


def text(response):
    return response.content.decode()


def flashes(response):
    return [str(message) for message in get_messages(response.wsgi_request)]


def listed(body):
    """The keys of the entry cards in a page or partial, in order."""
    return re.findall(r'<span class="key-line">key <code class="key">([^<]+)</code>', body)


def state(user):
    return {
        memory.key: (memory.value, list(memory.tags), memory.pinned)
        for memory in Memory.objects.filter(user=user)
    }


def many(user, count, kind="fact", **kwargs):
    """`count` entries, the newest (first listed) last."""
    return [
        MemoryFactory(
            user=user, key=f"{kind}:item-{number:03d}", value=f"{kind} {number}", **kwargs
        )
        for number in range(count)
    ]


# ---------------------------------------------------------------- fifty at a time


def test_the_list_shows_fifty_at_a_time_with_the_range_and_page_links(as_alice, alice):
    many(alice, 120)
    keys = list(
        Memory.objects.filter(user=alice)
        .order_by("-updated_at", "key")
        .values_list("key", flat=True)
    )

    first = text(as_alice.get("/?tab=entries"))
    assert listed(first) == keys[:50]
    assert "1–50 of 120 entries" in first
    assert '<nav class="pagination" aria-label="Pages of entries">' in first
    assert 'href="/?tab=entries&amp;page=2"' in first
    assert 'rel="prev"' not in first

    second = text(as_alice.get("/?tab=entries&page=2"))
    assert listed(second) == keys[50:100]
    assert "51–100 of 120 entries" in second
    assert 'aria-current="page"><span class="sr-only">Page </span>2</a>' in second
    assert 'href="/?tab=entries"' in second  # page 1 is the list without a page
    # A page past the end is the last one; one that is not a number is the first.
    assert listed(text(as_alice.get("/?tab=entries&page=9"))) == keys[100:]
    assert listed(text(as_alice.get("/?tab=entries&page=x"))) == keys[:50]


def test_page_links_and_the_refresh_keep_every_filter(as_alice, alice):
    many(alice, 60, tags=["work"])
    many(alice, 5, kind="preference", tags=["work"])
    say(alice, "fact:home", "fact at home", tags=["home"])

    page = as_alice.get("/?tab=entries&kind=fact&tag=work&q=fact", headers=hx("entry-list"))
    body = text(page)
    assert body.lstrip().startswith('<div id="entry-list" hx-get="/"')
    assert "1–50 of 60 matching (66 entries in all)" in body
    link = "/?tab=entries&amp;kind=fact&amp;tag=work&amp;q=fact&amp;page=2"
    assert f'href="{link}" hx-get="{link}"' in body
    second = text(as_alice.get(link.replace("&amp;", "&"), headers=hx("entry-list")))
    assert len(listed(second)) == 10
    assert all(key.startswith("fact:item-") for key in listed(second))
    # The list refreshes itself (entries-changed) on the page it shows, the filters from the
    # filter form; the bulk form carries both.
    assert second.lstrip().startswith('<div id="entry-list" hx-get="/?page=2"')
    for name, value in (
        ("kind", "fact"),
        ("tag", "work"),
        ("q", "fact"),
        ("page", "2"),
    ):
        assert f'<input type="hidden" name="{name}" value="{value}">' in second


def test_a_kind_split_over_two_pages_says_it_continues(as_alice, alice):
    many(alice, 55)  # facts come first, then preferences
    many(alice, 3, kind="preference")
    second = text(as_alice.get("/?tab=entries&page=2"))
    assert (
        '<h3 id="kind-fact">Fact <span class="badge">55</span> '
        '<span class="muted">continued</span></h3>' in second
    )
    assert '<h3 id="kind-preference">Preference <span class="badge">3</span></h3>' in second
    first = text(as_alice.get("/?tab=entries"))
    assert '<h3 id="kind-fact">Fact <span class="badge">55</span></h3>' in first
    assert "kind-preference" not in first


# ---------------------------------------------------------------- bulk form


def test_each_entry_has_a_box_for_the_bulk_form_and_the_page_lists_its_ids(as_alice, alice):
    tea = say(alice, "fact:tea", "Drinks tea")
    body = text(as_alice.get("/?tab=entries"))
    assert (
        f'<input type="checkbox" class="select-entry" id="select-{tea.pk}" name="bulk-ids" '
        f'value="{tea.pk}" form="entry-bulk" aria-label="Select “Drinks tea”">'
    ) in body
    assert f'<input type="hidden" name="bulk-page_ids" value="{tea.pk}">' in body
    assert '<label for="bulk-all">Select all 1 on this page</label>' in body


def test_bulk_delete_without_js_redirects_to_the_same_list_with_undo(as_alice, alice):
    one, _two, three = (say(alice, f"fact:n{n}", f"Note {n}", tags=["work"]) for n in range(3))
    response = as_alice.post(
        "/entries/bulk/",
        {
            "bulk-action": "delete",
            "bulk-ids": [one.pk, three.pk],
            "tab": "entries",
            "tag": "work",
            "q": "note",
        },
    )
    batch = MemoryHistory.objects.get(user=alice, key="fact:n0", action="delete").batch
    assert response.status_code == 302
    assert response["Location"] == f"/?tab=entries&tag=work&q=note&batch={batch}"
    assert flashes(response) == ["2 deleted."]
    assert list(state(alice)) == ["fact:n1"]

    page = text(as_alice.get(response["Location"]))
    assert "Deleted 2 memories together" in page
    assert f'action="/memories/batches/{batch}/undo/"' in page

    undone = as_alice.post(
        f"/memories/batches/{batch}/undo/", {"then": "entries", "tag": "work", "q": "note"}
    )
    assert undone.status_code == 302
    assert undone["Location"] == "/?tab=entries&tag=work&q=note"
    assert flashes(undone) == ["2 put back."]
    assert sorted(state(alice)) == ["fact:n0", "fact:n1", "fact:n2"]


def test_select_all_on_this_page_works_without_js(as_alice, alice):
    entries = many(alice, 55)
    on_page = [memory.pk for memory in entries[5:]]  # the newest 50
    response = as_alice.post(
        "/entries/bulk/",
        {
            "bulk-action": "tag_add",
            "bulk-tags": "Morning Routine, work",
            "bulk-all_on_page": "on",
            "bulk-page_ids": on_page,
        },
    )
    assert response.status_code == 302
    assert flashes(response) == ["50 re-tagged. Tag: 'Morning Routine' saved as #morning-routine."]
    tagged = Memory.objects.filter(user=alice, tags=["morning-routine", "work"])
    assert sorted(tagged.values_list("pk", flat=True)) == sorted(on_page)
    assert Memory.objects.filter(user=alice, tags=[]).count() == 5


def test_bulk_pin_with_htmx_answers_with_the_list_as_it_was_shown(as_alice, alice):
    tea = say(alice, "fact:tea", "Drinks tea")
    coffee = say(alice, "fact:coffee", "Drinks coffee", pinned=True)
    say(alice, "fact:water", "Drinks water")
    response = as_alice.post(
        "/entries/bulk/",
        {"bulk-action": "pin", "bulk-ids": [tea.pk, coffee.pk], "tab": "entries", "q": "drinks"},
        headers=hx("entry-list"),
    )
    body = text(response)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    assert body.lstrip().startswith('<div id="entry-list"')
    assert (
        '<div id="bulk-result" data-focus tabindex="-1" class="card notice bulk-result" '
        'role="status">'
    ) in body
    assert "<p>1 pinned, 1 pinned already.</p>" in body
    batch = MemoryHistory.objects.get(user=alice, key="fact:tea", action="update").batch
    assert f'hx-post="/memories/batches/{batch}/undo/"' in body
    assert '<input type="hidden" name="q" value="drinks">' in body
    assert state(alice)["fact:tea"][2] is True

    undo = as_alice.post(
        f"/memories/batches/{batch}/undo/",
        {"then": "entries", "q": "drinks"},
        headers=hx("entry-list"),
    )
    assert "<p>1 put back.</p>" in text(undo)
    assert undo["HX-Trigger"] == "memory-changed"
    assert (state(alice)["fact:tea"][2], state(alice)["fact:coffee"][2]) == (False, True)


def test_a_refused_row_is_reported_and_the_others_stand(as_alice, alice):
    full = say(alice, "fact:full", "Full", tags=[f"t{n:02d}" for n in range(20)])
    tea = say(alice, "fact:tea", "Drinks tea")
    response = as_alice.post(
        "/entries/bulk/",
        {"bulk-action": "tag_add", "bulk-tags": "extra", "bulk-ids": [full.pk, tea.pk]},
        headers=hx("entry-list"),
    )
    assert "<p>1 re-tagged, 1 refused: fact:full: At most 20 tags; there are 21.</p>" in text(
        response
    )
    assert state(alice)["fact:tea"][1] == ["extra"]
    assert len(state(alice)["fact:full"][1]) == 20


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"bulk-action": "delete"}, "Select some entries first"),
        ({"bulk-action": "tag_add", "bulk-ids": "ID"}, "Type the tags to add"),
        (
            {"bulk-action": "tag_remove", "bulk-ids": "ID", "bulk-tags": " , "},
            "Type the tags to remove",
        ),
        (
            {"bulk-action": "tag_add", "bulk-ids": "ID", "bulk-tags": "!!!"},
            "No tag to add: &#x27;!!!&#x27; left out: a tag needs a letter or a digit.",
        ),
        ({"bulk-action": "explode", "bulk-ids": "ID"}, "Select a valid choice"),
        ({"bulk-action": "delete", "bulk-ids": "1; DROP"}, "not one this page made"),
    ],
)
def test_a_refused_bulk_form_writes_nothing_with_or_without_js(as_alice, alice, data, error):
    tea = say(alice, "fact:tea", "Drinks tea")
    data = {name: str(tea.pk) if value == "ID" else value for name, value in data.items()}
    before, history = state(alice), MemoryHistory.objects.count()

    plain = as_alice.post("/entries/bulk/", data)
    assert plain.status_code == 400
    assert "<html" in text(plain)
    assert error in text(plain)
    partial = as_alice.post("/entries/bulk/", data, headers=hx("entry-list"))
    assert partial.status_code == 200
    assert text(partial).lstrip().startswith('<div id="entry-list"')
    assert error in text(partial)
    assert "HX-Trigger" not in partial
    assert (state(alice), MemoryHistory.objects.count()) == (before, history)


def test_bobs_ids_in_alices_form_change_nothing_of_bobs(as_alice, alice, bob):
    bobs = say(bob, "fact:bobs", "Bob's own")
    tea = say(alice, "fact:tea", "Drinks tea")
    bob_before = state(bob)
    response = as_alice.post(
        "/entries/bulk/", {"bulk-action": "delete", "bulk-ids": [bobs.pk, tea.pk]}
    )
    assert flashes(response) == ["1 deleted, 1 gone already."]
    assert state(bob) == bob_before
    assert state(alice) == {}
    # Nor can Alice undo a batch of Bob's: 404, nothing restored.
    batch = memory_bulk_delete(user=bob, memory_ids=[bobs.pk], actor=Actor.for_user(bob)).batch
    assert as_alice.post(f"/memories/batches/{batch}/undo/").status_code == 404
    assert as_alice.post(f"/memories/batches/{uuid.uuid4()}/undo/").status_code == 404
    assert state(bob) == {}


def test_the_new_pages_need_a_signed_in_user(client, alice):
    tea = say(alice, "fact:tea", "Drinks tea")
    for method, url, data in [
        ("post", "/entries/bulk/", {"bulk-action": "delete", "bulk-ids": tea.pk}),
        ("get", "/memories/delete-all/", {}),
        ("post", "/memories/delete-all/", {"confirm": "delete all"}),
        ("post", f"/memories/batches/{uuid.uuid4()}/undo/", {}),
    ]:
        response = getattr(client, method)(url, data)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")
    assert list(state(alice)) == ["fact:tea"]


# ---------------------------------------------------------------- delete all


def test_delete_all_says_what_it_covers_and_wants_the_phrase_typed(as_alice, alice, bob):
    say(alice, "name", "Alice")
    say(alice, "tone_slack", "casual")
    say(alice, "verbosity_slack", "brief")
    say(alice, "fact:tea", "Drinks tea")
    say(bob, "fact:bobs", "Bob's own")
    before = state(alice)

    page = text(as_alice.get("/memories/delete-all/"))
    assert "Every memory your assistant has of you: 4 memories in all." in page
    assert "Your profile: 1 field." in page
    assert "Your styles: 2 settings for 1 platform." in page
    assert "Your entries: 1 entry." in page
    assert "Documents, work items, proposals waiting in your Inbox" in page
    assert "Type “delete all” to confirm" in page

    for typed in ("", "delete", "alice", "delete all!"):
        refused = as_alice.post("/memories/delete-all/", {"confirm": typed})
        assert refused.status_code == 400
        assert (
            "Type “delete all” exactly to delete all your memories. Nothing was deleted."
            in text(refused)
        )
        assert state(alice) == before

    response = as_alice.post("/memories/delete-all/", {"confirm": "  Delete   ALL "})
    batch = MemoryHistory.objects.filter(user=alice, action="delete").first().batch
    assert response.status_code == 302
    # Said once, beside its Undo: in the entry list's box, which the page opens at.
    assert response["Location"] == f"/?tab=entries&batch={batch}#bulk-result"
    assert flashes(response) == []
    shown = text(as_alice.get(response["Location"].split("#")[0]))
    assert 'id="bulk-result"' in shown
    assert "Deleted 4 memories together" in shown
    assert f'hx-post="/memories/batches/{batch}/undo/"' in shown
    assert state(alice) == {}
    assert list(state(bob)) == ["fact:bobs"]
    assert MemoryHistory.objects.filter(user=alice, batch=batch, action="delete").count() == 4
    assert "You have no memories to delete." in text(as_alice.get("/memories/delete-all/"))

    # Recently deleted offers them back as one.
    trash = text(as_alice.get("/deleted/"))
    assert "4 memories deleted together" in trash
    assert f'hx-post="/memories/batches/{batch}/undo/"' in trash
    assert "Restore all 4" in trash
    restored = as_alice.post(
        f"/memories/batches/{batch}/undo/", {"then": "trash"}, headers=hx("trash")
    )
    assert text(restored).lstrip().startswith('<div id="trash">')
    assert "<p>4 put back.</p>" in text(restored)
    assert "deleted together" not in text(restored)
    assert state(alice) == before


def test_undo_after_a_key_was_added_again_says_so_for_that_row(as_alice, alice):
    tea = say(alice, "fact:tea", "Drinks tea")
    coffee = say(alice, "fact:coffee", "Drinks coffee")
    as_alice.post("/entries/bulk/", {"bulk-action": "delete", "bulk-ids": [tea.pk, coffee.pk]})
    batch = MemoryHistory.objects.get(user=alice, key="fact:tea", action="delete").batch
    say(alice, "fact:tea", "Drinks mint tea now")
    assert "2 memories deleted together, 1 still deleted" in text(as_alice.get("/deleted/"))

    response = as_alice.post(f"/memories/batches/{batch}/undo/", {"then": "trash"})
    assert response["Location"] == "/deleted/"
    assert flashes(response) == [
        "1 put back, 1 refused: 'fact:tea' was added again since; it is left as it is."
    ]
    assert state(alice)["fact:tea"][0] == "Drinks mint tea now"
    assert state(alice)["fact:coffee"][0] == "Drinks coffee"
