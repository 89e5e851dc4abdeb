"""The API's published contract: the OpenAPI schema, the Swagger UI, the tool manifest."""

import json
import re
from io import StringIO

import jsonschema
import pytest
import yaml
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import CommandError, call_command
from drf_spectacular.generators import SchemaGenerator

from activity.actors import Actor
from context.services import document_write
from memory.models import Memory
from memory.services import memory_upsert
from profiles.models import Agent
from work.services import work_create

pytestmark = pytest.mark.django_db

MEMORY_TOOLS = [
    "create_memory",
    "delete_memory",
    "get_memory",
    "list_memories",
    "list_proposals",
    "memory_list_recent",
    "memory_store",
    "update_memory",
]
WORKSPACE_TOOLS = [
    "agent_memory_get",
    "append_agent_memory",
    "append_daily_memory",
    "memory_append",
    "memory_delete",
    "memory_read",
    "memory_tree",
    "memory_write",
]
SEARCH_TOOLS = ["ask_memory", "memory_promote", "memory_search", "promote_memory", "search_memory"]
WORK_TOOLS = ["create_work", "get_work", "list_work", "update_work"]
SESSION_TOOLS = ["complete_bootstrap"]
TOOLS = sorted(MEMORY_TOOLS + WORKSPACE_TOOLS + SEARCH_TOOLS + WORK_TOOLS + SESSION_TOOLS)
SEEDED_WORK = "<the seeded work item's id>"  # swapped for it in the calls below


def test_schema_validates_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    operations = [op for item in schema["paths"].values() for op in item.values()]
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(
        [
            *TOOLS,
            "list_tools",
            "get_working_memory",
            "get_profile",
            "report_turn",
            "get_turn",
            "get_profile_memory",
            "get_system_prompt",
            "export_account",
        ]
    )
    for path, item in schema["paths"].items():
        if not path.startswith("/api/v1/tools/"):
            continue
        operation = item["post"]
        assert operation["operationId"] == path.rsplit("/", 1)[-1]
        assert operation["security"] == [{"agentToken": []}]
        assert operation["requestBody"]["content"]["application/json"]["examples"], path
        for status in ("400", "401", "413", "429"):
            error_schema = operation["responses"][status]["content"]["application/json"]
            assert error_schema["schema"] == {"$ref": "#/components/schemas/Error"}, path
    assert schema["components"]["securitySchemes"]["agentToken"]["scheme"] == "bearer"


def test_schema_is_served(client):
    response = client.get("/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"})
    assert response.status_code == 200
    assert "/api/v1/tools/create_memory" in json.loads(response.content)["paths"]


def test_swagger_ui_is_served_without_a_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "SwaggerUIBundle" in html or "swagger-ui" in html
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert any("swagger-ui" in asset for asset in assets)
    for asset in assets:
        assert not asset.startswith(("http:", "https:", "//")), asset
        if asset.startswith("/static/"):
            assert finders.find(asset.removeprefix("/static/")), asset


# --- the tool manifest -----------------------------------------------------------------

# For every tool: a call its schema accepts, and one it refuses.
CALLS = {
    "ask_memory": (
        {"question": "seed?", "max_tokens": 100},
        {"question": "seed?", "max_tokens": 10},
    ),
    "create_work": (
        {"title": "Report", "body": "# Findings", "kind": "report", "tags": ["q2"]},
        {"title": "Report", "body": "# Findings", "kind": "heartbeat"},
    ),
    "list_work": ({"kind": "report", "limit": 5}, {"limit": 101}),
    "get_work": ({"id": SEEDED_WORK}, {"id": "1"}),
    "update_work": (
        {"id": SEEDED_WORK, "status": "archived"},
        {"id": SEEDED_WORK, "status": "gone"},
    ),
    "complete_bootstrap": ({}, {"path": "BOOTSTRAP.md"}),
    "create_memory": (
        {
            "key": "fact:tea",
            "value": "green tea",
            "confidence": 0.7,
            "tags": ["drinks"],
            "occurred_at": "2023-05-08T13:56:00+02:00",
            "session": "chat-42",
        },
        {"key": "fact:tea", "value": "green tea", "confidence": 1.0},
    ),
    "update_memory": (
        {"key": "fact:seeded", "value": "new value", "pinned": True, "occurred_at": "2023-05-08"},
        {"key": "fact:seeded", "pinned": "yes"},
    ),
    "delete_memory": ({"key": "fact:seeded"}, {"key": ["fact:seeded"]}),
    "get_memory": ({"key": "fact:seeded"}, {}),
    "list_memories": ({"kind": "fact", "limit": 10}, {"limit": 0}),
    "list_proposals": ({"status": "pending_review", "limit": 10}, {"status": "maybe"}),
    "memory_store": (
        {
            "content": "likes green tea",
            "category": "preference",
            "tags": ["drinks"],
            "occurred_at": "2023-05-08T13:56:00Z",
            "session": "chat-42",
        },
        {"content": "likes green tea", "category": "opinion"},
    ),
    "memory_list_recent": ({"limit": 5}, {"limit": 51}),
    "memory_read": ({"path": "notes/seeded.md"}, {"path": 7}),
    "memory_write": ({"path": "notes/new.md", "content": "# New\n"}, {"path": "notes/new.md"}),
    "memory_append": ({"path": "notes/seeded.md", "content": "more"}, {"content": "more"}),
    "memory_tree": ({"path": "notes", "depth": 2}, {"depth": 0}),
    "memory_delete": ({"path": "notes/seeded.md"}, {"path": ""}),
    "append_daily_memory": ({"content": "Sent the report"}, {"content": ["a"]}),
    "append_agent_memory": ({"content": "Prefers short answers"}, {}),
    "agent_memory_get": ({}, {"path": "AGENT_MEMORY.md"}),
    "search_memory": ({"query": "seed", "limit": 5, "kind": "fact"}, {"query": "seed", "limit": 0}),
    "memory_search": ({"query": "seed", "path_prefix": "notes/"}, {"query": ""}),
    "promote_memory": ({"key": "fact:seeded"}, {"key": "fact:seeded", "pinned": True}),
    "memory_promote": ({"key": "fact:seeded"}, {"key": "fact:seeded", "pinned": True}),
}


def test_manifest_lists_every_tool_in_function_calling_format(client):
    response = client.get("/api/v1/tools")
    assert response.status_code == 200
    manifest = response.json()
    assert sorted(tool["function"]["name"] for tool in manifest) == TOOLS
    for tool in manifest:
        assert tool["type"] == "function"
        function = tool["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert len(function["description"]) > 20
        parameters = function["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object"
        assert parameters["additionalProperties"] is False
        assert "$ref" not in json.dumps(parameters)


def test_manifest_lists_memory_promote_as_the_other_name_of_promote_memory(client):
    manifest = {tool["function"]["name"]: tool for tool in client.get("/api/v1/tools").json()}
    alias, original = manifest["memory_promote"]["function"], manifest["promote_memory"]["function"]
    assert alias["parameters"] == original["parameters"]
    assert alias["description"].startswith("Memories — The other name of promote_memory")
    assert alias["description"].endswith(original["description"].removeprefix("Memories — "))


# What each look-alike pair of names works on, said by the group that leads its description.
GROUP_OF = {
    "delete_memory": "Memories",
    "memory_delete": "Documents",
    "search_memory": "Memories",
    "memory_search": "Documents",
    "memory_store": "Memories",
    "memory_write": "Documents",
    "ask_memory": "Memories and documents",
    "create_work": "Work items",
    "complete_bootstrap": "Session",
}


def test_manifest_groups_the_tools_by_what_they_work_on(client):
    """Every tool belongs to one declared group; the manifest lists the groups in the declared
    order, each tool's description led by its group's name, so `memory_delete` (a document)
    and `delete_memory` (a memory) cannot be mistaken for one another."""
    declared = [tag["name"] for tag in settings.SPECTACULAR_SETTINGS["TAGS"]]
    labels = [tag["description"].partition(":")[0] for tag in settings.SPECTACULAR_SETTINGS["TAGS"]]
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, item in schema["paths"].items():
        if path.startswith("/api/v1/tools/") and "post" in item:
            assert len(item["post"]["tags"]) == 1, path
            assert item["post"]["tags"][0] in declared, path
    manifest = client.get("/api/v1/tools").json()
    led_by = {}
    for tool in manifest:
        label, dash, rest = tool["function"]["description"].partition(" — ")
        assert dash, tool["function"]["name"]
        assert label in labels, tool["function"]["name"]
        assert rest, tool["function"]["name"]
        led_by[tool["function"]["name"]] = label
    order = [labels.index(led_by[tool["function"]["name"]]) for tool in manifest]
    assert order == sorted(order)
    assert {name: led_by[name] for name in GROUP_OF} == GROUP_OF
    by_name = {tool["function"]["name"]: tool["function"]["description"] for tool in manifest}
    assert "delete_memory" in by_name["memory_delete"]
    assert "memory_delete" in by_name["delete_memory"]
    assert "search_memory" in by_name["memory_search"]
    assert "memory_search" in by_name["search_memory"]


def test_manifest_key_schema_carries_the_grammar(client):
    manifest = {tool["function"]["name"]: tool for tool in client.get("/api/v1/tools").json()}
    key = manifest["create_memory"]["function"]["parameters"]["properties"]["key"]
    assert key["type"] == "string"
    assert "<kind>:<slug>" in key["description"]
    assert re.fullmatch(key["pattern"].strip("^$"), "preference:report-format")


@pytest.mark.parametrize("name", ["create_memory", "update_memory", "memory_store"])
def test_manifest_describes_occurred_at_and_session(client, name):
    manifest = {tool["function"]["name"]: tool for tool in client.get("/api/v1/tools").json()}
    properties = manifest[name]["function"]["parameters"]["properties"]
    occurred_at, session = properties["occurred_at"], properties["session"]
    assert occurred_at["type"] == session["type"] == "string"
    assert "ISO 8601" in occurred_at["description"]
    assert "user's local time" in occurred_at["description"]
    assert session["maxLength"] == 100
    pattern = re.compile(occurred_at["pattern"])
    for good in (
        "2023-05-08",
        "2023-05-08T13:56",
        "2023-05-08T13:56:00Z",
        "2023-05-08 13:56:00+02:00",
    ):
        assert pattern.match(good), good
    for bad in ("May 2023", "2023-5-8", "20230508", "2023-05-08T13"):
        assert not pattern.match(bad), bad


@pytest.mark.parametrize("name", TOOLS)
def test_manifest_schema_and_endpoint_agree(
    client, call_tool, alice, alice_agent, alice_token, name
):
    manifest = {tool["function"]["name"]: tool for tool in client.get("/api/v1/tools").json()}
    validator = jsonschema.Draft202012Validator(manifest[name]["function"]["parameters"])
    valid, invalid = CALLS[name]

    memory_upsert(user=alice, key="fact:seeded", value="seed", actor=Actor.for_agent(alice_agent))
    document_write(
        user=alice, path="notes/seeded.md", content="seed", actor=Actor.for_agent(alice_agent)
    )
    document_write(user=alice, path="BOOTSTRAP.md", content="ritual", actor=Actor.for_user(alice))
    seeded = work_create(
        user=alice, title="Seeded", body="seed", actor=Actor.for_agent(alice_agent)
    )
    valid, invalid = (
        {field: seeded.pk if value == SEEDED_WORK else value for field, value in call.items()}
        for call in (valid, invalid)
    )
    assert validator.is_valid(invalid) is False
    refused = call_tool(alice_token, name, invalid)
    assert refused.status_code == 400, refused.content
    assert validator.is_valid({**valid, "unexpected": 1}) is False
    assert call_tool(alice_token, name, {**valid, "unexpected": 1}).status_code == 400

    assert validator.is_valid(valid) is True
    accepted = call_tool(alice_token, name, valid)
    assert accepted.status_code in (200, 201), accepted.content


def test_manifest_is_public_and_needs_no_token(client):
    assert client.get("/api/v1/tools").status_code == 200


# --- create_agent_token ------------------------------------------------------------------


def test_create_agent_token_prints_a_working_token(alice, call_tool):
    out, err = StringIO(), StringIO()
    call_command("create_agent_token", "alice", "helper", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    assert raw.startswith("mnemo_")
    assert "shown only this once" in err.getvalue()
    agent = Agent.objects.get(user=alice, name="helper")
    assert agent.tokens.get().token_hash != raw  # only the hash is stored

    response = call_tool(raw, "create_memory", {"key": "fact:cli", "value": "made by a CLI token"})
    assert response.status_code == 201
    assert Memory.objects.get(user=alice, key="fact:cli").history.get().actor_agent == agent


def test_create_agent_token_reuses_the_agent(alice, alice_agent):
    call_command("create_agent_token", "alice", "assistant", stdout=StringIO(), stderr=StringIO())
    assert Agent.objects.filter(user=alice).count() == 1
    assert alice_agent.tokens.count() == 1


def test_create_agent_token_refuses_unknown_user_and_a_name_too_long(alice):
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("create_agent_token", "nobody", "x", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="at most 100 characters"):
        call_command("create_agent_token", "alice", "Я" * 101, stdout=StringIO())
    assert not Agent.objects.filter(user=alice).exists()


def test_create_agent_token_takes_a_name_in_any_script(alice):
    err = StringIO()
    call_command("create_agent_token", "alice", "Асистент", stdout=StringIO(), stderr=err)
    call_command(
        "create_agent_token",
        "alice",
        "claude-desktop",
        "--display-name",
        " Claude\tDesktop ",
        stdout=StringIO(),
        stderr=StringIO(),
    )
    call_command("create_agent_token", "alice", "Bad Name", stdout=StringIO(), stderr=StringIO())

    assert list(
        Agent.objects.filter(user=alice).order_by("name").values_list("name", "display_name")
    ) == [("asistent", "Асистент"), ("bad-name", "Bad Name"), ("claude-desktop", "Claude Desktop")]
    assert "for agent 'Асистент' ('asistent' in paths and tokens)" in err.getvalue()
