"""Times on pages are in the user's own zone (pages/middleware.py), named once per page;
the API keeps ISO 8601 with an offset."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from activity.actors import Actor
from activity.models import ActivityEvent
from memory.services import memory_upsert
from profiles.services import agent_get_or_create, token_create

pytestmark = pytest.mark.django_db

PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def alice_in_paris(alice):
    memory_upsert(user=alice, key="timezone", value="Europe/Paris", actor=Actor.for_user(alice))
    return alice


def _shown(html: str, moment: datetime) -> bool:
    local = moment.astimezone(PARIS)
    return f"{local:%b} {local.day}, {local:%H:%M}" in html


def test_activity_shows_the_users_local_time(client, alice_in_paris):
    memory_upsert(
        user=alice_in_paris, key="fact:tea", value="Likes tea", actor=Actor.for_user(alice_in_paris)
    )
    event = ActivityEvent.objects.filter(user=alice_in_paris).latest("created_at")
    client.force_login(alice_in_paris)

    html = client.get("/activity/").content.decode()

    assert _shown(html, event.created_at)
    assert html.count("Times are shown in Europe/Paris.") == 1
    offset = event.created_at.astimezone(PARIS).isoformat()[-6:]
    assert re.search(rf'datetime="[^"]+{re.escape(offset)}"', html)


def test_tokens_show_created_and_last_used_in_local_time(client, alice_in_paris):
    agent = agent_get_or_create(user=alice_in_paris, name="desk")
    issued = token_create(agent=agent)
    client.force_login(alice_in_paris)

    html = client.get("/agents/").content.decode()

    local = issued.token.created_at.astimezone(PARIS)
    # In the pages' one format (config/formats/en/formats.py): "Nov 28, 2026, 05:55".
    assert f"{local:%b} {local.day}, {local:%Y}, {local:%H:%M}" in html


def test_a_user_without_a_zone_sees_utc(client, alice):
    memory_upsert(user=alice, key="fact:tea", value="Likes tea", actor=Actor.for_user(alice))
    event = ActivityEvent.objects.filter(user=alice).latest("created_at")
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    utc = event.created_at.astimezone(ZoneInfo("UTC"))
    assert f"{utc:%b} {utc.day}, {utc:%H:%M}" in html
    assert "Times are shown in UTC (set your time zone" in html


def test_the_api_keeps_iso_8601_with_an_offset(client, alice_in_paris):
    agent = agent_get_or_create(user=alice_in_paris, name="desk")
    token = token_create(agent=agent).raw
    memory_upsert(
        user=alice_in_paris, key="fact:tea", value="Likes tea", actor=Actor.for_user(alice_in_paris)
    )

    response = client.post(
        "/api/v1/tools/get_memory",
        {"key": "fact:tea"},
        content_type="application/json",
        headers={"authorization": f"Bearer {token}"},
    )

    updated = response.json()["memory"]["updated_at"]
    assert datetime.fromisoformat(updated).utcoffset() is not None
