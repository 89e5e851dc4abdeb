"""GET /api/v1/system-prompt and the complete_bootstrap tool (briefing/system_prompt.py)."""

from __future__ import annotations

import datetime
import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from briefing.system_prompt import (
    BOOTSTRAP_NOTE,
    IDENTITY_FILES,
    TOOLS_NOTE,
    build_system_prompt,
)
from context.models import Document, DocumentVersion, ScopeGrant, SharedScope
from context.services import PROFILE_PATH, document_write
from context.well_known import append_agent_memory
from learning.user_memory_doc import SECTIONS, render_profile
from lib.data_fence import data_block
from lib.tokenizer import TokenCounter, get_token_counter
from lib.tool_manifest import tool_names
from memory.services import memory_upsert
from memory.working_memory import build_working_memory
from profiles.models import MIN_TOKEN_BUDGET
from profiles.services import profile_update, system_token_create, token_create
from tests.factories import AgentFactory, MemoryFactory

URL = "/api/v1/system-prompt"

pytestmark = pytest.mark.django_db


def get(client, token, query=""):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(f"{URL}{query}", headers=headers)


def prompt_of(client, token, query=""):
    response = get(client, token, query)
    assert response.status_code == 200, response.content
    return response.json()


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


def write(user, path, content):
    return document_write(user=user, path=path, content=content, actor=Actor.for_user(user))


MNEMOS_OWN = {"Working memory", "Memory tools"}


def section(title, body, *, lead="", note=""):
    """A part as the prompt shows it: a document's text quoted as data (lib/data_fence.py),
    Mnemo's own parts as they are; Mnemo's lead and note outside the fence."""
    if title not in MNEMOS_OWN:
        body = data_block(body)
    shown = "\n\n".join(piece for piece in (lead, body, note) if piece)
    return f"## {title}\n\n{shown}\n"


def count(text):
    return get_token_counter().count(text)


def stored_profile(user, bullet):
    text = render_profile(
        frontmatter={
            "user_id": user.pk,
            "schema_version": 1,
            "last_updated": "2025-06-03T09:00:00+00:00",
            "turn_count": 0,
        },
        sections={SECTIONS[0]: [bullet]},
    )
    write(user, PROFILE_PATH, text)
    return text


def freeze(monkeypatch, moment):
    monkeypatch.setattr("django.utils.timezone.now", lambda: moment)


NOW = datetime.datetime(2025, 6, 3, 9, 0, tzinfo=datetime.UTC)
SNAKE_CASE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def shared(scope, path, content):
    return document_write(
        user=None, shared_scope=scope, path=path, content=content, actor=Actor.system()
    )


# --- what the prompt holds, and in which order -----------------------------------------------


def test_every_part_in_its_fixed_order_under_its_own_heading(
    client, monkeypatch, no_llm, alice, alice_agent, alice_token
):
    freeze(monkeypatch, NOW)
    for name in reversed(IDENTITY_FILES):  # written in the opposite order
        write(alice, name, f"Text of {name}.")
    write(alice, "HEARTBEAT.md", "- check the inbox")  # the heartbeat's, not the prompt's
    memory_upsert(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))
    stored_profile(alice, "Alice, data engineer")
    append_agent_memory(agent=alice_agent, content="Prefers tables.", actor=Actor.system())
    write(alice, "MEMORY.md", "- Q3 launch moved to September.")
    write(alice, "daily/2025-06-03.md", "- 08:00 Today's line")
    write(alice, "daily/2025-06-02.md", "- 17:00 Yesterday's line")
    write(alice, "daily/2025-06-01.md", "- 12:00 Two days ago")

    body = prompt_of(client, alice_token)

    assert set(body) == {"prompt", "tokens", "budget", "counter", "parts", "omitted"}
    shown = [(part["name"], part["kind"]) for part in body["parts"]]
    assert shown == [
        *[(name, "identity") for name in IDENTITY_FILES],
        ("Working memory", "working_memory"),
        (PROFILE_PATH, "profile"),
        ("AGENT_MEMORY.md", "agent_memory"),
        ("MEMORY.md", "memory"),
        ("daily/2025-06-03.md", "daily_log"),
        ("daily/2025-06-02.md", "daily_log"),
        ("Memory tools", "tools_note"),
    ]
    assert all(part["included"] and not part["cut"] for part in body["parts"])
    assert body["omitted"] == []
    prompt = body["prompt"]
    starts = [
        prompt.index(f"## {title}\n")
        for title in [
            *IDENTITY_FILES,
            "Working memory",
            PROFILE_PATH,
            "AGENT_MEMORY.md",
            "MEMORY.md",
            "daily/2025-06-03.md (today)",
            "daily/2025-06-02.md (yesterday)",
            "Memory tools",
        ]
    ]
    assert starts == sorted(starts)
    assert prompt.startswith(section("IDENTITY.md", "Text of IDENTITY.md."))
    assert prompt.endswith(section("Memory tools", TOOLS_NOTE))
    assert "check the inbox" not in prompt
    assert "Two days ago" not in prompt
    assert "- Alice, data engineer" in prompt
    assert "Prefers tables." in prompt


def test_each_part_counts_its_own_tokens_and_the_whole_is_counted(
    client, no_llm, alice, alice_token
):
    write(alice, "IDENTITY.md", "You are Ada.")
    write(alice, "SOUL.md", "Be direct; say when you are unsure.\nNever guess dates.")
    write(alice, "MEMORY.md", "- Q3 launch moved to September.")

    body = prompt_of(client, alice_token)

    parts = {part["name"]: part for part in body["parts"]}
    expected = {
        "IDENTITY.md": section("IDENTITY.md", "You are Ada."),
        "SOUL.md": section("SOUL.md", "Be direct; say when you are unsure.\nNever guess dates."),
        "MEMORY.md": section("MEMORY.md", "- Q3 launch moved to September."),
        "Memory tools": section("Memory tools", TOOLS_NOTE),
    }
    assert list(parts) == list(expected)  # no memories: no working-memory part
    assert {name: part["tokens"] for name, part in parts.items()} == {
        name: count(text) for name, text in expected.items()
    }
    assert body["prompt"] == "\n".join(expected.values())
    assert body["tokens"] == count(body["prompt"])
    assert (body["budget"], body["counter"]) == (4000, get_token_counter().name)


def test_a_blank_identity_file_is_absent(client, alice, alice_token):
    write(alice, "IDENTITY.md", "You are Ada.")
    write(alice, "USER.md", "  \n\n")

    body = prompt_of(client, alice_token)

    assert "USER.md" not in [part["name"] for part in body["parts"]]
    assert "## USER.md" not in body["prompt"]


# --- identity files come from the user's own documents only ------------------------------------


def test_a_company_identity_file_never_stands_in_for_the_users(
    client, settings, alice, alice_token
):
    settings.MNEMO_GLOBAL_READABLE = True
    system = Actor.system()
    for name in ("SOUL.md", "IDENTITY.md", "TOOLS.md"):
        document_write(user=None, path=name, content=f"COMPANY {name}", actor=system)
    document_write(user=None, path="MEMORY.md", content="COMPANY MEMORY", actor=system)
    write(alice, "IDENTITY.md", "Alice's own identity.")

    body = prompt_of(client, alice_token)

    # The company's MEMORY.md is read across scopes (under its scope's name); its identity
    # files never are.
    assert "COMPANY SOUL" not in body["prompt"]
    assert "COMPANY IDENTITY" not in body["prompt"]
    assert "COMPANY TOOLS" not in body["prompt"]
    names = [part["name"] for part in body["parts"]]
    assert names == ["IDENTITY.md", "MEMORY.md (global)", "Memory tools"]
    assert section("IDENTITY.md", "Alice's own identity.") in body["prompt"]
    assert section("MEMORY.md (global)", "COMPANY MEMORY") in body["prompt"]

    write(alice, "SOUL.md", "Alice's own soul.")

    body = prompt_of(client, alice_token)

    assert "COMPANY SOUL" not in body["prompt"]
    assert [part["name"] for part in body["parts"]] == [
        "IDENTITY.md",
        "SOUL.md",
        "MEMORY.md (global)",
        "Memory tools",
    ]
    assert section("SOUL.md", "Alice's own soul.") in body["prompt"]
    # The company's copy is still there, untouched: only the prompt ignores it.
    assert Document.objects.get(user=None, agent=None, path="SOUL.md").body == "COMPANY SOUL.md"


def test_a_granted_shared_scopes_identity_file_is_never_included(client, alice, alice_token):
    # A team's MEMORY.md is read across scopes (below); its identity files never are.
    team = SharedScope.objects.create(slug="team")
    ScopeGrant.objects.create(scope=team, user=alice, access="read_write")
    for name in ("SOUL.md", "AGENTS.md"):
        document_write(
            user=None, shared_scope=team, path=name, content=f"TEAM {name}", actor=Actor.system()
        )
    write(alice, "AGENTS.md", "Alice's own agents file.")

    body = prompt_of(client, alice_token)

    assert "TEAM" not in body["prompt"]
    assert [part["name"] for part in body["parts"]] == ["AGENTS.md", "Memory tools"]
    assert section("AGENTS.md", "Alice's own agents file.") in body["prompt"]


def test_the_agents_own_identity_files_come_before_the_users_and_only_in_its_prompt(
    client, alice, alice_agent, alice_token
):
    other = AgentFactory(user=alice, name="other")
    write(alice, "SOUL.md", "The user's soul.")
    for agent, text in ((alice_agent, "My own soul."), (other, "The other's soul.")):
        document_write(user=alice, agent=agent, path="SOUL.md", content=text, actor=Actor.system())
    document_write(
        user=alice, agent=alice_agent, path="IDENTITY.md", content=" \n", actor=Actor.system()
    )
    document_write(
        user=alice, agent=alice_agent, path="BOOTSTRAP.md", content="mine", actor=Actor.system()
    )

    body = prompt_of(client, alice_token)

    assert [part["name"] for part in body["parts"]] == [
        "agents/assistant/SOUL.md",
        "SOUL.md",
        "Memory tools",
    ]
    assert body["prompt"].startswith(
        section("agents/assistant/SOUL.md (yours)", "My own soul.")
        + "\n"
        + section("SOUL.md", "The user's soul.")
    )
    assert "The other's soul." not in body["prompt"]
    other_body = prompt_of(client, token_create(agent=other).raw)
    assert section("agents/other/SOUL.md (yours)", "The other's soul.") in other_body["prompt"]
    assert "My own soul." not in other_body["prompt"]


# --- MEMORY.md and the daily logs of every scope the user reads ---------------------------------


def test_a_shared_scopes_memory_and_logs_appear_under_its_name_while_the_grant_lasts(
    client, monkeypatch, alice, alice_token, bob, bob_token
):
    freeze(monkeypatch, NOW)  # June 3 in alice's zone (UTC: no timezone memory)
    team = SharedScope.objects.create(slug="team")
    grant = ScopeGrant.objects.create(scope=team, user=alice, access="read")
    ScopeGrant.objects.create(scope=SharedScope.objects.create(slug="bobs"), user=bob)
    shared(team, "MEMORY.md", "- Team deploys on Tuesdays.")
    shared(team, "daily/2025-06-03.md", "- 08:30 Team standup")
    shared(team, "daily/2025-06-02.md", "- 16:00 Team retro")
    shared(team, "daily/2025-06-01.md", "- 10:00 Team two days ago")
    shared(SharedScope.objects.get(slug="bobs"), "MEMORY.md", "- Bob's team secret.")
    write(alice, "MEMORY.md", "- Alice's own note.")
    write(alice, "daily/2025-06-03.md", "- 08:00 Alice today")

    body = prompt_of(client, alice_token)

    assert [(part["name"], part["kind"]) for part in body["parts"]] == [
        ("MEMORY.md", "memory"),
        ("MEMORY.md (shared:team)", "memory"),
        ("daily/2025-06-03.md", "daily_log"),
        ("daily/2025-06-03.md (shared:team)", "daily_log"),
        ("daily/2025-06-02.md (shared:team)", "daily_log"),
        ("Memory tools", "tools_note"),
    ]
    assert body["prompt"] == "\n".join(
        [
            section("MEMORY.md", "- Alice's own note."),
            section("MEMORY.md (shared:team)", "- Team deploys on Tuesdays."),
            section("daily/2025-06-03.md (today)", "- 08:00 Alice today"),
            section("daily/2025-06-03.md (shared:team, today)", "- 08:30 Team standup"),
            section("daily/2025-06-02.md (shared:team, yesterday)", "- 16:00 Team retro"),
            section("Memory tools", TOOLS_NOTE),
        ]
    )
    assert "Team two days ago" not in body["prompt"]
    assert "Bob's team secret" not in body["prompt"]  # a scope alice has no grant to
    # Bob, without a grant to the team, reads only his own scope's.
    bobs = prompt_of(client, bob_token)
    assert "Team" not in bobs["prompt"]
    assert section("MEMORY.md (shared:bobs)", "- Bob's team secret.") in bobs["prompt"]

    grant.delete()

    body = prompt_of(client, alice_token)

    assert "Team" not in body["prompt"]
    assert "shared:team" not in body["prompt"]
    assert [part["name"] for part in body["parts"]] == [
        "MEMORY.md",
        "daily/2025-06-03.md",
        "Memory tools",
    ]


def test_a_shared_scopes_log_that_does_not_fit_loses_its_oldest_lines_after_the_users(
    client, monkeypatch, alice, alice_token
):
    freeze(monkeypatch, NOW)
    team = SharedScope.objects.create(slug="team")
    ScopeGrant.objects.create(scope=team, user=alice, access="read_write")
    lines = [f"- {n // 60:02d}:{n % 60:02d} Team entry {n}" for n in range(400)]
    shared(team, "daily/2025-06-03.md", "\n".join(lines))
    shared(team, "MEMORY.md", "- Team deploys on Tuesdays.")
    write(alice, "daily/2025-06-03.md", "- 08:00 Alice today")

    body = prompt_of(client, alice_token, "?budget=1000")

    assert body["tokens"] <= 1000
    parts = {part["name"]: part for part in body["parts"]}
    assert parts["MEMORY.md (shared:team)"]["included"] is True
    assert parts["daily/2025-06-03.md"]["included"] is True
    team_log = parts["daily/2025-06-03.md (shared:team)"]
    assert (team_log["included"], team_log["cut"]) == (True, True)
    assert "earlier lines left out to fit the budget" in body["prompt"]
    assert lines[-1] in body["prompt"]
    assert lines[0] + "\n" not in body["prompt"]


# --- the budget --------------------------------------------------------------------------------


def test_identity_and_working_memory_first_a_file_too_big_is_named_logs_cut_oldest_first(
    client, monkeypatch, alice, alice_token
):
    freeze(monkeypatch, NOW)
    write(alice, "IDENTITY.md", "You are Ada, Alice's research assistant.")
    memory_upsert(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))
    memory_upsert(user=alice, key="role", value="Data engineer", actor=Actor.for_user(alice))
    big_memory = "\n".join(f"- Fact number {n} about the launch plan." for n in range(300))
    write(alice, "MEMORY.md", big_memory)
    log_lines = [f"- {n // 60:02d}:{n % 60:02d} Entry {n} of the day's work" for n in range(400)]
    write(alice, "daily/2025-06-03.md", "\n".join(log_lines))

    body = prompt_of(client, alice_token, "?budget=1000")

    prompt = body["prompt"]
    assert body["tokens"] == count(prompt)
    assert body["tokens"] <= 1000
    parts = {part["name"]: part for part in body["parts"]}
    assert parts["IDENTITY.md"]["included"] is True
    assert parts["Working memory"]["included"] is True
    assert "Alice (Data engineer)" in prompt
    # MEMORY.md is left out whole and named, with what it would have taken.
    memory_tokens = count(section("MEMORY.md", big_memory))
    assert parts["MEMORY.md"] == {
        "name": "MEMORY.md",
        "kind": "memory",
        "tokens": memory_tokens,
        "included": False,
        "cut": False,
    }
    assert body["omitted"] == [
        {"name": "MEMORY.md", "tokens": memory_tokens, "reason": "over_budget"}
    ]
    assert "Fact number" not in prompt
    # The log keeps its newest lines, whole, and says how many older ones went.
    log = parts["daily/2025-06-03.md"]
    assert (log["included"], log["cut"]) == (True, True)
    shown = prompt.split("## daily/2025-06-03.md (today)\n\n", 1)[1]
    lead, fenced = shown.split("\n\n## Memory tools", 1)[0].split("\n\n", 1)
    assert fenced.startswith("```text\n")
    assert fenced.endswith("\n```")
    kept_lines = fenced.split("\n")[1:-1]
    kept = len(kept_lines)
    assert 0 < kept < len(log_lines)
    assert lead == f"({len(log_lines) - kept} earlier lines left out to fit the budget)"
    assert kept_lines == log_lines[-kept:]
    today = section("daily/2025-06-03.md (today)", "\n".join(kept_lines), lead=lead)
    assert log["tokens"] == count(today)


def test_an_identity_file_that_does_not_fit_is_named_and_the_working_memory_stays(
    client, alice, alice_token
):
    write(alice, "IDENTITY.md", "You are Ada.")
    write(alice, "SOUL.md", " ".join(["Be kind and careful with every word."] * 200))
    write(alice, "USER.md", "Alice likes tea.")
    memory_upsert(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))

    body = prompt_of(client, alice_token, "?budget=1000")

    included = [part["name"] for part in body["parts"] if part["included"]]
    assert included == ["IDENTITY.md", "USER.md", "Working memory", "Memory tools"]
    assert [item["name"] for item in body["omitted"]] == ["SOUL.md"]
    assert "Be kind" not in body["prompt"]
    assert body["tokens"] <= 1000


def test_identity_files_leave_the_working_memory_its_smallest_room(client, alice, alice_token):
    memory_upsert(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))
    block = build_working_memory(user=alice, budget=MIN_TOKEN_BUDGET).text.strip("\n")
    block_cost = count(section("Working memory", block)) + 1  # with its joining line break
    room = 1000 - (count(section("Memory tools", TOOLS_NOTE)) + 1)
    # An IDENTITY.md that fits beside the tools note, but not beside the working memory too.
    words = 1
    while count(section("IDENTITY.md", "plan " * words)) + 1 <= room - block_cost:
        words += 1
    assert count(section("IDENTITY.md", "plan " * words)) + 1 <= room
    write(alice, "IDENTITY.md", "plan " * words)

    body = prompt_of(client, alice_token, "?budget=1000")

    assert [(part["name"], part["included"]) for part in body["parts"]] == [
        ("IDENTITY.md", False),
        ("Working memory", True),
        ("Memory tools", True),
    ]
    assert section("Working memory", block) in body["prompt"]


def test_the_working_memory_keeps_to_the_users_own_budget(client, alice, alice_token):
    profile_update(user=alice, token_budget=500)
    for n in range(200):
        MemoryFactory(user=alice, key=f"fact:item-{n}", value=f"Fact {n} about the project plan")

    body = prompt_of(client, alice_token, "?budget=32000")

    block = next(part for part in body["parts"] if part["kind"] == "working_memory")
    assert block["included"] is True
    assert block["cut"] is True  # memories were left out to keep to the user's 500
    assert block["tokens"] <= 500 + count("## Working memory\n\n")
    assert "more memories left out to fit the budget" in body["prompt"]


def test_the_whole_is_fitted_again_when_joining_parts_costs_more(
    client, monkeypatch, alice, alice_token
):
    """Tokens can merge or split where parts are joined: the whole is what must fit."""

    def joined_costly(text):
        return len(text) // 4 + 40 * text.count("\n\n## ")

    monkeypatch.setattr(
        "briefing.system_prompt.get_token_counter",
        lambda: TokenCounter(name="test:joins", count=joined_costly),
    )
    write(alice, "IDENTITY.md", "You are Ada.")
    write(alice, "MEMORY.md", "- Launch in September.")
    lines = [f"- 10:{n % 60:02d} Line {n} of today's log" for n in range(600)]
    today = datetime.datetime.now(tz=datetime.UTC)
    write(alice, f"daily/{today:%Y-%m-%d}.md", "\n".join(lines))
    freeze(monkeypatch, today)

    body = prompt_of(client, alice_token, "?budget=1000")

    assert body["counter"] == "test:joins"
    assert body["tokens"] == joined_costly(body["prompt"])
    assert body["tokens"] <= 1000
    assert body["prompt"].count("\n\n## ") >= 2  # the joins were charged, and still it fits


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?budget=999", "budget"),
        ("?budget=32001", "budget"),
        ("?budget=", "budget"),
        ("?budget=lots", "budget"),
        ("?format=html", "format"),
    ],
)
def test_a_bad_parameter_is_a_400_that_names_it(client, alice_token, query, field):
    response = get(client, alice_token, query)
    assert response.status_code == 400
    assert error(response)["code"] == "invalid"
    assert error(response)["field"] == field


# --- the daily logs, by the user's time zone ---------------------------------------------------


def test_today_and_yesterday_are_the_users_local_dates(client, monkeypatch, alice, alice_token):
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_user(alice))
    # 17:30 UTC on June 3 is 01:30 on June 4 in Singapore.
    freeze(monkeypatch, datetime.datetime(2025, 6, 3, 17, 30, tzinfo=datetime.UTC))
    write(alice, "daily/2025-06-04.md", "- 01:00 Singapore today")
    write(alice, "daily/2025-06-03.md", "- 23:00 Singapore yesterday")
    write(alice, "daily/2025-06-02.md", "- 09:00 UTC's yesterday")
    # A granted scope's logs are picked by the same (the user's) local dates.
    team = SharedScope.objects.create(slug="team")
    ScopeGrant.objects.create(scope=team, user=alice)
    shared(team, "daily/2025-06-04.md", "- 01:10 Team's Singapore today")
    shared(team, "daily/2025-06-02.md", "- 09:00 Team's UTC yesterday")

    body = prompt_of(client, alice_token)

    logs = [part["name"] for part in body["parts"] if part["kind"] == "daily_log"]
    assert logs == [
        "daily/2025-06-04.md",
        "daily/2025-06-04.md (shared:team)",
        "daily/2025-06-03.md",
    ]
    assert "Team's UTC yesterday" not in body["prompt"]
    assert section("daily/2025-06-04.md (today)", "- 01:00 Singapore today") in body["prompt"]
    assert (
        section("daily/2025-06-03.md (yesterday)", "- 23:00 Singapore yesterday")
        in (body["prompt"])
    )
    assert "UTC's yesterday" not in body["prompt"]


def test_yesterday_after_a_short_daylight_saving_day_is_the_day_before(alice, alice_agent):
    memory_upsert(user=alice, key="timezone", value="America/New_York", actor=Actor.for_user(alice))
    write(alice, "daily/2025-03-09.md", "- 10:00 The 23-hour day")
    write(alice, "daily/2025-03-08.md", "- 10:00 Two days back")
    # 00:30 on March 10 in New York; 24 hours earlier it was still March 8 there.
    now = datetime.datetime(2025, 3, 10, 4, 30, tzinfo=datetime.UTC)

    prompt = build_system_prompt(agent=alice_agent, now=now)

    assert [part.name for part in prompt.parts if part.kind == "daily_log"] == [
        "daily/2025-03-09.md"
    ]
    assert "Two days back" not in prompt.text


# --- the profile and the agent's notes -----------------------------------------------------------


def test_the_stored_profile_is_included_even_without_an_llm(client, no_llm, alice, alice_token):
    body = prompt_of(client, alice_token)  # nothing stored, no LLM: no profile, no error
    assert PROFILE_PATH not in [part["name"] for part in body["parts"]]

    stored = stored_profile(alice, "Alice, data engineer")

    body = prompt_of(client, alice_token)

    profile = next(part for part in body["parts"] if part["kind"] == "profile")
    assert (profile["name"], profile["included"], profile["cut"]) == (PROFILE_PATH, True, False)
    assert section(PROFILE_PATH, stored.strip("\n")) in body["prompt"]
    assert profile["tokens"] == count(section(PROFILE_PATH, stored.strip("\n")))


def long_profile(user, bullets_per_section):
    sections = {
        name: [f"{name} fact number {n}, kept in the profile" for n in range(bullets_per_section)]
        for name in SECTIONS
    }
    text = render_profile(
        frontmatter={
            "user_id": user.pk,
            "schema_version": 1,
            "last_updated": "2025-06-03T09:00:00+00:00",
            "turn_count": 0,
        },
        sections=sections,
    )
    write(user, PROFILE_PATH, text)
    return text


def test_a_profile_over_what_is_left_is_cut_at_whole_bullets_from_the_end(
    client, no_llm, alice, alice_token
):
    stored = long_profile(alice, 12)  # within alice's own profile budget (2,000)
    assert 1000 < count(stored) <= 2000
    write(alice, "IDENTITY.md", "You are Ada.")
    write(alice, "MEMORY.md", "- Q3 launch moved to September.")

    body = prompt_of(client, alice_token, "?budget=1000")

    assert body["tokens"] <= 1000
    parts = {part["name"]: part for part in body["parts"]}
    profile = parts[PROFILE_PATH]
    assert (profile["included"], profile["cut"]) == (True, True)
    shown = body["prompt"].split(f"## {PROFILE_PATH}\n\n", 1)[1]
    lead, fenced = shown.split("\n\n", 1)
    assert fenced.startswith("```text\n")
    kept = fenced.removeprefix("```text\n").split("\n```\n", 1)[0].split("\n")
    stored_lines = stored.strip("\n").split("\n")
    bullets = [line for line in stored_lines if line.startswith("- ")]
    kept_bullets = [line for line in kept if line.startswith("- ")]
    left_out = len(bullets) - len(kept_bullets)
    assert kept_bullets
    assert left_out > 0
    assert lead == f"({left_out} later bullets left out to fit the budget)"
    # The first bullets, whole, with every other line (frontmatter, headings) kept; a
    # section the cut emptied says so, as the format wants (learning/user_memory_loading.py
    # cap_profile).
    dropped = set(bullets[len(kept_bullets) :])
    assert "_(empty)_" in kept
    assert [line for line in kept if line != "_(empty)_"] == [
        line for line in stored_lines if line not in dropped
    ]
    assert profile["tokens"] == count(section(PROFILE_PATH, "\n".join(kept), lead=lead))
    # It took what was left: the whole-or-nothing part after it did not fit.
    assert [item["name"] for item in body["omitted"]] == ["MEMORY.md"]
    assert body["tokens"] > 1000 - count(f"- {bullets[len(kept_bullets)]}\n") - 20


def test_a_profile_without_room_for_one_bullet_is_left_out_and_named(
    client, no_llm, alice, alice_token
):
    stored = long_profile(alice, 12)
    room = 1000 - (count(section("Memory tools", TOOLS_NOTE)) + 1)
    # An IDENTITY.md leaving less than the profile's headings with a single bullet need.
    first_bullet = next(line for line in stored.split("\n") if line.startswith("- "))
    skeleton = "\n".join(line for line in stored.split("\n") if not line.startswith("- "))
    least = count(section(PROFILE_PATH, skeleton + "\n" + first_bullet)) + 1
    words = 1
    while count(section("IDENTITY.md", "plan " * words)) + 1 < room - least + 5:
        words += 1
    write(alice, "IDENTITY.md", "plan " * words)

    body = prompt_of(client, alice_token, "?budget=1000")

    assert [part["name"] for part in body["parts"] if part["included"]] == [
        "IDENTITY.md",
        "Memory tools",
    ]
    assert body["omitted"] == [
        {
            "name": PROFILE_PATH,
            "tokens": count(section(PROFILE_PATH, stored.strip("\n"))),
            "reason": "over_budget",
        }
    ]
    assert "## Identity" not in body["prompt"]


def test_the_empty_profile_of_a_configured_llm_is_not_shown(client, llm_server, alice, alice_token):
    body = prompt_of(client, alice_token)
    assert [part["kind"] for part in body["parts"]] == ["tools_note"]


def test_only_the_calling_agents_own_notes(client, alice, alice_agent, alice_token):
    other = AgentFactory(user=alice, name="other")
    append_agent_memory(agent=alice_agent, content="Mine: prefers tables.", actor=Actor.system())
    append_agent_memory(agent=other, content="Other's: prefers prose.", actor=Actor.system())

    body = prompt_of(client, alice_token)

    assert section("AGENT_MEMORY.md", "Mine: prefers tables.") in body["prompt"]
    assert "prefers prose" not in body["prompt"]

    other_body = prompt_of(client, token_create(agent=other).raw)

    assert section("AGENT_MEMORY.md", "Other's: prefers prose.") in other_body["prompt"]
    assert "prefers tables" not in other_body["prompt"]


# --- BOOTSTRAP.md and complete_bootstrap ----------------------------------------------------------


def test_bootstrap_is_included_until_complete_bootstrap_deletes_it(
    client, call_tool, alice, alice_agent, alice_token
):
    write(alice, "IDENTITY.md", "You are Ada.")
    write(alice, "BOOTSTRAP.md", "Ask the user for their name, then write USER.md.")

    body = prompt_of(client, alice_token)

    note = BOOTSTRAP_NOTE.format(folder="agents/assistant/")
    ritual = "Ask the user for their name, then write USER.md."
    assert section("BOOTSTRAP.md", ritual, note=note) in body["prompt"]
    assert "complete_bootstrap" in note
    # The ritual has the agent keep its own identity in its folder, not the user's files.
    assert "agents/assistant/IDENTITY.md, agents/assistant/SOUL.md" in note

    response = call_tool(alice_token, "complete_bootstrap", {})

    assert response.status_code == 200, response.content
    version_id = response.json()["version_id"]
    assert response.json() == {"completed": True, "version_id": version_id}
    assert not Document.objects.filter(user=alice, path="BOOTSTRAP.md").exists()
    version = DocumentVersion.objects.get(pk=version_id)
    assert (version.user, version.agent, version.path, version.action, version.body) == (
        alice,
        None,
        "BOOTSTRAP.md",
        "delete",
        "Ask the user for their name, then write USER.md.",
    )
    assert version.actor_agent == alice_agent
    event = ActivityEvent.objects.get(event_type=EventType.BOOTSTRAP_COMPLETED)
    assert (event.user, event.actor_agent, event.payload) == (
        alice,
        alice_agent,
        {"version_id": version_id},
    )

    body = prompt_of(client, alice_token)

    assert "BOOTSTRAP.md" not in [part["name"] for part in body["parts"]]
    assert "Ask the user" not in body["prompt"]
    assert "complete_bootstrap" not in body["prompt"]


def test_complete_bootstrap_without_a_bootstrap_is_a_404_that_changes_nothing(
    client, call_tool, settings, alice, alice_token
):
    settings.MNEMO_GLOBAL_READABLE = True
    # A company BOOTSTRAP.md is no one's ritual: it is neither shown nor deleted.
    document_write(user=None, path="BOOTSTRAP.md", content="Company ritual", actor=Actor.system())
    events_before = ActivityEvent.objects.count()

    response = call_tool(alice_token, "complete_bootstrap", {})

    assert response.status_code == 404
    assert error(response)["code"] == "not_found"
    assert "already complete" in error(response)["message"]
    assert ActivityEvent.objects.count() == events_before
    assert Document.objects.filter(user=None, path="BOOTSTRAP.md").exists()


def test_complete_bootstrap_takes_no_arguments(call_tool, alice, alice_token):
    write(alice, "BOOTSTRAP.md", "Ritual")

    response = call_tool(alice_token, "complete_bootstrap", {"path": "BOOTSTRAP.md"})

    assert response.status_code == 400
    assert error(response)["field"] == "path"
    assert Document.objects.filter(user=alice, path="BOOTSTRAP.md").exists()


def test_complete_bootstrap_while_memory_is_paused_is_a_409_that_changes_nothing(
    call_tool, alice, alice_token
):
    write(alice, "BOOTSTRAP.md", "Ritual")
    profile_update(user=alice, memory_paused=True)

    response = call_tool(alice_token, "complete_bootstrap", {})

    assert response.status_code == 409
    assert error(response)["code"] == "memory_paused"
    assert Document.objects.filter(user=alice, path="BOOTSTRAP.md").exists()
    assert not ActivityEvent.objects.filter(event_type=EventType.BOOTSTRAP_COMPLETED).exists()


# --- who may ask --------------------------------------------------------------------------------


def test_bob_never_sees_alices_files_nor_ends_her_ritual(
    client, call_tool, alice, alice_agent, bob, bob_token
):
    for name in IDENTITY_FILES:
        write(alice, name, f"ALICE {name}")
    write(alice, "MEMORY.md", "ALICE memory")
    append_agent_memory(agent=alice_agent, content="ALICE agent notes", actor=Actor.system())
    memory_upsert(user=alice, key="name", value="ALICE", actor=Actor.for_user(alice))
    write(bob, "IDENTITY.md", "Bob's assistant.")

    body = prompt_of(client, bob_token)

    assert "ALICE" not in body["prompt"]
    assert [part["name"] for part in body["parts"]] == ["IDENTITY.md", "Memory tools"]

    response = call_tool(bob_token, "complete_bootstrap", {})

    assert response.status_code == 404
    assert Document.objects.get(user=alice, path="BOOTSTRAP.md").body == "ALICE BOOTSTRAP.md"
    assert not ActivityEvent.objects.filter(event_type=EventType.BOOTSTRAP_COMPLETED).exists()


def test_no_token_is_a_401(client, call_tool, alice):
    write(alice, "BOOTSTRAP.md", "Ritual")

    response = get(client, None)
    assert response.status_code == 401
    assert error(response)["code"] == "not_authenticated"

    response = call_tool(None, "complete_bootstrap", {})
    assert response.status_code == 401
    assert Document.objects.filter(user=alice, path="BOOTSTRAP.md").exists()


def test_a_system_token_is_a_403(client, call_tool):
    raw = system_token_create(label="ops").raw
    document_write(user=None, path="BOOTSTRAP.md", content="Company ritual", actor=Actor.system())

    response = get(client, raw)
    assert response.status_code == 403
    assert error(response)["code"] == "forbidden"

    response = call_tool(raw, "complete_bootstrap", {})
    assert response.status_code == 403
    assert Document.objects.filter(user=None, path="BOOTSTRAP.md").exists()


# --- formats and the contract ------------------------------------------------------------


def test_markdown_is_the_prompt_alone(client, alice, alice_token):
    write(alice, "IDENTITY.md", "You are Ada.")
    memory_upsert(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))
    body = prompt_of(client, alice_token)

    response = get(client, alice_token, "?format=markdown")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response.content.decode() == body["prompt"]
    assert response["X-Mnemo-Tokens"] == str(body["tokens"])
    assert response["X-Mnemo-Token-Counter"] == body["counter"]


def test_every_tool_the_notes_name_is_one_the_agent_has():
    # A tool name is a snake_case word; every one the notes mention must be in the tool
    # manifest, which /api/v1/tools and MCP's tools/list serve (mcp_bridge/server.py).
    tools = set(tool_names())
    named = set(SNAKE_CASE.findall(TOOLS_NOTE))
    assert {"search_memory", "memory_search", "memory_store"} <= named
    assert named - tools == set()
    assert "report_turn" not in TOOLS_NOTE
    assert set(SNAKE_CASE.findall(BOOTSTRAP_NOTE)) == {"complete_bootstrap"}
    assert "complete_bootstrap" in tools
    # Reporting a turn is named as the HTTP endpoint it is, and that endpoint exists.
    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert "POST /api/v1/turns" in TOOLS_NOTE
    assert "post" in schema["paths"]["/api/v1/turns"]
    operations = {op["operationId"] for item in schema["paths"].values() for op in item.values()}
    assert "get_system_prompt" in operations
