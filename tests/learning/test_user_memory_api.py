"""GET /api/v1/profile-memory: the consolidated profile as the assistant loads it."""

from __future__ import annotations

import pytest

from activity.actors import Actor
from context.models import Document
from context.services import PROFILE_PATH, document_write
from learning.user_memory_doc import SECTIONS, render_profile
from llm.client import model_token_counter
from llm.models import Turn, TurnStatus
from profiles.models import Profile
from profiles.services import system_token_create

URL = "/api/v1/profile-memory"

pytestmark = pytest.mark.django_db


def get(client, token, query=""):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(f"{URL}{query}", headers=headers)


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


def stored_profile(user, *, identity=("Alice",), topics=(), turn_count=0) -> int:
    text = render_profile(
        frontmatter={
            "user_id": user.pk,
            "schema_version": 1,
            "last_updated": "2025-06-03T09:00:00+00:00",
            "turn_count": turn_count,
        },
        sections={SECTIONS[0]: list(identity), SECTIONS[4]: list(topics)},
    )
    document = document_write(
        user=user, path=PROFILE_PATH, content=text, actor=Actor.for_user(user)
    )
    return document.written_version.pk


def test_the_stored_profile_with_its_tokens_and_live_turn_count(
    client, llm_server, alice, alice_agent, alice_token
):
    version = stored_profile(alice, identity=["Alice, data engineer"], turn_count=1)
    for _ in range(4):
        Turn.objects.create(
            user=alice,
            agent=alice_agent,
            user_message="hi",
            assistant_reply="hello",
            status=TurnStatus.DONE,
        )

    response = get(client, alice_token)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"text", "tokens", "budget", "cut", "tokenizer", "version_id", "exists"}
    assert "- Alice, data engineer" in body["text"]
    assert "\nturn_count: 4\n" in body["text"]
    assert "\nlast_updated: 2025-06-03T09:00:00+00:00\n" in body["text"]
    counter = model_token_counter()
    assert body["tokens"] == counter.count(body["text"])
    assert body["tokenizer"] == counter.name
    assert (body["budget"], body["cut"], body["version_id"], body["exists"]) == (
        2000,
        False,
        version,
        True,
    )


def test_an_over_budget_profile_is_served_cut(client, llm_server, alice, alice_token):
    Profile.objects.update_or_create(user=alice, defaults={"profile_budget": 500})
    topics = [
        f"Topic {n}: a long note on something the user and assistant discussed" for n in range(60)
    ]
    stored_profile(alice, topics=topics)
    stored = Document.objects.get(user=alice, path=PROFILE_PATH).body

    body = get(client, alice_token).json()

    assert body["cut"] is True
    assert body["budget"] == 500
    assert body["tokens"] == model_token_counter().count(body["text"]) <= 500
    assert "- Topic 0:" in body["text"]
    assert "- Topic 59:" not in body["text"]
    assert all(f"## {name}" in body["text"] for name in SECTIONS)
    assert Document.objects.get(user=alice, path=PROFILE_PATH).body == stored  # only served cut


def test_markdown_format_returns_the_text_alone(client, llm_server, alice, alice_token):
    stored_profile(alice)
    as_json = get(client, alice_token).json()

    response = get(client, alice_token, "?format=markdown")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response.content.decode() == as_json["text"]
    assert response["X-Mnemo-Tokens"] == str(as_json["tokens"])
    assert response["X-Mnemo-Token-Counter"] == as_json["tokenizer"]
    assert response["X-Mnemo-Cut"] == "false"


@pytest.mark.parametrize("query", ["?format=", "?format=xml"])
def test_a_bad_format_is_400(client, llm_server, alice_token, query):
    response = get(client, alice_token, query)
    assert response.status_code == 400
    assert error(response)["field"] == "format"


def test_before_any_rewrite_the_empty_profile(client, llm_server, alice, alice_token):
    body = get(client, alice_token).json()

    assert (body["exists"], body["version_id"], body["cut"]) == (False, None, False)
    assert f"\nuser_id: {alice.pk}\n" in body["text"]
    assert body["text"].count("_(empty)_") == len(SECTIONS)
    assert not Document.objects.filter(path=PROFILE_PATH).exists()  # reading writes nothing


def test_no_llm_and_no_profile_is_503_llm_not_configured(client, no_llm, alice_token):
    response = get(client, alice_token)

    assert response.status_code == 503
    problem = error(response)
    assert problem["code"] == "llm_not_configured"
    assert "MNEMO_LLM_MODEL" in problem["message"]


def test_a_stored_profile_is_served_without_an_llm(client, no_llm, alice, alice_token):
    version = stored_profile(alice, identity=["Alice, written by hand"])

    response = get(client, alice_token)

    assert response.status_code == 200
    body = response.json()
    assert "- Alice, written by hand" in body["text"]
    assert (body["exists"], body["version_id"]) == (True, version)


def test_another_users_token_never_sees_the_profile(client, llm_server, alice, bob, bob_token):
    stored_profile(alice, identity=["alice's secret"])

    body = get(client, bob_token).json()

    assert "alice's secret" not in body["text"]
    assert f"\nuser_id: {bob.pk}\n" in body["text"]
    assert (body["exists"], body["version_id"]) == (False, None)


def test_without_a_token_is_401(client, llm_server, alice):
    stored_profile(alice)
    response = get(client, None)
    assert response.status_code == 401
    assert error(response)["code"] == "not_authenticated"
    assert "Alice" not in response.content.decode()


def test_a_system_token_is_403(client, llm_server, alice):
    stored_profile(alice)
    response = get(client, system_token_create(label="ops").raw)
    assert response.status_code == 403
    assert error(response)["code"] == "forbidden"
