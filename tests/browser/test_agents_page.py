"""The Agents page in a real browser: agents, tokens shown once and revoked, pausing memory;
each checked against the agent API the tokens are for."""

import json
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from memory.models import Memory
from profiles.models import Agent, AgentToken
from profiles.services import agent_create

pytestmark = pytest.mark.django_db(transaction=True)


def call_api(live_server, token: str, tool: str, body: dict) -> tuple[int, dict]:
    """POST a tool call the way an agent does: outside the browser, with a bearer token."""
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/tools/{tool}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_create_an_agent_and_a_token_then_revoke_it(
    signed_in_page, alice, live_server, same_document
):
    page = signed_in_page(alice)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Agents").click()
    expect(page.get_by_role("heading", name="Agents and tokens")).to_be_visible()

    with same_document(page):
        page.get_by_label("Agent name").fill("claude-desktop")
        page.get_by_label("Description").fill("Claude on my laptop")
        page.get_by_role("button", name="Create agent").click()
        agent_heading = page.get_by_role("heading", name="agent claude-desktop")
        expect(agent_heading).to_be_visible()
        agent = Agent.objects.get(user=alice, name="claude-desktop")
        card = page.locator(f"#agent-{agent.pk}")
        expect(card).to_contain_text("No tokens yet.")

        card.get_by_label("Token label").fill("laptop")
        card.get_by_role("button", name="Create token").click()
        expect(page.locator("#new-token")).to_be_visible()
    raw = page.locator("#new-token").text_content()
    token = AgentToken.objects.get(agent=agent)
    assert raw.startswith(token.prefix)
    assert token.label == "laptop"
    row = page.locator(f"#token-{token.pk}")
    expect(row).to_contain_text(f"{token.prefix}…")
    expect(row).to_contain_text("laptop")
    expect(row).to_contain_text("active")
    expect(card.get_by_role("button", name="Copy")).to_be_visible()
    assert raw not in page.locator(f"#token-{token.pk}").text_content()

    status, body = call_api(live_server, raw, "list_memories", {})
    assert (status, body["results"]) == (200, [])

    # Shown once: a fresh load of the page has the row but not the token.
    page.reload()
    expect(page.locator(f"#token-{token.pk}")).to_be_visible()
    expect(page.locator("#new-token")).to_have_count(0)
    assert raw not in page.content()
    expect(row).not_to_contain_text("never")  # the API call above was a use

    dialogs = []

    def accept(dialog):
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    with same_document(page):
        row.get_by_role("button", name=f"Revoke token {token.prefix}…").click()
        expect(row.locator(".badge")).to_have_text("revoked")
        expect(row.get_by_role("status")).to_have_text("Revoked.")
        expect(row.get_by_role("button", name="Revoke")).to_have_count(0)
    assert len(dialogs) == 1
    assert dialogs[0].startswith(f"Revoke token {token.prefix}…?")
    token.refresh_from_db()
    assert token.revoked_at is not None

    status, body = call_api(live_server, raw, "list_memories", {})
    assert (status, body["error"]["code"]) == (401, "invalid_token")
    assert body["error"]["message"].startswith("This token was revoked on ")


def test_a_name_already_taken_is_explained_and_nothing_is_created(
    signed_in_page, alice, same_document
):
    # Any text makes a name (lib/slugs.py), so what is refused is a name already taken.
    agent_create(user=alice, display_name="Claude Desktop")
    page = signed_in_page(alice)
    page.goto("/agents/")

    with same_document(page):
        page.get_by_label("Agent name").fill("claude  desktop!")
        page.get_by_role("button", name="Create agent").click()
        error = page.locator("#agent-name-error")
        expect(error).to_have_text(
            "You already have the agent 'Claude Desktop' (named 'claude-desktop' in paths "
            "and tokens); choose another name."
        )
    expect(page.get_by_label("Agent name")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Agent name")).to_have_value("claude  desktop!")
    assert Agent.objects.filter(user=alice).count() == 1


def test_an_agent_named_as_written_shows_its_path_name(signed_in_page, alice, same_document):
    page = signed_in_page(alice)
    page.goto("/agents/")

    with same_document(page):
        page.get_by_label("Agent name").fill("My Agent!")
        page.get_by_role("button", name="Create agent").click()
        expect(page.get_by_role("heading", name="agent My Agent!")).to_be_visible()
    expect(page.get_by_text("In paths and tokens: my-agent")).to_be_visible()
    assert Agent.objects.get(user=alice).name == "my-agent"


def test_dismissing_the_revoke_confirmation_keeps_the_token(
    signed_in_page, alice, alice_agent, alice_token, live_server
):
    token = AgentToken.objects.get(agent=alice_agent)
    page = signed_in_page(alice)
    page.goto("/agents/")
    page.on("dialog", lambda dialog: dialog.dismiss())

    page.locator(f"#token-{token.pk}").get_by_role("button", name="Revoke").click()

    expect(page.locator(f"#token-{token.pk} .badge")).to_have_text("active")
    token.refresh_from_db()
    assert token.revoked_at is None
    assert call_api(live_server, alice_token, "list_memories", {})[0] == 200


def test_pause_and_resume_memory(signed_in_page, alice, alice_token, live_server, same_document):
    page = signed_in_page(alice)
    page.goto("/agents/")
    page.get_by_role("link", name="Settings", exact=True).last.click()
    status_card = page.locator("#memory-status")
    expect(status_card.get_by_role("heading")).to_have_text("Memory is on")

    with same_document(page):
        page.get_by_role("button", name="Pause memory").click()
        expect(status_card.get_by_role("heading")).to_have_text("Memory is paused")
        expect(status_card.get_by_role("status")).to_have_text(
            "Memory paused. Agents can read your memory but not change it."
        )
    status, body = call_api(
        live_server, alice_token, "create_memory", {"key": "fact:paused", "value": "no"}
    )
    assert (status, body["error"]["code"]) == (409, "memory_paused")
    assert not Memory.objects.filter(user=alice).exists()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Context").click()
    expect(page.get_by_role("note")).to_contain_text("Memory is paused.")

    page.get_by_role("link", name="Resume in Settings").click()
    with same_document(page):
        page.get_by_role("button", name="Resume memory").click()
        expect(status_card.get_by_role("heading")).to_have_text("Memory is on")
    status, body = call_api(
        live_server, alice_token, "create_memory", {"key": "fact:resumed", "value": "yes"}
    )
    assert status in {200, 201}
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        "fact:resumed": "yes"
    }


def test_bob_cannot_revoke_alices_token(signed_in_page, bob, alice_agent, alice_token, live_server):
    token = AgentToken.objects.get(agent=alice_agent)
    page = signed_in_page(bob)
    page.goto("/agents/")
    expect(page.locator(f"#token-{token.pk}")).to_have_count(0)

    csrf = page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    response = page.request.post(
        f"/agents/tokens/{token.pk}/revoke/", form={"csrfmiddlewaretoken": csrf}
    )

    assert response.status == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert call_api(live_server, alice_token, "list_memories", {})[0] == 200


def test_the_user_sets_what_an_agent_reads(signed_in_page, alice, live_server, same_document):
    """The "What … reads" form: all except #health keeps a health memory out of the agent's
    search, then all of it lets it back in; every change by the page, none by the agent."""
    from activity.actors import Actor
    from memory.services import memory_upsert
    from profiles.services import token_create
    from tests.factories import AgentFactory

    agent = AgentFactory(user=alice, name="travel")
    token = token_create(agent=agent).raw
    you = Actor.for_user(alice)
    memory_upsert(
        user=alice, key="fact:pills", value="Takes quokka pills", tags=["health"], actor=you
    )
    memory_upsert(user=alice, key="fact:trip", value="Quokka island trip", actor=you)

    def found() -> list[str]:
        status, body = call_api(live_server, token, "search_memory", {"query": "quokka"})
        assert status == 200, body
        return sorted(hit["memory"]["key"] for hit in body["results"])

    assert found() == ["fact:pills", "fact:trip"]
    page = signed_in_page(alice)
    page.goto(f"{live_server.url}/agents/")
    rules = page.locator(f"#agent-{agent.pk}-rules")
    with same_document(page):
        rules.get_by_label("Memories").select_option("except")
        rules.get_by_label("Tags").fill("#Health")
        rules.get_by_role("button", name="Save what travel reads").click()
        expect(rules.get_by_role("status")).to_have_text("Saved what “travel” reads.")
    expect(rules.get_by_label("Tags")).to_have_value("#health")
    assert found() == ["fact:trip"]

    with same_document(page):
        rules.get_by_label("Memories").select_option("only")
        rules.get_by_label("Tags").fill("")
        rules.get_by_role("button", name="Save what travel reads").click()
        expect(rules.get_by_text("Name at least one tag for this rule.")).to_be_visible()
    assert found() == ["fact:trip"]

    with same_document(page):
        rules.get_by_label("Memories").select_option("all")
        rules.get_by_role("button", name="Save what travel reads").click()
        expect(rules.get_by_role("status")).to_be_visible()
    assert found() == ["fact:pills", "fact:trip"]
