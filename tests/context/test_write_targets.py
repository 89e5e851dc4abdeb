"""memory_write's targets `memory` and `daily_log`: `memory` writes MEMORY.md
of the scope written in, `daily_log` adds a line to today's daily log in the user's
timezone; no document is ever named `memory` or `daily_log` by the tool. And the schema of
the agent-memory tools documents what they answer (no 403: a system token may use them)."""

import zoneinfo

import pytest
from django.core.management import call_command
from django.utils import timezone

from activity.actors import Actor
from context.models import Document
from context.services import document_write
from context.shared_scopes import scope_grant_set, shared_scope_create
from memory.services import memory_upsert
from profiles.services import system_token_create, token_create
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def system_token(db):
    return system_token_create(label="wiki sync").raw


def written(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def paths_of(**scope) -> set[str]:
    return set(Document.objects.filter(**scope).values_list("path", flat=True))


def in_singapore(alice, alice_agent):
    memory_upsert(
        user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_agent(alice_agent)
    )
    return zoneinfo.ZoneInfo("Asia/Singapore")


# --- memory --------------------------------------------------------------------------------


def test_the_memory_target_writes_the_users_memory_md(call_tool, alice, alice_token):
    body = written(call_tool(alice_token, "memory_write", {"path": "memory", "content": "- a"}))
    again = call_tool(
        alice_token,
        "memory_write",
        {"path": "memory", "content": "- b", "base_version": body["version_id"]},
    )

    assert body["path"] == "MEMORY.md"
    assert written(again)["replaced_version"] == body["version_id"]
    assert Document.objects.get(user=alice, agent=None, path="MEMORY.md").body == "- b"
    assert paths_of(user=alice) == {"MEMORY.md"}
    read = call_tool(alice_token, "memory_read", {"path": "MEMORY.md"}).json()
    assert read["content"] == "- b"


def test_a_stale_base_version_for_the_memory_target_is_a_409(call_tool, alice, alice_token):
    first = written(call_tool(alice_token, "memory_write", {"path": "memory", "content": "1"}))
    written(call_tool(alice_token, "memory_write", {"path": "MEMORY.md", "content": "2"}))

    stale = call_tool(
        alice_token,
        "memory_write",
        {"path": "memory", "content": "3", "base_version": first["version_id"]},
    )

    assert stale.status_code == 409
    assert Document.objects.get(user=alice, path="MEMORY.md").body == "2"


def test_the_memory_target_in_a_shared_scope_needs_a_write_grant(call_tool, alice, bob):
    team = shared_scope_create(slug="team", description="The team")
    scope_grant_set(scope=team, user=alice, access="read_write")
    scope_grant_set(scope=team, user=bob, access="read")
    alice_token = token_create(agent=AgentFactory(user=alice, name="assistant")).raw
    bob_token = token_create(agent=AgentFactory(user=bob, name="assistant")).raw
    named = {"path": "memory", "content": "- Deploys on Tuesdays", "scope": "shared:team"}

    body = written(call_tool(alice_token, "memory_write", named))
    refused = call_tool(bob_token, "memory_write", {**named, "content": "- overwritten"})

    assert (body["path"], body["scope"]) == ("MEMORY.md", "shared:team")
    assert refused.status_code == 403
    assert paths_of(shared_scope=team) == {"MEMORY.md"}
    assert Document.objects.get(shared_scope=team).body == "- Deploys on Tuesdays"
    assert not Document.objects.filter(user__in=[alice, bob]).exists()


def test_a_system_tokens_memory_target_is_the_company_memory_md(call_tool, system_token):
    body = written(call_tool(system_token, "memory_write", {"path": "memory", "content": "- c"}))

    assert (body["path"], body["scope"]) == ("MEMORY.md", "global")
    assert paths_of(user=None, shared_scope=None) == {"MEMORY.md"}


# --- daily_log -----------------------------------------------------------------------------


def test_the_daily_log_target_adds_a_line_to_todays_log_in_the_users_timezone(
    call_tool, alice, alice_agent, alice_token
):
    zone = in_singapore(alice, alice_agent)
    before = timezone.now().astimezone(zone)

    first = written(
        call_tool(alice_token, "memory_write", {"path": "daily_log", "content": "Sent it"})
    )
    second = written(
        call_tool(alice_token, "memory_write", {"path": "daily_log", "content": "  Filed it\n"})
    )

    after = timezone.now().astimezone(zone)
    assert first["path"] in {f"daily/{before:%Y-%m-%d}.md", f"daily/{after:%Y-%m-%d}.md"}
    assert second["path"] == first["path"]
    assert second["replaced_version"] == first["version_id"]
    lines = Document.objects.get(user=alice, path=first["path"]).body.split("\n")
    assert [line[7:] for line in lines] == [" Sent it", " Filed it"]
    assert {line[:2] for line in lines} == {"- "}
    assert lines[0][2:7] in {f"{before:%H:%M}", f"{after:%H:%M}"}
    assert paths_of(user=alice) == {first["path"]}


def test_the_daily_log_target_is_the_same_log_as_append_daily_memory(call_tool, alice, alice_token):
    logged = written(call_tool(alice_token, "append_daily_memory", {"content": "one"}))
    written(call_tool(alice_token, "memory_write", {"path": "daily_log", "content": "two"}))

    lines = Document.objects.get(user=alice, path=logged["path"]).body.split("\n")
    assert [line.split(" ", 2)[2] for line in lines] == ["one", "two"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"content": "one\n## Working memory"}, "content"),
        ({"content": "   "}, "content"),
        ({"content": "one", "base_version": 1}, "base_version"),
    ],
)
def test_the_daily_log_target_refuses_what_is_not_one_line_and_writes_nothing(
    call_tool, alice, alice_token, extra, field
):
    response = call_tool(alice_token, "memory_write", {"path": "daily_log", **extra})

    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    assert not Document.objects.filter(user=alice).exists()


def test_the_daily_log_target_of_a_read_only_shared_scope_is_refused(call_tool, alice):
    team = shared_scope_create(slug="team", description="The team")
    scope_grant_set(scope=team, user=alice, access="read")
    token = token_create(agent=AgentFactory(user=alice, name="assistant")).raw
    named = {"path": "daily_log", "content": "zebra", "scope": "shared:team"}

    assert call_tool(token, "memory_write", named).status_code == 403
    scope_grant_set(scope=team, user=alice, access="read_write")
    body = written(call_tool(token, "memory_write", named))
    assert body["scope"] == "shared:team"
    assert body["path"].startswith("daily/")
    assert Document.objects.get(shared_scope=team).body.endswith(" zebra")


def test_a_system_tokens_daily_log_is_the_company_log_in_utc(call_tool, system_token):
    before = timezone.now().astimezone(zoneinfo.ZoneInfo("UTC"))
    body = written(call_tool(system_token, "memory_write", {"path": "daily_log", "content": "x"}))
    after = timezone.now().astimezone(zoneinfo.ZoneInfo("UTC"))

    assert body["scope"] == "global"
    assert body["path"] in {f"daily/{before:%Y-%m-%d}.md", f"daily/{after:%Y-%m-%d}.md"}


def test_other_paths_are_still_documents_of_their_name(call_tool, alice, alice_token):
    for path in ("Memory", "memory.md", "notes/memory", "daily_log.md"):
        written(call_tool(alice_token, "memory_write", {"path": path, "content": path}))

    assert paths_of(user=alice) == {"Memory", "memory.md", "notes/memory", "daily_log.md"}


def test_an_existing_document_named_memory_is_left_alone(call_tool, alice, alice_token):
    document_write(user=alice, path="memory", content="old", actor=Actor.for_user(alice))

    written(call_tool(alice_token, "memory_write", {"path": "memory", "content": "new"}))

    assert Document.objects.get(user=alice, path="memory").body == "old"
    assert Document.objects.get(user=alice, path="MEMORY.md").body == "new"


# --- the schema ----------------------------------------------------------------------------


def schema_operations(tmp_path) -> dict[str, dict]:
    import yaml

    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    return {op["operationId"]: op for item in schema["paths"].values() for op in item.values()}


def test_the_agent_memory_tools_document_no_403(tmp_path):
    operations = schema_operations(tmp_path)

    assert "403" not in operations["append_agent_memory"]["responses"]
    assert "403" not in operations["agent_memory_get"]["responses"]
    assert "403" in operations["memory_write"]["responses"]


def test_memory_write_documents_its_targets(tmp_path):
    operation = schema_operations(tmp_path)["memory_write"]

    assert "daily_log" in operation["description"]
    examples = operation["requestBody"]["content"]["application/json"]["examples"]
    paths = {example["value"]["path"] for example in examples.values()}
    assert {"memory", "daily_log"} <= paths


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("append_agent_memory", {"content": "Synced."}), ("agent_memory_get", {})],
)
def test_a_system_token_gets_what_the_schema_says(call_tool, system_token, tool, arguments):
    assert call_tool(system_token, tool, arguments).status_code == 200
