"""htmx's history restore (Back to a page it no longer holds) gets the whole page from every
page with partials, whichever region the view swaps otherwise (lib/pages.py render_page)."""

import pytest

from activity.actors import Actor
from memory.services import memory_set

HX = {"HX-Request": "true"}
RESTORE = {**HX, "HX-History-Restore-Request": "true"}
PAGES = [
    "/",
    "/?tab=entries",
    "/search/?q=tea",
    "/activity/",
    "/work/",
    "/turns/",
    "/agents/",
    "/context/inbox/",
    "/deleted/",
    "/documents/",
    "/memories/{pk}/history/",
]


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("target", [None, "entry-list", "context-tabs", "doc-panel"])
def test_a_history_restore_gets_the_whole_page(as_alice, alice, path, target):
    memory_set(user=alice, key="fact:tea", value="Likes tea", actor=Actor.for_user(alice))
    url = path.format(pk=alice.memories.get(key="fact:tea").pk)
    headers = {**RESTORE, **({"HX-Target": target} if target else {})}

    response = as_alice.get(url, headers=headers)

    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith("<!doctype html>")


@pytest.mark.parametrize("path", ["/activity/", "/work/", "/turns/", "/search/?q=tea"])
def test_other_htmx_requests_get_the_partial(as_alice, alice, path):
    response = as_alice.get(path, headers=HX)

    assert response.status_code == 200
    assert "<html" not in response.content.decode()
