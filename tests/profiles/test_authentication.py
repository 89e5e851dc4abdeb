"""Bearer-token authentication: one statement loads the token, its agent, user and profile."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from profiles.authentication import agent_token_lookup
from profiles.models import AgentToken, Profile
from profiles.services import hash_token, profile_update, token_create
from tests.factories import AgentFactory, UserFactory

pytestmark = pytest.mark.django_db


def _fields(instance):
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.fields}


def test_the_lookup_loads_what_select_related_would(alice, alice_agent):
    profile_update(user=alice, token_budget=750, memory_paused=True)
    raw = token_create(agent=alice_agent, label="laptop").raw
    expected = AgentToken.objects.select_related("agent__user__profile").get(
        token_hash=hash_token(raw)
    )

    with CaptureQueriesContext(connection) as queries:
        token = agent_token_lookup(hash_token(raw))
        user = token.agent.user
        loaded = [_fields(token), _fields(token.agent), _fields(user), _fields(user.profile)]

    assert len(queries.captured_queries) == 1
    assert loaded == [
        _fields(expected),
        _fields(expected.agent),
        _fields(expected.agent.user),
        _fields(expected.agent.user.profile),
    ]
    assert (user.profile.token_budget, user.profile.memory_paused) == (750, True)
    assert agent_token_lookup(hash_token(raw + "x")) is None


def test_a_user_without_a_profile_gets_one_with_the_default_budget(client):
    user = UserFactory(username="dana")
    raw = token_create(agent=AgentFactory(user=user, name="assistant")).raw
    assert not Profile.objects.filter(user=user).exists()
    looked_up = agent_token_lookup(hash_token(raw)).agent.user
    assert not Profile.user.field.remote_field.is_cached(looked_up)

    response = client.get(
        "/api/v1/working-memory?format=json", headers={"Authorization": f"Bearer {raw}"}
    )

    assert response.status_code == 200
    assert json.loads(response.content)["budget"] == 2000
    assert Profile.objects.get(user=user).token_budget == 2000


def test_the_render_budget_comes_from_the_profile_read_with_the_token(client, alice, alice_token):
    profile_update(user=alice, token_budget=750)
    headers = {"Authorization": f"Bearer {alice_token}"}
    client.get("/api/v1/working-memory", headers=headers)  # records the token's first use

    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/working-memory?format=json", headers=headers)

    assert json.loads(response.content)["budget"] == 750
    assert len(queries.captured_queries) == 2  # the token lookup and the rows: no profile query


def test_a_deactivated_users_token_is_refused(call_tool, alice, alice_token):
    get_user_model().objects.filter(pk=alice.pk).update(is_active=False)

    response = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "green"})

    assert response.status_code == 401
    assert response.json()["error"] == {
        "code": "invalid_token",
        "message": "The user this token acts for is deactivated.",
        "field": None,
    }
