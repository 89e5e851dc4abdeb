"""The assistant loop's pages in a real browser: switching learning on in Settings (with htmx
and its errors), switching an agent on (with htmx and without JavaScript), and following a
turn from the Activity page to its page."""

import re

import pytest
from playwright.sync_api import expect

from activity import events
from activity.actors import Actor
from llm.models import CallOutcome, LLMCall, Turn, TurnStatus
from profiles.models import Agent, Profile

pytestmark = pytest.mark.django_db(transaction=True)


def test_switch_learning_on_in_settings(signed_in_page, alice, no_llm, same_document):
    page = signed_in_page(alice)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    section = page.locator("#learning-setting")
    switch = page.get_by_label("Learn from the turns my agents report")
    expect(switch).not_to_be_checked()
    expect(section).to_contain_text("Each agent must be switched on too")
    expect(page.locator("#llm-panel")).to_contain_text("No LLM is configured.")

    with same_document(page):
        page.get_by_label("Profile budget (tokens)").fill("100")
        page.get_by_role("button", name="Save learning settings").click()
        expect(page.locator("#profile-budget-error")).to_have_text(
            "The profile budget must be between 500 and 8,000 tokens."
        )
    expect(page.get_by_label("Profile budget (tokens)")).to_have_attribute("aria-invalid", "true")
    assert Profile.objects.get(user=alice).profile_budget == 2000

    with same_document(page):
        switch = page.get_by_label("Learn from the turns my agents report")
        switch.check()
        page.get_by_label("Profile budget (tokens)").fill("3000")
        page.get_by_label("Daily LLM budget (tokens)").fill("50000")
        page.get_by_role("button", name="Save learning settings").click()
        expect(page.locator("#learning-setting").get_by_role("status")).to_contain_text(
            "Saved. Mnemo learns from the turns of the agents switched on"
        )
    profile = Profile.objects.get(user=alice)
    assert (profile.auto_learn, profile.profile_budget, profile.llm_daily_tokens) == (
        True,
        3000,
        50000,
    )

    page.reload()
    expect(page.get_by_label("Learn from the turns my agents report")).to_be_checked()
    expect(page.get_by_label("Profile budget (tokens)")).to_have_value("3000")
    expect(page.get_by_label("Daily LLM budget (tokens)")).to_have_value("50000")

    page.locator("#learning-setting").get_by_role("link", name="Agents page").click()
    expect(page.get_by_role("heading", name="Agents and tokens")).to_be_visible()


def test_llm_panel_shows_todays_use(signed_in_page, alice, settings):
    settings.MNEMO_LLM_MODEL = "gpt-4o-mini"
    settings.MNEMO_LLM_BASE_URL = "http://127.0.0.1:8089/v1"
    LLMCall.objects.create(
        user=alice,
        purpose="consolidation",
        model="gpt-4o-mini",
        prompt_tokens=1200,
        completion_tokens=300,
        latency_ms=640,
        outcome=CallOutcome.OK,
    )
    page = signed_in_page(alice)
    page.goto("/settings/")
    panel = page.locator("#llm-panel")
    expect(panel).to_contain_text("gpt-4o-mini at 127.0.0.1:8089")
    expect(panel).to_contain_text("1,500 of 200,000 tokens")
    expect(panel.locator("#llm-usage-today td")).to_have_text(["1", "1,200", "300", "640 ms"])


def test_switch_an_agent_on(signed_in_page, alice, alice_agent, same_document):
    page = signed_in_page(alice)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Agents").click()
    learning = page.locator(f"#agent-{alice_agent.pk}-learning")
    expect(learning).to_contain_text("Learns from turns: off")

    with same_document(page):
        learning.get_by_role("button", name="Learn from assistant's turns").click()
        expect(learning).to_contain_text("Learns from turns: on")
        expect(learning.get_by_role("status")).to_have_text(
            "Mnemo now learns from the turns “assistant” reports. "
            "Switch on learning from turns in Settings too."
        )
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is True
    expect(learning).to_contain_text("Learning from turns is off for your account")

    page.reload()
    expect(learning).to_contain_text("Learns from turns: on")
    with same_document(page):
        learning.get_by_role("button", name="Stop learning from assistant's turns").click()
        expect(learning).to_contain_text("Learns from turns: off")
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is False


def test_switch_an_agent_on_without_javascript(signed_in_page, alice, alice_agent):
    page = signed_in_page(alice, java_script_enabled=False)
    page.goto("/agents/")
    page.get_by_role("button", name="Learn from assistant's turns").click()
    expect(page).to_have_url(re.compile(r"/agents/$"))
    expect(page.locator("#flash")).to_contain_text(
        "Mnemo now learns from the turns “assistant” reports."
    )
    expect(page.locator(f"#agent-{alice_agent.pk}-learning")).to_contain_text(
        "Learns from turns: on"
    )
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is True


def test_open_a_turn_from_the_activity_page(signed_in_page, alice, alice_agent):
    turn = Turn.objects.create(
        user=alice,
        agent=alice_agent,
        user_message="Remember that I <b>prefer</b> tabs.",
        assistant_reply="Noted.",
        tool_outputs=[{"name": "pytest", "text": "1 failed <script>alert(1)</script>"}],
        status=TurnStatus.DONE,
        outcome={
            "profile": {"status": "noop"},
            "capture": {"method": "cues", "observations": [], "failed": False},
            "prompt_tokens": 0,
            "completion_tokens": 0,
        },
    )
    events.turn_reported(
        user=alice, actor=Actor.for_agent(alice_agent), turn_id=turn.pk, learning=True
    )
    events.turn_processed(
        user=alice,
        turn_id=turn.pk,
        outcome={"profile": "noop", "captured": 0, "duplicates": 0, "proposals": 0},
    )
    page = signed_in_page(alice)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Activity").click()
    rows = page.locator("#activity-list tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text(
        f"Turn {turn.pk} processed: profile unchanged, 0 observations captured"
    )

    rows.nth(1).get_by_role("link", name=f"Turn {turn.pk} reported by agent assistant").click()

    expect(page).to_have_url(re.compile(rf"/turns/{turn.pk}/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Turn {turn.pk}")
    expect(page.locator("#turn-user-message")).to_have_text("Remember that I <b>prefer</b> tabs.")
    expect(page.locator("#turn-profile")).to_contain_text("Profile unchanged (nothing new)")
    output = page.locator("#tool-output-1 pre")
    expect(output).to_be_hidden()  # collapsed until asked for
    page.locator("#tool-output-1 summary").click()
    expect(output).to_have_text("1 failed <script>alert(1)</script>")

    page.get_by_role("link", name="← All turns").click()
    expect(page.locator(f"#turn-{turn.pk}")).to_contain_text("Profile unchanged (nothing new)")
