"""Load benchmark of the agent API under gunicorn (`make bench`; never run by the tests).

Seeds a throwaway embedded database through the project's services, starts a Valkey
beside it (the shared cache and broker, as `make run` does) and the web server as
`make run` starts it (`gunicorn -c config/gunicorn.conf.py`: the ASGI worker, with
WEB_CONCURRENCY processes of MNEMO_WEB_THREADS threads) on a free local port, then
measures:

* create_memory: sustained req/s and client-side latency with C concurrent clients;
* the working-memory render for a user with 500 entries: the server's own render
  time (the Server-Timing header) and the client-side round trip;
* for each, the CPU per request by process group (web, PostgreSQL, the Celery worker
  with --worker, the Valkey cache: bench/api_cost.py), and at the end a table of them;
* then create_memory alone on a fresh gunicorn for each WEB_CONCURRENCY of
  --web-concurrency (1, 2, 4), and the best.

`--profile` instead profiles a write and a render in this process (bench/api_profile.py).

The load generator is deliberately lean (one thread per client, hand-written HTTP/1.1
over a plain socket) because client, gunicorn and PostgreSQL share the same cores.
A benchmark reports, it does not gate: the exit code is 0 whether targets are met or
not, 1 if the server failed to start, 2 if every request of a benchmark failed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager

    from django.contrib.auth.models import AbstractBaseUser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project (Django settings, apps) and bench.common

from bench.api_cost import CpuCost, print_cost_table  # noqa: E402 - needs the root on sys.path
from bench.api_profile import CLOCKS, Call, profile_calls  # noqa: E402
from bench.common import (  # noqa: E402
    CpuMeter,
    cpu_seconds,
    percentile,
    prepare_environment,
    print_machine,
    process_tree,
    verdict,
)

HOST = "127.0.0.1"
WRITE_PATH = "/api/v1/tools/create_memory"
RENDER_PATH = "/api/v1/working-memory?format=json"
PROBE_PATH = "/login/"

TARGET_WRITE_RPS = 400.0
TARGET_WRITE_P95_MS = 25.0
TARGET_RENDER_P95_MS = 5.0

EXISTING_WRITE_KEYS = 1000  # fact:bench-0 … fact:bench-999 exist before the first write
NEW_KEY_SHARE = 0.25  # the rest of the writes replace one of the existing keys
RENDER_ENTRIES = 500
START_DEADLINE_S = 90.0
WORKER_START_DEADLINE_S = 90.0
STOP_DEADLINE_S = 30.0
REQUEST_TIMEOUT_S = 30.0
DEFAULT_SERVER = "asgi:2"  # WEB_CONCURRENCY=2, config/gunicorn.conf.py's own default
DEFAULT_THREADS = 4  # MNEMO_WEB_THREADS, lib/asgi.py's default
SWEEP_SERVERS = ("asgi:1x4", "asgi:2x2", "asgi:2x4", "asgi:3x4", "asgi:2x8")
DEFAULT_WEB_CONCURRENCY = (1, 2, 4)  # the write runs after the main one (issue 29)
WORKER_IDLE_CORES = 0.05  # the worker is done with the seed when it uses less than this
WORKER_IDLE_DEADLINE_S = 600.0
PROFILE_WARMUP_CALLS = 10  # the first calls load models and fill caches
PROFILE_NEW_KEYS_FROM = 900_000  # new keys of the profile, far from the load's
GUNICORN_CONF = ROOT / "config" / "gunicorn.conf.py"

EXIT_SERVER_FAILED = 1
EXIT_ALL_FAILED = 2


class ServerFailed(Exception):
    pass


class AllFailed(Exception):
    pass


class ProtocolError(OSError):
    """An answer this client cannot read; unlike ConnectionError it is not retried."""


# --- a minimal HTTP/1.1 client -------------------------------------------------------


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


class Connection:
    """One keep-alive connection; reconnects when the server closes it (sync workers do)."""

    def __init__(
        self, port: int, headers: dict[str, str], timeout: float = REQUEST_TIMEOUT_S
    ) -> None:
        self.port, self.timeout = port, timeout
        self.fixed_headers = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.sock: socket.socket | None = None
        self.buffer = b""

    def request(self, method: str, path: str, body: bytes = b"") -> HttpResponse:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n{self.fixed_headers}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        reused = self.sock is not None
        try:
            return self._exchange(head.encode() + body)
        except ConnectionError:
            self.close()
            if not reused:
                raise
        # The server dropped an idle keep-alive connection: retry once on a fresh one.
        return self._exchange(head.encode() + body)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buffer = None, b""

    def _exchange(self, data: bytes) -> HttpResponse:
        if self.sock is None:
            self.sock = socket.create_connection((HOST, self.port), timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(data)
        status, headers = self._read_head()
        body = self._read_exactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return HttpResponse(status, headers, body)

    def _read_head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self.buffer:
            self._receive()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", ""):
            raise ProtocolError("chunked responses are not supported by this client")
        return int(status_line.split(" ", 2)[1]), headers

    def _read_exactly(self, length: int) -> bytes:
        while len(self.buffer) < length:
            self._receive()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return body

    def _receive(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buffer += chunk


# --- statistics ------------------------------------------------------------------------


@dataclass
class Tally:
    """What a set of clients saw: latencies of answered 2xx requests, statuses, failures."""

    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def record(self, started: float, response: HttpResponse) -> None:
        self.statuses[response.status] += 1
        if 200 <= response.status < 300:
            self.latencies_ms.append((time.perf_counter() - started) * 1000)
        else:
            self.fail(f"HTTP {response.status}: {response.body[:300].decode(errors='replace')}")

    def fail(self, sample: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 3:
            self.error_samples.append(sample)

    def merge(self, other: Tally) -> None:
        self.latencies_ms += other.latencies_ms
        self.statuses.update(other.statuses)
        self.errors += other.errors
        self.error_samples += other.error_samples[: 3 - len(self.error_samples)]

    @property
    def ok(self) -> int:
        return len(self.latencies_ms)


# --- the database: environment, migrate, seed -------------------------------------------


def setup_django() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def new_agent(username: str) -> tuple[AbstractBaseUser, Any, str]:
    """A user with one agent "bench" and its bearer token."""
    from django.contrib.auth import get_user_model

    from profiles import services

    user = get_user_model().objects.create_user(username=username)
    services.profile_for_user(user)
    agent = services.agent_get_or_create(user=user, name="bench")
    return user, agent, services.token_create(agent=agent).raw


PROFILE = {
    "name": "Kevin Tan",
    "role": "Head of Growth",
    "company": "YARNNN",
    "timezone": "Asia/Singapore",
    "tone_slack": "Casual and direct; first names, no greetings, emoji only to acknowledge.",
    "verbosity_slack": "Short: two or three sentences, bullet points for anything longer.",
}
TEMPLATES = {
    "fact": "Works with the {team} team on {project}; their weekly sync is on {day} at {hour}.",
    "instruction": "When drafting {doc} for {person}, lead with the numbers and keep it under "
    "{words} words.",
    "preference": "Prefers {doc} as a short bulleted list, with links to the source data at "
    "the end rather than inline.",
    "decision": "Decided on {day} to move {project} to the {team} team's roadmap because the "
    "{topic} results were stronger than expected.",
    "discovery": "Found that the {project} dashboard undercounts {topic} when sessions cross "
    "midnight in the {team} region.",
    "pattern": "Usually reviews {doc} on {day} mornings before the {team} standup and replies "
    "in one batch.",
    "task": "Follow up with {person} about {topic} for {project} by {day}.",
    "bugfix": "Fixed the {topic} export in {project} by reading timestamps as UTC before "
    "grouping by {team} week.",
}
WORDS = {
    "team": ["growth", "data", "design", "platform", "sales", "support", "finance"],
    "project": ["Atlas", "the Q3 launch", "onboarding v2", "the pricing page", "Beacon"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "hour": ["9:30", "11:00", "14:00", "16:30"],
    "doc": ["weekly reports", "board updates", "launch briefs", "customer emails"],
    "person": ["Priya", "Marcus", "Aiko", "Daniel", "Sofia", "Tom"],
    "words": ["150", "200", "300"],
    "topic": ["retention", "activation", "churn", "trial conversion", "referrals"],
}


def entry_value(kind: str, rng: random.Random) -> str:
    text = TEMPLATES[kind].format(**{name: rng.choice(words) for name, words in WORDS.items()})
    return text[:200]


def seed_render_user(count: int) -> str:
    """A user with the profile above and `count` entries spread over every kind."""
    from activity.actors import Actor
    from memory import services
    from memory.keys import ENTRY_KINDS

    user, agent, token = new_agent("bench-reader")
    actor = Actor.for_agent(agent)
    for key, value in PROFILE.items():
        services.memory_upsert(user=user, key=key, value=value, actor=actor)
    rng = random.Random(500)  # noqa: S311 - reproducible test data, not a secret
    for n in range(count):
        kind = ENTRY_KINDS[n % len(ENTRY_KINDS)]
        services.memory_upsert(
            user=user,
            key=f"{kind}:item-{n}",
            value=entry_value(kind, rng),
            actor=actor,
            confidence=round(rng.uniform(0.5, 0.95), 2),
            tags=[kind, rng.choice(WORDS["team"])],
            pinned=n % 50 == 0,
        )
    return token


def write_value(n: int, revision: int | None = None) -> str:
    """The text of fact:bench-<n>; a replacing write gives a new `revision`, so that it
    changes the row (the same text and tags again would write nothing: no history row, no
    event, only the lock)."""
    text = f"Prefers the weekly {WORDS['topic'][n % 5]} summary as bullets; benchmark write {n}"
    return f"{text}." if revision is None else f"{text}, revision {revision}."


def seed_write_user() -> str:
    """A user whose fact:bench-0 … fact:bench-999 exist, so writes can replace them."""
    from activity.actors import Actor
    from memory import services

    user, agent, token = new_agent("bench-writer")
    actor = Actor.for_agent(agent)
    for n in range(EXISTING_WRITE_KEYS):
        services.memory_upsert(user=user, key=f"fact:bench-{n}", value=write_value(n), actor=actor)
    return token


# --- gunicorn --------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerConfig:
    workers: int  # WEB_CONCURRENCY: gunicorn ASGI worker processes
    threads: int  # MNEMO_WEB_THREADS: Django threads in each (lib/asgi.py)

    @classmethod
    def parse(cls, text: str, threads: int = DEFAULT_THREADS) -> ServerConfig:
        match = re.fullmatch(r"asgi:([1-9]\d*)(?:x([1-9]\d*))?", text)
        if match is None:
            raise argparse.ArgumentTypeError(f"{text!r}: use asgi:<workers> or asgi:<w>x<t>")
        return cls(int(match[1]), int(match[2]) if match[2] else threads)

    @property
    def label(self) -> str:
        return f"asgi:{self.workers}x{self.threads}"

    def environment(self, port: int) -> dict[str, str]:
        return {
            "MNEMO_HOST": HOST,
            "MNEMO_PORT": str(port),
            "WEB_CONCURRENCY": str(self.workers),
            "MNEMO_WEB_THREADS": str(self.threads),
        }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class Server:
    """gunicorn in a child process; stopped with SIGTERM when the block ends."""

    def __init__(self, config: ServerConfig, data_dir: Path, valkey: Valkey) -> None:
        self.config = config
        self.valkey_pid = valkey.pid
        self.port = free_port()
        self.log_path = data_dir / f"gunicorn-{config.label}.log"
        self.postmaster_pid = postmaster_pid(data_dir)
        self.command = [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF)]
        self.environment = config.environment(self.port)
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                self.command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.environment},
            )
        try:
            self._wait_until_up()
        except BaseException:
            self.__exit__()
            raise
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def __exit__(self, *exc_info: object) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _wait_until_up(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerFailed(f"gunicorn exited with code {self.process.returncode}")
            if self._answers():
                return
            # The pause between probes doubles as a check that gunicorn is still alive.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.1)
        raise ServerFailed(f"gunicorn did not answer within {START_DEADLINE_S:.0f} s")

    def _answers(self) -> bool:
        connection = Connection(self.port, {}, timeout=5.0)
        try:
            connection.request("GET", PROBE_PATH)
        except OSError:
            return False
        finally:
            connection.close()
        return True

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0])


class Valkey:
    """valkey-server on the data dir's socket, where the settings look for the shared cache
    (throttle counters, the embedding request flag) and Celery's broker; no persistence."""

    def __init__(self, data_dir: Path) -> None:
        from lib.stack import Layout, valkey_binary

        layout = Layout(data_dir)
        self.socket_path = layout.valkey_socket
        layout.run_dir.mkdir(parents=True, exist_ok=True)
        layout.valkey_dir.mkdir(parents=True, exist_ok=True)
        self.command = [
            str(valkey_binary()),
            *("--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700"),
            *("--dir", str(layout.valkey_dir), "--save", "", "--appendonly", "no"),
            *("--daemonize", "no", "--loglevel", "warning"),
        ]
        self.log_path = data_dir / "valkey.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Valkey:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - the packaged binary
                self.command, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_DEADLINE_S
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise ServerFailed("valkey-server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def _answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1.0)
                sock.connect(str(self.socket_path))
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


class Workers:
    """N `celery -A config worker --pool solo` processes, as `make run`'s worker program,
    with the environment lib/stack.py gives its programs; stopped with SIGTERM."""

    def __init__(self, count: int, data_dir: Path, port: int) -> None:
        from lib.stack import stack_environment

        self.data_dir = data_dir
        self.environment = stack_environment(data_dir, port, PYTHONUNBUFFERED="1")
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs = [data_dir / f"celery-{n}.log" for n in range(1, count + 1)]

    def command(self, n: int) -> list[str]:
        celery = str(Path(sys.executable).parent / "celery")
        return [
            *(celery, "-A", "config", "worker", "--loglevel", "INFO", "--pool", "solo"),
            *("--without-gossip", "--without-mingle", "--without-heartbeat"),
            *("-n", f"bench{n}@%h"),
        ]

    def __enter__(self) -> Workers:
        for n, log_path in enumerate(self.logs, start=1):
            with log_path.open("ab") as log:
                self.processes.append(
                    subprocess.Popen(  # noqa: S603 - our own virtualenv's celery
                        self.command(n),
                        cwd=ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=self.environment,
                    )
                )
        try:
            self._wait_until_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + WORKER_START_DEADLINE_S
        while not all(" ready." in self._log(n) for n in range(len(self.logs))):
            for process in self.processes:
                if process.poll() is not None:
                    raise ServerFailed(f"a Celery worker exited with code {process.returncode}")
            if time.monotonic() > deadline:
                raise ServerFailed(f"the workers were not ready in {WORKER_START_DEADLINE_S:g} s")
            time.sleep(0.2)

    def _log(self, n: int) -> str:
        return self.logs[n].read_text(errors="replace") if self.logs[n].exists() else ""

    def pids(self) -> list[psutil.Process]:
        return [proc for process in self.processes for proc in process_tree(process.pid)]


# --- the two benchmarks ----------------------------------------------------------------


def auth_headers(token: str, *, json_body: bool = False) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if json_body:
        headers["Content-Type"] = "application/json"
    return headers


class WriteKeys:
    """Keys for create_memory: a quarter new (fact:bench-1000, 1001, …), the rest replace one
    of fact:bench-0 … 999. Shared by the client threads; itertools.count is atomic."""

    def __init__(self) -> None:
        self.new = itertools.count(EXISTING_WRITE_KEYS)
        self.seeds = itertools.count()
        self.revisions = itertools.count(1)

    def rng(self) -> random.Random:
        """A generator of its own for each client, different in every run."""
        return random.Random(next(self.seeds))  # noqa: S311 - a load pattern, not a secret

    def body(self, rng: random.Random) -> bytes:
        if rng.random() < NEW_KEY_SHARE:
            n = next(self.new)
            value = write_value(n)
        else:  # every replacement a new text: a real write, never "unchanged"
            n = rng.randrange(EXISTING_WRITE_KEYS)
            value = write_value(n, next(self.revisions))
        payload = {"key": f"fact:bench-{n}", "value": value, "tags": ["bench"]}
        return json.dumps(payload).encode()


def write_client(
    port: int, token: str, keys: WriteKeys, seconds: float, gate: threading.Barrier
) -> Tally:
    tally, rng = Tally(), keys.rng()
    connection = Connection(port, auth_headers(token, json_body=True))
    gate.wait()
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        body = keys.body(rng)
        started = time.perf_counter()
        try:
            tally.record(started, connection.request("POST", WRITE_PATH, body))
        except OSError as error:
            connection.close()
            tally.fail(f"{type(error).__name__}: {error}")
    connection.close()
    return tally


def run_writers(
    port: int, token: str, keys: WriteKeys, clients: int, seconds: float
) -> tuple[Tally, float]:
    """C clients writing for `seconds`; returns what they saw and the wall time it took."""
    gate, tallies = threading.Barrier(clients + 1), []

    def client() -> None:
        tallies.append(write_client(port, token, keys, seconds, gate))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    gate.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return total, time.perf_counter() - started


SERVER_TIMING = re.compile(r"render;dur=([0-9.]+)")


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError:
        return {"error": f"not JSON: {body[:100]!r}"}
    return parsed if isinstance(parsed, dict) else {"error": f"not an object: {body[:100]!r}"}


@dataclass
class Renders:
    tally: Tally = field(default_factory=Tally)
    server_ms: list[float] = field(default_factory=list)
    first: dict[str, Any] | None = None


def run_renders(port: int, token: str, count: int) -> Renders:
    """`count` sequential working-memory renders on one keep-alive connection."""
    renders, connection = Renders(), Connection(port, auth_headers(token))
    for _ in range(count):
        started = time.perf_counter()
        try:
            response = connection.request("GET", RENDER_PATH)
        except OSError as error:
            connection.close()
            renders.tally.fail(f"{type(error).__name__}: {error}")
            continue
        renders.tally.record(started, response)
        if 200 <= response.status < 300:
            timing = SERVER_TIMING.search(response.headers.get("server-timing", ""))
            if timing:
                renders.server_ms.append(float(timing[1]))
            if renders.first is None:
                renders.first = parse_json(response.body)
    connection.close()
    return renders


# --- reporting -------------------------------------------------------------------------


def ms(value: float) -> str:
    return f"{value:7.2f} ms"


def print_errors(tally: Tally) -> None:
    if tally.errors:
        print(f"  errors     {tally.errors}; samples:")
        for sample in tally.error_samples:
            print(f"    {sample}")


def report_writes(tally: Tally, elapsed: float, cpu: str) -> tuple[float, float]:
    rate, p95 = tally.ok / elapsed, percentile(tally.latencies_ms, 95)
    created, replaced, waiting = tally.statuses[201], tally.statuses[200], tally.statuses[202]
    print(
        f"  requests   {tally.ok + tally.errors} in {elapsed:.1f} s: "
        f"{created} created (201), {replaced} replaced (200), {waiting} waiting for "
        f"review (202: near an entry of their kind), {tally.errors} errors"
    )
    print(
        f"  throughput {rate:7.1f} req/s   target >= {TARGET_WRITE_RPS:.0f} req/s"
        f"   {verdict(rate >= TARGET_WRITE_RPS)}"
    )
    print(
        f"  latency    p50 {ms(percentile(tally.latencies_ms, 50))}  p95 {ms(p95)}"
        f"  p99 {ms(percentile(tally.latencies_ms, 99))}"
        f"   target p95 <= {TARGET_WRITE_P95_MS:.0f} ms   {verdict(p95 <= TARGET_WRITE_P95_MS)}"
    )
    print(f"  {cpu}")
    print_errors(tally)
    return rate, p95


def report_renders(renders: Renders, cpu: str) -> float:
    if renders.first is not None:
        body = renders.first
        if "error" in body:
            print(f"  response   {body['error']}")
        print(
            f"  response   tokens {body.get('tokens')}, budget {body.get('budget')}, "
            f"counter {body.get('counter')}, included {len(body.get('included', []))}, "
            f"omitted {len(body.get('omitted', []))}"
        )
    server_p95 = percentile(renders.server_ms, 95)
    print(
        f"  server     render p50 {ms(percentile(renders.server_ms, 50))}  p95 {ms(server_p95)}"
        f"   ({len(renders.server_ms)} Server-Timing values)"
        f"   target p95 <= {TARGET_RENDER_P95_MS:.0f} ms   "
        f"{verdict(server_p95 <= TARGET_RENDER_P95_MS)}"
    )
    client = renders.tally.latencies_ms
    p50, p95 = percentile(client, 50), percentile(client, 95)
    print(f"  client     round trip p50 {ms(p50)}  p95 {ms(p95)}")
    print(f"  {cpu}")
    print_errors(renders.tally)
    return server_p95


def postgres_version() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return cursor.fetchone()[0]


# --- main ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tokens:
    writer: str
    reader: str


@dataclass
class Run:
    """What the phases of one run share: the seeded users, the data dir and its Valkey, the
    Celery worker (with --worker), the write keys (one sequence, so a new key stays new
    across servers) and the CPU cost of every measured phase."""

    tokens: Tokens
    data_dir: Path
    valkey: Valkey
    workers: Workers | None
    args: argparse.Namespace
    keys: WriteKeys = field(default_factory=WriteKeys)
    costs: list[CpuCost] = field(default_factory=list)


def server_meter(server: Server, workers: Workers | None) -> CpuMeter:
    """CPU of the client (this process), the web server (gunicorn's master and workers),
    PostgreSQL (the postmaster and every backend), the Celery worker if one runs, and the
    cache (Valkey)."""
    groups: dict[str, Callable[[], list[psutil.Process]]] = {
        "client": lambda: [psutil.Process()],
        "web": lambda: process_tree(server.pid),
        "postgres": lambda: process_tree(server.postmaster_pid),
        "cache": lambda: process_tree(server.valkey_pid),
    }
    if workers is not None:
        groups["worker"] = workers.pids
    return CpuMeter(groups)


def answered(tally: Tally) -> int:
    """Requests the server answered, whatever the status (the CPU per request divides by
    these; a connection failure is not counted)."""
    return sum(tally.statuses.values())


@dataclass(frozen=True)
class WriteResult:
    clients: int
    rate: float
    p95: float
    cost: CpuCost
    noisy: bool  # other processes took CPU during the run


def measure_writes(server: Server, run: Run, clients: int) -> WriteResult:
    args = run.args
    print(
        f"\ncreate_memory: {clients} concurrent clients, {args.seconds:g} s "
        f"after {args.warmup:g} s warm-up ({NEW_KEY_SHARE:.0%} new keys, rest replace)"
    )
    token = run.tokens.writer
    run_writers(server.port, token, run.keys, clients, args.warmup)
    with server_meter(server, run.workers) as meter:
        tally, elapsed = run_writers(server.port, token, run.keys, clients, args.seconds)
    cost = CpuCost.of(f"create_memory C={clients} {server.config.label}", meter, answered(tally))
    rate, p95 = report_writes(tally, elapsed, f"{meter.line}\n  {cost.line}")
    run.costs.append(cost)
    if not tally.ok:
        raise AllFailed("every create_memory request failed")
    return WriteResult(clients, rate, p95, cost, meter.noisy)


def bench_writes(server: Server, run: Run) -> list[str]:
    summary = []
    for clients in run.args.clients:
        result = measure_writes(server, run, clients)
        summary.append(
            f"C={clients}: {result.rate:6.1f} req/s p95 {result.p95:6.2f} ms "
            f"cpu {result.cost.server_ms:5.2f} ms"
        )
    return summary


def bench_renders(server: Server, run: Run) -> str:
    args, token = run.args, run.tokens.reader
    print(
        f"\nworking memory: {RENDER_ENTRIES} entries, {args.renders} sequential GETs "
        f"after {args.render_warmup} warm-up ({RENDER_PATH})"
    )
    run_renders(server.port, token, args.render_warmup)
    with server_meter(server, run.workers) as meter:
        renders = run_renders(server.port, token, args.renders)
    cost = CpuCost.of(f"working memory {server.config.label}", meter, answered(renders.tally))
    server_p95 = report_renders(renders, f"{meter.line}\n  {cost.line}")
    run.costs.append(cost)
    if not renders.tally.ok:
        raise AllFailed("every working-memory request failed")
    client_p95 = percentile(renders.tally.latencies_ms, 95)
    return f"render p95 server {server_p95:5.2f} ms, client {client_p95:5.2f} ms"


@contextlib.contextmanager
def serving(config: ServerConfig, run: Run) -> Iterator[Server | None]:
    """gunicorn with `config` for the block, or None (said, with its log) if it failed to
    start or every request of a phase failed; other errors pass."""
    server = Server(config, run.data_dir, run.valkey)
    environment = " ".join(f"{name}={value}" for name, value in server.environment.items())
    print(f"\n=== gunicorn {config.label}: {environment} {' '.join(server.command[1:])}")
    try:
        with server:
            yield server
    except ServerFailed as error:
        print(f"SERVER FAILED: {error}\n--- gunicorn log (tail) ---\n{server.log_tail()}")
        raise
    except AllFailed as error:
        print(f"ALL REQUESTS FAILED: {error}\n--- gunicorn log (tail) ---\n{server.log_tail()}")
        raise


def bench_server(config: ServerConfig, run: Run) -> tuple[int, str]:
    """Start gunicorn with `config`, run both benchmarks, stop it; (exit code, summary)."""
    try:
        with serving(config, run) as server:
            writes = bench_writes(server, run)
            render = bench_renders(server, run)
    except ServerFailed:
        return EXIT_SERVER_FAILED, f"{config.label:12} server failed"
    except AllFailed:
        return EXIT_ALL_FAILED, f"{config.label:12} all requests failed"
    return 0, f"{config.label:12} " + " | ".join([*writes, render])


def bench_web_concurrency(run: Run) -> int:
    """create_memory at --concurrency-clients on a fresh gunicorn for each WEB_CONCURRENCY
    of --web-concurrency (the same database, one after the other), then the best."""
    counts, clients = run.args.web_concurrency, run.args.concurrency_clients
    if not counts:
        return 0
    print(
        f"\n=== WEB_CONCURRENCY {', '.join(map(str, counts))}: create_memory at C={clients}, "
        f"{run.args.threads} threads a process"
    )
    results, code, started = [], 0, time.perf_counter()
    for count in counts:
        config = ServerConfig(count, run.args.threads)
        try:
            with serving(config, run) as server:
                results.append((config, measure_writes(server, run, clients)))
        except ServerFailed:
            code = max(code, EXIT_SERVER_FAILED)
        except AllFailed:
            code = max(code, EXIT_ALL_FAILED)
    print(
        f"\n=== WEB_CONCURRENCY at C={clients} ({time.perf_counter() - started:.0f} s for "
        "these runs)"
    )
    for config, result in results:
        print(
            f"  WEB_CONCURRENCY={config.workers} ({config.label:9}) {result.rate:7.1f} req/s"
            f"  p95 {result.p95:7.2f} ms  cpu/write {result.cost.server_ms:5.2f} ms"
            + ("  (machine busy)" if result.noisy else "")
        )
    if results:
        best_config, best = max(results, key=lambda item: item[1].rate)
        print(
            f"  best: WEB_CONCURRENCY={best_config.workers} ({best.rate:.1f} req/s, "
            f"p95 {best.p95:.2f} ms)"
        )
        if any(result.noisy for _, result in results):
            print("  WARNING    other processes took CPU: re-run on a quiet machine to choose")
    return code


def start_worker(data_dir: Path, enabled: bool) -> AbstractContextManager[Workers | None]:
    """One Celery worker as `make run` starts it (--worker), once it has embedded what the
    seeding left it; or nothing."""
    if not enabled:
        return contextlib.nullcontext()
    return IdleWorkers(1, data_dir, free_port())


class IdleWorkers(Workers):
    """Workers that, once ready, wait for the seeded rows' embeddings to be done (their CPU
    falls below WORKER_IDLE_CORES for a second) so the measured phases do not pay for them."""

    def __enter__(self) -> IdleWorkers:
        super().__enter__()
        started = time.monotonic()
        print("worker     one Celery worker (--pool solo); waiting for it to embed the seed")
        while time.monotonic() - started < WORKER_IDLE_DEADLINE_S:
            before = sum(cpu_seconds(self.pids()).values())
            time.sleep(1.0)
            if sum(cpu_seconds(self.pids()).values()) - before < WORKER_IDLE_CORES:
                break
        print(f"           idle after {time.monotonic() - started:.0f} s")
        return self


def seed() -> Tokens:
    from django.db import connections

    started = time.perf_counter()
    setup_django()
    from django.test import override_settings

    # The entries come from a few templates, so many say the same; seeding is not an agent
    # writing, so they are not compared (the measured server compares its writes).
    with override_settings(MNEMO_MERGE_NEAR_DUPLICATES=False):
        tokens = Tokens(writer=seed_write_user(), reader=seed_render_user(RENDER_ENTRIES))
    print(f"database   PostgreSQL {postgres_version()} (embedded, throwaway)")
    print(
        f"seeded     writer with {EXISTING_WRITE_KEYS} keys, reader with {RENDER_ENTRIES} "
        f"entries + {len(PROFILE)} profile/style keys, in {time.perf_counter() - started:.1f} s"
    )
    connections.close_all()  # the server's processes do the work from here on
    return tokens


def client_counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def profiled_calls(tokens: Tokens) -> list[Call]:
    """A replacing write, a new key's write (compared with the user's entries of its kind,
    so most become proposals, 202) and the 500-entry render, through Django's test client."""
    from django.test import Client

    client = Client(HTTP_HOST=HOST)
    write_auth = f"Bearer {tokens.writer}"
    rng = random.Random(29)  # noqa: S311 - a load pattern, not a secret
    new_keys = itertools.count(PROFILE_NEW_KEYS_FROM)
    revisions = itertools.count(1)

    def write(n: int, revision: int | None = None) -> int:
        payload = {"key": f"fact:bench-{n}", "value": write_value(n, revision), "tags": ["bench"]}
        response = client.post(
            WRITE_PATH, payload, content_type="application/json", HTTP_AUTHORIZATION=write_auth
        )
        return response.status_code

    def render() -> int:
        response = client.get(RENDER_PATH, HTTP_AUTHORIZATION=f"Bearer {tokens.reader}")
        return response.status_code

    return [
        Call(
            "create_memory, an existing key",
            lambda: write(rng.randrange(EXISTING_WRITE_KEYS), next(revisions)),
        ),
        Call("create_memory, a new key", lambda: write(next(new_keys))),
        Call(f"working memory, {RENDER_ENTRIES} entries", render),
    ]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help="asgi:<workers> (WEB_CONCURRENCY), or asgi:<workers>x<threads> "
        f"(default {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help=f"MNEMO_WEB_THREADS, Django threads per process (default {DEFAULT_THREADS})",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help=f"run everything for each of {', '.join(SWEEP_SERVERS)}",
    )
    parser.add_argument(
        "--clients",
        type=client_counts,
        default=[8, 16],
        help="concurrent create_memory clients, comma-separated (default 8,16)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds per run")
    parser.add_argument("--renders", type=int, default=500, help="measured renders")
    parser.add_argument("--render-warmup", type=int, default=50, help="warm-up renders")
    parser.add_argument(
        "--web-concurrency",
        type=client_counts,
        default=list(DEFAULT_WEB_CONCURRENCY),
        metavar="N,N,…",
        help="after the main run, create_memory alone on a fresh gunicorn with each "
        "WEB_CONCURRENCY (and --threads), then the best; empty (--web-concurrency=) skips "
        f"it (default {','.join(map(str, DEFAULT_WEB_CONCURRENCY))})",
    )
    parser.add_argument(
        "--concurrency-clients",
        type=int,
        default=8,
        help="concurrent clients of the WEB_CONCURRENCY runs (default 8)",
    )
    parser.add_argument(
        "--worker",
        action="store_true",
        help="start one Celery worker as `make run` does and count its CPU (it embeds every "
        "write); without it the embedding requests wait in Valkey",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead of the load runs: profile a write and a render in this process "
        "(cProfile) and print the top ten costs of each",
    )
    parser.add_argument(
        "--profile-clock",
        choices=sorted(CLOCKS),
        default="cpu",
        help="cProfile's timer: cpu (the calling thread's CPU; default) or wall (waits included)",
    )
    parser.add_argument(
        "--profile-calls", type=int, default=50, help="calls profiled per kind (default 50)"
    )
    args = parser.parse_args()
    try:
        args.server = ServerConfig.parse(args.server, args.threads)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    return args


def sweep(argv: list[str]) -> int:
    """Run every SWEEP_SERVERS config in a child run of its own (a fresh database each),
    then print their summaries together. The children skip the WEB_CONCURRENCY runs."""
    summaries, code = [], 0
    for label in SWEEP_SERVERS:
        command = [sys.executable, __file__, *argv, f"--server={label}", "--web-concurrency="]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)  # noqa: S603
        assert child.stdout is not None
        last = ""
        for line in child.stdout:
            print(line, end="")
            last = line.strip() or last
        code = max(code, child.wait())
        summaries.append(last)
    print("\n=== sweep summary")
    for summary in summaries:
        print(f"  {summary}")
    return code


def main() -> int:
    args = parse_args()
    if args.sweep:
        return sweep([arg for arg in sys.argv[1:] if arg != "--sweep"])
    data_dir = prepare_environment("mnemo-bench-", MNEMO_API_RATE="1000000/s")
    print_machine("Mnemo agent API benchmark", ["gunicorn", "django", "djangorestframework"])
    started = time.perf_counter()
    try:
        with Valkey(data_dir) as valkey:
            tokens = seed()
            if args.profile:
                calls = profiled_calls(tokens)
                profile_calls(calls, args.profile_calls, PROFILE_WARMUP_CALLS, args.profile_clock)
                return 0
            with start_worker(data_dir, args.worker) as workers:
                run = Run(tokens, data_dir, valkey, workers, args)
                code, summary = bench_server(args.server, run)
                code = max(code, bench_web_concurrency(run))
    except ServerFailed as error:  # Valkey's or the worker's; gunicorn's are said already
        print(f"SERVER FAILED: {error}")
        return EXIT_SERVER_FAILED
    print_cost_table(run.costs)
    print(f"\nwhole run  {time.perf_counter() - started:.0f} s (seeding included)")
    print(f"\n=== summary\n  {summary}")
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # gunicorn is stopped and the data dir removed on the way out
        sys.exit(130)
