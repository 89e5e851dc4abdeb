"""Export benchmark (`make bench`; never run by the tests).

    .venv/bin/python bench/export.py [--memories 10000] [--documents 1000]
        [--words 2000] [--activity 50000]

On a throwaway embedded PostgreSQL, one account is seeded with bulk inserts (fast, not
the services): MEMORIES memories and a create row of history for each, DOCUMENTS
documents of WORDS words of made-up prose with one version each (as a write leaves
them), ACTIVITY activity events, and a few work items. Then the account is exported with
portability.export.write_export, the code the download streams, into a sink that only
counts bytes. Reported: seconds, archive size, and the peak extra memory of the process
over its size before the export (RSS, sampled every 5 ms), against the targets of 20 s
and 200 MB.

A benchmark reports, it does not gate: the exit code is 0 whether targets are met or not.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import psutil

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# bench/search.py would shadow the project's `search` app; the project root goes first.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.common import prepare_environment, print_machine, verdict  # noqa: E402

TARGET_SECONDS = 20.0
TARGET_MB = 200.0
BATCH = 2000


class CountingSink:
    """A write-only stream that keeps nothing, like a socket."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.bytes += len(data)
        return len(data)


class PeakRSS:
    """The highest resident set size of this process while the block runs."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self) -> PeakRSS:
        self.peak = self.process.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def seed(args: argparse.Namespace):
    from django.contrib.auth import get_user_model

    from activity.models import ActivityEvent, EventType
    from context.models import Document, DocumentVersion
    from memory.models import Memory, MemoryHistory, Source
    from profiles import services
    from work.models import WorkItem

    rng = random.Random(17)  # noqa: S311 - made-up prose, not secrets
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
        for _ in range(5000)
    ]
    user = get_user_model().objects.create_user(username="exporter")
    services.profile_for_user(user)
    agent = services.agent_get_or_create(user=user, name="bench")

    def words(n: int) -> str:
        return " ".join(rng.choices(vocabulary, k=n))

    memories = [
        Memory(
            user=user,
            key=f"fact:item-{n:05d}",
            value=words(25),
            source=Source.TP_EXTRACTED,
            confidence=0.7,
            tags=["bench", f"t{n % 50}"],
        )
        for n in range(args.memories)
    ]
    Memory.objects.bulk_create(memories, batch_size=BATCH)
    MemoryHistory.objects.bulk_create(
        (
            MemoryHistory(
                user=user,
                key=m.key,
                action="create",
                source=m.source,
                after=m.snapshot(),
                actor_type="agent",
                actor_agent=agent,
            )
            for m in memories
        ),
        batch_size=BATCH,
    )
    del memories
    for start in range(0, args.documents, 100):
        batch = []
        for n in range(start, min(start + 100, args.documents)):
            paragraphs = [words(100) for _ in range(args.words // 100)]
            batch.append(
                Document(
                    user=user,
                    agent=agent if n % 10 == 0 else None,
                    path=f"notes/{n // 100:02d}/doc-{n:04d}.md",
                    body=f"# Document {n}\n\n" + "\n\n".join(paragraphs) + "\n",
                )
            )
        Document.objects.bulk_create(batch)
        DocumentVersion.objects.bulk_create(
            DocumentVersion(
                document=d,
                user=user,
                agent=d.agent,
                path=d.path,
                action="write",
                body=d.body,
                actor_type="user",
                actor_user=user,
            )
            for d in batch
        )
    for start in range(0, args.activity, BATCH * 5):
        ActivityEvent.objects.bulk_create(
            (
                ActivityEvent(
                    user=user,
                    event_type=EventType.MEMORY_WRITTEN,
                    payload={"key": f"fact:item-{n % max(args.memories, 1):05d}", "n": n},
                    actor_type="agent",
                    actor_agent=agent,
                )
                for n in range(start, min(start + BATCH * 5, args.activity))
            ),
            batch_size=BATCH,
        )
    WorkItem.objects.bulk_create(
        WorkItem(user=user, agent=agent, title=f"Report {n}", body=words(300)) for n in range(20)
    )
    return user


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--documents", type=int, default=1_000)
    parser.add_argument("--words", type=int, default=2_000)
    parser.add_argument("--activity", type=int, default=50_000)
    args = parser.parse_args()

    prepare_environment("mnemo-bench-export-")
    import django
    from django.core.management import call_command

    django.setup()  # starts the throwaway embedded PostgreSQL
    call_command("migrate", verbosity=0, interactive=False)
    print_machine("Export benchmark", ["Django", "psycopg"])

    from portability.export import export_counts, write_export

    started = time.perf_counter()
    user = seed(args)
    print(f"seeded     {time.perf_counter() - started:.1f} s: {export_counts(user)}")

    sink = CountingSink()
    with PeakRSS() as memory:
        before = memory.peak
        started = time.perf_counter()
        write_export(user, sink)
        seconds = time.perf_counter() - started
    extra_mb = (memory.peak - before) / 2**20
    # RSS alone flatters: the seed's freed memory is reused. Python's own allocations
    # during a second export are the other measure.
    tracemalloc.start()
    write_export(user, CountingSink())
    traced_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    extra_mb = max(extra_mb, traced_mb)
    print(f"archive    {sink.bytes / 2**20:.1f} MiB")
    print(
        f"time       {seconds:.2f} s (target ≤ {TARGET_SECONDS:.0f} s): "
        f"{verdict(seconds <= TARGET_SECONDS)}"
    )
    print(f"traced     {traced_mb:.1f} MiB peak of Python allocations (tracemalloc, 2nd run)")
    print(
        f"memory     +{extra_mb:.1f} MiB peak (the larger) over {before / 2**20:.0f} MiB before "
        f"(target ≤ {TARGET_MB:.0f} MB): {verdict(extra_mb <= TARGET_MB)}"
    )


if __name__ == "__main__":
    main()
