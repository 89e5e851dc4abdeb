"""lib/pages.py: the one copy of each page helper."""

from types import SimpleNamespace

import pytest
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from activity.actors import Actor
from lib.errors import InvalidInput
from lib.pages import Who, add_service_error, done, render_page, target_partial, who
from memory.models import MemoryHistory
from memory.services import memory_set

HX = {"HTTP_HX_REQUEST": "true"}
RESTORE = {**HX, "HTTP_HX_HISTORY_RESTORE_REQUEST": "true"}
TEMPLATE = "pages/_nav.html"  # its nav_inbox partial stands for any page's


def request(user=None, **headers):
    made = RequestFactory().get("/", **headers)
    made.htmx = HtmxDetails(made)
    made.user = user or AnonymousUser()
    return made


@pytest.mark.parametrize(
    ("headers", "template_name"),
    [
        ({}, TEMPLATE),
        (HX, f"{TEMPLATE}#nav_inbox"),
        (RESTORE, TEMPLATE),  # Back to a page htmx no longer holds: the whole page
    ],
)
def test_render_page_renders_the_partial_for_htmx_only(headers, template_name):
    response = render_page(request(**headers), TEMPLATE, {}, partial="nav_inbox", status=201)

    assert response.template_name == template_name
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("headers", "partial"),
    [
        ({}, None),
        (HX, None),  # htmx without a target: the page
        ({**HX, "HTTP_HX_TARGET": "entry-list"}, "entry_list"),
        ({**HX, "HTTP_HX_TARGET": "context-tabs"}, "tabs"),
        ({**HX, "HTTP_HX_TARGET": "somewhere-else"}, None),
        ({**RESTORE, "HTTP_HX_TARGET": "entry-list"}, None),
    ],
)
def test_target_partial_maps_the_htmx_target_to_a_partial(headers, partial):
    partials = {"entry-list": "entry_list", "context-tabs": "tabs"}

    assert target_partial(request(**headers), partials) == partial


def test_done_flashes_the_message_and_redirects():
    made = request()
    made.session = {}
    made._messages = FallbackStorage(made)

    response = done(made, "Saved.", "/?tab=profile")

    assert (response.status_code, response["Location"]) == (302, "/?tab=profile")
    assert [str(message) for message in get_messages(made)] == ["Saved."]


class SampleForm(forms.Form):
    key = forms.CharField()
    value = forms.CharField()


@pytest.mark.parametrize(
    ("field", "fields", "errors"),
    [
        ("value", None, {"value": ["Too long."]}),
        ("tags", None, {"__all__": ["Too long."]}),  # not a field of the form: above it
        (None, None, {"__all__": ["Too long."]}),
        ("slug", {"slug": "key"}, {"key": ["Too long."]}),  # the service's name, mapped
        ("value", {"slug": "key"}, {"value": ["Too long."]}),
    ],
)
def test_add_service_error_puts_the_error_on_the_field_it_names(field, fields, errors):
    form = SampleForm({"key": "a", "value": "b"})
    assert form.is_valid()

    add_service_error(form, InvalidInput("Too long.", field=field), fields)

    assert form.errors == errors


@pytest.mark.django_db
def test_who_made_a_change(alice, bob, alice_agent):
    memory_set(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))
    memory_set(user=alice, key="role", value="CTO", actor=Actor.for_agent(alice_agent))
    memory_set(user=alice, key="company", value="Acme", actor=Actor.system())
    memory_set(user=alice, key="summary", value="Hi", actor=Actor.for_user(bob))
    rows = {row.key: row for row in MemoryHistory.objects.filter(user=alice)}

    seen = {key: who(request(alice), row) for key, row in rows.items()}

    assert seen == {
        "name": Who("user", "you", "you"),
        "role": Who("agent", "assistant", "agent assistant"),
        "company": Who("system", "system", "system"),
        "summary": Who("user", "bob", "bob"),
    }
    alice_agent.delete()
    gone = MemoryHistory.objects.get(user=alice, key="role")
    assert who(request(alice), gone) == Who("agent", "a deleted agent", "a deleted agent")


def test_who_reads_only_the_actor_columns():
    row = SimpleNamespace(
        actor_type="user", actor_user_id=7, actor_agent=None, actor_label="a deleted user"
    )

    assert who(request(SimpleNamespace(pk=7)), row) == Who("user", "you", "you")
    assert who(request(SimpleNamespace(pk=8)), row) == Who(
        "user", "a deleted user", "a deleted user"
    )
