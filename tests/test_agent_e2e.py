"""An agent's session over real HTTP: register the tools, write memories, fetch the block."""

import concurrent.futures
import json
import threading
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

EXPECTED_BLOCK = """### About you
Kevin (Head of Growth) at YARNNN
Timezone: Asia/Singapore

### Your preferences
- slack: tone: casual, verbosity: brief
- gmail: verbosity: detailed

### What I've noticed
- Note: always include TL;DR
- Prefers: bullet points in reports
"""


class Agent:
    """What an agent runtime does: HTTP with a bearer token, JSON in and out."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url
        self.token = token

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict, str]:
        request = urllib.request.Request(
            self.base_url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()

    def call(self, tool: str, **arguments: object) -> tuple[int, dict]:
        status, _, text = self.request("POST", f"/api/v1/tools/{tool}", arguments)
        return status, json.loads(text)


def test_agent_writes_memories_and_reads_the_working_memory(live_server, alice_token):
    agent = Agent(live_server.url, alice_token)

    status, _, manifest = agent.request("GET", "/api/v1/tools")
    assert status == 200
    tools = {tool["function"]["name"] for tool in json.loads(manifest)}
    assert {"create_memory", "update_memory", "delete_memory"} <= tools

    writes = [
        ("name", "Kevin"),
        ("role", "Head of Growth"),
        ("company", "YARNNN"),
        ("timezone", "Asia/Singapore"),
        ("tone_slack", "casual"),
        ("verbosity_slack", "brief"),
        ("verbosity_gmail", "detailed"),
        ("preference:bullets", "bullet points in reports"),
        ("fact:wrong", "this one gets deleted"),
        ("instruction:tldr", "always include TL;DR"),
    ]
    for key, value in writes:
        assert agent.call("create_memory", key=key, value=value)[0] == 201
    assert agent.call("delete_memory", key="fact:wrong")[0] == 200
    assert agent.call("update_memory", key="verbosity_gmail", value="detailed")[0] == 200

    status, headers, text = agent.request("GET", "/api/v1/working-memory")
    assert status == 200
    assert headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert text == EXPECTED_BLOCK
    assert headers["Server-Timing"].startswith("render;dur=")

    status, _, body = agent.request("GET", "/api/v1/working-memory?format=json&budget=500")
    assert status == 200
    block = json.loads(body)
    assert block["text"] == EXPECTED_BLOCK
    assert block["budget"] == 500
    assert 0 < block["tokens"] <= 500
    assert block["omitted"] == []
    assert len(block["included"]) == 9


def test_twenty_agents_appending_to_the_daily_log_at_once_lose_no_line(
    live_server, alice, alice_token
):
    agent = Agent(live_server.url, alice_token)
    lines = [f"entry {number:02d}" for number in range(20)]
    start = threading.Barrier(len(lines))

    def append(line: str) -> tuple[int, dict]:
        start.wait(timeout=30)
        return agent.call("append_daily_memory", content=line)

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(lines)) as pool:
        results = list(pool.map(append, lines))

    assert [status for status, _ in results] == [200] * len(lines)
    (path,) = {body["path"] for _, body in results}
    status, read = agent.call("memory_read", path=path)
    assert status == 200
    written = [line.split(" ", 2)[2] for line in read["content"].split("\n")]
    assert sorted(written) == lines
    assert len({body["version_id"] for _, body in results}) == len(lines)
