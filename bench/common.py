"""What the benchmarks share: percentiles and verdicts, CPU accounting, the throwaway
data dir and the machine line. Imported as `bench.common` with the project root on
sys.path (each script puts it there first)."""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

NOISY_CORES = 0.2  # CPU taken by other processes above which a result is flagged


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an unsorted list (nan if empty)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil without floats drifting
    return ordered[int(rank) - 1]


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


# --- CPU accounting --------------------------------------------------------------------


def process_tree(pid: int) -> list[psutil.Process]:
    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(processes: Iterable[psutil.Process]) -> dict[int, float]:
    seconds = {}
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        seconds[process.pid] = times.user + times.system
    return seconds


def machine_busy(times: Any) -> float:
    idle = times.idle + getattr(times, "iowait", 0.0) + getattr(times, "steal", 0.0)
    guest = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return sum(times) - idle - guest  # guest time is already counted in user time


def cpu_ms_per_request(seconds: float, requests: int) -> float:
    """Milliseconds of CPU per request: `seconds` of CPU spread over `requests` (nan if none)."""
    return seconds * 1000 / requests if requests > 0 else float("nan")


class CpuMeter:
    """Cores kept busy over a `with` block by each named group of processes, by everything
    else on the machine ("others": a test run next door makes the numbers low) and by
    steal. After the block, `line` says so in one line (two with a warning), `seconds`
    holds each group's CPU seconds over the block and `ms_per_request` divides them.

    A process that starts inside the block counts whole; one that exits inside it loses
    what it used there (the benchmarks keep their connections, so their PostgreSQL
    backends live through the block)."""

    def __init__(self, groups: dict[str, Callable[[], list[psutil.Process]]]) -> None:
        self.groups = groups
        self.line = ""
        self.seconds: dict[str, float] = {}
        self.wall = 0.0
        self.noisy = False

    def __enter__(self) -> CpuMeter:
        self.start = {name: cpu_seconds(procs()) for name, procs in self.groups.items()}
        self.machine_start = psutil.cpu_times()
        self.started_at = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.started_at
        busy = {}
        for name, procs in self.groups.items():
            now = cpu_seconds(procs())
            busy[name] = sum(total - self.start[name].get(pid, 0.0) for pid, total in now.items())
        machine = psutil.cpu_times()
        ours = sum(busy.values())
        busy["others"] = machine_busy(machine) - machine_busy(self.machine_start) - ours
        busy["steal"] = getattr(machine, "steal", 0.0) - getattr(self.machine_start, "steal", 0.0)
        self.seconds = {name: max(0.0, seconds) for name, seconds in busy.items()}
        self.wall = wall
        parts = [f"{name} {seconds / wall:.2f}" for name, seconds in self.seconds.items()]
        self.line = f"cpu (cores busy of {psutil.cpu_count()}): " + ", ".join(parts)
        self.noisy = (busy["others"] + busy["steal"]) / wall > NOISY_CORES
        if self.noisy:
            self.line += "\n  WARNING    other processes took CPU during this run; numbers are low"

    def ms_per_request(self, requests: int) -> dict[str, float]:
        """Each group's CPU over the block in milliseconds per request ("others" and
        "steal" too)."""
        return {name: cpu_ms_per_request(s, requests) for name, s in self.seconds.items()}


# --- the throwaway database and the machine ---------------------------------------------


def prepare_environment(prefix: str, **environment: str) -> Path:
    """A temporary data dir for a throwaway embedded PostgreSQL, removed at exit."""
    data_dir = Path(tempfile.mkdtemp(prefix=prefix))
    # Registered before Django starts PostgreSQL, so it runs after pgserver's own atexit
    # (which deletes only the postgres folder) and removes the rest of the data dir.
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    os.environ.pop("DATABASE_URL", None)
    os.environ.update(
        MNEMO_DATA_DIR=str(data_dir),
        MNEMO_EMBEDDED_THROWAWAY="1",
        DJANGO_SETTINGS_MODULE="config.settings",
        MNEMO_LOG_LEVEL="WARNING",
        **environment,
    )
    return data_dir


def print_machine(title: str, packages: Sequence[str]) -> None:
    usable = len(os.sched_getaffinity(0))
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    software = ", ".join(f"{name} {version(name)}" for name in packages)
    print(title)
    print(f"machine    {os.cpu_count()} CPUs ({usable} usable), load average {load}")
    print(f"           {platform.platform()}, {psutil.virtual_memory().total / 2**30:.1f} GiB RAM")
    print(f"software   Python {platform.python_version()}, {software}")
