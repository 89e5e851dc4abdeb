"""The search tools over HTTP: results with their score parts, isolation, system tokens."""

import pytest

from activity.actors import Actor
from context.services import document_write
from memory.models import Memory
from memory.services import memory_upsert
from profiles.services import system_token_create, token_create
from search.embeddings import get_embedder
from search.indexing import embed_rows, rows_needing_vectors
from search.models import SearchLog
from search.registry import sources
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def index_everything():
    embedder = get_embedder()
    for source in sources():
        embed_rows(rows_needing_vectors(source, embedder.model), embedder)


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


@pytest.fixture
def twins(alice, bob):
    """Near-identical memories and documents for two users."""
    for user in (alice, bob):
        actor = Actor.for_user(user)
        memory_upsert(user=user, key="fact:order", value=f"Order QX-1 for {user}", actor=actor)
        memory_upsert(user=user, key="preference:tea", value="Prefers green tea", actor=actor)
        document_write(
            user=user, path="notes/order.md", content=f"Order QX-1 shipped to {user}", actor=actor
        )
    index_everything()


def test_search_memory_returns_rows_with_score_parts(call_tool, alice, alice_token, twins):
    response = call_tool(alice_token, "search_memory", {"query": "QX-1 order", "limit": 5})

    assert response.status_code == 200, response.content
    first = response.json()["results"][0]
    assert first["memory"]["key"] == "fact:order"
    assert first["memory"]["value"] == "Order QX-1 for alice"
    assert first["keyword_rank"] == 1
    assert set(first) == {
        "memory",
        "score",
        "fused",
        "keyword_rank",
        "vector_rank",
        "decay",
        "use_boost",
    }
    assert first["score"] == pytest.approx(first["fused"] * first["decay"] * first["use_boost"])
    assert first["memory"]["access_count"] == 1
    assert Memory.objects.get(user=alice, key="fact:order").access_count == 1
    assert float(response["Server-Timing"].removeprefix("search;dur=")) > 0


def test_search_memory_filters_by_kind(call_tool, alice_token, twins):
    body = call_tool(alice_token, "search_memory", {"query": "tea order", "kind": "preference"})
    assert [hit["memory"]["key"] for hit in body.json()["results"]] == ["preference:tea"]


def test_memory_search_returns_paths_and_bold_snippets(call_tool, alice_token, twins):
    response = call_tool(alice_token, "memory_search", {"query": "shipped"})

    assert response.status_code == 200
    (hit,) = response.json()["results"]
    assert (hit["path"], hit["scope"], hit["chunk"]) == ("notes/order.md", "user", 0)
    assert "**shipped**" in hit["snippet"]
    assert "alice" in hit["snippet"]


def test_each_user_finds_only_their_own(call_tool, alice_token, bob_token, twins):
    for token, name, other in ((alice_token, "alice", "bob"), (bob_token, "bob", "alice")):
        memories = call_tool(token, "search_memory", {"query": "order QX-1 tea", "limit": 50})
        documents = call_tool(token, "memory_search", {"query": "order QX-1", "limit": 50})
        text = memories.content.decode() + documents.content.decode()
        assert name in text
        assert other not in text


def test_promote_memory_pins_it(call_tool, alice, alice_agent, alice_token, twins):
    memory_upsert(
        user=alice, key="fact:guess", value="Drinks oolong", actor=Actor.for_agent(alice_agent)
    )

    response = call_tool(alice_token, "promote_memory", {"key": "fact:guess"})

    assert response.status_code == 200
    assert response.json()["memory"]["pinned"] is True
    assert Memory.objects.get(user=alice, key="fact:guess").pinned is True


def test_promoting_what_the_user_stated_waits_for_review(call_tool, alice, alice_token, twins):
    response = call_tool(alice_token, "promote_memory", {"key": "preference:tea"})

    assert response.status_code == 202
    assert response.json()["proposal"]["after"]["pinned"] is True
    assert Memory.objects.get(user=alice, key="preference:tea").pinned is False


def test_promote_memory_of_a_missing_or_other_users_key_is_404(call_tool, bob, bob_token):
    memory_upsert(user=bob, key="fact:bobs", value="bob only", actor=Actor.for_user(bob))
    stranger_token = token_create(agent=AgentFactory(name="other")).raw

    response = call_tool(stranger_token, "promote_memory", {"key": "fact:bobs"})

    assert response.status_code == 404
    assert Memory.objects.get(user=bob, key="fact:bobs").pinned is False


def without_times(body):
    """A tool's answer without what a second call moves on: the memory's updated_at, and
    the proposal's id and times (a later proposal for the key replaces the earlier one)."""
    if "memory" in body:
        body = {**body, "memory": {**body["memory"], "updated_at": None}}
    if "proposal" in body:
        times = {"id": None, "created_at": None, "expires_at": None}
        body = {**body, "proposal": {**body["proposal"], **times}}
    return body


def test_memory_promote_answers_exactly_as_promote_memory(
    call_tool, alice, alice_agent, alice_token, twins
):
    memory_upsert(
        user=alice, key="fact:first", value="Drinks oolong", actor=Actor.for_agent(alice_agent)
    )

    pinned = call_tool(alice_token, "memory_promote", {"key": "fact:first"})

    assert pinned.status_code == 200, pinned.content
    assert pinned.json()["memory"]["pinned"] is True
    assert Memory.objects.get(user=alice, key="fact:first").pinned is True
    # The same call answers the same under either name. (Pinning what is pinned already
    # answers "unchanged" but saves the row again: only its updated_at moves on.)
    statuses = []
    for body in (
        {"key": "fact:first"},
        {"key": "preference:tea"},  # what the user stated: waits for review
        {"key": "fact:missing"},
        {"key": "Not A Key"},
        {"key": "fact:first", "pinned": True},
        {},
    ):
        original = call_tool(alice_token, "promote_memory", body)
        alias = call_tool(alice_token, "memory_promote", body)
        assert alias.status_code == original.status_code, body
        assert without_times(alias.json()) == without_times(original.json()), body
        statuses.append(alias.status_code)
    assert statuses == [200, 202, 404, 400, 400, 400]


def test_bad_search_input_is_400(call_tool, alice_token):
    for body, field in [
        ({"query": ""}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 51}, "limit"),
        ({"query": 5}, "query"),
        ({"query": "x", "kind": "facts"}, "kind"),
        ({"query": "x", "extra": 1}, "extra"),
    ]:
        response = call_tool(alice_token, "search_memory", body)
        assert response.status_code == 400, body
        assert error(response)["field"] == field, body


def test_agents_search_their_own_notes_but_not_another_agents(call_tool, alice, alice_agent):
    other = AgentFactory(user=alice, name="researcher")
    for agent, text in ((alice_agent, "zebra notes of assistant"), (other, "zebra of other")):
        document_write(
            user=alice,
            agent=agent,
            path="AGENT_MEMORY.md",
            content=text,
            actor=Actor.for_user(alice),
        )
    token = token_create(agent=alice_agent).raw

    results = call_tool(token, "memory_search", {"query": "zebra"}).json()["results"]
    in_folder = call_tool(token, "memory_search", {"query": "zebra", "path_prefix": "agents/"})
    elsewhere = call_tool(token, "memory_search", {"query": "zebra", "path_prefix": "notes/"})

    # The path is where the agent reads it: its private folder.
    assert [(hit["path"], hit["scope"]) for hit in results] == [
        ("agents/assistant/AGENT_MEMORY.md", "agent")
    ]
    assert "assistant" in results[0]["snippet"]
    read = call_tool(token, "memory_read", {"path": results[0]["path"]}).json()
    assert read["content"] == "zebra notes of assistant"
    assert [hit["path"] for hit in in_folder.json()["results"]] == [results[0]["path"]]
    assert elsewhere.json()["results"] == []


def test_system_tokens_search_global_documents_only(call_tool, settings, alice, alice_token):
    document_write(user=None, path="handbook.md", content="Expense policy", actor=Actor.system())
    document_write(
        user=alice, path="mine.md", content="My expense notes", actor=Actor.for_user(alice)
    )
    system = system_token_create().raw

    found = call_tool(system, "memory_search", {"query": "expense"}).json()["results"]
    refused = call_tool(system, "search_memory", {"query": "expense"})
    hidden = call_tool(alice_token, "memory_search", {"query": "expense"}).json()["results"]
    settings.MNEMO_GLOBAL_READABLE = True
    shared = call_tool(alice_token, "memory_search", {"query": "expense"}).json()["results"]

    assert [(hit["path"], hit["scope"]) for hit in found] == [("handbook.md", "global")]
    assert refused.status_code == 403
    assert [hit["path"] for hit in hidden] == ["mine.md"]
    assert sorted(hit["path"] for hit in shared) == ["handbook.md", "mine.md"]
    # The system token's search is logged too, under no user; it counts in no one's stats.
    assert SearchLog.objects.filter(user=None).values_list("tool", "results").get() == (
        "memory_search",
        1,
    )
