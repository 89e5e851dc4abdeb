"""The Agents page (agents, tokens, pause memory) and open sign-up."""

import re

import pytest
from django.contrib.auth import get_user_model

from profiles.models import Agent, AgentToken, Profile
from profiles.services import hash_token, profile_update, token_create, token_revoke

HX = {"HX-Request": "true"}
NEW_TOKEN = re.compile(r'<code id="new-token">(mnemo_[A-Za-z0-9_-]+)</code>')


def new_token(response):
    match = NEW_TOKEN.search(response.content.decode())
    return match.group(1) if match else None


@pytest.fixture
def issued(alice_agent):
    return token_create(agent=alice_agent, label="laptop")


# Login required -------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/agents/"),
        ("post", "/agents/new/"),
        ("post", "/agents/1/tokens/"),
        ("post", "/agents/tokens/1/revoke/"),
        ("get", "/settings/"),
        ("post", "/settings/"),
        ("post", "/settings/memory/"),
    ],
)
def test_login_required(client, db, method, path):
    data = {"name": "x", "paused": "1"} if method == "post" else {}
    response = getattr(client, method)(path, data)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"
    assert Agent.objects.count() == 0
    assert AgentToken.objects.count() == 0
    assert Profile.objects.count() == 0


# The page -------------------------------------------------------------------


def test_page_lists_agents_and_tokens(client, alice, alice_agent, issued):
    revoked = token_revoke(token=token_create(agent=alice_agent, label="old").token)
    client.force_login(alice)
    response = client.get("/agents/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html
    assert response["Cache-Control"].startswith("max-age=0")
    heading = f'<h2 id="agent-{alice_agent.pk}-name"><span class="badge agent">agent</span>'
    assert f'{heading} <bdi class="agent-name" dir="auto">assistant</bdi></h2>' in html
    assert f'<tr id="token-{issued.token.pk}" class="active">' in html
    assert f"<code>{issued.token.prefix}…</code>" in html
    assert '<td data-label="Label">laptop</td>' in html
    assert '<span class="muted">never</span>' in html
    assert '<span class="badge user">active</span>' in html
    assert f'<tr id="token-{revoked.pk}" class="revoked">' in html
    assert '<span class="badge revoked">revoked</span>' in html
    # The secret and its hash are never on the page.
    assert issued.raw not in html
    assert issued.token.token_hash not in html
    assert '<a href="/settings/">Settings</a>' in html
    assert '<label for="id_agent_name">Agent name</label>' in html
    assert f'<label for="id_token_label_{alice_agent.pk}">Token label</label>' in html
    assert "/static/js/copy.js" in html


def test_page_htmx_partial(client, alice, alice_agent):
    client.force_login(alice)
    response = client.get("/agents/", headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert f'id="agent-{alice_agent.pk}"' in html


def test_last_used_is_shown(client, alice, issued, call_tool):
    assert call_tool(issued.raw, "list_memories", {}).status_code == 200
    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None
    client.force_login(alice)
    html = client.get("/agents/").content.decode()
    assert f'datetime="{issued.token.last_used_at.isoformat()}"' in html


def test_empty_state(client, alice):
    client.force_login(alice)
    assert "No agents yet." in client.get("/agents/").content.decode()


def test_bob_sees_none_of_alices_agents(client, bob, alice_agent, issued):
    client.force_login(bob)
    html = client.get("/agents/").content.decode()
    assert f'id="agent-{alice_agent.pk}"' not in html
    assert issued.token.prefix not in html
    assert "No agents yet." in html


# Create an agent ------------------------------------------------------------


def test_create_agent_htmx(client, alice):
    client.force_login(alice)
    response = client.post(
        "/agents/new/", {"name": "claude-desktop", "description": "At home"}, headers=HX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    agent = Agent.objects.get(user=alice)
    assert (agent.name, agent.description) == ("claude-desktop", "At home")
    assert html.strip().startswith('<div id="agents">')
    assert "Agent “claude-desktop” created." in html
    assert f'id="agent-{agent.pk}"' in html
    assert '<input id="id_agent_name" name="name" value=""' in html


def test_create_agent_without_js_redirects_with_message(client, alice):
    client.force_login(alice)
    response = client.post("/agents/new/", {"name": "notes", "description": ""})
    assert response.status_code == 302
    assert response["Location"] == "/agents/"
    assert list(Agent.objects.filter(user=alice).values_list("name", flat=True)) == ["notes"]
    page = client.get("/agents/").content.decode()
    assert "Agent “notes” created. Create a token so it can connect." in page


def test_an_agent_named_as_people_write_it_gets_a_derived_path_name(client, alice):
    client.force_login(alice)

    response = client.post("/agents/new/", {"name": "Claude Desktop"}, headers=HX)

    agent = Agent.objects.get(user=alice)
    assert (agent.name, agent.display_name) == ("claude-desktop", "Claude Desktop")
    html = response.content.decode()
    assert "Agent “Claude Desktop” created (“claude-desktop” in paths and tokens)." in html
    assert "In paths and tokens: <code>claude-desktop</code>" in html


def test_an_agent_named_in_another_script_keeps_that_name(client, alice):
    client.force_login(alice)

    response = client.post("/agents/new/", {"name": "Асистент"}, headers=HX)

    agent = Agent.objects.get(user=alice)
    assert (agent.name, agent.display_name) == ("asistent", "Асистент")
    html = response.content.decode()
    assert "Agent “Асистент” created (“asistent” in paths and tokens)." in html
    assert '<bdi class="agent-name" dir="auto">Асистент</bdi>' in html


def test_rename_an_agent_in_any_script(client, alice, alice_agent):
    client.force_login(alice)
    url = f"/agents/{alice_agent.pk}/rename/"

    htmx = client.post(url, {"display_name": " Асистент\u202e "}, headers=HX)
    alice_agent.refresh_from_db()
    assert (alice_agent.name, alice_agent.display_name) == ("assistant", "Асистент")
    html = htmx.content.decode()
    assert "<html" not in html
    assert "Renamed: pages now call it “Асистент”." in html
    assert f'id="agent-{alice_agent.pk}-name"' in html

    full = client.post(url, {"display_name": "Claude Desktop"})
    assert (full.status_code, full["Location"]) == (302, "/agents/")
    alice_agent.refresh_from_db()
    assert (alice_agent.name, alice_agent.display_name) == ("assistant", "Claude Desktop")

    refused = client.post(url, {"display_name": "\x01"}, headers=HX)
    assert "Give the agent a name." in refused.content.decode()
    alice_agent.refresh_from_db()
    assert alice_agent.display_name == "Claude Desktop"


def test_bob_cannot_rename_alices_agent(client, bob, alice_agent):
    client.force_login(bob)
    response = client.post(f"/agents/{alice_agent.pk}/rename/", {"display_name": "Mine"})
    assert response.status_code == 404
    alice_agent.refresh_from_db()
    assert alice_agent.display_name == ""


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("\x01\x02", "Give the agent a name."),
        ("", "This field is required."),
        ("x" * 101, "Ensure this value has at most 100 characters (it has 101)."),
    ],
)
def test_create_agent_invalid_name(client, alice, name, error):
    client.force_login(alice)
    htmx = client.post("/agents/new/", {"name": name}, headers=HX)
    assert htmx.status_code == 200
    assert error in htmx.content.decode()
    assert 'aria-invalid="true"' in htmx.content.decode()
    assert "<html" not in htmx.content.decode()
    full = client.post("/agents/new/", {"name": name})
    assert full.status_code == 400
    assert "<html" in full.content.decode()
    assert error in full.content.decode()
    assert Agent.objects.filter(user=alice).count() == 0


def test_create_agent_duplicate_name(client, alice, alice_agent):
    client.force_login(alice)
    response = client.post("/agents/new/", {"name": "Assistant"}, headers=HX)
    assert response.status_code == 200
    assert (
        "You already have the agent &#x27;assistant&#x27; (named &#x27;assistant&#x27; in "
        "paths and tokens); choose another name."
    ) in response.content.decode()
    assert Agent.objects.filter(user=alice).count() == 1


def test_same_agent_name_for_another_user_is_fine(client, bob, alice_agent):
    client.force_login(bob)
    assert client.post("/agents/new/", {"name": "assistant"}).status_code == 302
    assert Agent.objects.filter(user=bob, name="assistant").exists()


# Create a token -------------------------------------------------------------


def test_create_token_htmx_shows_it_once(client, alice, alice_agent, call_tool):
    client.force_login(alice)
    response = client.post(f"/agents/{alice_agent.pk}/tokens/", {"label": "phone"}, headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert response["Cache-Control"] == "no-store"
    raw = new_token(response)
    token = AgentToken.objects.get(agent=alice_agent)
    assert raw is not None
    assert raw.startswith(token.prefix)
    assert token.label == "phone"
    # Only the hash is stored.
    assert token.token_hash == hash_token(raw)
    assert raw not in {str(value) for value in AgentToken.objects.values().get().values()}
    assert token.token_hash not in html
    assert "It won&#x27;t be shown again." in html or "It won't be shown again." in html
    assert '<button type="button" class="small" data-copy-target="new-token">Copy</button>' in html
    assert f'<tr id="token-{token.pk}" class="active">' in html
    # The token works, and it is never shown again.
    assert call_tool(raw, "list_memories", {}).status_code == 200
    later = client.get("/agents/").content.decode()
    assert raw not in later
    assert 'id="new-token"' not in later
    assert raw not in client.get("/agents/", headers=HX).content.decode()


def test_create_token_without_js_renders_the_page_with_it(client, alice, alice_agent):
    client.force_login(alice)
    response = client.post(f"/agents/{alice_agent.pk}/tokens/", {"label": ""})
    assert response.status_code == 200
    assert "<html" in response.content.decode()
    assert response["Cache-Control"] == "no-store"
    raw = new_token(response)
    token = AgentToken.objects.get(agent=alice_agent)
    assert token.token_hash == hash_token(raw)
    assert token.label == ""
    assert raw not in client.get("/agents/").content.decode()


def test_create_token_label_too_long(client, alice, alice_agent):
    client.force_login(alice)
    htmx = client.post(f"/agents/{alice_agent.pk}/tokens/", {"label": "x" * 101}, headers=HX)
    assert htmx.status_code == 200
    assert "Ensure this value has at most 100 characters (it has 101)." in htmx.content.decode()
    assert new_token(htmx) is None
    full = client.post(f"/agents/{alice_agent.pk}/tokens/", {"label": "x" * 101})
    assert full.status_code == 400
    assert AgentToken.objects.count() == 0


def test_bob_cannot_create_a_token_for_alices_agent(client, bob, alice_agent):
    client.force_login(bob)
    for headers in ({}, HX):
        response = client.post(f"/agents/{alice_agent.pk}/tokens/", {"label": "x"}, headers=headers)
        assert response.status_code == 404
    assert AgentToken.objects.count() == 0


def test_create_token_for_missing_agent_is_404(client, alice):
    client.force_login(alice)
    assert client.post("/agents/999999/tokens/", {}).status_code == 404


# Revoke a token -------------------------------------------------------------


def test_revoke_htmx_swaps_the_row(client, alice, issued, call_tool):
    assert call_tool(issued.raw, "list_memories", {}).status_code == 200
    client.force_login(alice)
    response = client.post(f"/agents/tokens/{issued.token.pk}/revoke/", headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.strip().startswith(f'<tr id="token-{issued.token.pk}" class="revoked">')
    assert '<span class="badge revoked">revoked</span>' in html
    assert ">Revoke<" not in html
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is not None
    refused = call_tool(issued.raw, "list_memories", {})
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_token"


def test_revoke_without_js_redirects_with_message(client, alice, issued):
    client.force_login(alice)
    response = client.post(f"/agents/tokens/{issued.token.pk}/revoke/")
    assert response.status_code == 302
    assert response["Location"] == "/agents/"
    issued.token.refresh_from_db()
    first_revoked_at = issued.token.revoked_at
    assert first_revoked_at is not None
    page = client.get("/agents/").content.decode()
    assert f"Token {issued.token.prefix}… revoked." in page
    # Revoking again changes nothing.
    client.post(f"/agents/tokens/{issued.token.pk}/revoke/")
    issued.token.refresh_from_db()
    assert issued.token.revoked_at == first_revoked_at


def test_revoke_button_confirms(client, alice, issued):
    client.force_login(alice)
    html = client.get("/agents/").content.decode()
    assert f'hx-confirm="Revoke token {issued.token.prefix}…?' in html


def test_bob_cannot_revoke_alices_token(client, bob, issued, call_tool):
    client.force_login(bob)
    for headers in ({}, HX):
        response = client.post(f"/agents/tokens/{issued.token.pk}/revoke/", headers=headers)
        assert response.status_code == 404
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is None
    assert call_tool(issued.raw, "list_memories", {}).status_code == 200


def test_revoke_needs_post(client, alice, issued):
    client.force_login(alice)
    assert client.get(f"/agents/tokens/{issued.token.pk}/revoke/").status_code == 405
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is None


# Settings: pause and resume memory, the budget, search stats -------------------


def test_settings_page_shows_memory_budget_and_search(client, alice):
    profile_update(user=alice, token_budget=3500)
    client.force_login(alice)
    response = client.get("/settings/")
    html = response.content.decode()
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    assert '<a href="/settings/" aria-current="page">Settings</a>' in html
    assert "Memory is on" in html
    assert '<button type="submit" class="secondary">Pause memory</button>' in html
    assert "up to <strong>3500 tokens</strong> of working memory" in html
    assert '<h2 id="search-stats-title">Search</h2>' in html
    assert "<p>No searches yet.</p>" in html


def test_pause_and_resume_htmx(client, alice, alice_token, call_tool):
    client.force_login(alice)
    paused = client.post("/settings/memory/", {"paused": "1"}, headers=HX)
    html = paused.content.decode()
    assert paused.status_code == 200
    assert "<html" not in html
    assert html.strip().startswith('<section id="memory-status"')
    assert "Memory is paused" in html
    assert '<button type="submit">Resume memory</button>' in html
    assert "While paused, agents can read but not change your memory." in html
    assert Profile.objects.get(user=alice).memory_paused is True
    refused = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "tea"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "memory_paused"
    assert call_tool(alice_token, "list_memories", {}).status_code == 200

    resumed = client.post("/settings/memory/", {"paused": "0"}, headers=HX)
    assert "Memory is on" in resumed.content.decode()
    assert '<button type="submit" class="secondary">Pause memory</button>' in (
        resumed.content.decode()
    )
    assert Profile.objects.get(user=alice).memory_paused is False
    created = call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "tea"})
    assert created.status_code == 201


def test_pause_without_js_redirects_with_message(client, alice):
    client.force_login(alice)
    response = client.post("/settings/memory/", {"paused": "1"})
    assert response.status_code == 302
    assert response["Location"] == "/settings/"
    assert Profile.objects.get(user=alice).memory_paused is True
    page = client.get("/settings/").content.decode()
    assert "Memory paused. Agents can read your memory but not change it." in page
    assert "Resume memory" in page
    client.post("/settings/memory/", {"paused": "0"})
    assert Profile.objects.get(user=alice).memory_paused is False


@pytest.mark.parametrize("data", [{}, {"paused": "yes"}])
def test_pause_with_bad_value_changes_nothing(client, alice, data):
    profile_update(user=alice, memory_paused=True)
    client.force_login(alice)
    assert client.post("/settings/memory/", data).status_code == 400
    htmx = client.post("/settings/memory/", data, headers=HX)
    assert htmx.status_code == 200
    assert "That request could not be understood." in htmx.content.decode()
    assert Profile.objects.get(user=alice).memory_paused is True


def test_pause_is_per_user(client, alice, bob):
    client.force_login(bob)
    client.post("/settings/memory/", {"paused": "1"})
    assert Profile.objects.get(user=bob).memory_paused is True
    assert not Profile.objects.filter(user=alice, memory_paused=True).exists()


# Settings: agents' new memories wait for review ------------------------------

REVIEW_ON = {"setting": "review", "review_agent_memories": "on"}


def test_settings_page_shows_the_review_setting_off_by_default(client, alice):
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert '<h2 id="review-setting-title">Review</h2>' in html
    assert "Agents' changes to what you stated always wait for your review" in html
    assert (
        '<input type="checkbox" id="id_review_agent_memories" name="review_agent_memories" '
        'aria-describedby="review-help"> Agents\' new memories wait for my review</label>'
    ) in html
    assert '<a href="/context/inbox/">inbox</a>' in html


def test_review_setting_htmx(client, alice):
    client.force_login(alice)
    on = client.post("/settings/", REVIEW_ON, headers=HX)
    html = on.content.decode()
    assert on.status_code == 200
    assert "<html" not in html
    assert html.strip().startswith('<section id="review-setting"')
    assert 'aria-describedby="review-help" checked>' in html
    assert "Saved. Agents&#x27; new memories now wait for your review in the inbox." in html
    assert Profile.objects.get(user=alice).review_agent_memories is True

    off = client.post("/settings/", {"setting": "review"}, headers=HX)
    assert "now apply at once, shown as noted by the agent." in off.content.decode()
    assert 'aria-describedby="review-help">' in off.content.decode()
    assert Profile.objects.get(user=alice).review_agent_memories is False


def test_review_setting_without_js_redirects_with_message(client, alice):
    client.force_login(alice)
    response = client.post("/settings/", REVIEW_ON)
    assert response.status_code == 302
    assert response["Location"] == "/settings/"
    page = client.get("/settings/").content.decode()
    assert "Saved. Agents&#x27; new memories now wait for your review in the inbox." in page
    assert 'aria-describedby="review-help" checked>' in page


@pytest.mark.parametrize("data", [{}, {"review_agent_memories": "on"}, {"setting": "pause"}])
def test_review_setting_with_a_bad_form_changes_nothing(client, alice, data):
    profile_update(user=alice, review_agent_memories=True)
    client.force_login(alice)
    assert client.post("/settings/", data).status_code == 400
    htmx = client.post("/settings/", data, headers=HX)
    assert htmx.status_code == 200
    assert "That request could not be understood." in htmx.content.decode()
    assert Profile.objects.get(user=alice).review_agent_memories is True


def test_review_setting_is_per_user(client, alice, bob):
    client.force_login(bob)
    client.post("/settings/", REVIEW_ON)
    assert Profile.objects.get(user=bob).review_agent_memories is True
    assert not Profile.objects.filter(user=alice, review_agent_memories=True).exists()


# Sign-up --------------------------------------------------------------------

SIGNUP = {
    "username": "dora",
    "password1": "tall-green-lantern-42",
    "password2": "tall-green-lantern-42",
}


def test_signup_is_404_when_closed(client, db, settings):
    settings.MNEMO_OPEN_SIGNUP = False
    assert client.get("/signup/").status_code == 404
    assert client.post("/signup/", SIGNUP).status_code == 404
    assert not get_user_model().objects.filter(username="dora").exists()
    assert "Create an account" not in client.get("/login/").content.decode()


def test_signup_creates_user_and_profile_and_logs_in(client, db, settings):
    settings.MNEMO_OPEN_SIGNUP = True
    assert '<a href="/signup/">Create an account</a>' in client.get("/login/").content.decode()
    page = client.get("/signup/")
    html = page.content.decode()
    assert page.status_code == 200
    for label in ("Username", "Password", "Confirm password"):
        assert f">{label}</label>" in html
    response = client.post("/signup/", SIGNUP)
    assert response.status_code == 302
    assert response["Location"] == "/"
    user = get_user_model().objects.get(username="dora")
    assert user.check_password("tall-green-lantern-42")
    assert Profile.objects.filter(user=user).exists()
    assert client.session["_auth_user_id"] == str(user.pk)
    assert client.get("/agents/").status_code == 200
    # Signed in, the sign-up page sends you home.
    assert client.get("/signup/")["Location"] == "/"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({**SIGNUP, "password2": "something-else-42"}, "The two password fields didn’t match."),
        ({**SIGNUP, "username": "alice"}, "A user with that username already exists."),
        ({**SIGNUP, "password1": "short", "password2": "short"}, "This password is too short."),
    ],
)
def test_signup_errors(client, alice, settings, data, error):
    settings.MNEMO_OPEN_SIGNUP = True
    response = client.post("/signup/", data)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert get_user_model().objects.count() == 1
    assert "_auth_user_id" not in client.session
