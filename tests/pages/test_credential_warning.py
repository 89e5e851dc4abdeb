"""The user may save what looks like a credential on the pages (agents may not: see
tests/memory/test_secrets.py): it is saved, and the page says what it looks like and that
their agents will read it, escaped, with htmx beside the note and without as a flash."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from activity.actors import Actor
from context.models import Document
from context.services import document_write
from context.versions import document_latest_version_id
from memory.models import Memory
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
DOC_HX = {**HX, "HX-Target": "doc-panel"}
STRIPE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
WARNING = "This looks like a Stripe secret key: your agents will read it."
CARD_WARNING = "This looks like a payment card number: your agents will read it."


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def text(response) -> str:
    return response.content.decode()


def flashes(response) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


def warned(body: str, note: str, warning: str = WARNING) -> bool:
    return (
        f'<span class="saved" role="status">{note} <strong class="warning">{warning}</strong>'
        f"</span>" in body
    )


# ---------------------------------------------------------------- the Context page


def test_a_profile_field_holding_a_card_is_saved_with_a_warning(as_alice, alice):
    response = as_alice.post(
        "/profile/", {"profile-company": "Acme, card 4111 1111 1111 1111"}, headers=HX
    )

    assert response.status_code == 200
    assert warned(text(response), "Saved company.", CARD_WARNING)
    assert Memory.objects.get(user=alice, key="company").value == "Acme, card 4111 1111 1111 1111"


def test_without_javascript_the_warning_is_a_second_flash(as_alice, alice):
    response = as_alice.post("/profile/", {"profile-summary": f"Stripe: {STRIPE}"})

    assert response.status_code == 302
    assert flashes(response) == [("success", "Saved summary."), ("warning", WARNING)]
    page = text(as_alice.get(response["Location"]))
    assert f'<p class="flash warning" role="status">{WARNING}</p>' in page


def test_an_entry_added_with_a_key_is_saved_with_a_warning_and_escaped(as_alice, alice):
    value = f"<b>Billing</b> key {STRIPE}"

    response = as_alice.post(
        "/entries/add/", {"entry-kind": "fact", "entry-value": value}, headers=HX
    )

    body = text(response)
    assert warned(body, f"Added “&lt;b&gt;Billing&lt;/b&gt; key {STRIPE}” as a fact.")
    assert "<b>Billing</b>" not in body
    assert Memory.objects.get(user=alice).value == value


def test_an_edited_entry_is_saved_with_a_warning(as_alice, alice):
    memory = memory_upsert(
        user=alice, key="fact:billing", value="billing", actor=Actor.for_user(alice)
    ).memory

    response = as_alice.post(
        f"/memories/{memory.pk}/edit/", {f"edit-{memory.pk}-value": f"key {STRIPE}"}, headers=HX
    )
    plain = as_alice.post(f"/memories/{memory.pk}/edit/", {f"edit-{memory.pk}-value": "no key"})

    assert warned(text(response), "Saved.")
    assert [level for level, _ in flashes(plain)] == ["success"]
    assert Memory.objects.get(pk=memory.pk).value == "no key"


def test_ordinary_saves_say_nothing_more(as_alice):
    profile = as_alice.post("/profile/", {"profile-company": "Acme"}, headers=HX)
    entry = as_alice.post(
        "/entries/add/", {"entry-kind": "fact", "entry-value": "Prefers oat milk"}, headers=HX
    )

    for response in (profile, entry):
        assert 'class="warning"' not in text(response)


# ---------------------------------------------------------------- the Documents pages


def test_a_new_document_holding_a_key_is_saved_with_a_warning(as_alice, alice):
    response = as_alice.post(
        "/documents/new/",
        {"new-scope": "mine", "new-path": "keys.md", "new-content": f"Stripe: {STRIPE}"},
        headers=DOC_HX,
    )

    assert warned(text(response), "Created keys.md.")
    assert Document.objects.get(user=alice, path="keys.md").body == f"Stripe: {STRIPE}"


def test_an_edited_document_is_saved_with_a_warning_with_or_without_javascript(as_alice, alice):
    document = document_write(
        user=alice, path="notes.md", content="v1", actor=Actor.for_user(alice)
    )
    base = document_latest_version_id(document)

    response = as_alice.post(
        "/documents/mine/edit/notes.md",
        {"content": f"# Keys\n{STRIPE}\n", "base_version": base},
        headers=DOC_HX,
    )
    base = document_latest_version_id(Document.objects.get(user=alice, path="notes.md"))
    plain = as_alice.post(
        "/documents/mine/edit/notes.md",
        {"content": f"# Keys\n{STRIPE}\nmore\n", "base_version": base},
    )
    same = as_alice.post(
        "/documents/mine/edit/notes.md",
        {"content": f"# Keys\n{STRIPE}\nmore\n", "base_version": base + 1},
        headers=DOC_HX,
    )

    assert warned(text(response), "Saved.")
    assert flashes(plain) == [("success", "Saved: notes.md."), ("warning", WARNING)]
    assert '<span class="saved" role="status">No change.</span>' in text(same)


def test_a_daily_line_with_a_card_is_added_with_a_warning(as_alice, alice):
    response = as_alice.post(
        "/documents/today/", {"daily-line": "Paid with 4111 1111 1111 1111"}, headers=DOC_HX
    )

    assert warned(text(response), "Added to today&#x27;s log.", CARD_WARNING)
