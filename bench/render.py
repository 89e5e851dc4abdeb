"""The working-memory render in one process, for iterating on its cost (issue 29).

bench/api.py measures the render under gunicorn, between create_memory runs; this
script measures only the render, quicker to re-run: a throwaway embedded PostgreSQL,
the bench's 500-entry user (bench/api.py `seed_render_user`), then sequential
`GET /api/v1/working-memory?format=json` through `django.test.Client` on one persistent
connection. It prints the server's own time (the `render;dur=` of the Server-Timing
header) p50/p95 against bench/api.py's target, and with `--profile` a cProfile of
renders naming the top costs. A benchmark reports, it does not gate: the exit code is 0.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project (Django settings, apps) and bench.common

from bench.common import percentile, prepare_environment, print_machine, verdict  # noqa: E402

RENDER_PATH = "/api/v1/working-memory?format=json"
SERVER_TIMING = re.compile(r"render;dur=([0-9.]+)")


def seed() -> str:
    from django.test import override_settings

    from bench.api import RENDER_ENTRIES, seed_render_user, setup_django

    setup_django()
    # As bench/api.py seeds: templated entries, not an agent writing, so not compared.
    with override_settings(MNEMO_MERGE_NEAR_DUPLICATES=False):
        return seed_render_user(RENDER_ENTRIES)


def render_times(client: object, token: str, count: int) -> list[float]:
    """The Server-Timing render durations of `count` sequential GETs, in ms."""
    times = []
    for _ in range(count):
        response = client.get(RENDER_PATH, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.content[:200]
        times.append(float(SERVER_TIMING.search(response["Server-Timing"])[1]))
    return times


def profile(client: object, token: str, count: int, top: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    render_times(client, token, count)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(top)
    print(f"\ncProfile of {count} requests (its overhead inflates Python-heavy parts), by own time")
    print(out.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=500, help="measured renders")
    parser.add_argument("--warmup", type=int, default=50, help="warm-up renders")
    parser.add_argument("--profile", action="store_true", help="add a cProfile pass")
    parser.add_argument("--top", type=int, default=15, help="rows of the profile")
    args = parser.parse_args()
    # One process: a local-memory cache and an in-memory broker stand in for Valkey.
    prepare_environment(
        "mnemo-bench-render-",
        CACHE_URL="locmemcache://",
        CELERY_BROKER_URL="memory://",
        MNEMO_API_RATE="1000000/s",
    )
    print_machine("Mnemo working-memory render (in process)", ["django"])
    token = seed()

    from django.db import connection
    from django.test import Client

    from bench.api import TARGET_RENDER_P95_MS

    connection.ensure_connection()
    client = Client(SERVER_NAME="localhost")
    render_times(client, token, args.warmup)
    started = time.perf_counter()
    times = render_times(client, token, args.renders)
    elapsed = time.perf_counter() - started
    p95 = percentile(times, 95)
    print(
        f"render     {args.renders} GETs in {elapsed:.2f} s; server p50 "
        f"{percentile(times, 50):.2f} ms  p95 {p95:.2f} ms  min {min(times):.2f} ms  "
        f"(target p95 <= {TARGET_RENDER_P95_MS:.0f} ms: "
        f"{verdict(p95 <= TARGET_RENDER_P95_MS)})"
    )
    if args.profile:
        profile(client, token, min(args.renders, 100), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
