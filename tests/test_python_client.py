"""The Python client in clients/python: generated from the live schema, one method per tool
with the tool's parameters, and real calls against the live test server."""

import importlib.util
import inspect
import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from activity.actors import Actor
from memory.models import Memory, MemoryProposal
from memory.services import memory_upsert

CLIENT_DIR = Path(__file__).resolve().parent.parent / "clients" / "python"
sys.path.insert(0, str(CLIENT_DIR / "src"))

from mnemo_client import (  # noqa: E402 - imported from the checkout, not installed
    TOOL_NAMES,
    AuthenticationError,
    Conflict,
    InvalidRequest,
    MnemoClient,
    MnemoConnectionError,
    MnemoError,
    NotFound,
    RateLimited,
    SecretRefused,
)
from mnemo_client import client as client_module  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)

# The hand-written GET methods and the endpoints they call.
GET_METHODS = {
    "list_tools": "/api/v1/tools",
    "working_memory": "/api/v1/working-memory",
    "profile": "/api/v1/profile",
    "profile_memory": "/api/v1/profile-memory",
    "system_prompt": "/api/v1/system-prompt",
    "get_turn": "/api/v1/turns/{turn_id}",
}


def fetch_json(url: str, accept: str = "application/json") -> object:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def live_schema(live_server) -> dict:
    return fetch_json(f"{live_server.url}/api/schema/", "application/vnd.oai.openapi+json")


@pytest.fixture
def mnemo(live_server, alice_token):
    return MnemoClient(live_server.url, alice_token, timeout=10, max_retries=0)


def load_generator():
    spec = importlib.util.spec_from_file_location("mnemo_generate", CLIENT_DIR / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parameters(method) -> tuple[list[str], list[str]]:
    """A method's (required, optional) parameter names, self left out."""
    required, optional = [], []
    for name, parameter in inspect.signature(method).parameters.items():
        if name == "self":
            continue
        (required if parameter.default is inspect.Parameter.empty else optional).append(name)
    return required, optional


# Checked against the schema.


def test_the_generated_module_is_what_the_live_schema_generates(live_schema):
    generate = load_generator()
    expected = generate.ruff_format(generate.render(live_schema))
    assert generate.OUT.read_text() == expected, (
        "clients/python/src/mnemo_client/_tools.py is stale: run "
        "`python manage.py spectacular --format openapi-json | python clients/python/generate.py`"
    )


def test_every_tool_of_the_live_manifest_is_a_method_with_its_parameters(live_server):
    manifest = fetch_json(f"{live_server.url}/api/v1/tools")
    names = [tool["function"]["name"] for tool in manifest]
    assert sorted(TOOL_NAMES) == sorted(names)
    for tool in manifest:
        function = tool["function"]
        schema = function["parameters"]
        method = getattr(MnemoClient, function["name"], None)
        assert callable(method), f"MnemoClient has no method {function['name']}"
        required, optional = parameters(method)
        assert sorted(required) == sorted(schema.get("required", [])), function["name"]
        assert sorted(required + optional) == sorted(schema["properties"]), function["name"]
        for name in optional:
            parameter = inspect.signature(method).parameters[name]
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, (function["name"], name)
            assert parameter.default is None, (function["name"], name)


def test_the_get_methods_take_the_endpoints_parameters(live_schema):
    for method_name, path in GET_METHODS.items():
        operation = live_schema["paths"][path]["get"]
        expected_required = sorted(
            p["name"] for p in operation.get("parameters", []) if p.get("required")
        )
        expected_all = sorted(p["name"] for p in operation.get("parameters", []))
        required, optional = parameters(getattr(MnemoClient, method_name))
        assert sorted(required) == expected_required, method_name
        assert sorted(required + optional) == expected_all, method_name


def test_report_turn_takes_the_endpoints_body(live_schema):
    body = live_schema["components"]["schemas"]["TurnReportRequest"]
    required, optional = parameters(MnemoClient.report_turn)
    assert sorted(required) == sorted(body["required"])
    assert sorted(required + optional) == sorted(body["properties"])


# Against the live server.


def test_create_get_and_search_a_memory(mnemo, alice):
    created = mnemo.create_memory(
        "preference:report-format", "Short bullet points, numbers first", tags=["reports"]
    )
    assert (created["status"], created["created"]) == ("created", True)
    assert created["memory"]["value"] == "Short bullet points, numbers first"
    assert created["memory"]["tags"] == ["reports"]
    assert created["memory"]["source"] == "tp_extracted"

    memory = mnemo.get_memory("preference:report-format")["memory"]
    assert (memory["key"], memory["value"]) == (
        "preference:report-format",
        "Short bullet points, numbers first",
    )

    hits = mnemo.search_memory("bullet points", limit=5)
    assert [hit["memory"]["key"] for hit in hits["results"]] == ["preference:report-format"]
    assert Memory.objects.get(user=alice, key="preference:report-format").tags == ["reports"]


def test_write_and_read_a_document(mnemo):
    written = mnemo.memory_write("notes/ideas.md", "# Ideas\n\nA memory for assistants.\n")
    assert (written["path"], written["scope"]) == ("notes/ideas.md", "user")

    document = mnemo.memory_read("notes/ideas.md")
    assert document["content"] == "# Ideas\n\nA memory for assistants.\n"
    assert document["version_id"] == written["version_id"]

    with pytest.raises(Conflict) as raised:
        mnemo.memory_write("notes/ideas.md", "stale", base_version=written["version_id"] + 99)
    assert (raised.value.status, raised.value.code) == (409, "version_conflict")
    assert mnemo.memory_read("notes/ideas.md")["content"] == document["content"]


def test_a_missing_memory_raises_not_found(mnemo):
    with pytest.raises(NotFound) as raised:
        mnemo.get_memory("fact:nothing-here")
    error = raised.value
    assert isinstance(error, MnemoError)
    assert (error.status, error.code) == (404, "not_found")
    assert "fact:nothing-here" in error.message


def test_bad_input_raises_with_the_field(mnemo, alice):
    with pytest.raises(InvalidRequest) as raised:
        mnemo.create_memory("facts:tea", "Green")
    assert (raised.value.status, raised.value.code, raised.value.field) == (400, "invalid", "key")
    assert not Memory.objects.filter(user=alice).exists()


def test_a_credential_raises_secret_refused(mnemo, alice):
    with pytest.raises(SecretRefused) as raised:
        mnemo.memory_store("The staging database password: Tr0ub4dor&3", "fact")
    error = raised.value
    assert (error.status, error.code, error.field) == (422, "secret_refused", "value")
    assert error.message == (
        "This looks like a password; Mnemo does not store credentials as memories."
    )
    assert not Memory.objects.filter(user=alice).exists()


def test_a_change_waiting_for_review_is_a_result(mnemo, alice):
    memory_upsert(user=alice, key="name", value="Kevin", actor=Actor.for_user(alice))

    result = mnemo.update_memory("name", value="Kev", reason="He signs as Kev.")

    assert result["status"] == "pending_review"
    proposal = MemoryProposal.objects.get(pk=result["proposal"]["id"])
    assert (proposal.key, proposal.status) == ("name", "pending_review")
    assert Memory.objects.get(user=alice, key="name").value == "Kevin"


def test_a_bad_token_raises_authentication_error(live_server):
    client = MnemoClient(live_server.url, "mnemo_not-a-token", max_retries=0)
    with pytest.raises(AuthenticationError) as raised:
        client.list_memories()
    assert raised.value.status == 401


def test_a_429_is_retried_after_retry_after(live_server, alice_token, settings, monkeypatch):
    settings.MNEMO_API_RATE = "2/s"
    waits: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(client_module.time, "sleep", sleep)
    client = MnemoClient(live_server.url, alice_token, max_retries=2)
    client.list_memories()
    client.list_memories()

    assert client.list_memories()["results"] == []  # the third call in the second waits
    assert waits == [1.0]


def test_without_retries_a_429_raises_with_retry_after(live_server, alice_token, settings):
    settings.MNEMO_API_RATE = "1/min"
    client = MnemoClient(live_server.url, alice_token, max_retries=0)
    client.list_memories()

    with pytest.raises(RateLimited) as raised:
        client.list_memories()
    assert (raised.value.status, raised.value.code) == (429, "rate_limited")
    assert 1 <= raised.value.retry_after <= 60


def test_a_wait_longer_than_max_retry_wait_raises_at_once(live_server, alice_token, settings):
    settings.MNEMO_API_RATE = "1/hour"
    client = MnemoClient(live_server.url, alice_token, max_retries=3, max_retry_wait=5)
    client.list_memories()
    started = time.monotonic()
    with pytest.raises(RateLimited):
        client.list_memories()
    assert time.monotonic() - started < 2


def test_the_get_endpoints(mnemo, alice):
    memory_upsert(user=alice, key="name", value="Kevin", actor=Actor.for_user(alice))

    block = mnemo.working_memory(budget=1000)
    assert isinstance(block, str)
    assert "Kevin" in block
    as_json = mnemo.working_memory(budget=1000, format="json")
    assert as_json["budget"] == 1000
    assert "name" in as_json["included"]

    assert mnemo.profile()["memory_paused"] is False
    assert "Kevin" in mnemo.system_prompt(budget=2000)["prompt"]
    assert sorted(tool["function"]["name"] for tool in mnemo.list_tools()) == sorted(TOOL_NAMES)


def test_report_a_turn_and_read_it_back(mnemo):
    turn = mnemo.report_turn("I prefer tea.", "Noted.", turn_id="turn-1")
    assert turn["turn_id"] == "turn-1"

    assert mnemo.get_turn(turn["id"])["id"] == turn["id"]
    with pytest.raises(NotFound):
        mnemo.get_turn(turn["id"] + 1000)


def test_another_users_token_sees_none_of_it(mnemo, live_server, bob_token):
    mnemo.create_memory("fact:tea", "Drinks green tea")
    bob = MnemoClient(live_server.url, bob_token, max_retries=0)

    with pytest.raises(NotFound):
        bob.get_memory("fact:tea")
    assert bob.list_memories()["results"] == []


def test_no_server_raises_a_connection_error():
    client = MnemoClient("http://127.0.0.1:9", "token", timeout=2, max_retries=0)
    with pytest.raises(MnemoConnectionError) as raised:
        client.list_memories()
    assert (raised.value.status, raised.value.code) == (None, "connection_error")
