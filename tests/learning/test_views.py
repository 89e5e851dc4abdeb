"""The assistant loop's pages: Settings (learning, budgets, the LLM panel), the Agents page's
per-agent switch, the turn pages, the activity rows of the new events, the document version's
link to its turn, and the read-only admin of turns and LLM calls."""

from __future__ import annotations

import datetime
import re
import types

import pytest
from django.utils import timezone
from django.utils.html import escape

from activity import events
from activity.actors import Actor
from activity.models import EventType
from context.models import DocumentVersion
from context.services import document_write
from learning.user_memory_loading import cap_profile, left_out_lines
from lib.errors import InvalidInput
from llm import selectors as llm_selectors
from llm.client import model_token_counter
from llm.models import CallOutcome, LLMCall, Turn, TurnStatus
from memory.models import Memory, MemoryProposal, ProposalAction, ProposalTrigger, Source
from profiles.models import Agent, Profile
from profiles.services import profile_update
from tests.factories import AgentFactory, MemoryFactory

HX = {"HX-Request": "true"}
LEARNING_ON = {"auto_learn": "on", "profile_budget": "3000", "llm_daily_tokens": "50000"}


def make_turn(user, agent=None, **fields) -> Turn:
    """A reported turn as learning/services.py stores it (the pages only read them)."""
    values = {
        "user_message": "I switched the project to Postgres 17.",
        "assistant_reply": "Noted: the project now runs on Postgres 17.",
        "status": TurnStatus.DONE,
    }
    return Turn.objects.create(user=user, agent=agent, **(values | fields))


def make_call(user, turn=None, **fields) -> LLMCall:
    values = {
        "purpose": "consolidation",
        "model": "gpt-4o-mini",
        "prompt_tokens": 700,
        "completion_tokens": 112,
        "latency_ms": 950,
        "outcome": CallOutcome.OK,
    }
    return LLMCall.objects.create(user=user, turn=turn, **(values | fields))


def configure_llm(settings) -> None:
    """An LLM as the pages see it; nothing is called, so no server is needed."""
    settings.MNEMO_LLM_MODEL = "gpt-4o-mini"
    settings.MNEMO_LLM_BASE_URL = "http://127.0.0.1:8089/v1"
    settings.MNEMO_LLM_API_KEY = ""


# Login required --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/turns/"),
        ("get", "/turns/1/"),
        ("post", "/settings/learning/"),
        ("post", "/agents/1/learning/"),
    ],
)
def test_login_required(client, alice_agent, method, path):
    data = {"learns_from_turns": "1"} | LEARNING_ON if method == "post" else {}
    response = getattr(client, method)(path, data)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"
    assert Profile.objects.filter(auto_learn=True).count() == 0
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is False


# Settings: learning from turns ----------------------------------------------------------


def test_settings_show_learning_off_by_default(client, alice, no_llm):
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert '<h2 id="learning-setting-title">Learning from turns</h2>' in html
    assert (
        '<input type="checkbox" id="id_auto_learn" name="auto_learn" '
        'aria-describedby="auto-learn-help"> Learn from the turns my agents report</label>'
    ) in html
    assert (
        "Off by default. Each agent must be switched on too, on the "
        '<a href="/agents/">Agents page</a>'
    ) in html
    assert 'name="profile_budget" min="500" max="8000" step="100" required value="2000"' in html
    assert (
        'name="llm_daily_tokens" min="1000" max="100000000" step="1000" required value="200000"'
    ) in html
    assert "500–8,000 tokens" in html
    assert '<a href="/turns/">See the reported turns</a>' in html


def test_learning_settings_save_htmx(client, alice, no_llm):
    client.force_login(alice)
    response = client.post("/settings/learning/", LEARNING_ON, headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.strip().startswith('<div id="learning">')
    assert 'aria-describedby="auto-learn-help" checked>' in html
    assert 'required value="3000"' in html
    assert 'required value="50000"' in html
    assert "Saved. Mnemo learns from the turns of the agents switched on" in html
    assert '<section id="llm-panel"' in html  # the LLM panel is swapped with it
    profile = Profile.objects.get(user=alice)
    assert (profile.auto_learn, profile.profile_budget, profile.llm_daily_tokens) == (
        True,
        3000,
        50000,
    )

    off = client.post(
        "/settings/learning/", {"profile_budget": "3000", "llm_daily_tokens": "50000"}, headers=HX
    )
    assert "Saved. Learning from turns is off" in off.content.decode()
    assert Profile.objects.get(user=alice).auto_learn is False


def _over_budget_edit(user) -> tuple[str, int]:
    """The user's own USER_MEMORY.md of 40 bullets, each with markup in it; its version."""
    bullets = "\n".join(f"- Topic {n}: <b>long</b> notes about a subject & more" for n in range(40))
    text = (
        "---\nuser_id: 1\nschema_version: 1\nlast_updated: 2025-06-03T09:00:00+00:00\n"
        f"turn_count: 0\n---\n\n# User Memory\n\n## Identity\n{bullets}\n"
    )
    document = document_write(
        user=user, path="USER_MEMORY.md", content=text, actor=Actor.for_user(user)
    )
    return text, document.written_version.pk


def test_settings_say_the_stored_profile_is_over_its_budget_and_by_how_much(client, alice, no_llm):
    Profile.objects.create(user=alice, profile_budget=500)
    text, version = _over_budget_edit(alice)
    counter = model_token_counter()
    tokens = counter.count(text)
    capped, _, _ = cap_profile(text, budget=500, counter=counter)
    kept = capped.count("\n- ")
    first_left_out = left_out_lines(text, capped)[0]
    assert 0 < kept < 40
    assert tokens > 500
    client.force_login(alice)

    html = client.get("/settings/").content.decode()

    assert (
        f"Your profile (<code>USER_MEMORY.md</code>) is {tokens:,} tokens, {tokens - 500:,} over "
        f"its budget of 500: the assistant reads the first {kept} of its 40 bullets; it stops "
        f"before “{escape(first_left_out)}”, and the next consolidation rewrites the profile "
        "from that part."
    ) in html
    assert f'<a href="/documents/versions/{version}/">this version</a>' in html
    assert "&lt;b&gt;long&lt;/b&gt; notes about a subject &amp; more" in html
    assert "<b>long</b>" not in html
    assert 'aria-describedby="profile-budget-help profile-over-budget"' in html

    # A budget the profile fits in: the note goes with the saved setting.
    raised = client.post(
        "/settings/learning/", LEARNING_ON | {"profile_budget": "8000"}, headers=HX
    ).content.decode()
    assert "Saved." in raised
    assert 'id="profile-over-budget"' not in raised


def test_settings_say_nothing_of_a_profile_within_its_budget(client, alice, no_llm):
    _over_budget_edit(alice)  # about 600 tokens: within the default budget of 2000
    client.force_login(alice)
    assert 'id="profile-over-budget"' not in client.get("/settings/").content.decode()
    lowered = client.post(
        "/settings/learning/", LEARNING_ON | {"profile_budget": "500"}, headers=HX
    ).content.decode()
    assert 'id="profile-over-budget"' in lowered


def test_learning_settings_without_js_redirects_with_message(client, alice, no_llm):
    client.force_login(alice)
    response = client.post("/settings/learning/", LEARNING_ON)
    assert response.status_code == 302
    assert response["Location"] == "/settings/"
    page = client.get("/settings/").content.decode()
    assert "Saved. Mnemo learns from the turns of the agents switched on" in page
    assert 'aria-describedby="auto-learn-help" checked>' in page
    assert 'required value="3000"' in page
    assert Profile.objects.get(user=alice).auto_learn is True


PROFILE_RANGE = "The profile budget must be between 500 and 8,000 tokens."
DAILY_RANGE = "The daily LLM budget must be between 1,000 and 100,000,000 tokens."


@pytest.mark.parametrize(
    ("data", "errors"),
    [
        ({"profile_budget": "499"}, [PROFILE_RANGE]),
        ({"profile_budget": "8001"}, [PROFILE_RANGE]),
        ({"profile_budget": "lots"}, [PROFILE_RANGE]),
        ({"llm_daily_tokens": "999"}, [DAILY_RANGE]),
        ({"llm_daily_tokens": "100000001"}, [DAILY_RANGE]),
        ({"llm_daily_tokens": ""}, [DAILY_RANGE]),
        ({"profile_budget": "1", "llm_daily_tokens": "1"}, [PROFILE_RANGE, DAILY_RANGE]),
    ],
)
def test_learning_settings_out_of_range_change_nothing(client, alice, no_llm, data, errors):
    profile_update(user=alice, profile_budget=2500, llm_daily_tokens=40000)
    client.force_login(alice)
    page = client.post("/settings/learning/", LEARNING_ON | data)
    htmx = client.post("/settings/learning/", LEARNING_ON | data, headers=HX)
    assert page.status_code == 400
    assert "<html" in page.content.decode()
    assert htmx.status_code == 200
    for response in (page, htmx):
        html = response.content.decode()
        for error in errors:
            assert f">{error}</p>" in html
        assert "Not saved: correct the marked field" in html
        assert 'aria-invalid="true"' in html
    profile = Profile.objects.get(user=alice)
    assert (profile.auto_learn, profile.profile_budget, profile.llm_daily_tokens) == (
        False,
        2500,
        40000,
    )


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"profile_budget": 499}, "profile_budget", PROFILE_RANGE),
        ({"profile_budget": 8001}, "profile_budget", PROFILE_RANGE),
        ({"llm_daily_tokens": 999}, "llm_daily_tokens", DAILY_RANGE),
        ({"llm_daily_tokens": 100_000_001}, "llm_daily_tokens", DAILY_RANGE),
    ],
)
def test_profile_update_refuses_out_of_range_budgets(alice, fields, field, message):
    with pytest.raises(InvalidInput) as refused:
        profile_update(user=alice, auto_learn=True, **fields)
    assert (refused.value.field, refused.value.message) == (field, message)
    assert not Profile.objects.filter(user=alice, auto_learn=True).exists()


def test_profile_update_saves_the_edges_of_the_ranges(alice):
    profile = profile_update(user=alice, profile_budget=500, llm_daily_tokens=100_000_000)
    assert (profile.profile_budget, profile.llm_daily_tokens) == (500, 100_000_000)
    profile = profile_update(user=alice, profile_budget=8000, llm_daily_tokens=1000)
    stored = Profile.objects.get(user=alice)
    assert (stored.profile_budget, stored.llm_daily_tokens) == (8000, 1000)


def test_learning_settings_are_per_user(client, alice, bob, no_llm):
    client.force_login(bob)
    client.post("/settings/learning/", LEARNING_ON)
    assert Profile.objects.get(user=bob).auto_learn is True
    assert not Profile.objects.filter(user=alice, auto_learn=True).exists()


# Settings: the LLM panel -----------------------------------------------------------------


def test_llm_panel_explains_how_to_turn_it_on(client, alice, no_llm):
    make_call(alice)  # past use is not shown while nothing is configured
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert '<h2 id="llm-panel-title">LLM</h2>' in html
    assert "<strong>No LLM is configured.</strong>" in html
    assert "captures observations, found by cue phrases" in html
    assert "your consolidated profile is not rewritten after each turn" in html
    assert "<code>MNEMO_LLM_MODEL</code> (e.g. <code>llama3.1:8b</code>) and " in html
    assert "<code>MNEMO_LLM_BASE_URL</code>" in html
    assert "Ollama, llama.cpp, vLLM" in html
    assert "api.openai.com: <code>MNEMO_LLM_MODEL</code>" in html
    assert "<code>MNEMO_LLM_API_KEY</code>" in html
    assert "restart Mnemo" in html
    assert 'id="llm-usage-today"' not in html


FIXED_NOW = datetime.datetime(2026, 3, 15, 12, 0, tzinfo=datetime.UTC)


@pytest.fixture
def fixed_now(monkeypatch):
    """The usage panel's clock at FIXED_NOW (rows' times are set with update())."""
    monkeypatch.setattr(llm_selectors, "timezone", types.SimpleNamespace(now=lambda: FIXED_NOW))
    return FIXED_NOW


def at(call: LLMCall, when: datetime.datetime) -> None:
    LLMCall.objects.filter(pk=call.pk).update(created_at=when)


def test_llm_panel_shows_today_and_this_month(client, alice, bob, settings, fixed_now):
    configure_llm(settings)
    today = fixed_now.replace(hour=0)
    at(make_call(alice, prompt_tokens=1000, completion_tokens=200, latency_ms=400), today)
    at(make_call(alice, prompt_tokens=3000, completion_tokens=300, latency_ms=800), fixed_now)
    at(
        make_call(alice, prompt_tokens=5000, completion_tokens=500, latency_ms=100),
        today.replace(day=1),
    )
    at(
        make_call(alice, prompt_tokens=90000, completion_tokens=9000),
        today - datetime.timedelta(days=15),
    )
    at(make_call(bob, prompt_tokens=70000, completion_tokens=7000), fixed_now)
    client.force_login(alice)

    html = client.get("/settings/").content.decode()

    assert "Learning from turns asks <strong>gpt-4o-mini at 127.0.0.1:8089</strong>" in html
    assert "<strong>4,500 of 200,000 tokens</strong> of your daily budget used (2%)" in html
    assert '<meter min="0" max="200000" value="4500"' in html
    today_row = re.search(r'<tr id="llm-usage-today">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", today_row)
    assert cells == ["2", "4,000", "500", "600 ms"]
    assert "since Mar 15, 00:00" in today_row
    month_row = re.search(r'<tr id="llm-usage-month">(.*?)</tr>', html, re.S).group(1)
    assert re.findall(r"<td[^>]*>(.*?)</td>", month_row) == ["3", "9,000", "1,000", "433 ms"]
    assert "since Mar 1" in month_row
    assert "Today's budget is spent" not in html
    assert "No LLM is configured" not in html
    assert "test" not in re.search(r'<section id="llm-panel".*?</section>', html, re.S).group(0)


def test_llm_panel_says_when_the_budget_is_spent(client, alice, settings, fixed_now):
    configure_llm(settings)
    profile_update(user=alice, llm_daily_tokens=1000)
    at(make_call(alice, prompt_tokens=900, completion_tokens=100), fixed_now)
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert "<strong>1,000 of 1,000 tokens</strong> of your daily budget used (100%)" in html
    assert "Today's budget is spent: Mnemo makes no more LLM calls for you" in html


def test_llm_panel_without_calls(client, alice, settings):
    configure_llm(settings)
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    today_row = re.search(r'<tr id="llm-usage-today">(.*?)</tr>', html, re.S).group(1)
    assert re.findall(r"<td[^>]*>(.*?)</td>", today_row) == [
        "0",
        "0",
        "0",
        '<span class="muted">—</span>',
    ]
    assert "<strong>0 of 200,000 tokens</strong>" in html


def test_usage_is_one_aggregate_query_per_period(alice, django_assert_num_queries, fixed_now):
    at(make_call(alice, prompt_tokens=10, completion_tokens=5, latency_ms=20), fixed_now)
    with django_assert_num_queries(1):
        usage = llm_selectors.llm_usage_since(user=alice, since=fixed_now.replace(hour=0))
    assert usage == llm_selectors.Usage(
        calls=1, prompt_tokens=10, completion_tokens=5, average_latency_ms=20.0
    )
    summary = llm_selectors.llm_usage_summary(user=alice)
    assert (summary.today.total_tokens, summary.month.calls, summary.daily_budget) == (
        15,
        1,
        200_000,
    )
    assert summary.month_start == datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)


# Agents: learns from turns ---------------------------------------------------------------


def test_agents_page_shows_each_agents_learning(client, alice, alice_agent):
    other = AgentFactory(user=alice, name="cursor", learns_from_turns=True)
    client.force_login(alice)
    html = client.get("/agents/").content.decode()
    off = re.search(rf'<div class="agent-learning" id="agent-{alice_agent.pk}-learning">', html)
    on = re.search(rf'<div class="agent-learning is-on" id="agent-{other.pk}-learning">', html)
    assert off
    assert on
    assert 'Learns from turns: <span class="badge">off</span>' in html
    assert 'Learns from turns: <span class="badge user">on</span>' in html
    assert "Learn from assistant's turns</button>" in html
    assert "Stop learning from cursor's turns</button>" in html
    # cursor is on but the account is not: the page says why nothing is learned yet.
    assert "Learning from turns is off for your account, so nothing is learned yet" in html


def test_agent_switch_htmx(client, alice, alice_agent):
    profile_update(user=alice, auto_learn=True)
    client.force_login(alice)
    url = f"/agents/{alice_agent.pk}/learning/"
    response = client.post(url, {"learns_from_turns": "1"}, headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.strip().startswith(
        f'<div class="agent-learning is-on" id="agent-{alice_agent.pk}-learning">'
    )
    assert "Mnemo now learns from the turns “assistant” reports.</p>" in html
    assert "Stop learning from assistant's turns" in html
    assert "Learning from turns is off for your account" not in html
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is True

    off = client.post(url, {"learns_from_turns": "0"}, headers=HX).content.decode()
    assert "Mnemo no longer learns from the turns “assistant” reports." in off
    assert 'Learns from turns: <span class="badge">off</span>' in off
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is False


def test_agent_switch_without_js_redirects_with_message(client, alice, alice_agent):
    client.force_login(alice)
    response = client.post(f"/agents/{alice_agent.pk}/learning/", {"learns_from_turns": "1"})
    assert response.status_code == 302
    assert response["Location"] == "/agents/"
    page = client.get("/agents/").content.decode()
    assert (
        "Mnemo now learns from the turns “assistant” reports. "
        "Switch on learning from turns in Settings too."
    ) in page
    assert "Stop learning from assistant's turns" in page
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is True


@pytest.mark.parametrize("data", [{}, {"learns_from_turns": "yes"}])
def test_agent_switch_with_a_bad_value_changes_nothing(client, alice, alice_agent, data):
    Agent.objects.filter(pk=alice_agent.pk).update(learns_from_turns=True)
    client.force_login(alice)
    url = f"/agents/{alice_agent.pk}/learning/"
    page = client.post(url, data)
    assert page.status_code == 400
    assert "That request could not be understood." in page.content.decode()
    htmx = client.post(url, data, headers=HX)
    assert htmx.status_code == 200
    assert "That request could not be understood." in htmx.content.decode()
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is True


def test_bob_cannot_switch_alices_agent(client, bob, alice_agent):
    client.force_login(bob)
    response = client.post(f"/agents/{alice_agent.pk}/learning/", {"learns_from_turns": "1"})
    assert response.status_code == 404
    assert Agent.objects.get(pk=alice_agent.pk).learns_from_turns is False


# The turn page --------------------------------------------------------------------------


@pytest.fixture
def processed_turn(alice, alice_agent):
    """A processed turn with every kind of outcome: a rewrite, a created memory, a
    duplicate, a proposal, a refusal; two LLM calls."""
    turn = make_turn(
        alice,
        alice_agent,
        user_message="Remember: <b>I</b> prefer tabs.",
        assistant_reply="Got it & noted.",
        tool_outputs=[
            {"name": "run_tests", "text": "FAILED test_x <script>alert(1)</script>"},
            {"name": "<img src=x>", "text": "ok"},
        ],
        client_turn_id="conv-7/turn-3",
        attempts=1,
        processed_at=timezone.now(),
    )
    document = document_write(
        user=alice,
        path="USER_MEMORY.md",
        content="# User Memory\n",
        actor=Actor.system(),
        turn=turn,
    )
    version = DocumentVersion.objects.get(document=document)
    created = MemoryFactory(
        user=alice, key="preference:tabs", source=Source.TP_EXTRACTED, confidence=0.6
    )
    existing = MemoryFactory(user=alice, key="fact:postgres-17")
    proposal = MemoryProposal.objects.create(
        user=alice,
        key="decision:use-uv",
        action=ProposalAction.CREATE,
        trigger=ProposalTrigger.NEW_MEMORY,
        after={"value": "Use uv", "source": "tp_extracted", "confidence": 0.6},
        expires_at=timezone.now() + datetime.timedelta(days=30),
        turn=turn,
        **Actor.for_agent(alice_agent).as_fields(),
    )
    turn.outcome = {
        "profile": {
            "status": "rewritten",
            "reason": "",
            "version_id": version.pk,
            "profile_tokens": 640,
            "prompt_tokens": 700,
            "completion_tokens": 112,
            "attempts": 1,
        },
        "capture": {
            "method": "llm",
            "observations": [
                {
                    "kind": "preference",
                    "text": "Prefers tabs.",
                    "status": "created",
                    "key": created.key,
                    "proposal_id": None,
                    "reason": "",
                },
                {
                    "kind": "discovery",
                    "text": "Runs Postgres 17.",
                    "status": "duplicate",
                    "key": existing.key,
                    "proposal_id": None,
                    "reason": "",
                },
                {
                    "kind": "decision",
                    "text": "Use uv.",
                    "status": "pending_review",
                    "key": "decision:use-uv",
                    "proposal_id": proposal.pk,
                    "reason": "",
                },
                {
                    "kind": "task",
                    "text": "<i>x</i>",
                    "status": "refused",
                    "key": "",
                    "proposal_id": None,
                    "reason": "Memory is paused",
                },
            ],
            "failed": False,
            "reason": "",
            "prompt_tokens": 300,
            "completion_tokens": 40,
            "attempts": 1,
        },
        "prompt_tokens": 1000,
        "completion_tokens": 152,
    }
    turn.save()
    calls = [
        make_call(alice, turn, purpose="consolidation", latency_ms=1200),
        make_call(
            alice,
            turn,
            purpose="capture",
            prompt_tokens=300,
            completion_tokens=40,
            latency_ms=480,
        ),
    ]
    return types.SimpleNamespace(
        turn=turn,
        version=version,
        created=created,
        existing=existing,
        proposal=proposal,
        calls=calls,
    )


def test_turn_page_tells_the_whole_story(client, alice, alice_agent, processed_turn):
    turn = processed_turn.turn
    client.force_login(alice)
    response = client.get(f"/turns/{turn.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'<h1 id="turn-title">Turn {turn.pk}</h1>' in html
    assert (
        '<dt>Reported by</dt><dd><bdi class="badge agent" dir="auto">assistant</bdi></dd>' in html
    )
    assert '<span id="turn-status" class="turn-status turn-status-done">Processed</span>' in html
    assert "<code>conv-7/turn-3</code>" in html
    # What was said, escaped.
    assert "Remember: &lt;b&gt;I&lt;/b&gt; prefer tabs." in html
    assert "Got it &amp; noted." in html
    assert "<summary><code>run_tests</code>" in html
    assert '<pre dir="auto">FAILED test_x &lt;script&gt;alert(1)&lt;/script&gt;</pre>' in html
    assert "<code>&lt;img src=x&gt;</code>" in html
    assert "<script>alert(1)" not in html
    assert '<details class="tool-output" id="tool-output-2">' in html
    # The profile: rewritten, linking the version.
    version_url = f"/documents/versions/{processed_turn.version.pk}/"
    assert (
        f'<strong>Profile rewritten</strong>: <a href="{version_url}">'
        "the new version of <code>USER_MEMORY.md</code></a>, 640 tokens long."
    ) in html
    # Observations, each with its fate and link.
    assert "Captured by the LLM: 1 memory written." in html
    rows = dict(re.findall(r'<tr id="observation-(\d)" class="observation-(\w+)">', html))
    assert rows == {"1": "created", "2": "duplicate", "3": "pending_review", "4": "refused"}
    assert (
        f'<a href="/memories/{processed_turn.created.pk}/history/"><code>preference:tabs</code></a>'
    ) in html
    assert f'<a href="/memories/{processed_turn.existing.pk}/history/">' in html
    assert "Duplicate: already known" in html
    assert (
        f'<a href="/context/inbox/#proposal-{processed_turn.proposal.pk}">In your review inbox</a>'
    ) in html
    proposal_row = re.search(r'<tr id="observation-3".*?</tr>', html, re.S).group(0)
    assert "not there now" not in proposal_row
    assert 'Not stored <span class="muted">(Memory is paused)</span>' in html
    assert "&lt;i&gt;x&lt;/i&gt;" in html
    # Tokens, per call.
    assert "2 calls, <strong>1,152 tokens</strong> (1,000 prompt, 152 completion)." in html
    first, second = processed_turn.calls
    call_row = re.search(rf'<tr id="call-{first.pk}">(.*?)</tr>', html, re.S).group(1)
    assert re.findall(r"<td[^>]*>(.*?)</td>", call_row) == [
        "consolidation",
        "<code>gpt-4o-mini</code>",
        "700",
        "112",
        "1,200 ms",
        "Answered",
    ]
    assert html.index(f'id="call-{first.pk}"') < html.index(f'id="call-{second.pk}"')
    assert '<a href="/turns/" aria-current="page">Turns</a>' in html


def test_turn_page_shows_a_decided_proposal_and_a_gone_memory(client, alice, processed_turn):
    MemoryProposal.objects.filter(pk=processed_turn.proposal.pk).update(
        status="rejected", decided_at=timezone.now()
    )
    Memory.objects.filter(pk=processed_turn.created.pk).delete()
    client.force_login(alice)
    html = client.get(f"/turns/{processed_turn.turn.pk}/").content.decode()
    assert "Proposal rejected" in html
    assert "In your review inbox" not in html
    assert '<code>preference:tabs</code> <span class="muted">(not there now)</span>' in html


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (
            {"status": "noop"},
            "<strong>Profile unchanged (nothing new)</strong>: the model found nothing to "
            "change, so <code>USER_MEMORY.md</code> was left as it was.",
        ),
        (
            {"status": "failed", "reason": "the rewrite has no ## Identity section"},
            "<strong>Profile not rewritten</strong>: the rewrite has no ## Identity section. "
            "The profile was kept as it was.",
        ),
        (
            {"status": "off", "reason": "no LLM is configured"},
            "<strong>Profile not consolidated</strong>: no LLM is configured.",
        ),
    ],
)
def test_turn_page_profile_outcomes(client, alice, alice_agent, profile, expected):
    outcome = {
        "profile": profile,
        "capture": {"method": "cues", "observations": [], "failed": False},
        "prompt_tokens": 0,
        "completion_tokens": 0,
    }
    turn = make_turn(alice, alice_agent, outcome=outcome)
    client.force_login(alice)
    html = client.get(f"/turns/{turn.pk}/").content.decode()
    assert " ".join(expected.split()) in " ".join(html.split())
    assert "Captured by cue phrases: 0 memories written." in html
    assert "Nothing in this turn was worth remembering." in html
    assert "No LLM calls were made for this turn." in html


def test_turn_page_capture_failed(client, alice, alice_agent):
    outcome = {
        "profile": {"status": "noop"},
        "capture": {
            "method": "llm",
            "observations": [],
            "failed": True,
            "reason": "the answer was not JSON",
        },
    }
    turn = make_turn(alice, alice_agent, outcome=outcome)
    client.force_login(alice)
    html = client.get(f"/turns/{turn.pk}/").content.decode()
    assert (
        'Captured by the LLM: <span class="error">failed, nothing was written '
        "(the answer was not JSON)</span>."
    ) in html


@pytest.mark.parametrize(
    ("fields", "status_label", "expected"),
    [
        (
            {"status": "skipped", "skipped_reason": "Learning from turns is off for this account."},
            "Not learned from (learning is off)",
            "Nothing was learned from this turn: Learning from turns is off for this account.",
        ),
        ({"status": "queued"}, "Waiting to be processed", "Waiting to be processed."),
        (
            {"status": "failed", "outcome": {"error": "processing failed 3 times"}},
            "Processing failed",
            "Processing failed: processing failed 3 times",
        ),
        (
            {"status": "done", "outcome": {"paused": True}},
            "Processed",
            "Memory was paused when this turn was processed, so nothing was learned from it.",
        ),
    ],
)
def test_turn_page_states(client, alice, alice_agent, fields, status_label, expected):
    turn = make_turn(alice, alice_agent, **fields)
    client.force_login(alice)
    html = client.get(f"/turns/{turn.pk}/").content.decode()
    assert f'turn-status-{fields["status"]}">{status_label}</span>' in html
    assert expected in html
    assert "No tool outputs were reported with this turn." in html
    assert "<h3>Consolidated profile</h3>" not in html


def test_turn_of_a_deleted_agent(client, alice, alice_agent):
    turn = make_turn(alice, alice_agent, status="queued")
    alice_agent.delete()
    client.force_login(alice)
    html = client.get(f"/turns/{turn.pk}/").content.decode()
    assert '<dt>Reported by</dt><dd><span class="muted">a deleted agent</span></dd>' in html


def test_turn_page_htmx_partial(client, alice, alice_agent):
    turn = make_turn(alice, alice_agent)
    client.force_login(alice)
    html = client.get(f"/turns/{turn.pk}/", headers=HX).content.decode()
    assert "<html" not in html
    assert f'<h1 id="turn-title">Turn {turn.pk}</h1>' in html


def test_bob_cannot_see_alices_turn(client, bob, bob_agent, processed_turn):
    client.force_login(bob)
    assert client.get(f"/turns/{processed_turn.turn.pk}/").status_code == 404
    assert client.get("/turns/999999/").status_code == 404
    mine = make_turn(bob, bob_agent, user_message="bob's own turn")
    listing = client.get("/turns/").content.decode()
    assert f'<tr id="turn-{mine.pk}">' in listing
    assert f'id="turn-{processed_turn.turn.pk}"' not in listing
    assert "1 turn." in listing


def test_another_users_version_is_not_linked(client, alice, bob, alice_agent):
    bobs = document_write(user=bob, path="USER_MEMORY.md", content="# Bob\n", actor=Actor.system())
    version = DocumentVersion.objects.get(document=bobs)
    turn = make_turn(
        alice, alice_agent, outcome={"profile": {"status": "rewritten", "version_id": version.pk}}
    )
    client.force_login(alice)
    html = client.get(f"/turns/{turn.pk}/").content.decode()
    assert f"/documents/versions/{version.pk}/" not in html
    assert "(that version is no longer there)" in html


# The list of turns ----------------------------------------------------------------------


def test_turn_list_with_one_line_outcomes(client, alice, alice_agent, processed_turn):
    skipped = make_turn(
        alice, alice_agent, status="skipped", skipped_reason="Learning from turns is off."
    )
    queued = make_turn(alice, alice_agent, status="queued")
    client.force_login(alice)
    html = client.get("/turns/").content.decode()
    assert "3 turns." in html
    row = re.search(rf'<tr id="turn-{processed_turn.turn.pk}">(.*?)</tr>', html, re.S).group(1)
    assert f'<a href="/turns/{processed_turn.turn.pk}/">Turn {processed_turn.turn.pk}</a>' in row
    assert '<bdi class="badge agent" dir="auto">assistant</bdi>' in row
    assert (
        '<td class="what" data-label="What came of it">Profile rewritten · 1 observation captured,'
        " 1 duplicate, 1 proposal · 1,152 LLM tokens</td>"
    ) in row
    assert "Not learned from: Learning from turns is off." in html
    assert "Waiting to be processed</td>" in html
    # Newest first.
    assert html.index(f'id="turn-{queued.pk}"') < html.index(f'id="turn-{skipped.pk}"')
    assert html.index(f'id="turn-{skipped.pk}"') < html.index(f'id="turn-{processed_turn.turn.pk}"')


def test_turn_list_filters_by_status_and_pages(client, alice, alice_agent):
    Turn.objects.bulk_create(
        Turn(
            user=alice, agent=alice_agent, user_message=f"m{n}", assistant_reply="r", status="done"
        )
        for n in range(51)
    )
    skipped = make_turn(alice, alice_agent, status="skipped", skipped_reason="off")
    client.force_login(alice)
    first = client.get("/turns/").content.decode()
    assert "52 turns." in first
    assert "Page 1 of 2" in first
    second = client.get("/turns/", {"page": 2}, headers=HX).content.decode()
    assert second.strip().startswith('<section id="turn-list"')
    assert "Page 2 of 2" in second
    only = client.get("/turns/", {"status": "skipped"}).content.decode()
    assert "1 turn matches this filter." in only
    assert f'id="turn-{skipped.pk}"' in only
    bad = client.get("/turns/", {"status": "bogus"})
    assert bad.status_code == 400
    assert "This filter cannot be used" in bad.content.decode()


def test_turn_list_empty(client, alice):
    client.force_login(alice)
    html = client.get("/turns/").content.decode()
    assert "No turns yet." in html
    assert '<a href="/turns/" aria-current="page">Turns</a>' in html


# The document version links its turn -----------------------------------------------------


def test_version_page_links_the_turn_that_wrote_it(client, alice, alice_agent):
    turn = make_turn(alice, alice_agent)
    document = document_write(
        user=alice,
        path="USER_MEMORY.md",
        content="# User Memory\n",
        actor=Actor.system(),
        turn=turn,
    )
    edited = document_write(
        user=alice, path="USER_MEMORY.md", content="# Mine\n", actor=Actor.for_user(alice)
    )
    consolidated = DocumentVersion.objects.get(document=document, turn=turn)
    by_hand = DocumentVersion.objects.filter(document=edited, turn=None).get()
    client.force_login(alice)
    html = client.get(f"/documents/versions/{consolidated.pk}/").content.decode()
    assert (
        f'Written by consolidation after <a href="/turns/{turn.pk}/">turn {turn.pk}</a>.'
    ) in html
    plain = client.get(f"/documents/versions/{by_hand.pk}/").content.decode()
    assert "Written by consolidation" not in plain
    history = client.get("/documents/mine/history/USER_MEMORY.md").content.decode()
    assert f'consolidated after <a href="/turns/{turn.pk}/">turn {turn.pk}</a>' in history


# Activity --------------------------------------------------------------------------------


def test_activity_shows_the_loops_events_with_links(client, alice, alice_agent):
    on = make_turn(alice, alice_agent, status="queued")
    off = make_turn(alice, alice_agent, status="skipped", skipped_reason="off")
    agent = Actor.for_agent(alice_agent)
    events.turn_reported(user=alice, actor=agent, turn_id=on.pk, learning=True)
    events.turn_reported(
        user=alice,
        actor=agent,
        turn_id=off.pk,
        learning=False,
        reason="Learning from turns is off for agent 'assistant' (Agents page).",
    )
    events.turn_processed(
        user=alice,
        turn_id=on.pk,
        outcome={
            "profile": "rewritten",
            "profile_reason": "",
            "capture_method": "llm",
            "capture_failed": False,
            "captured": 2,
            "duplicates": 1,
            "proposals": 1,
            "prompt_tokens": 700,
            "completion_tokens": 112,
        },
    )
    events.turn_processed(
        user=alice,
        turn_id=off.pk,
        outcome={"profile": "failed", "error": "processing did not finish after 3 attempts"},
    )
    events.consolidation_applied(
        user=alice,
        turn_id=on.pk,
        version_id=1,
        profile_tokens=640,
        prompt_tokens=700,
        completion_tokens=112,
    )
    events.learning_failed(
        user=alice,
        event_type=EventType.CONSOLIDATION_FAILED,
        turn_id=on.pk,
        reason="the rewrite has no ## Identity <section>",
        attempt=2,
    )
    events.learning_failed(
        user=alice, event_type=EventType.CAPTURE_FAILED, turn_id=on.pk, reason="not JSON", attempt=1
    )
    events.llm_budget_reached(user=alice, used=200_000, budget=200_000)
    client.force_login(alice)

    html = client.get("/activity/").content.decode()

    link = f'<a href="/turns/{on.pk}/">'
    assert f"{link}Turn {on.pk} reported by agent assistant: Mnemo learns from it</a>" in html
    assert (
        f'<a href="/turns/{off.pk}/">Turn {off.pk} reported by agent assistant — learning off: '
        "Learning from turns is off for agent &#x27;assistant&#x27; (Agents page).</a>"
    ) in html
    assert (
        f"{link}Turn {on.pk} processed: profile rewritten, 2 observations captured, "
        "1 duplicate, 1 proposal, 812 tokens</a>"
    ) in html
    assert (
        f'<a href="/turns/{off.pk}/">Turn {off.pk} failed: processing did not finish after '
        "3 attempts</a>"
    ) in html
    assert (
        f"{link}Profile rewritten after turn {on.pk}: now 640 tokens, 812 LLM tokens used</a>"
        in html
    )
    assert (
        f"{link}Consolidation failed for turn {on.pk} (attempt 2): "
        "the rewrite has no ## Identity &lt;section&gt;</a>"
    ) in html
    assert f"{link}Capture failed for turn {on.pk} (attempt 1): not JSON</a>" in html
    assert (
        '<a href="/settings/#llm-panel">Daily LLM budget reached: 200,000 of 200,000 tokens</a>'
    ) in html
    for label in (
        "Turn reported",
        "Turn processed",
        "Consolidation applied",
        "Consolidation failed",
        "Capture failed",
        "Daily LLM budget reached",
    ):
        assert f'<td data-label="Event">{label}</td>' in html


def test_activity_processed_turn_variants(client, alice):
    turn = make_turn(alice)
    events.turn_processed(user=alice, turn_id=turn.pk, outcome={"profile": "paused", "captured": 0})
    events.turn_processed(
        user=alice,
        turn_id=turn.pk,
        outcome={
            "profile": "off",
            "profile_reason": "no LLM is configured",
            "capture_method": "cues",
            "captured": 1,
            "duplicates": 0,
            "proposals": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        },
    )
    client.force_login(alice)
    html = client.get("/activity/").content.decode()
    assert f"Turn {turn.pk} processed: memory was paused, nothing was learned</a>" in html
    assert (
        f"Turn {turn.pk} processed: profile not consolidated (no LLM is configured), "
        "1 observation captured</a>"
    ) in html


def test_activity_filters_by_the_new_types(client, alice, alice_agent):
    turn = make_turn(alice, alice_agent)
    events.turn_reported(
        user=alice, actor=Actor.for_agent(alice_agent), turn_id=turn.pk, learning=True
    )
    events.llm_budget_reached(user=alice, used=5, budget=1000)
    client.force_login(alice)
    page = client.get("/activity/").content.decode()
    for value in (
        "turn_reported",
        "turn_processed",
        "consolidation_applied",
        "consolidation_failed",
        "capture_failed",
        "llm_budget_reached",
    ):
        assert f'<option value="{value}">' in page
    filtered = client.get("/activity/", {"event_type": "llm_budget_reached"}).content.decode()
    assert "1 event matches this filter." in filtered
    assert "Daily LLM budget reached: 5 of 1,000 tokens" in filtered
    assert f"/turns/{turn.pk}/" not in filtered


# The admin: read-only --------------------------------------------------------------------


def test_admin_shows_turns_and_calls_read_only(client, superuser, processed_turn):
    client.force_login(superuser)
    turn = processed_turn.turn
    call = processed_turn.calls[0]
    turns = client.get("/admin/llm/turn/", {"q": "alice"})
    assert turns.status_code == 200
    assert list(turns.context["cl"].result_list) == [turn]
    change = client.get(f"/admin/llm/turn/{turn.pk}/change/")
    assert change.status_code == 200
    assert escape("Remember: <b>I</b> prefer tabs.") in change.content.decode()
    assert "capture" in change.content.decode()  # the inline lists its calls
    calls = client.get("/admin/llm/llmcall/", {"q": "capture"})
    assert list(calls.context["cl"].result_list) == [processed_turn.calls[1]]
    assert client.get(f"/admin/llm/llmcall/{call.pk}/change/").status_code == 200
    assert client.get("/admin/llm/turn/add/").status_code == 403
    assert client.get("/admin/llm/llmcall/add/").status_code == 403
    deleting = client.post(f"/admin/llm/llmcall/{call.pk}/delete/", {"post": "yes"})
    assert deleting.status_code == 403
    changing = client.post(f"/admin/llm/turn/{turn.pk}/change/", {"status": "failed"})
    assert changing.status_code == 403
    assert Turn.objects.get(pk=turn.pk).status == "done"
    assert LLMCall.objects.filter(pk=call.pk).exists()
