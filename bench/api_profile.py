"""`bench/api.py --profile`: where one agent call's time goes, in this process.

Each call is sent through Django's test client (the project's middleware, DRF, the
services, the cache and PostgreSQL of the bench, not gunicorn or lib/asgi.py) a few times
to warm up, then timed without a profiler (CPU per call), then run again `repeat` times
under cProfile. Printed per call: the ten functions with the most own time (anywhere),
and the ten of the project's own code with the most cumulative time (what a change
here would save). Imported as `bench.api_profile` with the project root on sys.path."""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = 10

# cProfile's timer: "cpu" counts what the calling thread spends (waiting on PostgreSQL or
# Valkey costs nothing: their CPU is theirs; another thread's work is not charged to
# whatever this one was doing), "wall" also the waits.
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.thread_time, "wall": time.perf_counter}
# The project's functions around the whole call (the middleware) say nothing of where it
# goes: a function with more of the call's cumulative time than this is left out.
WRAPPER_SHARE = 0.9

# pstats' key of a function: (file name, first line, function name)
FunctionKey = tuple[str, int, str]


@dataclass(frozen=True)
class Call:
    """One kind of request: its name and a function that sends it and returns the status."""

    name: str
    send: Callable[[], int]


@dataclass(frozen=True)
class Cost:
    where: str  # file:line(function)
    own_ms: float  # per call, this function's own time
    cumulative_ms: float  # per call, with everything it called
    calls: float  # times it ran per call


def short_path(filename: str) -> str:
    """A file's name as a reader finds it: relative to the project, or to site-packages,
    or as pstats names built-ins ("~")."""
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1]
    path = Path(filename)
    if path.is_absolute() and path.is_relative_to(ROOT):
        return str(path.relative_to(ROOT))
    stdlib = Path(sys.base_prefix) / "lib"
    if path.is_absolute() and path.is_relative_to(stdlib):
        return str(path.relative_to(stdlib))
    return filename


def is_project_code(filename: str) -> bool:
    """The project's own modules (not the virtualenv, the standard library or bench/)."""
    path = Path(filename)
    if not path.is_absolute() or not path.is_relative_to(ROOT):
        return False
    first = path.relative_to(ROOT).parts[0]
    return first not in {".venv", ".tools", "bench", "tests"}


def costs_of(stats: pstats.Stats, repeat: int) -> list[Cost]:
    costs = []
    for (filename, line, function), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = function if filename == "~" else f"{short_path(filename)}:{line}({function})"
        costs.append(Cost(where, own * 1000 / repeat, cumulative * 1000 / repeat, calls / repeat))
    return costs


def top_costs(stats: pstats.Stats, repeat: int, top: int = TOP) -> tuple[list[Cost], list[Cost]]:
    """(the `top` by own time, anywhere; the `top` of the project's code by cumulative time,
    less the wrappers of the whole call)."""
    costs = costs_of(stats, repeat)
    by_own = sorted(costs, key=lambda cost: cost.own_ms, reverse=True)[:top]
    whole_ms = stats.total_tt * 1000 / repeat  # type: ignore[attr-defined]
    project = [
        cost
        for key, cost in zip(stats.stats, costs, strict=True)  # type: ignore[attr-defined]
        if is_project_code(key[0]) and cost.cumulative_ms <= WRAPPER_SHARE * whole_ms
    ]
    by_cumulative = sorted(project, key=lambda cost: cost.cumulative_ms, reverse=True)[:top]
    return by_own, by_cumulative


def cpu_ms_per_call(call: Call, repeat: int, statuses: list[int]) -> float:
    """This process's CPU per call (all its threads), without a profiler; each call's
    status goes to `statuses`."""
    started = time.process_time()
    for _ in range(repeat):
        statuses.append(call.send())
    return (time.process_time() - started) * 1000 / repeat


def print_costs(title: str, costs: list[Cost]) -> None:
    print(f"  {title}")
    print(f"    {'own ms':>7} {'cum ms':>7} {'calls':>6}  function")
    for cost in costs:
        print(f"    {cost.own_ms:7.3f} {cost.cumulative_ms:7.3f} {cost.calls:6.1f}  {cost.where}")


def profile_call(call: Call, repeat: int, warmup: int, clock: str) -> None:
    statuses = [call.send() for _ in range(warmup)]
    cpu_ms = cpu_ms_per_call(call, repeat, statuses)
    profiler = cProfile.Profile(CLOCKS[clock])
    for _ in range(repeat):
        profiler.enable()
        statuses.append(call.send())
        profiler.disable()
    stats = pstats.Stats(profiler)
    total_ms = stats.total_tt * 1000 / repeat  # type: ignore[attr-defined]
    answered = ", ".join(f"{status} ×{statuses.count(status)}" for status in sorted(set(statuses)))
    print(f"\n{call.name}: {warmup} warm-up + {repeat} timed + {repeat} profiled ({answered})")
    print(
        f"  cpu        {cpu_ms:.2f} ms a call in this process without the profiler; "
        f"{total_ms:.2f} ms ({clock} time) under cProfile (its overhead inflates many "
        "small calls)"
    )
    by_own, by_cumulative = top_costs(stats, repeat)
    print_costs(f"top {TOP} by own time, per call", by_own)
    print_costs(
        f"top {TOP} of the project's code by cumulative time, per call (not the middleware "
        f"around the whole call: over {WRAPPER_SHARE:.0%} of it)",
        by_cumulative,
    )


def profile_calls(calls: list[Call], repeat: int, warmup: int, clock: str = "cpu") -> None:
    print(
        f"\n=== profile (cProfile, {clock} time, in-process through Django's test client: no "
        "gunicorn, no lib/asgi.py; times per call)"
    )
    for call in calls:
        profile_call(call, repeat, warmup, clock)
