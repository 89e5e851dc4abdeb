"""Fixtures for the indexing tests: the fake OpenAI server, provider settings, a real Celery
worker process, and a Redis broker."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import kombu.pools
import pytest
from django.conf import settings as django_settings
from django.db import connection

from config.celery import app as celery_app
from search.embeddings import reset_embedder
from tests.search.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
OPENAI_MODEL_ID = "openai:text-embedding-3-small:256"
DOCUMENT_PATH = "projects/alpha/notes.md"
# About 1,000 words: two chunks; the rare token is in the first, the first 680 words are in
# the first chunk only, the last 200 in the second only.
DOCUMENT = "Supplier ZK-40417 confirmed the shipment schedule for project alpha. " + " ".join(
    f"Meeting {n} covered budgets, hiring, the launch plan and customer feedback."
    for n in range(90)
)
WORKER_START_SECONDS = 60
WORKERS = pytest.StashKey[list["Worker"]]()


def wait_for(
    condition: Callable[[], object],
    *,
    seconds: float,
    what: str,
    log: Callable[[], str] = lambda: "",
) -> object:
    """Poll `condition` until it is truthy; fail saying `what` did not happen in time."""
    deadline = time.monotonic() + seconds
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {seconds:g} s{log()}")
        time.sleep(0.05)


# --- the fake OpenAI-compatible server and the provider settings ------------------------------


@pytest.fixture
def openai_server(monkeypatch) -> Iterator[FakeOpenAI]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def local_provider(settings):
    """The test process embeds with the local model, whatever the environment says."""
    settings.MNEMO_EMBEDDING_PROVIDER = "local"
    yield settings
    reset_embedder()


def use_openai(settings, server: FakeOpenAI, **overrides: object) -> None:
    """Point the test process's embedder at the fake server (fast failures, no backoff)."""
    values = {
        "MNEMO_EMBEDDING_PROVIDER": "openai",
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": server.url,
        "MNEMO_EMBEDDING_MODEL": "text-embedding-3-small",
        "MNEMO_EMBEDDING_DIMENSIONS": 256,
        "MNEMO_EMBEDDING_SEND_DIMENSIONS": "auto",
        "MNEMO_EMBEDDING_BATCH_SIZE": 64,
        "MNEMO_EMBEDDING_CONNECT_TIMEOUT": 2.0,
        "MNEMO_EMBEDDING_TIMEOUT": 5.0,
        "MNEMO_EMBEDDING_RETRIES": 0,
        "MNEMO_EMBEDDING_BACKOFF": 0.01,
        "MNEMO_EMBEDDING_BACKOFF_MAX": 0.1,
    } | overrides
    for name, value in values.items():
        setattr(settings, name, value)  # each change resets the cached embedder


# --- a real Celery worker ---------------------------------------------------------------------


def database_url() -> str:
    """A DATABASE_URL for the database this test uses (the test database, not `mnemo`)."""
    db = connection.settings_dict
    user, password = quote(db["USER"] or "", safe=""), quote(db["PASSWORD"] or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host, port, name = db["HOST"] or "", str(db["PORT"] or ""), quote(db["NAME"], safe="")
    if host.startswith("/"):  # a socket directory (the embedded server) goes in the query
        return f"postgres://{auth}/{name}?{urlencode({'host': host, 'port': port})}"
    return f"postgres://{auth}{host}{':' + port if port else ''}/{name}"


class Worker:
    """`celery -A config worker` in its own process group, its output in a log file."""

    def __init__(self, log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self.name = f"test-{uuid.uuid4().hex[:8]}@%h"
        # --skip-checks: Django's system checks (~0.7 s) are `manage.py check`'s business.
        command = [
            *(sys.executable, "-m", "celery", "--skip-checks", "-A", "config", "worker"),
            *("--pool", "solo", "--without-gossip", "--without-mingle", "--without-heartbeat"),
            *("--loglevel", "INFO", "--hostname", self.name),
        ]
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: a kill reaches everything it started
            )

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_suffix(self) -> str:
        return f"\n--- celery worker log ({self.log_path}) ---\n{self.log()}"

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                pytest.fail(
                    f"the celery worker exited with {self.process.returncode} before it was "
                    f"ready{self.log_suffix()}"
                )
            return " ready." in self.log()

        wait_for(
            ready, seconds=WORKER_START_SECONDS, what="the worker's 'ready.'", log=self.log_suffix
        )

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a pulled plug would: no shutdown, no acks."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it died on its own just now
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def worker_environment(**overrides: str) -> dict[str, str]:
    """The test process's environment, aimed at the test database, with the embedding and
    broker settings spelled out so a developer's own variables cannot leak in."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "MNEMO_EMBEDDING_", "CELERY_", "DJANGO_"))
        and name not in PROXY_VARIABLES
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "DATABASE_CONN_MAX_AGE": "0",
        "SECRET_KEY": "celery-worker-under-test",
        # The same data dir, hence the same filesystem broker folders as this process.
        "MNEMO_DATA_DIR": str(django_settings.DATA_DIR),
        "CELERY_BROKER_URL": celery_app.conf.broker_url,
        "MNEMO_EMBEDDING_PROVIDER": "local",
        "NO_PROXY": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
    }
    return env | overrides


@pytest.fixture
def start_worker(request, transactional_db, tmp_path) -> Iterator[Callable[..., Worker]]:
    """start_worker(**env) starts a worker on the test database and waits until it is ready.

    Workers are stopped at teardown (before the database is flushed); a failing test's
    report carries their logs.
    """
    workers: list[Worker] = request.node.stash.setdefault(WORKERS, [])

    def start(**env: str) -> Worker:
        worker = Worker(tmp_path / f"worker-{len(workers)}.log", worker_environment(**env))
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    # Killed, not asked to stop: a warm (or cold) shutdown waits out the filesystem
    # transport's polling, ~4 s, and an idle worker on its own DATABASE_URL connection
    # leaves nothing behind.
    for worker in workers:
        worker.kill()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for worker in item.stash.get(WORKERS, []):
            report.sections.append((f"celery worker log {worker.log_path}", worker.log()))
    return report


# --- Redis --------------------------------------------------------------------------------


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


MACHINE_REDIS = "redis://127.0.0.1:6379/11"  # the machine's Redis, a database for tests


@pytest.fixture
def redis_url(tmp_path) -> Iterator[str]:
    """A Redis broker URL: the machine's Redis on 127.0.0.1:6379 (database 11, emptied
    before and after) when it answers, as in CI, where .ci/run starts it; otherwise a
    private redis-server when the binary is installed. Neither: the test fails saying so."""
    if _redis_answers(MACHINE_REDIS):
        _flush(MACHINE_REDIS)
        yield MACHINE_REDIS
        _flush(MACHINE_REDIS)
        return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "The Redis broker test needs Redis: run one on 127.0.0.1:6379 (.ci/run starts "
            "redis-server when it is installed) or install redis-server (the test starts its own)."
        )
    port = _free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_for(
            lambda: _redis_answers(url),
            seconds=10,
            what=f"an answer from the redis-server this test started ({binary}, port {port})",
        )
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def _flush(url: str) -> None:
    import redis

    redis.Redis.from_url(url, socket_connect_timeout=0.5).flushdb()


@pytest.fixture
def celery_broker() -> Iterator[Callable[[str], None]]:
    """celery_broker(url) makes this process's Celery app publish to `url`; undone after."""
    conf = celery_app.conf
    saved_env = os.environ.get("CELERY_BROKER_URL")
    saved_url = conf.broker_url
    saved_options = dict(conf.broker_transport_options or {})

    def repoint(url: str, transport_options: dict) -> None:
        conf.broker_url = url
        conf.broker_transport_options = transport_options
        # Connections and producers are pooled per broker in kombu's registry. Closing a
        # pool but leaving it registered breaks the next publish to that broker ("Acquire
        # on closed pool"), so empty the registry and drop the app's references to it.
        kombu.pools.reset()
        celery_app._pool = None
        celery_app.amqp._producer_pool = None

    def use(url: str) -> None:
        os.environ["CELERY_BROKER_URL"] = url  # Celery reads the variable before its conf
        repoint(url, {})

    yield use
    if saved_env is None:
        os.environ.pop("CELERY_BROKER_URL", None)
    else:
        os.environ["CELERY_BROKER_URL"] = saved_env
    repoint(saved_url, saved_options)
