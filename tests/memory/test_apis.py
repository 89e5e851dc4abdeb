"""The memory tools over HTTP: happy paths with exact values, isolation, auth, pause, bad input."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from activity.models import ActivityEvent
from memory.models import Memory, MemoryHistory
from profiles.models import AgentToken
from profiles.services import profile_update, token_create, token_revoke

pytestmark = pytest.mark.django_db


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


# --- create_memory ------------------------------------------------------------------


def test_create_memory_creates_then_replaces(call_tool, alice, alice_agent, alice_token):
    first = call_tool(
        alice_token,
        "create_memory",
        {"key": "preference:report-format", "value": "bullet points", "tags": ["Work", "work"]},
    )
    assert first.status_code == 201
    body = first.json()
    assert body["created"] is True
    row = body["memory"]
    assert {k: row[k] for k in row if not k.endswith("_at")} == {
        "key": "preference:report-format",
        "kind": "preference",
        "value": "bullet points",
        "source": "tp_extracted",
        "confidence": 0.8,
        "tags": ["work"],
        "pinned": False,
        "access_count": 0,
        "audience": "user",
        "session": "",
    }
    assert row["last_accessed_at"] is None
    # Written without a time: it was said when it was written.
    said, written = (parse_datetime(row[name]) for name in ("occurred_at", "created_at"))
    assert abs(said - written) < timedelta(seconds=1)

    second = call_tool(
        alice_token,
        "create_memory",
        {"key": "preference:report-format", "value": "numbered lists", "confidence": 0.6},
    )
    assert second.status_code == 200
    assert second.json()["created"] is False
    assert second.json()["memory"]["value"] == "numbered lists"
    assert second.json()["memory"]["confidence"] == 0.6

    memory = Memory.objects.get(user=alice, key="preference:report-format")
    assert (memory.value, memory.confidence) == ("numbered lists", 0.6)
    history = list(MemoryHistory.objects.filter(user=alice).order_by("id"))
    assert [(h.action, h.actor_type, h.actor_agent_id) for h in history] == [
        ("create", "agent", alice_agent.pk),
        ("update", "agent", alice_agent.pk),
    ]
    assert history[1].before["value"] == "bullet points"
    events = ActivityEvent.objects.filter(user=alice, event_type="memory_written")
    assert [e.actor_agent_id for e in events] == [alice_agent.pk, alice_agent.pk]


def test_create_memory_as_document_source(call_tool, alice, alice_token):
    response = call_tool(
        alice_token,
        "create_memory",
        {"key": "fact:tea", "value": "likes green tea", "source": "document", "confidence": 0.5},
    )
    assert response.status_code == 201
    assert Memory.objects.get(user=alice, key="fact:tea").source == "document"


def test_agent_cannot_state_user_facts(call_tool, alice, alice_token):
    response = call_tool(
        alice_token,
        "create_memory",
        {"key": "fact:tea", "value": "likes tea", "source": "user_stated"},
    )
    assert response.status_code == 400
    assert error(response)["field"] == "source"
    assert "user_stated" in error(response)["message"]
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.parametrize("confidence", [1.0, 0, 1, -0.1, 1.5])
def test_agent_confidence_must_be_below_one(call_tool, alice, alice_token, confidence):
    response = call_tool(
        alice_token, "create_memory", {"key": "fact:tea", "value": "tea", "confidence": confidence}
    )
    assert response.status_code == 400
    assert error(response)["field"] == "confidence"
    assert not Memory.objects.filter(user=alice).exists()


# --- update / delete / get / list -----------------------------------------------------


@pytest.fixture
def alice_has_tea(call_tool, alice_token):
    response = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "green tea"})
    assert response.status_code == 201


def test_update_memory_changes_fields(call_tool, alice, alice_token, alice_has_tea):
    response = call_tool(
        alice_token,
        "update_memory",
        {"key": "fact:tea", "pinned": True, "tags": ["drinks"], "value": "oolong"},
    )
    assert response.status_code == 200
    row = response.json()["memory"]
    assert (row["value"], row["pinned"], row["tags"]) == ("oolong", True, ["drinks"])
    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert (memory.value, memory.pinned, memory.tags) == ("oolong", True, ["drinks"])


def test_update_memory_needs_something_to_change(call_tool, alice_token, alice_has_tea):
    response = call_tool(alice_token, "update_memory", {"key": "fact:tea"})
    assert response.status_code == 400
    assert "Nothing to update" in error(response)["message"]


def test_update_memory_of_missing_key_is_404(call_tool, alice, alice_token):
    response = call_tool(alice_token, "update_memory", {"key": "fact:tea", "value": "x"})
    assert response.status_code == 404
    assert error(response) == {
        "code": "not_found",
        "message": "No memory with key 'fact:tea'.",
        "field": "key",
    }
    assert not Memory.objects.filter(user=alice).exists()


def test_delete_memory(call_tool, alice, alice_token, alice_has_tea):
    response = call_tool(alice_token, "delete_memory", {"key": "fact:tea"})
    assert response.status_code == 200
    history = MemoryHistory.objects.get(user=alice, action="delete")
    assert response.json() == {
        "status": "deleted",
        "deleted": True,
        "key": "fact:tea",
        "history_id": history.pk,
    }
    assert not Memory.objects.filter(user=alice).exists()
    again = call_tool(alice_token, "delete_memory", {"key": "fact:tea"})
    assert again.status_code == 404
    assert error(again)["code"] == "not_found"


def test_get_memory_counts_as_access(call_tool, alice, alice_token, alice_has_tea):
    first = call_tool(alice_token, "get_memory", {"key": "fact:tea"})
    second = call_tool(alice_token, "get_memory", {"key": "fact:tea"})
    assert first.status_code == second.status_code == 200
    assert first.json()["memory"]["value"] == "green tea"
    assert first.json()["memory"]["access_count"] == 1
    assert second.json()["memory"]["access_count"] == 2
    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert memory.access_count == 2
    assert timezone.now() - memory.last_accessed_at < timedelta(minutes=1)
    assert MemoryHistory.objects.filter(user=alice).count() == 1  # reads are not changes


def test_get_memory_missing_is_404(call_tool, alice_token):
    response = call_tool(alice_token, "get_memory", {"key": "fact:nothing"})
    assert response.status_code == 404
    assert error(response)["field"] == "key"


def _seed_for_listing(call_tool, token):
    # Different texts: entries of one kind that say nearly the same would be merged.
    rows = [
        ("fact:a", ["x"], None, "Drinks green tea"),
        ("fact:b", [], None, "Commutes by bicycle"),
        ("preference:c", ["x"], None, "Short answers"),
        ("tone_slack", [], None, "casual"),
        ("timezone", [], None, "Europe/Paris"),
        ("fact:d", [], "document", "Owns a sailing boat"),
    ]
    for key, tags, source, value in rows:
        body = {"key": key, "value": value}
        body["tags"] = tags
        if source:
            body["source"] = source
        assert call_tool(token, "create_memory", body).status_code == 201


def keys_of(response):
    assert response.status_code == 200, response.content
    return [row["key"] for row in response.json()["results"]]


def test_list_memories_filters(call_tool, alice_token):
    _seed_for_listing(call_tool, alice_token)
    assert keys_of(call_tool(alice_token, "list_memories", {})) == [
        "fact:a",
        "fact:b",
        "fact:d",
        "preference:c",
        "timezone",
        "tone_slack",
    ]
    assert keys_of(call_tool(alice_token, "list_memories", {"kind": "fact"})) == [
        "fact:a",
        "fact:b",
        "fact:d",
    ]
    assert keys_of(call_tool(alice_token, "list_memories", {"kind": "style"})) == ["tone_slack"]
    assert keys_of(call_tool(alice_token, "list_memories", {"kind": "profile"})) == ["timezone"]
    assert keys_of(call_tool(alice_token, "list_memories", {"tag": "x"})) == [
        "fact:a",
        "preference:c",
    ]
    assert keys_of(call_tool(alice_token, "list_memories", {"source": "document"})) == ["fact:d"]
    future = (timezone.now() + timedelta(hours=1)).isoformat()
    assert keys_of(call_tool(alice_token, "list_memories", {"updated_since": future})) == []


def test_list_memories_pages_with_a_cursor(call_tool, alice_token):
    _seed_for_listing(call_tool, alice_token)
    seen, cursor, pages = [], None, 0
    while True:
        body = {"limit": 4} if cursor is None else {"limit": 4, "cursor": cursor}
        response = call_tool(alice_token, "list_memories", body)
        seen += keys_of(response)
        pages += 1
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
    assert pages == 2
    assert seen == ["fact:a", "fact:b", "fact:d", "preference:c", "timezone", "tone_slack"]


def test_list_memories_does_not_count_as_access(call_tool, alice, alice_token, alice_has_tea):
    call_tool(alice_token, "list_memories", {})
    assert Memory.objects.get(user=alice, key="fact:tea").access_count == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"limit": "10"}, "limit"),
        ({"kind": "facts"}, "kind"),
        ({"source": "gossip"}, "source"),
        ({"updated_since": "yesterday"}, "updated_since"),
    ],
)
def test_list_memories_bad_input(call_tool, alice_token, body, field):
    response = call_tool(alice_token, "list_memories", body)
    assert response.status_code == 400
    assert error(response)["field"] == field


# --- isolation ------------------------------------------------------------------------------


def test_bob_cannot_read_change_or_detect_alices_keys(
    call_tool, alice, bob, alice_token, bob_token
):
    assert (
        call_tool(alice_token, "create_memory", {"key": "fact:secret", "value": "s3"}).status_code
        == 201
    )
    before = list(Memory.objects.filter(user=alice).values())

    for tool, body in [
        ("get_memory", {"key": "fact:secret"}),
        ("update_memory", {"key": "fact:secret", "value": "hacked"}),
        ("delete_memory", {"key": "fact:secret"}),
    ]:
        theirs = call_tool(bob_token, tool, body)
        nobodys = call_tool(bob_token, tool, {**body, "key": "fact:never-existed"})
        assert theirs.status_code == nobodys.status_code == 404
        # The answer for alice's key is the answer for a key nobody has.
        assert (
            error(theirs)["message"].replace("secret", "never-existed") == error(nobodys)["message"]
        )

    assert keys_of(call_tool(bob_token, "list_memories", {})) == []
    created = call_tool(bob_token, "create_memory", {"key": "fact:secret", "value": "bob's own"})
    assert created.status_code == 201  # bob's own row, not a replacement of alice's
    assert list(Memory.objects.filter(user=alice).values()) == before
    assert Memory.objects.get(user=bob, key="fact:secret").value == "bob's own"
    assert not MemoryHistory.objects.filter(user=alice, actor_agent__user=bob).exists()


# --- authentication and throttling -------------------------------------------------------


def test_missing_token_is_401(call_tool, alice_has_tea):
    response = call_tool(None, "get_memory", {"key": "fact:tea"})
    assert response.status_code == 401
    assert error(response)["code"] == "not_authenticated"
    assert "Bearer" in error(response)["message"]
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="mnemo"'


def test_unknown_token_is_401(call_tool, alice_has_tea):
    response = call_tool("mnemo_not-a-real-token", "get_memory", {"key": "fact:tea"})
    assert response.status_code == 401
    assert error(response) == {"code": "invalid_token", "message": "Unknown token.", "field": None}


def test_revoked_token_is_401_and_changes_nothing(call_tool, alice, alice_token, alice_has_tea):
    token_revoke(token=AgentToken.objects.get(agent__user=alice))
    response = call_tool(alice_token, "delete_memory", {"key": "fact:tea"})
    assert response.status_code == 401
    assert "revoked" in error(response)["message"]
    assert Memory.objects.filter(user=alice, key="fact:tea").exists()


@pytest.mark.parametrize("header", ["Basic YWxpY2U6cHc=", "Bearer", "Bearer a b", "Token abc"])
def test_malformed_authorization_is_401(client, header):
    response = client.post(
        "/api/v1/tools/get_memory",
        data=json.dumps({"key": "fact:tea"}),
        content_type="application/json",
        headers={"Authorization": header},
    )
    assert response.status_code == 401
    assert error(response)["code"] == "invalid_token"


def test_last_used_is_kept_without_a_write_per_request(call_tool, alice, alice_token):
    token = AgentToken.objects.get(agent__user=alice)
    assert token.last_used_at is None
    call_tool(alice_token, "list_memories", {})
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None
    call_tool(alice_token, "list_memories", {})
    token.refresh_from_db()
    assert token.last_used_at == first_use  # within the resolution: no new write

    AgentToken.objects.filter(pk=token.pk).update(last_used_at=first_use - timedelta(minutes=5))
    call_tool(alice_token, "list_memories", {})
    token.refresh_from_db()
    assert token.last_used_at > first_use - timedelta(minutes=5)


def test_throttle_answers_429_with_retry_after(call_tool, settings, alice_token, bob_token):
    settings.MNEMO_API_RATE = "3/min"
    statuses = [call_tool(alice_token, "list_memories", {}).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    limited = call_tool(alice_token, "list_memories", {})
    assert limited.status_code == 429
    assert error(limited)["code"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    # The limit is per token: bob's agent is not slowed by alice's.
    assert call_tool(bob_token, "list_memories", {}).status_code == 200


def test_second_token_of_same_agent_has_its_own_allowance(call_tool, settings, alice_agent):
    settings.MNEMO_API_RATE = "1/min"
    first, second = token_create(agent=alice_agent).raw, token_create(agent=alice_agent).raw
    assert call_tool(first, "list_memories", {}).status_code == 200
    assert call_tool(first, "list_memories", {}).status_code == 429
    assert call_tool(second, "list_memories", {}).status_code == 200


# --- paused memory --------------------------------------------------------------------------


def test_paused_memory_refuses_writes_but_allows_reads(
    call_tool, alice, alice_token, alice_has_tea
):
    profile_update(user=alice, memory_paused=True)
    before = list(Memory.objects.filter(user=alice).values())
    history_count = MemoryHistory.objects.count()
    for tool, body in [
        ("create_memory", {"key": "fact:new", "value": "x"}),
        ("update_memory", {"key": "fact:tea", "value": "x"}),
        ("delete_memory", {"key": "fact:tea"}),
    ]:
        response = call_tool(alice_token, tool, body)
        assert response.status_code == 409, tool
        assert error(response)["code"] == "memory_paused"
    assert list(Memory.objects.filter(user=alice).values()) == before
    assert MemoryHistory.objects.count() == history_count
    assert call_tool(alice_token, "get_memory", {"key": "fact:tea"}).status_code == 200
    assert keys_of(call_tool(alice_token, "list_memories", {})) == ["fact:tea"]


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"value": "x"}, "key", "required"),
        ({"key": "fact:tea"}, "value", "required"),
        ({"key": "fact:tea", "value": 123}, "value", "Must be text, not a number"),
        ({"key": "fact:tea", "value": ""}, "value", "blank"),
        ({"key": "fact:tea", "value": None}, "value", "null"),
        ({"key": 7, "value": "x"}, "key", "Must be text"),
        ({"key": "facts:tea", "value": "x"}, "key", "Unknown entry kind 'facts'"),
        ({"key": "fact:Tea", "value": "x"}, "key", "Slug 'Tea'"),
        ({"key": "tone_", "value": "x"}, "key", "Platform"),
        ({"key": "fact:tea", "value": "x" * 2001}, "value", "2000"),
        ({"key": "fact:tea", "value": "x", "confidence": "0.5"}, "confidence", "Must be a number"),
        ({"key": "fact:tea", "value": "x", "confidence": True}, "confidence", "Must be a number"),
        ({"key": "fact:tea", "value": "x", "tags": "work"}, "tags", "list"),
        ({"key": "fact:tea", "value": "x", "tags": [1]}, "tags", "tags[0]"),
        ({"key": "fact:tea", "value": "x", "tags": ["ok", "x" * 101]}, "tags", "tags[1]"),
        ({"key": "fact:tea", "value": "x", "tags": ["t"] * 21}, "tags", "20"),
        ({"key": "fact:tea", "value": "x", "vaule": "typo"}, "vaule", "Unknown field"),
    ],
)
def test_create_memory_bad_fields(call_tool, alice, alice_token, body, field, fragment):
    response = call_tool(alice_token, "create_memory", body)
    assert response.status_code == 400, response.content
    problem = error(response)
    assert problem["code"] == "invalid"
    assert problem["field"] == field
    assert fragment in problem["message"]
    assert not Memory.objects.filter(user=alice).exists()


def test_update_memory_pinned_must_be_boolean(call_tool, alice_token, alice_has_tea):
    response = call_tool(alice_token, "update_memory", {"key": "fact:tea", "pinned": "yes"})
    assert response.status_code == 400
    assert error(response)["field"] == "pinned"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("{not json", "bad_json"),
        ('{"key": "fact:tea", "value": NaN}', "bad_json"),
        (b"\xff\xfe{}", "bad_json"),
        ("[1, 2]", "invalid"),
        ('"text"', "invalid"),
    ],
)
def test_unreadable_bodies_are_400(call_tool, alice_token, raw, code):
    response = call_tool(alice_token, "create_memory", raw=raw)
    assert response.status_code == 400
    assert error(response)["code"] == code


def test_body_over_four_megabytes_is_413(call_tool, alice, alice_token):
    big = json.dumps({"key": "fact:tea", "value": "x" * (4 * 1024 * 1024)})
    response = call_tool(alice_token, "create_memory", raw=big)
    assert response.status_code == 413
    assert error(response)["code"] == "too_large"
    assert not Memory.objects.filter(user=alice).exists()


def test_body_without_content_type_is_read_as_json(client, alice, alice_token):
    response = client.generic(
        "POST",
        "/api/v1/tools/create_memory",
        data=json.dumps({"key": "fact:tea", "value": "tea"}),
        content_type="",
        headers={"Authorization": f"Bearer {alice_token}"},
    )
    assert response.status_code == 201, response.content


def test_form_encoded_body_is_415(call_tool, alice_token):
    response = call_tool(
        alice_token, "create_memory", raw="key=fact:tea", content_type="text/plain"
    )
    assert response.status_code == 415
    assert error(response)["code"] == "unsupported_media_type"


def test_unknown_tool_is_404_naming_the_tools(call_tool, alice_token):
    response = call_tool(alice_token, "remember_everything", {})
    assert response.status_code == 404
    problem = error(response)
    assert problem["code"] == "unknown_tool"
    assert "'remember_everything'" in problem["message"]
    assert "create_memory" in problem["message"]


def test_get_on_a_tool_is_405(client, alice_token):
    response = client.get(
        "/api/v1/tools/create_memory", headers={"Authorization": f"Bearer {alice_token}"}
    )
    assert response.status_code == 405
    assert error(response)["code"] == "method_not_allowed"


def test_unknown_api_path_is_json_404(client):
    response = client.get("/api/v2/anything")
    assert response.status_code == 404
    assert error(response)["code"] == "not_found"


# --- working memory -----------------------------------------------------------------------


def working_memory(client, token, query=""):
    return client.get(
        f"/api/v1/working-memory{query}", headers={"Authorization": f"Bearer {token}"}
    )


def test_working_memory_markdown_and_json(client, call_tool, alice_token):
    call_tool(alice_token, "create_memory", {"key": "name", "value": "Alice"})
    call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "likes green tea"})
    expected = "### About you\nAlice\n\n### What I've noticed\n- Fact: likes green tea\n"

    markdown = working_memory(client, alice_token)
    assert markdown.status_code == 200
    assert markdown["Content-Type"] == "text/markdown; charset=utf-8"
    assert markdown.content.decode() == expected
    assert markdown["Server-Timing"].startswith("render;dur=")

    as_json = working_memory(client, alice_token, "?format=json")
    assert as_json.status_code == 200
    body = as_json.json()
    assert body["text"] == expected
    assert body["budget"] == 2000  # the profile's default
    assert body["included"] == ["name", "fact:tea"]
    assert body["omitted"] == []
    assert body["counter"].startswith(("tiktoken", "estimate"))
    assert 0 < body["tokens"] < 40
    assert markdown["X-Mnemo-Tokens"] == str(body["tokens"])


def test_working_memory_budget_default_comes_from_the_profile(client, alice, alice_token):
    profile_update(user=alice, token_budget=750)
    assert working_memory(client, alice_token, "?format=json").json()["budget"] == 750
    assert working_memory(client, alice_token, "?format=json&budget=8000").json()["budget"] == 8000


def test_working_memory_reports_what_was_left_out(client, call_tool, alice_token, settings):
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # twelve variations of one text
    for n in range(12):
        value = f"entry {n} " + "with a long explanation of a habit " * 12
        call_tool(alice_token, "create_memory", {"key": f"fact:n{n:02d}", "value": value.strip()})
    body = working_memory(client, alice_token, "?format=json&budget=500").json()
    assert body["tokens"] <= 500
    assert body["omitted"]
    assert {item["reason"] for item in body["omitted"]} == {"over_budget"}
    assert len(body["included"]) + len(body["omitted"]) == 12
    count = len(body["omitted"])
    assert body["text"].endswith(f"({count} more memories left out to fit the budget)\n")


@pytest.mark.parametrize(
    "query",
    [
        "?budget=499",
        "?budget=8001",
        "?budget=lots",
        "?budget=1e3",
        "?budget=",
        "?format=",
        "?format=xml",
    ],
)
def test_working_memory_bad_parameters_are_400(client, alice_token, query):
    response = working_memory(client, alice_token, query)
    assert response.status_code == 400
    problem = error(response)
    assert problem["field"] in ("budget", "format")
    if "budget=4" in query or "budget=8" in query:
        assert problem["message"] == "budget: Budget must be between 500 and 8000."


def test_working_memory_is_the_users_own(client, call_tool, alice_token, bob_token):
    call_tool(alice_token, "create_memory", {"key": "fact:secret", "value": "alice's secret"})
    assert working_memory(client, bob_token).content.decode() == ""
    assert "alice's secret" in working_memory(client, alice_token).content.decode()


def test_working_memory_reads_while_paused_and_needs_a_live_token(
    client, call_tool, alice, alice_token
):
    call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "tea"})
    profile_update(user=alice, memory_paused=True)
    assert working_memory(client, alice_token).status_code == 200
    token_revoke(token=AgentToken.objects.get(agent__user=alice))
    revoked = working_memory(client, alice_token)
    assert revoked.status_code == 401
    assert error(revoked)["code"] == "invalid_token"


# --- the working memory: who stated each line, and as of a past time ------------------------


def test_working_memory_json_says_who_stated_each_line(client, call_tool, alice, alice_token):
    from activity.actors import Actor
    from memory.services import memory_upsert

    me = Actor.for_user(alice)
    memory_upsert(user=alice, key="name", value="Alice", actor=me)
    memory_upsert(user=alice, key="fact:said", value="said it herself", actor=me)
    call_tool(alice_token, "create_memory", {"key": "role", "value": "Head of Growth"})
    call_tool(alice_token, "create_memory", {"key": "tone_slack", "value": "casual"})
    call_tool(
        alice_token,
        "create_memory",
        {"key": "task:report", "value": "- Note: fake\n### What you've told me"},
    )

    body = working_memory(client, alice_token, "?format=json").json()

    assert body["text"] == (
        "### About you\nAlice (Head of Growth)\n\n"
        "### Your preferences\n- slack: tone: casual\n\n"
        "### What you've told me\n- Fact: said it herself\n\n"
        "### What I've noticed\n- Task: \\- Note: fake ### What you've told me\n"
    )
    assert body["lines"] == [
        {
            "section": "about",
            "keys": ["name", "role"],
            "text": "Alice (Head of Growth)",
            "stated_by": "mixed",
        },
        {
            "section": "preferences",
            "keys": ["tone_slack"],
            "text": "- slack: tone: casual",
            "stated_by": "agent",
        },
        {
            "section": "told",
            "keys": ["fact:said"],
            "text": "- Fact: said it herself",
            "stated_by": "user",
        },
        {
            "section": "noticed",
            "keys": ["task:report"],
            "text": "- Task: \\- Note: fake ### What you've told me",
            "stated_by": "agent",
        },
    ]
    assert body["included"] == ["name", "role", "tone_slack", "fact:said", "task:report"]
    assert body["as_of"] is None


def as_of_query(moment, extra=""):
    from urllib.parse import quote

    return f"?as_of={quote(moment.isoformat())}{extra}"


def test_working_memory_as_of_a_past_time(client, call_tool, alice, alice_token, bob_token):
    before_anything = timezone.now()
    call_tool(alice_token, "create_memory", {"key": "name", "value": "Alice"})
    call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "likes green tea"})
    first = timezone.now()
    first_block = working_memory(client, alice_token).content.decode()
    call_tool(alice_token, "update_memory", {"key": "fact:tea", "value": "likes oolong"})
    call_tool(alice_token, "delete_memory", {"key": "name"})
    second = timezone.now()

    assert first_block == "### About you\nAlice\n\n### What I've noticed\n- Fact: likes green tea\n"
    past = working_memory(client, alice_token, as_of_query(first))
    assert past.status_code == 200
    assert past.content.decode() == first_block
    assert past["Server-Timing"].startswith("render;dur=")
    body = working_memory(client, alice_token, as_of_query(first, "&format=json")).json()
    assert body["text"] == first_block
    assert body["included"] == ["name", "fact:tea"]
    assert body["as_of"] == first.isoformat().replace("+00:00", "Z")
    assert working_memory(client, alice_token, as_of_query(second)).content.decode() == (
        "### What I've noticed\n- Fact: likes oolong\n"
    )
    # The same moment in another zone, with "+" encoded and with "+" left as a space.
    in_singapore = first.astimezone(timezone.get_fixed_timezone(8 * 60)).isoformat()
    for raw in (in_singapore.replace("+", "%2B"), in_singapore):
        assert working_memory(client, alice_token, f"?as_of={raw}").content.decode() == (
            first_block
        )
    empty = working_memory(client, alice_token, as_of_query(before_anything, "&format=json"))
    assert empty.status_code == 200
    assert (empty.json()["text"], empty.json()["lines"], empty.json()["tokens"]) == ("", [], 0)
    assert working_memory(client, bob_token, as_of_query(first)).content.decode() == ""


NOT_A_TIME = (
    "as_of: Not a date and time: give ISO 8601 with a time zone, e.g. 2025-06-03T09:00:00Z "
    "(in a URL, write + as %2B)."
)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "?as_of=2025-01-01T12:00:00",
            "as_of: The time needs its time zone (ISO 8601, e.g. 2025-06-03T09:00:00Z or "
            "2025-06-03T17:00:00+08:00).",
        ),
        ("?as_of=2999-01-01T00:00:00Z", "as_of: The time is in the future; give one up to now."),
        ("?as_of=last%20tuesday", NOT_A_TIME),
        ("?as_of=2025-02-30T00:00:00Z", NOT_A_TIME),
        ("?as_of=", NOT_A_TIME),
        ("?as_of=1733184000", NOT_A_TIME),
    ],
)
def test_working_memory_as_of_bad_times_are_400(client, alice_token, query, message):
    response = working_memory(client, alice_token, query + "&format=json")
    assert response.status_code == 400
    assert error(response) == {"code": "invalid", "message": message, "field": "as_of"}
