"""Saves that mean what they say (issue 30), through the pages: the profile form's Save is
all or nothing even when the service refuses a field the form let through; a restore from
Recently deleted brings back the same memories, whose old history links answer again; and
adding an entry that is there already adds nothing and points at it."""

import pytest
from django import forms
from django.contrib.messages import get_messages

from activity.actors import Actor
from memory.bulk import memory_delete_all
from memory.forms import ProfileForm
from memory.models import Memory, MemoryHistory
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def say(user, key: str, value: str) -> Memory:
    return memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user)).memory


def test_a_field_the_service_refuses_after_the_form_saves_no_field(as_alice, alice, monkeypatch):
    """The form checks each value first; should the service still refuse one (a race), the
    fields written before it are undone with it."""
    say(alice, "name", "Kev")
    monkeypatch.setattr(ProfileForm, "clean", forms.Form.clean)  # let the bad zone through
    typed = {
        "profile-name": "Kevin",
        "profile-company": "YARNNN",
        "profile-timezone": "Mars/Base",
    }

    response = as_alice.post("/profile/", typed, headers=HX)

    body = response.content.decode()
    assert "Nothing was saved: fix the field marked below." in body
    # The error is on the timezone field, and names what was typed.
    timezone_field = body.split('id="profile-timezone"')[1].split('id="profile-summary"')[0]
    assert "field-error" in timezone_field
    assert "Mars/Base" in timezone_field
    assert 'value="Kevin"' in body  # as typed
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {"name": "Kev"}
    assert MemoryHistory.objects.filter(user=alice).count() == 1
    assert "HX-Trigger" not in response


def test_restore_all_from_recently_deleted_brings_the_old_history_links_back(as_alice, alice):
    tea = say(alice, "fact:tea", "Drinks green tea")
    name = say(alice, "name", "Kevin")
    batch = memory_delete_all(user=alice, actor=Actor.for_user(alice)).batch
    assert as_alice.get(f"/memories/{tea.pk}/history/").status_code == 404

    response = as_alice.post(f"/memories/batches/{batch}/undo/", {"then": "trash"})

    assert response.status_code == 302
    for memory in (tea, name):
        page = as_alice.get(f"/memories/{memory.pk}/history/")
        assert page.status_code == 200
        assert memory.value in page.content.decode()
        assert Memory.objects.get(pk=memory.pk).created_at == memory.created_at


def test_the_activity_log_links_a_restored_memory_as_there(as_alice, alice):
    """The deletion's event links its history row; once restored, the memory is there again
    (memory/selectors.py history_states asks the memory table, not the kept id)."""
    from memory.selectors import history_states
    from memory.services import memory_delete, memory_restore

    tea = say(alice, "fact:tea", "Drinks green tea")
    deletion = memory_delete(user=alice, key="fact:tea", actor=Actor.for_user(alice))
    assert deletion.memory_id == tea.pk
    assert history_states(user=alice, ids=[deletion.pk]) == {deletion.pk: False}
    memory_restore(user=alice, history_id=deletion.pk, actor=Actor.for_user(alice))
    assert history_states(user=alice, ids=[deletion.pk]) == {deletion.pk: True}


def test_adding_an_entry_that_is_there_already_answers_with_a_link_to_it(as_alice, alice):
    existing = say(alice, "preference:prefers-oat-milk-in-coffee", "Prefers oat milk in coffee.")
    typed = {"entry-kind": "preference", "entry-value": "Prefers oat milk in coffee."}

    response = as_alice.post("/entries/add/", typed, headers=HX)

    body = response.content.decode()
    link = (
        f'href="/?tab=entries&amp;q=preference%3Aprefers-oat-milk-in-coffee#memory-{existing.pk}"'
    )
    assert "You have this already:" in body
    assert "Nothing was added." in body
    assert link in body
    assert "HX-Trigger" not in response  # nothing changed
    assert Memory.objects.filter(user=alice).count() == 1

    plain = as_alice.post("/entries/add/", typed)
    assert plain.status_code == 302
    assert plain["Location"] == (
        f"/?tab=entries&q=preference%3Aprefers-oat-milk-in-coffee#memory-{existing.pk}"
    )
    assert [str(m) for m in get_messages(plain.wsgi_request)] == [
        "You have “Prefers oat milk in coffee.” already; nothing was added."
    ]
    assert Memory.objects.filter(user=alice).count() == 1


def test_a_deleted_memorys_history_shows_its_changes_under_earlier_keys(as_alice, alice):
    from memory.entries import memory_rename
    from memory.services import memory_delete

    say(alice, "fact:tea", "Drinks a little green tea")
    memory_rename(user=alice, key="fact:tea", new_key="fact:green-tea", actor=Actor.for_user(alice))
    deletion = memory_delete(user=alice, key="fact:green-tea", actor=Actor.for_user(alice))

    page = as_alice.get(f"/history/{deletion.pk}/")

    assert page.status_code == 200
    # The creation under its first key is the deleted memory's too (its rows keep its id).
    assert page.context["rows"][-1].action == "create"
    assert page.context["rows"][-1].key == "fact:tea"
    assert [row.action for row in page.context["rows"]] == ["delete", "rename", "create"]
