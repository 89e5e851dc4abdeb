"""The production shape (docker-compose.yml) on one machine: a Redis-protocol server as
Celery's broker and the shared cache, two web processes (two compose `web` replicas of one
gunicorn worker each) and two Celery workers, all on one PostgreSQL: the test session's.

Scaling out is then the same code path as in compose, not only a file: writes through
either web process are embedded by whichever worker takes the task, the embedding request
is coalesced through the shared cache, the API's rate limit counts one token's requests in
both web processes together, and a worker killed with SIGKILL leaves the queue to the other.

The processes start once for the module (~20 s on a loaded machine); each test is
transactional, so they see the rows it commits, and starts from an empty cache. The tests
run in file order: the last one kills a worker.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

import pytest
import redis
from django.core.cache import cache
from django.core.management import call_command
from django.test import override_settings

import config.settings as production_settings
from lib.stack import valkey_binary
from memory.models import Memory
from profiles.services import token_create
from search.embeddings import get_embedder, reset_embedder
from search.indexing import LEASE_KEY, PENDING_KEY
from tests.factories import AgentFactory, UserFactory
from tests.search.conftest import database_url

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
START_SECONDS = 60
VECTORS_SECONDS = 20
QUIET_SECONDS = 20
API_RATE = 20  # per minute, for every token, in both web processes together
LOG_TAIL_CHARS = 6000
RECEIVED = re.compile(r"Task search\.tasks\.embed_pending\[[^\]]+\] received")
SUCCEEDED = re.compile(r"Task search\.tasks\.embed_pending\[[^\]]+\] succeeded in \S+s: (\d+)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Process:
    """One program in its own process group, its output in a log file."""

    name: str
    log_path: Path
    popen: subprocess.Popen

    @classmethod
    def start(cls, name: str, command: list[str], *, env: dict[str, str], log_dir: Path) -> Process:
        log_path = log_dir / f"{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a kill of the group reaches gunicorn's worker too
            )
        return cls(name, log_path, popen)

    def log(self, since: int = 0) -> str:
        try:
            return self.log_path.read_text(errors="replace")[since:]
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole group, as the OOM killer or a pulled plug would."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)


@dataclass
class Shape:
    """The running processes; database 0 of the server is the broker, database 1 the cache."""

    redis_port: int
    server: Process
    webs: list[Process]
    workers: list[Process]
    web_ports: list[int]
    killed: set[str] = field(default_factory=set)

    @property
    def processes(self) -> list[Process]:
        return [self.server, *self.webs, *self.workers]

    @functools.cached_property
    def broker(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.redis_port, db=0, socket_timeout=5)

    @functools.cached_property
    def cache_db(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.redis_port, db=1, socket_timeout=5)

    def logs(self) -> str:
        return "".join(
            f"\n--- {process.name} ({process.log_path}) ---\n{process.log()[-LOG_TAIL_CHARS:]}"
            for process in self.processes
        )


def wait_for(
    condition: Callable[[], object],
    *,
    seconds: float,
    what: str | Callable[[], str],
    logs: Callable[[], str] = lambda: "",
) -> None:
    """Poll until `condition` is truthy; else fail saying what did not happen (and the
    processes' logs, where no report section will carry them)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            said = what if isinstance(what, str) else what()
            pytest.fail(f"{said} did not happen within {seconds:g} s{logs()}")
        time.sleep(0.05)


def app_environment(*, redis_port: int, data_dir: Path) -> dict[str, str]:
    """What compose gives web and worker, aimed at the test database; nothing of the test
    process's own configuration (its throwaway data dir, broker, cache or provider)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CELERY_", "CACHE_", "OPENAI_", "DJANGO_", "DATABASE_", "MNEMO_"))
        and name.upper() not in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    }
    return env | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
        "CACHE_URL": f"redis://127.0.0.1:{redis_port}/1",
        "SECRET_KEY": "production-shape-under-test",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "MNEMO_EMBEDDING_PROVIDER": "local",
        # The facts below come from one template, so they are near-duplicates of each
        # other; this test is about web processes and workers, not about merging.
        "MNEMO_MERGE_NEAR_DUPLICATES": "false",
        "MNEMO_API_RATE": f"{API_RATE}/min",
        "MNEMO_DATA_DIR": str(data_dir),
        "MNEMO_STATIC_ROOT": str(data_dir / "staticfiles"),
        "NO_PROXY": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
    }


def http_get_status(port: int, path: str) -> int | None:
    """The status, or None while nothing answers. The master listens before its worker has
    loaded Django; a request sent then waits in the queue, so wait long enough for it."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}{path}", timeout=START_SECONDS) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


@pytest.fixture(scope="module")
def production(django_db_setup, tmp_path_factory) -> Iterator[Shape]:
    """Valkey, two gunicorn web processes and two Celery workers on the test database, as
    compose runs them; all killed (process groups) at the end of the module."""
    root = tmp_path_factory.mktemp("production-shape")
    data_dir, log_dir = root / "data", root / "logs"
    data_dir.mkdir()
    log_dir.mkdir()
    redis_port = _free_port()
    env = app_environment(redis_port=redis_port, data_dir=data_dir)  # the test database's
    server = Process.start(
        "valkey",
        [
            str(valkey_binary()),
            *("--port", str(redis_port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", str(root)),
        ],
        env=env,
        log_dir=log_dir,
    )
    shape = Shape(redis_port=redis_port, server=server, webs=[], workers=[], web_ports=[])
    try:
        wait_for(
            lambda: _pings(shape), seconds=10, what=f"valkey on port {redis_port}", logs=shape.logs
        )
        for number in (1, 2):
            shape.workers.append(
                Process.start(
                    f"worker-{number}",
                    [
                        *(sys.executable, "-m", "celery", "-A", "config", "worker"),
                        *("--loglevel", "INFO", "--pool", "solo", "-n", f"w{number}@%h"),
                    ],
                    env=env,
                    log_dir=log_dir,
                )
            )
        collect_static(data_dir / "staticfiles")  # while the workers start
        for number in (1, 2):
            port = _free_port()
            shape.web_ports.append(port)
            shape.webs.append(
                Process.start(
                    f"web-{number}",
                    [
                        *(sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.conf.py"),
                        *("--bind", f"127.0.0.1:{port}"),
                    ],
                    env=env | {"WEB_CONCURRENCY": "1"},
                    log_dir=log_dir,
                )
            )

        def up() -> bool:
            for process in shape.processes:
                if not process.alive():
                    pytest.fail(
                        f"{process.name} exited with {process.popen.returncode}{shape.logs()}"
                    )
            serving = all(http_get_status(port, "/login/") == 200 for port in shape.web_ports)
            ready = [
                f"w{n}@" in worker.log() and " ready." in worker.log()
                for n, worker in enumerate(shape.workers, 1)
            ]
            return serving and ready == [True, True]

        wait_for(
            up,
            seconds=START_SECONDS,
            what="/login/ 200 from both web processes and both workers ready",
            logs=shape.logs,
        )
        yield shape
    finally:
        for process in reversed(shape.processes):
            process.kill()
        shape.broker.close()
        shape.cache_db.close()


def collect_static(static_root: Path) -> None:
    """What the image's build does (Dockerfile), with the production storage, in this
    process while the workers start. Without the API docs' and the admin's files, which
    nothing here requests and whose compression would take most of the start-up."""
    with override_settings(STATIC_ROOT=static_root, STORAGES=production_settings.STORAGES):
        call_command(
            "collectstatic",
            interactive=False,
            verbosity=0,
            ignore_patterns=["drf_spectacular_sidecar", "admin", "rest_framework"],
        )


def _pings(shape: Shape) -> bool:
    if not shape.server.alive():
        pytest.fail(f"valkey exited with {shape.server.popen.returncode}{shape.logs()}")
    try:
        return bool(shape.broker.ping())
    except redis.RedisError:
        return False


@dataclass
class Run:
    """One test's view of the shape: where each log was when it started."""

    shape: Shape
    item: pytest.Item
    offsets: dict[str, int]

    def since(self, process: Process) -> str:
        return process.log(self.offsets[process.name])

    def received(self) -> int:
        return sum(len(RECEIVED.findall(self.since(worker))) for worker in self.shape.workers)

    def runs(self, worker: Process) -> list[int]:
        """What each embed_pending the worker finished in this test returned (rows embedded)."""
        return [int(count) for count in SUCCEEDED.findall(self.since(worker))]

    def wait(self, condition: Callable[[], object], *, seconds: float, what: str) -> None:
        wait_for(condition, seconds=seconds, what=what)  # the report carries the logs

    def assert_served(self, tool: str, counts: list[int]) -> None:
        """Each web process's access log shows this many calls of the tool. A line is
        written just after its response is sent, so the last one may take an instant."""

        def served() -> list[int]:
            line = f'"POST /api/v1/tools/{tool} HTTP/1.1"'
            return [self.since(web).count(line) for web in self.shape.webs]

        deadline = time.monotonic() + 5
        while served() != counts and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served() == counts


def quiet_state(shape: Shape) -> dict[str, object]:
    """What is in flight: tasks queued and unacknowledged (in a worker's hands), the
    runner's lease, and tasks each live worker received but has not finished."""
    broker = shape.broker
    return {
        "queued": broker.llen("celery"),
        "unacked": broker.hlen("unacked"),
        "lease": cache.get(LEASE_KEY),
        "unfinished": {
            worker.name: len(RECEIVED.findall(worker.log())) - len(SUCCEEDED.findall(worker.log()))
            for worker in shape.workers
            if worker.name not in shape.killed
        },
    }


def wait_until_quiet(
    shape: Shape, *, lease_free: bool = True, logs: Callable[[], str] = lambda: ""
) -> None:
    """No task queued or running (twice, 0.2 s apart: a task between a worker's fetch and
    its bookkeeping is not visible for an instant). lease_free=False: a lease in the cache
    is no reason to wait (this process holds it, or it is stale)."""
    states: list[dict[str, object]] = []

    def quiet() -> bool:
        state = quiet_state(shape)
        states.append(state)
        return (
            state["queued"] == state["unacked"] == 0
            and (state["lease"] is None or not lease_free)
            and not any(state["unfinished"].values())  # type: ignore[union-attr]
        )

    def settled() -> bool:
        if not quiet():
            return False
        time.sleep(0.2)
        return quiet()

    wait_for(
        settled,
        seconds=QUIET_SECONDS,
        what=lambda: f"an empty queue and no runner (last seen: {states[-1]})",
        logs=logs,
    )


@pytest.fixture
def run(production, transactional_db, settings, request) -> Iterator[Run]:
    """This process reads the shared cache too (the pending flag, the lease) and embeds
    with the local model, to check the workers' vectors; the cache starts empty."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{production.redis_port}/1",
        }
    }
    settings.MNEMO_EMBEDDING_PROVIDER = "local"
    for process in production.processes:
        if process.name not in production.killed and not process.alive():
            pytest.fail(f"{process.name} has exited{production.logs()}")
    # No task is queued or running, so a lease still in the cache is no runner's (an
    # earlier test's, say): the cache is emptied.
    wait_until_quiet(production, lease_free=False, logs=production.logs)
    production.cache_db.flushdb()
    offsets = {process.name: len(process.log()) for process in production.processes}
    yield Run(shape=production, item=request.node, offsets=offsets)
    reset_embedder()


def logs_on_failure(test: Callable[..., None]) -> Callable[..., None]:
    """A failing test's report carries every process's log as a section."""

    @functools.wraps(test)
    def wrapper(*args: object, **kwargs: object) -> None:
        current: Run = kwargs["run"]  # type: ignore[assignment]
        try:
            test(*args, **kwargs)
        except BaseException:
            for process in current.shape.processes:
                current.item.add_report_section(
                    "call", f"log {process.name} {process.log_path}", process.log()
                )
            raise

    return wrapper


def agent_token(username: str) -> str:
    """An agent and its token, made in this process; committed at once (no transaction)."""
    agent = AgentFactory(user=UserFactory(username=username), name="assistant")
    return token_create(agent=agent).raw


def call(port: int, token: str, tool: str, body: dict) -> tuple[int, dict, Message]:
    """POST one tool call to one web process: (status, JSON body, headers by any case)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/tools/{tool}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=15) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read()), error.headers


def write_memories(run: Run, token: str, values: dict[str, str]) -> None:
    """create_memory for each key, alternating between the two web processes."""
    for number, (key, value) in enumerate(values.items()):
        port = run.shape.web_ports[number % 2]
        status, body, _ = call(port, token, "create_memory", {"key": key, "value": value})
        assert (status, body["created"], body["memory"]["value"]) == (201, True, value), body


def wait_for_vectors(run: Run, username: str, count: int) -> list[Memory]:
    model = get_embedder().model

    def embedded() -> bool:
        rows = Memory.objects.filter(user__username=username)
        return rows.count() == count and all(
            row.embedding is not None and row.embedding_model == model for row in rows
        )

    run.wait(embedded, seconds=VECTORS_SECONDS, what=f"local vectors for {count} memories")
    return list(Memory.objects.filter(user__username=username).order_by("key"))


def assert_local_vectors(rows: list[Memory]) -> None:
    """Each stored vector is what this process's local model makes of the row's value."""
    for row, want in zip(rows, get_embedder().embed([row.value for row in rows]), strict=True):
        assert list(row.embedding) == pytest.approx(want, abs=1e-6), row.key


def facts(prefix: str, count: int) -> dict[str, str]:
    topics = ["tea", "trains", "jazz", "sailing", "chess", "ramen", "hiking", "poetry"]
    return {
        f"fact:{prefix}-{n}": f"The user {prefix} note {n}: likes {topics[n % len(topics)]} "
        f"and mentioned it on day {n + 3}"
        for n in range(count)
    }


@logs_on_failure
def test_writes_through_both_web_processes_are_embedded_by_the_workers(run):
    token = agent_token("alice")
    values = facts("both", 10)

    write_memories(run, token, values)

    # Each web process served half of them: two processes, not one behind two ports.
    run.assert_served("create_memory", [5, 5])
    rows = wait_for_vectors(run, "alice", 10)
    assert {row.key: row.value for row in rows} == values
    assert_local_vectors(rows)
    wait_until_quiet(run.shape)
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)
    # One runner at a time across both workers (the lease in the shared cache), so each
    # row was embedded exactly once, however the runs split them.
    assert sum(sum(run.runs(worker)) for worker in run.shape.workers) == 10


@logs_on_failure
def test_one_embedding_request_for_a_burst_through_both_web_processes(run):
    token = agent_token("alice")
    # A runner is busy (this process holds the lease): the first write raises the pending
    # flag in the shared cache and sends the one task, which leaves the work to the lease
    # holder; every later write, through either web process, sees the flag and sends none.
    assert cache.add(LEASE_KEY, "a runner in the test process", 60)

    write_memories(run, token, facts("burst", 6))

    run.assert_served("create_memory", [3, 3])
    wait_until_quiet(run.shape, lease_free=False)
    assert run.received() == 1
    assert sorted(count for worker in run.shape.workers for count in run.runs(worker)) == [0]
    assert cache.get(PENDING_KEY) == 1
    assert Memory.objects.filter(user__username="alice", embedding__isnull=True).count() == 6

    # The holder lets go; the next write's request reaches a worker, whose run embeds all.
    cache.delete(LEASE_KEY)
    cache.delete(PENDING_KEY)
    write_memories(run, token, {"fact:burst-last": "The user burst note last: likes kites"})

    rows = wait_for_vectors(run, "alice", 7)
    assert_local_vectors(rows)
    wait_until_quiet(run.shape)
    assert run.received() == 2
    assert sorted(count for worker in run.shape.workers for count in run.runs(worker)) == [0, 7]
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)


@logs_on_failure
def test_the_api_rate_limit_counts_both_web_processes_together(run):
    token = agent_token("alice")
    other_token = agent_token("bob")
    answers = []

    for number in range(30):
        port = run.shape.web_ports[number % 2]
        answers.append(call(port, token, "list_memories", {}))

    statuses = [status for status, _, _ in answers]
    # With a cache per process each would allow 20 of its 15: all 30 would pass.
    assert statuses == [200] * API_RATE + [429] * 10
    run.assert_served("list_memories", [15, 15])
    for _, body, headers in answers[API_RATE:]:
        assert body["error"]["code"] == "rate_limited"
        assert 1 <= int(headers["Retry-After"]) <= 60
    # Per token: another agent's token is still served by both processes.
    assert [call(port, other_token, "list_memories", {})[0] for port in run.shape.web_ports] == [
        200,
        200,
    ]


@logs_on_failure
def test_a_worker_killed_with_sigkill_leaves_the_queue_to_the_other(run):
    token = agent_token("alice")
    write_memories(run, token, facts("before", 4))
    wait_for_vectors(run, "alice", 4)
    wait_until_quiet(run.shape)  # no task in flight: no lease dies with the worker
    assert sum(sum(run.runs(worker)) for worker in run.shape.workers) == 4

    killed, survivor = run.shape.workers
    killed.kill()
    run.shape.killed.add(killed.name)
    assert killed.popen.returncode == -signal.SIGKILL
    survivor_offset = len(survivor.log())

    write_memories(run, token, facts("after", 4))

    rows = wait_for_vectors(run, "alice", 8)
    assert_local_vectors(rows)
    wait_until_quiet(run.shape)
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)
    # The four rows written after the kill were embedded by the survivor, each once.
    after_kill = [int(count) for count in SUCCEEDED.findall(survivor.log(survivor_offset))]
    assert sum(after_kill) == 4
    assert not killed.alive()
