"""Web master restart benchmark (never run by the tests).

Starts `make run`'s supervised stack (lib/stack.py, as bench/soak.py does) on a throwaway
data dir, then, --kills times: waits until the stack is steady (the `web` program RUNNING,
no process of an earlier master left), SIGKILLs gunicorn's master (what the OOM killer or
a crash does) while two clients each GET /login/ every 50 ms, and records the longest time
a client went without a successful answer, from the kill until the new master's workers
answer and the old master's workers are gone. Target: under 3 s for every kill.

It also prints the web program's memory (master and workers, RSS and PSS) when steady.

A benchmark reports, it does not gate: the exit code is 0 whether the target is met or not.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import print_machine, verdict  # noqa: E402
from bench.soak import Stack, free_port  # noqa: E402

TARGET_OUTAGE_SECONDS = 3.0
POLL_EVERY = 0.05
CLIENTS = 2
REQUEST_TIMEOUT = 10.0
SETTLE_DEADLINE = 120.0


class Poller:
    """Clients that GET a page every 50 ms and note when each success arrived."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self.successes: list[list[float]] = [[] for _ in range(CLIENTS)]
        self.failures: dict[str, int] = {}
        self.stop = threading.Event()
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def run(self, client: int) -> None:
        while not self.stop.is_set():
            status = self._get()
            now = time.monotonic()
            with self.lock:
                if status == 200:
                    self.successes[client].append(now)
                else:
                    self.failures[str(status or "no answer")] = (
                        self.failures.get(str(status or "no answer"), 0) + 1
                    )
            time.sleep(POLL_EVERY)

    def _get(self) -> int:
        try:
            with self.opener.open(self.url, timeout=REQUEST_TIMEOUT) as response:
                response.read()
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            return 0

    def longest_gap(self, start: float, end: float) -> float:
        """The longest time any client went without a success within [start, end]."""
        longest = 0.0
        with self.lock:
            for times in self.successes:
                before = [t for t in times if t <= start]
                points = [before[-1] if before else start]
                points += [t for t in times if start < t <= end] + [end]
                longest = max(longest, *(b - a for a, b in itertools.pairwise(points)))
        return longest

    def last_success(self) -> float:
        with self.lock:
            return min((times[-1] if times else 0.0) for times in self.successes)


def web_processes(stack: Stack) -> list[psutil.Process]:
    master = psutil.Process(stack.pid("web"))
    return [master, *master.children(recursive=True)]


def web_memory(stack: Stack) -> tuple[int, float, float]:
    """(processes, RSS MB, PSS MB) of the web program."""
    rss = pss = 0
    processes = web_processes(stack)
    for process in processes:
        info = process.memory_full_info()
        rss, pss = rss + info.rss, pss + info.pss
    return len(processes), rss / 2**20, pss / 2**20


def steady(stack: Stack, poller: Poller, leftovers: list[psutil.Process]) -> None:
    """The web program RUNNING, the old master's workers gone, both clients answered lately."""
    deadline = time.monotonic() + SETTLE_DEADLINE
    while time.monotonic() < deadline:
        alive = [process for process in leftovers if process.is_running()]
        fresh = time.monotonic() - poller.last_success() < 0.5
        if stack.state("web") == "RUNNING" and not alive and fresh:
            return
        time.sleep(0.1)
    raise SystemExit("the web program did not settle")


def one_kill(stack: Stack, poller: Poller) -> tuple[float, float]:
    """SIGKILL the master; (the longest gap a client saw, seconds until settled)."""
    processes = web_processes(stack)
    master = processes[0]
    killed_at = time.monotonic()
    os.kill(master.pid, signal.SIGKILL)
    # Settled: a new master RUNNING, every process of the old one gone, and answers again.
    deadline = killed_at + SETTLE_DEADLINE
    while time.monotonic() < deadline:
        try:
            replaced = stack.state("web") == "RUNNING" and stack.pid("web") != master.pid
        except (OSError, KeyError):
            replaced = False
        gone = not any(process.is_running() for process in processes)
        if replaced and gone and poller.last_success() > killed_at:
            break
        time.sleep(0.05)
    time.sleep(1.0)  # a second of answers after it, so a gap that is still open shows
    settled = time.monotonic()
    return poller.longest_gap(killed_at, settled), settled - killed_at


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument(
        "--web-concurrency", default="1", help="WEB_CONCURRENCY (make run's default: 1)"
    )
    args = parser.parse_args()

    print_machine("Mnemo web master restart benchmark", ["supervisor", "gunicorn"])
    folder = Path(tempfile.mkdtemp(prefix="mnemo-restart-"))
    stack = Stack(folder / "data", free_port())
    stack.env["WEB_CONCURRENCY"] = args.web_concurrency
    poller = Poller(stack.base + "/login/")
    clients = [threading.Thread(target=poller.run, args=(n,)) for n in range(CLIENTS)]
    try:
        started = time.monotonic()
        stack.start()
        print(f"stack      up in {time.monotonic() - started:.1f} s on {stack.base}")
        for client in clients:
            client.start()
        steady(stack, poller, [])
        count, rss, pss = web_memory(stack)
        print(
            f"web        WEB_CONCURRENCY={args.web_concurrency}: {count} processes, "
            f"RSS {rss:.0f} MB (PSS {pss:.0f} MB)"
        )
        gaps = []
        for number in range(1, args.kills + 1):
            leftovers = web_processes(stack)
            steady(stack, poller, [])
            gap, settle = one_kill(stack, poller)
            gaps.append(gap)
            print(
                f"kill {number}     longest gap {gap:.2f} s, settled after {settle:.1f} s   "
                f"target < {TARGET_OUTAGE_SECONDS:g} s   {verdict(gap < TARGET_OUTAGE_SECONDS)}"
            )
            steady(stack, poller, leftovers)
        print(f"failures   {poller.failures or 'none'}")
        print(
            f"outage     worst {max(gaps):.2f} s, median {sorted(gaps)[len(gaps) // 2]:.2f} s "
            f"over {len(gaps)} kills   {verdict(max(gaps) < TARGET_OUTAGE_SECONDS)}"
        )
        count, rss, pss = web_memory(stack)
        print(f"web        after: {count} processes, RSS {rss:.0f} MB (PSS {pss:.0f} MB)")
    finally:
        poller.stop.set()
        for client in clients:
            if client.is_alive():
                client.join()
        stack.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
