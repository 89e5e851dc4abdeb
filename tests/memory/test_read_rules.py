"""The isolation suite for what each agent reads (issue 27 items 1 and 2, memory/visibility.py
and context/workspace.py folder_rule): agent B never reads agent A's own note, and an agent
whose user set a tag or folder rule never reads what it hides, through any read path. Each
test counts leaks: the secret words of what must stay hidden, found in an answer."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from context.services import document_write
from lib.errors import NotFound
from memory.models import Memory, MemoryHistory
from memory.outcomes import ReviewRequired
from memory.services import memory_delete, memory_update, memory_upsert
from memory.working_memory import build_working_memory
from profiles.services import agent_set_read_rules, token_create
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

# Each hidden thing carries a word nothing else says, so a leak is a word found.
A_NOTE = "quasarbuild"  # agent A's own note
HEALTH = "quokkapills"  # a memory tagged #health
WORK = "narwhalship"  # a memory tagged #work
PLAIN = "lemurtea"  # a memory without tags
JOURNAL = "okapidiary"  # a document in journal/
PROJECT = "ibexplan"  # a document in projects/acme/
ROOT_MEMORY = "tapirroot"  # MEMORY.md at the root
QUERY = "zebrafish"  # in every memory and document, so a search finds each


@pytest.fixture
def world(alice):
    """Alice's memory, her documents, and her agents: coder (with an own note), travel (no
    rule), careful (all except #health), focused (only #work), and two with folder rules."""
    you = Actor.for_user(alice)
    for key, value, tags in (
        ("fact:pills", f"{HEALTH} twice a day, {QUERY}", ["health"]),
        ("fact:release", f"{WORK} release on Friday, {QUERY}", ["work"]),
        ("preference:tea", f"{PLAIN} in the morning, {QUERY}", []),
    ):
        memory_upsert(user=alice, key=key, value=value, tags=tags, actor=you)
    for path, word in (
        ("journal/today.md", JOURNAL),
        ("projects/acme/plan.md", PROJECT),
        ("MEMORY.md", ROOT_MEMORY),
    ):
        document_write(user=alice, path=path, content=f"{word} {QUERY}\n", actor=you)
    agents = {
        name: AgentFactory(user=alice, name=name)
        for name in ("coder", "travel", "careful", "focused", "nojournal", "onlyprojects")
    }
    # Through the write path, so its history (which the as-of view replays) has it too.
    memory_upsert(
        user=alice,
        key="discovery:ci",
        value=f"{A_NOTE} failed on CI, {QUERY}",
        actor=Actor.for_agent(agents["coder"]),
        owner_agent=agents["coder"],
    )
    agent_set_read_rules(
        agent=agents["careful"], memory_rule="except", memory_tags=["#Health"], document_rule="all"
    )
    agent_set_read_rules(
        agent=agents["focused"], memory_rule="only", memory_tags=["work"], document_rule="all"
    )
    agent_set_read_rules(
        agent=agents["nojournal"],
        memory_rule="all",
        document_rule="except",
        document_folders=["journal/"],
    )
    agent_set_read_rules(
        agent=agents["onlyprojects"],
        memory_rule="all",
        document_rule="only",
        document_folders=["projects"],
    )
    tokens = {name: token_create(agent=agent).raw for name, agent in agents.items()}
    return agents, tokens


def every_read(client, call_tool, token: str) -> dict[str, str]:
    """What the agent of `token` gets from each memory read path, as text."""
    headers = {"Authorization": f"Bearer {token}"}
    now = (timezone.now() + timedelta(seconds=-0.001)).isoformat()
    texts = {
        "working memory": client.get("/api/v1/working-memory", headers=headers),
        "working memory json": client.get(
            "/api/v1/working-memory", {"format": "json"}, headers=headers
        ),
        "working memory as of": client.get(
            "/api/v1/working-memory", {"as_of": now}, headers=headers
        ),
        "system prompt": client.get(
            "/api/v1/system-prompt", {"format": "markdown"}, headers=headers
        ),
        "search_memory": call_tool(token, "search_memory", {"query": QUERY, "limit": 20}),
        "ask_memory": call_tool(token, "ask_memory", {"question": QUERY, "max_tokens": 1000}),
        "list_memories": call_tool(token, "list_memories", {"limit": 200}),
        "memory_search": call_tool(token, "memory_search", {"query": QUERY, "limit": 20}),
        "memory_tree": call_tool(token, "memory_tree", {"depth": 5}),
        "memory_list_recent": call_tool(token, "memory_list_recent", {"limit": 50}),
        "scratchpad": client.get(
            "/api/v1/working-memory", {"format": "scratchpad"}, headers=headers
        ),
    }
    for key in ("fact:pills", "fact:release", "preference:tea", "discovery:ci"):
        texts[f"get_memory {key}"] = call_tool(token, "get_memory", {"key": key})
    own = {"key": "discovery:ci", "own": True}
    texts["get_memory own discovery:ci"] = call_tool(token, "get_memory", own)
    for path in ("journal/today.md", "projects/acme/plan.md", "MEMORY.md"):
        texts[f"memory_read {path}"] = call_tool(token, "memory_read", {"path": path})
    return {name: response.content.decode() for name, response in texts.items()}


def leaks(texts: dict[str, str], words: list[str]) -> list[tuple[str, str]]:
    return [(path, word) for path, text in texts.items() for word in words if word in text]


def test_another_agents_note_leaks_through_no_read_path(client, call_tool, no_llm, world):
    _, tokens = world

    texts = every_read(client, call_tool, tokens["travel"])

    assert leaks(texts, [A_NOTE]) == []
    # The rest of what it may read is there: the paths did answer.
    assert PLAIN in texts["search_memory"]
    assert HEALTH in texts["working memory"]


def test_an_agent_reads_its_own_note_labelled_as_its_own(client, call_tool, no_llm, world):
    _, tokens = world

    search = call_tool(tokens["coder"], "search_memory", {"query": A_NOTE}).json()
    ask = call_tool(tokens["coder"], "ask_memory", {"question": A_NOTE}).json()

    (hit,) = search["results"]
    assert (hit["memory"]["key"], hit["memory"]["audience"]) == ("discovery:ci", "own")
    assert ask["sources"] == [{"type": "memory", "key": "discovery:ci", "audience": "own"}]
    assert "discovery:ci (your own note)" in ask["answer"]
    shared = call_tool(tokens["coder"], "search_memory", {"query": PLAIN}).json()["results"]
    assert [result["memory"]["audience"] for result in shared] == ["user"]


def test_the_working_memory_never_shows_a_note_not_even_its_owners(alice, world):
    agents, _ = world

    for agent in (None, agents["coder"], agents["travel"]):
        assert A_NOTE not in build_working_memory(user=alice, agent=agent).text


def test_all_except_health_never_sees_a_health_memory(client, call_tool, no_llm, world):
    _, tokens = world

    texts = every_read(client, call_tool, tokens["careful"])

    assert leaks(texts, [HEALTH, A_NOTE]) == []
    assert WORK in texts["working memory"]
    assert PLAIN in texts["search_memory"]
    assert json.loads(texts["get_memory fact:pills"])["error"]["code"] == "not_found"


def test_only_work_sees_only_work_memories(client, call_tool, no_llm, world):
    _, tokens = world

    texts = every_read(client, call_tool, tokens["focused"])

    assert leaks(texts, [HEALTH, PLAIN, A_NOTE]) == []
    for path in ("working memory", "system prompt", "search_memory", "list_memories"):
        assert WORK in texts[path], path


def test_a_tag_rule_leaves_the_consolidated_profile_out(client, call_tool, no_llm, alice, world):
    _, tokens = world
    document_write(
        user=alice,
        path="USER_MEMORY.md",
        content="# User Memory\n\n## Identity\n- wombatprofile\n",
        actor=Actor.for_user(alice),
    )

    for name, shown in (("careful", False), ("focused", False), ("travel", True)):
        headers = {"Authorization": f"Bearer {tokens[name]}"}
        prompt = client.get("/api/v1/system-prompt", {"format": "markdown"}, headers=headers)
        profile = client.get("/api/v1/profile-memory", headers=headers)
        read = call_tool(tokens[name], "memory_read", {"path": "USER_MEMORY.md"})
        assert ("wombatprofile" in prompt.content.decode()) is shown, name
        assert (profile.status_code == 200) is shown, name
        assert ("wombatprofile" in read.content.decode()) is shown, name
    refused = client.get(
        "/api/v1/profile-memory", headers={"Authorization": f"Bearer {tokens['careful']}"}
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


def test_a_folder_rule_hides_its_documents_on_every_read_path(client, call_tool, no_llm, world):
    _, tokens = world

    except_journal = every_read(client, call_tool, tokens["nojournal"])
    only_projects = every_read(client, call_tool, tokens["onlyprojects"])

    assert leaks(except_journal, [JOURNAL, A_NOTE]) == []
    assert PROJECT in except_journal["memory_search"]
    assert ROOT_MEMORY in except_journal["system prompt"]
    assert leaks(only_projects, [JOURNAL, ROOT_MEMORY, A_NOTE]) == []
    assert PROJECT in only_projects["memory_read projects/acme/plan.md"]
    assert PROJECT in only_projects["ask_memory"]
    assert json.loads(only_projects["memory_read MEMORY.md"])["error"]["code"] == "not_found"


def test_an_agent_cannot_write_into_a_folder_it_may_not_read(call_tool, alice, world):
    _, tokens = world

    refused = call_tool(
        tokens["nojournal"], "memory_write", {"path": "journal/new.md", "content": "hello"}
    )
    allowed = call_tool(
        tokens["nojournal"], "memory_write", {"path": "notes/new.md", "content": "hello"}
    )

    assert refused.status_code == 403, refused.content
    assert "read rule" in refused.json()["error"]["message"]
    assert allowed.status_code in (200, 201), allowed.content
    deleting = call_tool(tokens["nojournal"], "memory_delete", {"path": "journal/today.md"})
    assert deleting.status_code == 403
    assert JOURNAL not in deleting.content.decode()


@pytest.mark.parametrize(
    ("tool", "body"),
    [
        ("get_memory", {"key": "fact:pills"}),
        ("update_memory", {"key": "fact:pills", "value": "changed"}),
        ("delete_memory", {"key": "fact:pills"}),
        ("promote_memory", {"key": "fact:pills"}),
        ("memory_promote", {"key": "fact:pills"}),
        ("create_memory", {"key": "fact:pills", "value": "replaced"}),
    ],
)
def test_a_write_to_a_hidden_memory_answers_as_if_it_did_not_exist(
    call_tool, alice, world, tool, body
):
    _, tokens = world

    response = call_tool(tokens["careful"], tool, body)

    assert response.status_code == 404, response.content
    assert response.json()["error"] == {
        "code": "not_found",
        "message": "No memory with key 'fact:pills'.",
        "field": "key",
    }
    pills = Memory.objects.get(user=alice, key="fact:pills", owner_agent=None)
    assert pills.value == f"{HEALTH} twice a day, {QUERY}"
    assert (pills.pinned, pills.access_count) == (False, 0)


@pytest.mark.parametrize(
    ("tool", "body"),
    [
        ("create_memory", {"key": "fact:doctor", "value": "sees a doctor", "tags": ["Health"]}),
        ("update_memory", {"key": "fact:release", "tags": ["work", "#health"]}),
        (
            "memory_store",
            {"content": "sees a doctor", "category": "fact", "tags": ["health"], "share": True},
        ),
    ],
)
def test_a_write_with_a_hidden_tag_is_refused(call_tool, alice, world, tool, body):
    _, tokens = world
    before = sorted(Memory.objects.filter(user=alice).values_list("key", "value", "tags"))

    response = call_tool(tokens["careful"], tool, body)

    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "forbidden"
    assert "#health" in response.json()["error"]["message"]
    assert sorted(Memory.objects.filter(user=alice).values_list("key", "value", "tags")) == before


def test_a_rule_binds_the_users_memory_not_the_agents_own_notes(call_tool, world):
    _, tokens = world
    note = {"content": "sees a doctor", "category": "fact", "tags": ["health"]}

    stored = call_tool(tokens["careful"], "memory_store", note)

    assert stored.status_code == 201, stored.content
    assert stored.json()["memory"]["audience"] == "own"
    found = call_tool(tokens["careful"], "search_memory", {"query": "doctor"}).json()
    assert [hit["memory"]["key"] for hit in found["results"]] == [stored.json()["key"]]


def test_only_work_may_not_write_a_memory_without_a_work_tag(call_tool, world):
    _, tokens = world

    untagged = call_tool(tokens["focused"], "create_memory", {"key": "fact:x", "value": "x"})
    tagged = call_tool(
        tokens["focused"], "create_memory", {"key": "fact:x", "value": "x", "tags": ["work"]}
    )

    assert untagged.status_code == 403
    assert untagged.json()["error"]["message"] == (
        "Your read rule lets you read only memories tagged #work, so a memory you write needs "
        "one of those tags: the user sets what you read on the Agents page."
    )
    assert tagged.status_code == 201, tagged.content


def hidden_history(alice) -> list[tuple[str, object]]:
    from memory.models import MemoryHistory

    return list(
        MemoryHistory.objects.filter(user=alice, key="fact:pills").values_list("action", "after")
    )


def test_an_agents_write_is_compared_only_with_what_it_may_read(call_tool, alice, world):
    """The same text as a memory its rule hides is a new memory of the agent's, not a
    duplicate merged into that one: a merge (or a 403 for it) would tell the agent that a
    memory it may not read says this. The hidden memory and its history stay as they were;
    an agent that may read it gets the merge as before."""
    _, tokens = world
    before = hidden_history(alice)
    same = {"key": "fact:pills-again", "value": f"{HEALTH} twice a day, {QUERY}"}

    careful = call_tool(tokens["careful"], "create_memory", same)
    after_careful = hidden_history(alice)
    travel = call_tool(tokens["travel"], "create_memory", {**same, "key": "fact:pills-too"})

    assert careful.status_code == 201, careful.content
    assert careful.json()["status"] == "created"
    assert careful.json()["memory"]["key"] == "fact:pills-again"
    assert '"fact:pills"' not in careful.content.decode()
    assert after_careful == before
    assert travel.json()["status"] == "duplicate"
    assert travel.json()["memory"]["key"] == "fact:pills"


def test_the_rules_change_through_no_agent_tool(call_tool, world, client):
    """No tool or API path takes a rule: every tool called with the rule fields as its body
    leaves it as it was, and the page refuses a bearer token."""
    from lib.tool_manifest import tool_names

    agents, tokens = world
    attempt = {
        "memory_rule": "all",
        "memory_tags": [],
        "document_rule": "all",
        "document_folders": [],
    }
    for name in tool_names():
        call_tool(tokens["careful"], name, attempt)
    page = client.post(
        f"/agents/{agents['careful'].pk}/read-rules/",
        {"memory_rule": "all", "document_rule": "all"},
        headers={"Authorization": f"Bearer {tokens['careful']}"},
    )

    assert page.status_code == 302
    assert page["Location"].startswith("/login/")
    careful = type(agents["careful"]).objects.get(pk=agents["careful"].pk)
    assert (careful.memory_rule, careful.memory_tags) == ("except", ["health"])


def test_the_user_and_the_system_read_the_users_memory_only(alice, world):
    """The search box and the working memory the heartbeat reads (no agent) hold no note."""
    from context.search import search_everything

    found = search_everything(user=alice, query=QUERY, limit=20)

    keys = sorted(hit.memory.key for hit in found.memories)
    assert keys == ["fact:pills", "fact:release", "preference:tea"]
    assert A_NOTE not in build_working_memory(user=alice).text


def test_the_export_is_for_the_signed_in_user_only(client, world):
    _, tokens = world

    response = client.get("/api/v1/export", headers={"Authorization": f"Bearer {tokens['travel']}"})

    assert response.status_code in (401, 403)
    assert A_NOTE not in response.content.decode()


def test_a_rule_change_applies_on_the_next_call(call_tool, world):
    agents, tokens = world

    def keys() -> list[str]:
        body = call_tool(tokens["travel"], "search_memory", {"query": QUERY, "limit": 20}).json()
        return sorted(hit["memory"]["key"] for hit in body["results"])

    assert keys() == ["fact:pills", "fact:release", "preference:tea"]
    agent_set_read_rules(
        agent=agents["travel"], memory_rule="only", memory_tags=["work"], document_rule="all"
    )
    assert keys() == ["fact:release"]


def test_the_daily_log_is_a_folder_like_any_other(call_tool, alice, world):
    agents, tokens = world
    agent_set_read_rules(
        agent=agents["nojournal"],
        memory_rule="all",
        document_rule="except",
        document_folders=["daily"],
    )

    refused = call_tool(tokens["nojournal"], "append_daily_memory", {"content": "hello"})
    allowed = call_tool(tokens["travel"], "append_daily_memory", {"content": "hello"})

    assert refused.status_code == 403, refused.content
    assert allowed.status_code == 200, allowed.content


def test_an_addition_to_a_hidden_memory_is_no_proposal_on_it(call_tool, alice, world):
    """A new entry that adds to a #health memory the user stated would be a proposal to
    update that one for an agent that may read it; for one that may not, it is a memory of
    its own, and the Inbox holds nothing that names the hidden one."""
    from memory.models import MemoryProposal

    _, tokens = world
    text = f"{HEALTH} twice a day, {QUERY}, with water after breakfast"

    created = call_tool(tokens["careful"], "create_memory", {"key": "fact:water", "value": text})

    assert created.status_code == 201, created.content
    assert created.json()["status"] == "created"
    assert not MemoryProposal.objects.filter(user=alice, key="fact:pills").exists()


def test_a_proposal_made_before_a_rule_names_nothing_the_rule_now_hides(call_tool, alice, world):
    """A proposal near a #health memory made while the agent read everything is listed,
    once the user hides #health from it, without that memory's key or text."""
    agents, tokens = world
    text = f"{HEALTH} twice a day, {QUERY}, with water after breakfast"
    agent_set_read_rules(agent=agents["careful"], memory_rule="all", document_rule="all")
    created = call_tool(tokens["careful"], "create_memory", {"key": "fact:water", "value": text})
    assert created.status_code == 202, created.content
    assert created.json()["proposal"]["key"] == "fact:pills"

    agent_set_read_rules(
        agent=agents["careful"], memory_rule="except", memory_tags=["health"], document_rule="all"
    )
    listed = call_tool(tokens["careful"], "list_proposals", {})

    body = listed.content.decode()
    assert listed.json()["results"], body
    assert "fact:pills" not in body
    assert "twice a day" not in body


def test_memory_writes_targets_meet_the_folder_rule(call_tool, world):
    """memory_write's `memory` (MEMORY.md at the root) and `daily_log` (daily/) targets are
    paths of the user's scope like any other."""
    agents, tokens = world
    agent_set_read_rules(
        agent=agents["nojournal"],
        memory_rule="all",
        document_rule="except",
        document_folders=["daily"],
    )

    daily = call_tool(tokens["nojournal"], "memory_write", {"path": "daily_log", "content": "x"})
    root = call_tool(tokens["onlyprojects"], "memory_write", {"path": "memory", "content": "x"})
    allowed = call_tool(tokens["travel"], "memory_write", {"path": "daily_log", "content": "x"})

    assert daily.status_code == 403, daily.content
    assert root.status_code == 403, root.content
    assert allowed.status_code == 200, allowed.content


def test_the_owner_finds_its_note_in_its_scratchpad_not_in_the_working_memory(
    client, call_tool, no_llm, world
):
    _, tokens = world

    texts = every_read(client, call_tool, tokens["coder"])

    assert A_NOTE in texts["memory_list_recent"]
    assert A_NOTE in texts["scratchpad"]
    assert A_NOTE in texts["search_memory"]
    assert A_NOTE in texts["get_memory own discovery:ci"]
    assert A_NOTE not in texts["get_memory discovery:ci"]  # without own: the user's memory
    for path in ("working memory", "working memory json", "working memory as of"):
        assert A_NOTE not in texts[path], path
    assert PLAIN in texts["working memory as of"]


@pytest.mark.parametrize(
    "write",
    [
        lambda user, agent: memory_upsert(
            user=user,
            key="fact:pills",
            value="replaced",
            actor=Actor.for_agent(agent),
            reader=agent,
        ),
        lambda user, agent: memory_update(
            user=user, key="fact:pills", pinned=True, actor=Actor.for_agent(agent), reader=agent
        ),
        lambda user, agent: memory_delete(
            user=user, key="fact:pills", actor=Actor.for_agent(agent), reader=agent
        ),
    ],
    ids=["upsert", "update", "delete"],
)
def test_the_write_path_refuses_a_hidden_row_under_its_lock(alice, world, write):
    """The read rule binds the write itself, on the row it locked, not a look before it: a
    row that became hidden after the tool call began cannot be written either."""
    agents, _ = world
    pills = Memory.objects.get(user=alice, key="fact:pills", owner_agent=None)
    history = MemoryHistory.objects.filter(user=alice, key="fact:pills").count()

    with pytest.raises(NotFound) as refused:
        write(alice, agents["careful"])

    assert str(refused.value) == "No memory with key 'fact:pills'."
    assert Memory.objects.get(pk=pills.pk).value == pills.value
    assert Memory.objects.get(pk=pills.pk).pinned is False
    assert MemoryHistory.objects.filter(user=alice, key="fact:pills").count() == history


def test_a_readable_row_goes_on_to_the_review_gate_with_the_reader_given(alice, world):
    """The same write of a row the rule lets the agent read is no NotFound: the user stated
    it, so it becomes a proposal."""
    agents, _ = world
    with pytest.raises(ReviewRequired) as waiting:
        memory_update(
            user=alice,
            key="fact:release",
            pinned=True,
            actor=Actor.for_agent(agents["careful"]),
            reader=agents["careful"],
        )
    assert waiting.value.proposal.key == "fact:release"
