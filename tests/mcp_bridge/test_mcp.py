"""The MCP server, driven by the official SDK's own client over both transports.

HTTP: config.asgi's application (lib/asgi.py with /mcp mounted) served by uvicorn on a
free port in a thread of this process, so it uses the test database and this process's
settings and cache. stdio: `manage.py mcp` in a subprocess pointed at the test database.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from django.conf import settings as django_settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from activity.actors import Actor
from activity.models import ActivityEvent
from context.models import Document
from context.services import document_write
from lib.tool_manifest import tool_manifest
from memory.models import Memory
from memory.services import memory_upsert
from profiles.services import profile_update
from tests.briefing.test_prompt_forgery import (
    assert_unforged,
    forge_everything,
    freeze,
    make_agents,
)
from tests.search.conftest import database_url, wait_for
from tests.test_api_contract import CALLS, SEEDED_WORK
from tests.test_errors import asgi_call
from work.services import work_create

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
CALL_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def mcp_url(transactional_db) -> Iterator[str]:
    """The web application on a free port; yields the URL of its /mcp."""
    from config.asgi import build_application

    config = uvicorn.Config(
        build_application(),
        host="127.0.0.1",
        port=_free_port(),
        lifespan="on",
        log_level="warning",
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    wait_for(lambda: server.started, seconds=30, what="uvicorn's start")
    yield f"http://127.0.0.1:{config.port}/mcp"
    server.should_exit = True
    thread.join(timeout=30)
    assert not thread.is_alive(), "uvicorn did not stop"


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main)


@asynccontextmanager
async def http_session(url: str, token: str, *, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S, trust_env=False) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def pyproject_version() -> str:
    """Mnemo's version as pyproject.toml states it (never empty)."""
    with (REPO / "pyproject.toml").open("rb") as file:
        version = tomllib.load(file)["project"]["version"]
    assert version
    return version


def stdio_parameters(token: str | None, *args: str) -> StdioServerParameters:
    """`manage.py mcp` on the test database, with the test settings' tame services."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "CELERY_", "MNEMO_", "OPENAI_"))
        and name not in ("DATABASE_URL", "CACHE_URL")
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "DATABASE_CONN_MAX_AGE": "0",
        "SECRET_KEY": "mcp-stdio-under-test",
        "MNEMO_DATA_DIR": str(django_settings.DATA_DIR),
        "CELERY_BROKER_URL": "memory://",
        "MNEMO_EMBEDDING_PROVIDER": "wordllama",
        "MNEMO_DOCUMENT_EMBEDDING_PROVIDER": "auto",
        "PYTHONUNBUFFERED": "1",
    }
    if token is not None:
        env["MNEMO_MCP_TOKEN"] = token
    return StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", *args], env=env, cwd=REPO
    )


def manifest_as_mcp() -> dict[str, tuple[str, dict]]:
    return {
        tool["function"]["name"]: (tool["function"]["description"], tool["function"]["parameters"])
        for tool in tool_manifest()
    }


def listed(tools: list[Any]) -> dict[str, tuple[str, dict]]:
    return {tool.name: (tool.description, tool.input_schema) for tool in tools}


def error_of(result: Any) -> dict[str, Any]:
    assert result.is_error is True, result
    body = json.loads(result.content[0].text)
    assert result.structured_content == body
    return body["error"]


def seed(alice, alice_agent) -> int:
    """What CALLS expects to exist: fact:seeded, notes/seeded.md, BOOTSTRAP.md, a work item."""
    actor = Actor.for_agent(alice_agent)
    memory_upsert(user=alice, key="fact:seeded", value="seed", actor=actor)
    document_write(user=alice, path="notes/seeded.md", content="seed", actor=actor)
    document_write(user=alice, path="BOOTSTRAP.md", content="ritual", actor=Actor.for_user(alice))
    return work_create(user=alice, title="Seeded", body="seed", actor=actor).pk


def valid_calls(work_id: int) -> list[tuple[str, dict]]:
    """Every tool's valid call from the API contract test; the deletions last."""
    calls = [
        (name, {key: work_id if value == SEEDED_WORK else value for key, value in valid.items()})
        for name, (valid, _) in CALLS.items()
    ]
    return sorted(calls, key=lambda call: call[0] in ("delete_memory", "memory_delete"))


# --- streamable HTTP at /mcp ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_http_lists_the_manifest_the_resources_and_the_prompt(mcp_url, alice_token, mode):
    async def main() -> tuple[Any, Any, Any]:
        async with http_session(mcp_url, alice_token, mode=mode) as client:
            return (
                await client.list_tools(),
                await client.list_resources(),
                await client.list_prompts(),
            )

    tools, resources, prompts = run(main)
    assert listed(tools.tools) == manifest_as_mcp()
    assert [tool.name for tool in tools.tools] == [t["function"]["name"] for t in tool_manifest()]
    assert [str(resource.uri) for resource in resources.resources] == [
        "mnemo://working-memory",
        "mnemo://profile-memory",
        "mnemo://system-prompt",
    ]
    assert [prompt.name for prompt in prompts.prompts] == ["system_prompt"]


def test_http_calls_every_tool_as_the_api_does(mcp_url, alice, alice_agent, alice_token):
    calls = valid_calls(seed(alice, alice_agent))
    assert {name for name, _ in calls} == set(manifest_as_mcp())

    async def main() -> list[tuple[str, Any]]:
        async with http_session(mcp_url, alice_token) as client:
            return [(name, await client.call_tool(name, body)) for name, body in calls]

    for name, result in run(main):
        assert result.is_error is False, (name, result.content[0].text)
        assert result.meta["mnemo/status"] in (200, 201), name
        assert result.structured_content == json.loads(result.content[0].text), name
    assert Memory.objects.get(user=alice, key="fact:tea").value == "green tea"
    assert not Memory.objects.filter(user=alice, key="fact:seeded").exists()


def test_http_tool_results_match_the_http_api(mcp_url, alice, alice_agent, alice_token, client):
    seed(alice, alice_agent)
    headers = {"Authorization": f"Bearer {alice_token}"}
    over_http = client.post(
        "/api/v1/tools/get_memory", {"key": "fact:seeded"}, "application/json", headers=headers
    )

    async def main() -> tuple[Any, Any]:
        async with http_session(mcp_url, alice_token) as session:
            found = await session.call_tool("get_memory", {"key": "fact:seeded"})
            refused = await session.call_tool("get_memory", {"key": "Not A Key"})
            return found, refused

    found, refused = run(main)
    # Reading a memory counts the read: the counters moved on between the two calls.
    moved = {"access_count", "last_accessed_at"}
    mcp_memory, http_memory = found.structured_content["memory"], over_http.json()["memory"]
    assert set(mcp_memory) == set(http_memory)
    assert {k: v for k, v in mcp_memory.items() if k not in moved} == {
        k: v for k, v in http_memory.items() if k not in moved
    }
    refused_over_http = client.post(
        "/api/v1/tools/get_memory", {"key": "Not A Key"}, "application/json", headers=headers
    )
    assert error_of(refused) == refused_over_http.json()["error"]
    assert refused.meta["mnemo/status"] == refused_over_http.status_code == 400


def test_http_lists_and_calls_memory_promote_as_promote_memory(
    mcp_url, alice, alice_agent, alice_token
):
    seed(alice, alice_agent)

    async def main() -> tuple[Any, Any]:
        async with http_session(mcp_url, alice_token) as client:
            tools = await client.list_tools()
            return tools, await client.call_tool("memory_promote", {"key": "fact:seeded"})

    tools, result = run(main)
    alias, original = (listed(tools.tools)[name] for name in ("memory_promote", "promote_memory"))
    assert alias[0].startswith("Memories — The other name of promote_memory")
    assert alias[1] == original[1]
    assert result.is_error is False, result.content[0].text
    assert result.structured_content["memory"]["pinned"] is True
    assert Memory.objects.get(user=alice, key="fact:seeded").pinned is True


def test_http_tools_take_and_return_occurred_at_and_session(mcp_url, alice, alice_token):
    """The MCP tools are the API's: the new fields are in their schemas and round-trip."""
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_user(alice))

    async def main() -> tuple[Any, ...]:
        async with http_session(mcp_url, alice_token) as client:
            tools = await client.list_tools()
            stored = await client.call_tool(
                "memory_store",
                {
                    "content": "Moved to Lisbon",
                    "category": "fact",
                    "occurred_at": "2023-05-08",
                    "session": "chat-42",
                },
            )
            key = stored.structured_content["key"]
            updated = await client.call_tool(
                "update_memory", {"key": key, "occurred_at": "2023-05-09T10:00:00Z", "own": True}
            )
            refused = await client.call_tool(
                "create_memory", {"key": "fact:x", "value": "x", "occurred_at": "last May"}
            )
            return tools, stored, updated, refused

    tools, stored, updated, refused = run(main)
    schemas = {tool.name: tool.input_schema["properties"] for tool in tools.tools}
    for name in ("create_memory", "update_memory", "memory_store"):
        assert {"occurred_at", "session"} <= set(schemas[name]), name
        assert schemas[name]["session"]["maxLength"] == 100
        assert "ISO 8601" in schemas[name]["occurred_at"]["description"]
    # An agent's own note by default (issue 27): memory_store's share, the others' own.
    assert schemas["memory_store"]["share"]["type"] == "boolean"
    for name in ("get_memory", "update_memory", "delete_memory", "memory_promote"):
        assert schemas[name]["own"]["type"] == "boolean", name
    memory = stored.structured_content["memory"]
    # 2023-05-08 in Singapore began at 16:00 UTC the day before.
    assert (memory["occurred_at"], memory["session"]) == ("2023-05-07T16:00:00Z", "chat-42")
    memory = updated.structured_content["memory"]
    assert (memory["occurred_at"], memory["session"]) == ("2023-05-09T10:00:00Z", "chat-42")
    assert error_of(refused)["field"] == "occurred_at"
    assert not Memory.objects.filter(user=alice, key="fact:x").exists()


def test_http_refuses_a_missing_or_bad_token_before_mcp(mcp_url, alice_token, client):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    bad = "mnemo_" + "x" * 40
    with httpx2.Client(timeout=CALL_TIMEOUT_S, trust_env=False) as http:
        missing = http.post(mcp_url, json=initialize, headers=accept)
        wrong = http.post(
            mcp_url, json=initialize, headers={**accept, "Authorization": f"Bearer {bad}"}
        )
        good = http.post(
            mcp_url, json=initialize, headers={**accept, "Authorization": f"Bearer {alice_token}"}
        )
    api_missing = client.post("/api/v1/tools/list_memories", {}, "application/json")
    api_wrong = client.post(
        "/api/v1/tools/list_memories",
        {},
        "application/json",
        headers={"Authorization": f"Bearer {bad}"},
    )
    assert missing.status_code == wrong.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="mnemo"'
    assert wrong.headers["www-authenticate"] == (
        'Bearer realm="mnemo", error="invalid_token", error_description="Unknown token."'
    )
    # A JSON-RPC error carrying the API's message, and its error object with the status.
    for answer, api in ((missing, api_missing), (wrong, api_wrong)):
        assert answer.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32001,
                "message": api.json()["error"]["message"],
                "data": {**api.json()["error"], "status": 401},
            },
        }
    assert wrong.json()["error"]["data"]["code"] == "invalid_token"
    assert good.status_code == 200
    assert good.json()["result"]["serverInfo"] == {
        "name": "mnemo",
        "title": "Mnemo",
        "version": pyproject_version(),
    }

    async def main() -> None:
        async with http_session(mcp_url, bad) as session:
            await session.list_tools()

    # The SDK's client gives up at the first answer, the 401, and says why.
    with pytest.raises(ExceptionGroup) as refused:
        run(main)
    assert refused.group_contains(MCPError, match="^Unknown token\\.$", depth=2)


def test_http_keeps_users_apart(mcp_url, alice_token, bob_token):
    async def main() -> tuple[Any, Any, Any]:
        async with http_session(mcp_url, alice_token) as alice_session:
            written = await alice_session.call_tool(
                "create_memory", {"key": "fact:secret", "value": "alice's secret"}
            )
        async with http_session(mcp_url, bob_token) as bob_session:
            got = await bob_session.call_tool("get_memory", {"key": "fact:secret"})
            listing = await bob_session.call_tool("list_memories", {})
        return written, got, listing

    written, got, listing = run(main)
    assert written.is_error is False
    assert error_of(got)["code"] == "not_found"
    assert got.meta["mnemo/status"] == 404
    assert "fact:secret" not in listing.content[0].text
    assert Memory.objects.get(key="fact:secret").user.username == "alice"


def test_http_maps_a_paused_memory_to_a_tool_error(mcp_url, alice, alice_token):
    profile_update(user=alice, memory_paused=True)

    async def main() -> Any:
        async with http_session(mcp_url, alice_token) as session:
            return await session.call_tool("create_memory", {"key": "fact:tea", "value": "green"})

    result = run(main)
    assert error_of(result)["code"] == "memory_paused"
    assert result.meta["mnemo/status"] == 409
    assert not Memory.objects.filter(user=alice).exists()


def test_http_refuses_a_credential_as_the_api_does(mcp_url, alice, alice_token, client):
    card = "Card 4111 1111 1111 1111"
    calls = [
        ("create_memory", {"key": "fact:card", "value": card}),
        ("memory_store", {"content": card, "category": "fact"}),
        ("memory_write", {"path": "notes/card.md", "content": card}),
        ("append_daily_memory", {"content": card}),
    ]

    async def main() -> list[Any]:
        async with http_session(mcp_url, alice_token) as session:
            return [await session.call_tool(name, body) for name, body in calls]

    results = run(main)
    headers = {"Authorization": f"Bearer {alice_token}"}
    for (name, body), result in zip(calls, results, strict=True):
        over_http = client.post(f"/api/v1/tools/{name}", body, "application/json", headers=headers)
        assert error_of(result) == over_http.json()["error"], name
        assert error_of(result)["code"] == "secret_refused"
        assert result.meta["mnemo/status"] == over_http.status_code == 422
    assert not Memory.objects.filter(user=alice).exists()
    assert not Document.objects.filter(user=alice).exists()
    assert not ActivityEvent.objects.filter(user=alice).exists()


def test_http_throttles_as_the_api_does(mcp_url, alice_token, settings):
    settings.MNEMO_API_RATE = "2/min"

    async def main() -> list[Any]:
        async with http_session(mcp_url, alice_token) as session:
            return [await session.call_tool("list_memories", {}) for _ in range(3)]

    first, second, third = run(main)
    assert first.is_error is second.is_error is False
    assert error_of(third)["code"] == "rate_limited"
    assert third.meta["mnemo/status"] == 429
    assert int(third.meta["mnemo/retry_after"]) > 0


def test_http_unknown_tool_is_a_protocol_error(mcp_url, alice_token):
    async def main() -> MCPError:
        async with http_session(mcp_url, alice_token) as session:
            with pytest.raises(MCPError) as refused:
                await session.call_tool("drop_everything", {})
            return refused.value

    error = run(main)
    assert error.error.code == INVALID_PARAMS
    assert error.error.message.startswith("Unknown tool 'drop_everything'; the tools are ")


def test_http_reads_the_resources_and_the_prompt_as_the_api_serves_them(
    mcp_url, alice, alice_agent, alice_token, client
):
    memory_upsert(
        user=alice, key="preference:tea", value="green tea", actor=Actor.for_agent(alice_agent)
    )
    document_write(
        user=alice,
        path="USER_MEMORY.md",
        content="# Alice\nDrinks green tea.\n",
        actor=Actor.for_user(alice),
    )
    headers = {"Authorization": f"Bearer {alice_token}"}

    async def main() -> tuple[dict[str, str], Any]:
        async with http_session(mcp_url, alice_token) as session:
            texts = {}
            for uri in (
                "mnemo://working-memory",
                "mnemo://profile-memory",
                "mnemo://system-prompt",
            ):
                read = await session.read_resource(uri)
                assert read.contents[0].mime_type == "text/markdown"
                texts[uri] = read.contents[0].text
            return texts, await session.get_prompt("system_prompt")

    texts, prompt = run(main)
    for uri, path in (
        ("mnemo://working-memory", "/api/v1/working-memory"),
        ("mnemo://profile-memory", "/api/v1/profile-memory"),
        ("mnemo://system-prompt", "/api/v1/system-prompt"),
    ):
        over_http = client.get(path, {"format": "markdown"}, headers=headers)
        assert over_http.status_code == 200
        assert texts[uri] == over_http.content.decode(), uri
    assert "green tea" in texts["mnemo://working-memory"]
    assert "Drinks green tea." in texts["mnemo://profile-memory"]
    assert prompt.messages[0].content.text == texts["mnemo://system-prompt"]


def test_another_agents_writes_forge_no_section_of_the_prompt_or_the_resource(
    mcp_url, call_tool, no_llm, monkeypatch, alice
):
    """Issue 25: the MCP prompt and resource are the same prompt as the API's, so agent A's
    forgery (tests/briefing/test_prompt_forgery.py) reaches neither outside its fences."""
    freeze(monkeypatch)
    token_a, token_b = make_agents(alice)
    forge_everything(call_tool, token_a)

    async def main() -> tuple[str, str]:
        async with http_session(mcp_url, token_b) as session:
            read = await session.read_resource("mnemo://system-prompt")
            prompt = await session.get_prompt("system_prompt")
            return read.contents[0].text, prompt.messages[0].content.text

    resource, prompt = run(main)

    assert resource == prompt
    assert_unforged(resource)


def test_the_resources_show_an_agent_what_it_may_read_only(mcp_url, alice, no_llm):
    """Issue 27: over MCP as over the API, an agent whose user hides #health from it, and
    which is not the agent that wrote a note, reads neither in any resource; the profile,
    built from all of the user's memory, is refused to it."""
    from profiles.services import agent_set_read_rules, token_create
    from tests.factories import AgentFactory, MemoryFactory

    you = Actor.for_user(alice)
    memory_upsert(user=alice, key="fact:pills", value="quokkapills", tags=["health"], actor=you)
    memory_upsert(user=alice, key="fact:trip", value="lemurtrip", actor=you)
    document_write(user=alice, path="USER_MEMORY.md", content="# wombatprofile\n", actor=you)
    writer, reader = AgentFactory(user=alice, name="coder"), AgentFactory(user=alice, name="travel")
    MemoryFactory(user=alice, owner_agent=writer, key="discovery:ci", value="quasarnote")
    agent_set_read_rules(
        agent=reader, memory_rule="except", memory_tags=["health"], document_rule="all"
    )
    token = token_create(agent=reader).raw

    async def main() -> tuple[dict[str, str], MCPError]:
        async with http_session(mcp_url, token) as session:
            texts = {}
            for uri in ("mnemo://working-memory", "mnemo://system-prompt"):
                texts[uri] = (await session.read_resource(uri)).contents[0].text
            with pytest.raises(MCPError) as refused:
                await session.read_resource("mnemo://profile-memory")
            return texts, refused.value

    texts, refused = run(main)

    for uri, text in texts.items():
        assert "lemurtrip" in text, uri
        for hidden in ("quokkapills", "quasarnote", "wombatprofile"):
            assert hidden not in text, (uri, hidden)
    assert refused.error.data["status"] == 403


def test_http_resource_error_is_a_protocol_error_with_the_api_error(mcp_url, alice_token, no_llm):
    async def main() -> MCPError:
        async with http_session(mcp_url, alice_token) as session:
            with pytest.raises(MCPError) as refused:
                await session.read_resource("mnemo://profile-memory")
            return refused.value

    error = run(main)
    assert error.error.data["code"] == "llm_not_configured"
    assert error.error.data["status"] == 503
    assert error.error.code == INTERNAL_ERROR
    assert error.error.message.startswith("There is no consolidated profile yet")


# --- stdio: manage.py mcp ---------------------------------------------------------------


def test_stdio_serves_the_tools_and_resources(alice, alice_agent, alice_token, bob_token):
    memory_upsert(user=alice, key="fact:seeded", value="seed", actor=Actor.for_agent(alice_agent))

    async def main() -> tuple[Any, ...]:
        async with Client(stdio_parameters(alice_token), read_timeout_seconds=CALL_TIMEOUT_S) as c:
            server_info = c.server_info
            tools = await c.list_tools()
            created = await c.call_tool("create_memory", {"key": "fact:tea", "value": "green tea"})
            got = await c.call_tool("get_memory", {"key": "fact:tea"})
            working = await c.read_resource("mnemo://working-memory")
        # bob's token, from --token this time: alice's memory is not his
        async with Client(
            stdio_parameters(None, "--token", bob_token), read_timeout_seconds=CALL_TIMEOUT_S
        ) as c:
            bobs = await c.call_tool("get_memory", {"key": "fact:tea"})
        return server_info, tools, created, got, working, bobs

    server_info, tools, created, got, working, bobs = run(main)
    assert (server_info.name, server_info.version) == ("mnemo", pyproject_version())
    assert listed(tools.tools) == manifest_as_mcp()
    assert created.is_error is False
    assert created.meta["mnemo/status"] == 201
    assert got.structured_content["memory"]["value"] == "green tea"
    assert "seed" in working.contents[0].text
    assert error_of(bobs)["code"] == "not_found"
    memory = Memory.objects.get(user=alice, key="fact:tea")
    assert memory.history.get().actor_agent == alice_agent


def test_stdio_paused_memory_is_a_tool_error(alice, alice_token):
    profile_update(user=alice, memory_paused=True)

    async def main() -> Any:
        async with Client(stdio_parameters(alice_token), read_timeout_seconds=CALL_TIMEOUT_S) as c:
            return await c.call_tool("create_memory", {"key": "fact:tea", "value": "green"})

    assert error_of(run(main))["code"] == "memory_paused"
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (None, "No agent token: pass --token or set MNEMO_MCP_TOKEN."),
        ("mnemo_nope", "Unknown token."),
    ],
)
def test_stdio_refuses_a_missing_or_bad_token(db, token, message):
    parameters = stdio_parameters(token)
    finished = subprocess.run(
        [parameters.command, *parameters.args],
        env=parameters.env,
        cwd=parameters.cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        # Loading Django whole to check the token: ~8 s of CPU, far longer on a busy machine.
        timeout=2 * CALL_TIMEOUT_S,
        check=False,
    )
    assert finished.returncode == 1
    assert message in finished.stderr
    assert finished.stdout == ""


def test_mcp_gets_the_web_servers_refusals_first():
    too_large = [(b"content-length", str(5 * 1024 * 1024).encode())]
    for path in ("/mcp", "/mcp/"):
        status, _, body = asgi_call(path, too_large)
        assert status == 413
        assert json.loads(body)["error"]["code"] == "too_large"
    status, _, body = asgi_call("/mcp?" + "a" * 9000, [])
    assert status == 414
    assert json.loads(body)["error"]["code"] == "url_too_long"


def test_stdio_first_request_after_initialize_waits_for_django(alice, alice_agent, alice_token):
    """A client's first request may come while Django is still loading on its thread
    (mcp_bridge/stdio.py): a tool call, or a resource read, waits for it and is answered."""
    memory_upsert(user=alice, key="fact:seeded", value="seed", actor=Actor.for_agent(alice_agent))

    async def main() -> tuple[Any, Any]:
        async with Client(stdio_parameters(alice_token), read_timeout_seconds=CALL_TIMEOUT_S) as c:
            got = await c.call_tool("get_memory", {"key": "fact:seeded"})
        async with Client(stdio_parameters(alice_token), read_timeout_seconds=CALL_TIMEOUT_S) as c:
            working = await c.read_resource("mnemo://working-memory")
        return got, working

    got, working = run(main)
    assert got.is_error is False
    assert got.structured_content["memory"]["value"] == "seed"
    assert "seed" in working.contents[0].text


def test_stdio_answers_initialize_with_the_version_before_django_is_loaded(db):
    """`initialize` needs nothing of Django (mcp_bridge/stdio.py): with no database to reach
    the server still introduces itself, with Mnemo's version, and then says why it cannot
    serve a tool."""
    parameters = stdio_parameters("mnemo_" + "x" * 40)
    parameters.env["DATABASE_URL"] = "postgres://nobody:nothing@127.0.0.1:1/none"

    async def main() -> Any:
        async with Client(parameters, read_timeout_seconds=CALL_TIMEOUT_S) as c:
            info = c.server_info
            with pytest.raises(MCPError, match=r"^Mnemo could not start: OperationalError"):
                await c.list_tools()
            return info

    info = run(main)
    assert (info.name, info.title, info.version) == ("mnemo", "Mnemo", pyproject_version())
