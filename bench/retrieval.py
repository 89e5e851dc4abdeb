"""Retrieval benchmark on LoCoMo through the public API (`make bench`; never run by the tests).

Measures what ../shared/eval/README.md defines, on a throwaway stack (embedded PostgreSQL,
Valkey, gunicorn as `make run` starts it, two Celery workers embedding as in production):

* every observation fact of the conversations written as one `fact` memory of the
  conversation's user through `create_memory`, in session order, with its `session`
  (session-N) and `occurred_at` (that session's date), with the shipped defaults (near
  duplicates merged, agents' notes stored): how many writes were held (202) or merged
  (200 duplicate), a merged or held fact crediting the memory it went to; and the
  embedding throughput: from the first write until every row has a vector by the current
  model;
* every question of categories 1-4 with evidence asked through `search_memory` (limit 10)
  under the user's agent token: R@5 and R@10 overall and per category, then every question
  asked again (each search is a use, so access counts have grown) and R@10 compared;
* search_memory latency over both passes (client side, and the server's own when the
  response carries a Server-Timing header);
* nonsense queries, unrelated to the conversations, against every user: the share that
  return nothing;
* the short-query set (bench/short_queries.py) against one more user holding its profile:
  the share of unrelated one- and two-word queries that return nothing, the related ones
  whose row comes first, and the exact-words queries whose row comes first, with its
  vector and again after the vectors are taken away (as if just written).

The dialog ids of each fact stay in this script's bookkeeping (memory key -> dialog ids);
the memories hold only the fact's text. A benchmark reports, it does not gate: the exit
code is 0 whether targets are met or not, 1 if a server did not start, 2 if every write or
every search failed.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime
import json
import os
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project (Django settings, apps) and bench.*

from bench import short_queries  # noqa: E402
from bench.api import (  # noqa: E402 - needs the project root on sys.path
    EXIT_ALL_FAILED,
    EXIT_SERVER_FAILED,
    Connection,
    Server,
    ServerConfig,
    ServerFailed,
    Valkey,
    Workers,
    auth_headers,
    new_agent,
    parse_json,
    setup_django,
)
from bench.common import (  # noqa: E402
    CpuMeter,
    percentile,
    prepare_environment,
    print_machine,
    process_tree,
    verdict,
)

DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "locomo-dev.json"
WRITE_PATH = "/api/v1/tools/create_memory"
SEARCH_PATH = "/api/v1/tools/search_memory"
SEARCH_LIMIT = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

TARGET_RECALL_10 = 0.75  # on both passes
TARGET_RECALL_5 = 0.69  # on both passes
TARGET_STABILITY = 0.01  # second-pass R@10 within this of the first
TARGET_NONSENSE_EMPTY = 0.90
TARGET_SEARCH_P95_MS = 20.0
TARGET_HELD = 0.01  # of the writes answered 202
TARGET_SHORT_EMPTY = 0.90
PROFILE_USER = "profile"  # bench/short_queries.py's person

WEB = ServerConfig(workers=1, threads=4)  # `make run`'s default: one web process
CELERY_WORKERS = 2
EMBED_DEADLINE_S = 600.0  # after the last write; a stuck worker must not hang the run
POLL_S = 0.05
SLUG_CHARS = 60  # of the fact's text in its key; the grammar allows 80

# Queries about nothing in the conversations (music theory, machinery, chemistry, filler
# and keyboard noise), written without looking at the data: a search that finds nothing
# relevant should say so with an empty list rather than return the least bad ten.
NONSENSE_QUERIES = (
    "xylophone quartet",
    "zzzz qqqq",
    "purple elephant quantum banjo",
    "asdf jkl",
    "qwrtpz vbnmkl",
    "xkcd zorblax fnord",
    "torque specification for a 1967 tractor gearbox",
    "hydraulic fluid viscosity grade for excavator booms",
    "boiling point of liquid nitrogen in kelvin",
    "mitochondrial electron transport chain complex IV",
    "COBOL copybook redefines clause",
    "kernel panic in the ext4 journaling driver",
    "tensile strength of carbon fibre rebar",
    "medieval tax law in the duchy of Burgundy",
    "differential equations for a damped pendulum",
    "pH of sulfuric acid at 0.5 molar",
    "replacing a carburetor float needle",
    "subnet mask for a /27 network",
    "zygomorphic flower pollination by hawkmoths",
    "Byzantine fault tolerance quorum size",
    "gregorian chant neume notation",
    "crankshaft journal bearing clearance",
    "blorptang wuzzle frimp",
    "ooooo aaaaa eeeee",
    "lorem ipsum dolor sit amet",
    "vxq jjz wpf",
    "semiconductor doping with phosphorus",
    "offshore oil rig ballast pump maintenance",
    "quaternion gimbal lock in flight software",
    "asbestos abatement permit requirements",
)


# --- the data: facts with their dialog ids, questions with their evidence ------------


@dataclass(frozen=True)
class Fact:
    key: str
    text: str
    dialogs: frozenset[str]
    session: str  # session-N: the conversation's session it was extracted from


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    name: str
    facts: list[Fact]
    questions: list[Question]
    without_evidence: int  # of categories 1-4, left out (they can never be a hit)
    reshaped_evidence: int  # questions whose evidence ids needed normalising
    dates: dict[str, datetime.datetime] = field(default_factory=dict)  # session-N → when
    token: str = ""

    # Memory key → dialog ids of facts whose write was merged into it: answered 200
    # duplicate (naming the memory that has it) or 202 with a proposal to update it.
    credits: dict[str, set[str]] = field(default_factory=dict)

    def dialogs_of(self) -> dict[str, frozenset[str]]:
        dialogs = {fact.key: fact.dialogs for fact in self.facts}
        for key, extra in self.credits.items():
            dialogs[key] = dialogs.get(key, frozenset()) | extra
        return dialogs


# A dialog id is D<session>:<turn>. A few evidence entries are malformed ("D8:6; D9:17",
# "D:11:26", a bare "D"): read every id an entry holds, drop what holds none.
DIALOG_ID = re.compile(r"D:?(\d+):(\d+)")


def dialog_ids(raw: str | list[str]) -> frozenset[str]:
    items = raw if isinstance(raw, list) else [raw]
    return frozenset(
        f"D{int(match[1])}:{int(match[2])}" for item in items for match in DIALOG_ID.finditer(item)
    )


def session_number(name: str) -> int:
    match = re.fullmatch(r"session_(\d+)_observation", name)
    if match is None:
        raise ValueError(f"unexpected observation session {name!r}")
    return int(match[1])


def key_for(text: str, used: Counter[str]) -> str:
    """`fact:<slug of the text>`, made unique within the user with -2, -3, …"""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower())[:SLUG_CHARS].strip("-") or "fact"
    used[slug] += 1
    return f"fact:{slug}" if used[slug] == 1 else f"fact:{slug}-{used[slug]}"


def facts_of(observation: dict[str, dict[str, list]]) -> list[Fact]:
    """Sessions by number, then speakers in the file's order, then facts in order."""
    facts, used = [], Counter()
    for session in sorted(observation, key=session_number):
        name = f"session-{session_number(session)}"
        for speaker_facts in observation[session].values():
            for text, raw_ids in speaker_facts:
                facts.append(Fact(key_for(text, used), text, dialog_ids(raw_ids), name))
    return facts


def session_date(raw: str) -> datetime.datetime:
    """A session's date as the data writes it ("1:56 pm on 8 May, 2023"), naive."""
    return datetime.datetime.strptime(raw.replace(",", ""), "%I:%M %p on %d %B %Y")


def dates_of(conversation: dict[str, Any]) -> dict[str, datetime.datetime]:
    """session-N → that session's date and time (naive: the user's time zone, UTC here)."""
    return {
        f"session-{match[1]}": session_date(value)
        for name, value in conversation.items()
        if (match := re.fullmatch(r"session_(\d+)_date_time", name))
    }


def conversation_of(entry: dict[str, Any], limit_questions: int | None) -> Conversation:
    questions, without, reshaped = [], 0, 0
    for qa in entry["qa"]:
        if qa["category"] not in CATEGORIES:
            continue
        evidence = dialog_ids(qa.get("evidence") or [])
        if not evidence:
            without += 1
            continue
        reshaped += sorted(evidence) != sorted(qa["evidence"])
        questions.append(Question(qa["question"], qa["category"], evidence))
    return Conversation(
        name=entry["sample_id"],
        facts=facts_of(entry["observation"]),
        dates=dates_of(entry["conversation"]),
        questions=questions[:limit_questions],
        without_evidence=without,
        reshaped_evidence=reshaped,
    )


def load(path: Path, conversations: int, limit_questions: int | None) -> list[Conversation]:
    entries = json.loads(path.read_text())
    return [conversation_of(entry, limit_questions) for entry in entries[:conversations]]


def print_data(path: Path, conversations: list[Conversation]) -> None:
    facts = sum(len(c.facts) for c in conversations)
    asked = sum(len(c.questions) for c in conversations)
    without = sum(c.without_evidence for c in conversations)
    reshaped = sum(c.reshaped_evidence for c in conversations)
    reachable = sum(
        any(q.evidence & fact.dialogs for fact in c.facts)
        for c in conversations
        for q in c.questions
    )
    names = ", ".join(c.name for c in conversations)
    print(f"data       {path} ({names})")
    print(f"           {facts} facts; {asked + without} questions of categories 1-4:")
    print(f"           {asked} asked, {without} without evidence left out (never a hit);")
    print(f"           evidence ids normalised in {reshaped} questions ('D8:6; D9:17', 'D:11:26')")
    print(f"ceiling    {reachable / max(asked, 1):.3f} of the asked questions have an evidence id")
    print("           among the facts at all (the best R@k can be)")


# --- the stack: bench/api.py's Celery workers, Valkey and gunicorn ---------------------


def stack_meter(server: Server, workers: Workers, valkey: Valkey) -> CpuMeter:
    return CpuMeter(
        {
            "client": lambda: [psutil.Process()],
            "gunicorn": lambda: process_tree(server.pid),
            "workers": workers.pids,
            "postgres": lambda: process_tree(server.postmaster_pid),
            "valkey": lambda: process_tree(valkey.pid),
        }
    )


def keep_data_dir() -> None:
    """Undo prepare_environment's clean-up: no rmtree at exit, no throwaway PostgreSQL."""
    atexit.unregister(shutil.rmtree)
    os.environ["MNEMO_EMBEDDED_THROWAWAY"] = "0"


def seed_users(conversations: list[Conversation]) -> None:
    """One user per conversation, each with an agent and its token (through the services)."""
    from django.db import connection

    for conversation in conversations:
        conversation.token = new_agent(conversation.name)[2]
    connection.close()


# --- the database, read by this process -------------------------------------------------


def current_model() -> str:
    from search.embeddings import get_embedder

    return get_embedder().model


def vector_counts(model: str) -> tuple[int, int]:
    """(rows, rows with a vector by `model`) in user_context."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE embedding IS NOT NULL"
            " AND embedding_model = %s) FROM user_context",
            [model],
        )
        return cursor.fetchone()


def models_in_use() -> list[tuple[str, int]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(nullif(embedding_model, ''), '(none)'), count(*)"
            " FROM user_context GROUP BY 1 ORDER BY 2 DESC"
        )
        return cursor.fetchall()


def missing_keys(conversations: list[Conversation]) -> int:
    """Bookkeeping keys with no row of that user: the key to dialog ids map must hold."""
    from memory.models import Memory

    missing = 0
    for conversation in conversations:
        rows = Memory.objects.filter(user__username=conversation.name)
        stored = set(rows.values_list("key", flat=True))
        missing += sum(fact.key not in stored for fact in conversation.facts)
    return missing


def wait_for_vectors(model: str, since: float) -> float | None:
    """Seconds from `since` until every row has a current vector; None past the deadline.
    (Every row: a write merged into a row, or held as a proposal, adds none.)"""
    deadline = time.perf_counter() + EMBED_DEADLINE_S
    while time.perf_counter() < deadline:
        total, embedded = vector_counts(model)
        if embedded >= total > 0:
            return time.perf_counter() - since
        time.sleep(POLL_S)
    return None


# --- writing the facts ------------------------------------------------------------------


@dataclass
class Writes:
    statuses: Counter[int] = field(default_factory=Counter)
    duplicates: int = 0  # 200 answers with status duplicate: no row added
    held_updates: int = 0  # 202 answers proposing to update an existing memory
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    @property
    def ok(self) -> int:
        """Writes that made or changed a row (not a 202 proposal, not a duplicate)."""
        return self.statuses[201] + self.statuses[200] - self.duplicates


def write_facts(port: int, conversations: list[Conversation]) -> Writes:
    """Each conversation's facts in order, one request at a time (one agent writing), each
    with its session and the session's date. A fact merged into a memory (a duplicate, or
    a proposal to update one) credits that memory with the fact's dialog ids."""
    writes = Writes(started=time.perf_counter())
    for conversation in conversations:
        connection = Connection(port, auth_headers(conversation.token, json_body=True))
        for fact in conversation.facts:
            body = {
                "key": fact.key,
                "value": fact.text,
                "session": fact.session,
                "occurred_at": conversation.dates[fact.session].isoformat(),
            }
            try:
                response = connection.request("POST", WRITE_PATH, json.dumps(body).encode())
            except OSError as error:
                connection.close()
                writes.statuses[0] += 1
                writes.errors.append(f"{fact.key}: {type(error).__name__}: {error}")
                continue
            writes.statuses[response.status] += 1
            answer = parse_json(response.body) if response.status in (200, 202) else {}
            merged_into = None
            if response.status == 200 and answer.get("status") == "duplicate":
                writes.duplicates += 1
                merged_into = answer["memory"]["key"]
            elif response.status == 202 and answer["proposal"]["key"] != fact.key:
                writes.held_updates += 1
                merged_into = answer["proposal"]["key"]
            if merged_into is not None:
                conversation.credits.setdefault(merged_into, set()).update(fact.dialogs)
            if response.status not in (200, 201, 202):
                writes.errors.append(f"{fact.key}: HTTP {response.status} {response.body[:200]!r}")
        connection.close()
    writes.ended = time.perf_counter()
    return writes


def report_writes(
    conversations: list[Conversation],
    writes: Writes,
    embedded_after: float | None,
    model: str,
    cpu: str,
) -> None:
    seconds = writes.ended - writes.started
    print(f"  writes     {dict(writes.statuses)} in {seconds:.1f} s ({writes.ok / seconds:.0f}/s)")
    written = sum(writes.statuses.values())
    print(
        f"  held       {writes.statuses[202]} of {written} answered 202 (a proposal: "
        f"{writes.statuses[202] / max(written, 1):.1%}), {writes.held_updates} of them to update "
        "an existing memory (credited with the fact's evidence)"
    )
    print(
        f"  merged     {writes.duplicates} answered 200 duplicate (the memory named is credited "
        "with the fact's evidence)"
    )
    for sample in writes.errors[:3]:
        print(f"    {sample}")
    print(
        f"  keys       {missing_keys(conversations)} of the bookkeeping's keys not found as rows "
        f"({writes.statuses[202] + writes.duplicates} writes held or merged)"
    )
    if embedded_after is None:
        _, embedded = vector_counts(model)
        print(f"  embedded   NOT all: {embedded} of {writes.ok} after {EMBED_DEADLINE_S:g} s")
    else:
        lag = embedded_after - seconds
        print(
            f"  embedding  {writes.ok / embedded_after:.1f} facts/s: every row had a vector "
            f"{embedded_after:.1f} s after the first write ({lag:.1f} s after the last)"
        )
        if lag < 1.0:  # then the rate above is the writers', not the workers' limit
            print("             the workers kept up with the writes: this is the write rate")
    for name, count in models_in_use():
        print(f"  model      {name}: {count} rows")
    print(f"  {cpu}")


# --- searching --------------------------------------------------------------------------


SERVER_TIMING = re.compile(r"([A-Za-z0-9_-]+)(?:;[^,]*?)?;dur=([0-9.]+)")


def server_ms(header: str) -> float | None:
    """The server's own time from Server-Timing: its `total` metric, else the first."""
    metrics = {name: float(dur) for name, dur in SERVER_TIMING.findall(header)}
    if not metrics:
        return None
    return metrics.get("total", next(iter(metrics.values())))


@dataclass
class Searches:
    client_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def merge(self, other: Searches) -> None:
        self.client_ms += other.client_ms
        self.server_ms += other.server_ms
        self.errors += other.errors


def search(connection: Connection, query: str, searches: Searches) -> list[str] | None:
    """The keys search_memory returns, best first; None if the request failed."""
    body = json.dumps({"query": query, "limit": SEARCH_LIMIT}).encode()
    started = time.perf_counter()
    try:
        response = connection.request("POST", SEARCH_PATH, body)
    except OSError as error:
        connection.close()
        searches.errors.append(f"{type(error).__name__}: {error}")
        return None
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        searches.errors.append(f"HTTP {response.status} {response.body[:200]!r}")
        return None
    searches.client_ms.append(elapsed)
    timing = server_ms(response.headers.get("server-timing", ""))
    if timing is not None:
        searches.server_ms.append(timing)
    return [hit["memory"]["key"] for hit in parse_json(response.body).get("results", [])]


@dataclass
class Answer:
    category: int
    rank: int | None  # 1-based place of the first result holding evidence; None if none


@dataclass
class Pass:
    answers: list[Answer] = field(default_factory=list)
    searches: Searches = field(default_factory=Searches)

    def recall(self, k: int, category: int | None = None) -> float:
        chosen = [a for a in self.answers if category in (None, a.category)]
        hits = sum(a.rank is not None and a.rank <= k for a in chosen)
        return hits / len(chosen) if chosen else float("nan")

    def count(self, category: int | None = None) -> int:
        return sum(category in (None, a.category) for a in self.answers)


def first_hit(keys: list[str], dialogs: dict[str, frozenset[str]], evidence: frozenset[str]):
    for rank, key in enumerate(keys, start=1):
        if dialogs.get(key, frozenset()) & evidence:
            return rank
    return None


def ask_all(port: int, conversations: list[Conversation]) -> Pass:
    """Every question under its conversation's token, in the file's order, sequentially."""
    result = Pass()
    for conversation in conversations:
        dialogs = conversation.dialogs_of()
        connection = Connection(port, auth_headers(conversation.token, json_body=True))
        for question in conversation.questions:
            keys = search(connection, question.text, result.searches)
            if keys is not None:
                rank = first_hit(keys, dialogs, question.evidence)
                result.answers.append(Answer(question.category, rank))
        connection.close()
    return result


def report_pass(title: str, result: Pass, cpu: str) -> None:
    print(f"\n{title}: {result.count()} questions answered, {len(result.searches.errors)} failed")
    for sample in result.searches.errors[:3]:
        print(f"    {sample}")
    print(f"  overall        R@5 {result.recall(5):.3f}   R@10 {result.recall(10):.3f}")
    for category, name in CATEGORIES.items():
        if result.count(category):
            print(
                f"  {category} {name:12} R@5 {result.recall(5, category):.3f}   "
                f"R@10 {result.recall(10, category):.3f}   ({result.count(category)} questions)"
            )
    print(f"  {cpu}")


def run_nonsense(port: int, conversations: list[Conversation]) -> tuple[int, Counter[str], int]:
    """(searches answered, how many users got results for each query, failures)."""
    answered, found, searches = 0, Counter(), Searches()
    for conversation in conversations:
        connection = Connection(port, auth_headers(conversation.token, json_body=True))
        for query in NONSENSE_QUERIES:
            keys = search(connection, query, searches)
            if keys is None:
                continue
            answered += 1
            if keys:
                found[query] += 1
        connection.close()
    return answered, found, len(searches.errors)


def report_nonsense(answered: int, found: Counter[str], failed: int) -> float:
    """Print and return the share of nonsense searches that returned nothing."""
    empty = (answered - sum(found.values())) / answered if answered else float("nan")
    print(
        f"\nnonsense queries: {len(NONSENSE_QUERIES)} against each user, {answered} answered, "
        f"{failed} failed"
    )
    print(f"  empty      {empty:.1%} returned no results")
    for query, users in found.most_common(5):
        print(f"    results for {users} user(s): {query!r}")
    if len(found) > 5:
        print(f"    … and {len(found) - 5} more queries with results")
    return empty


@dataclass
class ShortQueries:
    unrelated_empty: float  # share of UNRELATED queries returning nothing
    unrelated_found: list[tuple[str, list[str]]]  # those that returned something
    exact_first: dict[str, int]  # "with vector" / "without vector" → EXACT queries first
    missed: list[str]
    related_first: int


def write_profile(port: int, token: str) -> Counter[int]:
    """bench/short_queries.py's profile, as create_memory writes (its statuses)."""
    statuses: Counter[int] = Counter()
    connection = Connection(port, auth_headers(token, json_body=True))
    for key, value in short_queries.PROFILE.items():
        body = json.dumps({"key": key, "value": value}).encode()
        statuses[connection.request("POST", WRITE_PATH, body).status] += 1
    connection.close()
    return statuses


def drop_vectors(username: str, keys: list[str]) -> int:
    """Take the vectors of these memories away, as if they were just written (no task is
    queued, so nothing embeds them again during the run)."""
    from memory.models import Memory

    return Memory.objects.filter(user__username=username, key__in=keys).update(
        embedding=None, embedding_model="", embedded_hash=""
    )


def run_short_queries(port: int, username: str, token: str) -> ShortQueries:
    """The unrelated and related queries, and the exact-words queries with the rows'
    vectors and again after taking them away."""
    searches = Searches()
    connection = Connection(port, auth_headers(token, json_body=True))

    def ask(query: str) -> list[str]:
        return search(connection, query, searches) or []

    found = [(query, keys) for query in short_queries.UNRELATED if (keys := ask(query))]
    related = sum(ask(query)[:1] == [key] for query, key in short_queries.RELATED.items())
    exact, missed = {}, []
    for state in ("with vector", "without vector"):
        if state == "without vector":
            drop_vectors(username, list(short_queries.EXACT.values()))
        exact[state] = 0
        for query, key in short_queries.EXACT.items():
            first = ask(query)[:1]
            exact[state] += first == [key]
            if first != [key]:
                missed.append(f"{query!r} ({state}): {first or 'nothing'}")
    connection.close()
    unrelated = len(short_queries.UNRELATED)
    return ShortQueries((unrelated - len(found)) / unrelated, found, exact, missed, related)


def report_short_queries(result: ShortQueries) -> None:
    print(
        f"\nshort queries (bench/short_queries.py): {len(short_queries.PROFILE)} memories of one "
        "profile"
    )
    print(
        f"  unrelated  {result.unrelated_empty:.1%} of {len(short_queries.UNRELATED)} returned "
        "nothing"
    )
    for query, keys in result.unrelated_found[:5]:
        print(f"    {query!r}: {len(keys)} results, first {keys[0]}")
    print(
        f"  related    {result.related_first} of {len(short_queries.RELATED)} return their "
        "row first"
    )
    for state, count in result.exact_first.items():
        print(
            f"  exact      {count} of {len(short_queries.EXACT)} return their row first ({state})"
        )
    for sample in result.missed[:5]:
        print(f"    missed {sample}")


def report_latency(searches: Searches) -> float:
    """Print the latencies; return the client-side p95."""
    client_p95 = percentile(searches.client_ms, 95)
    print(f"\nsearch_memory latency over both passes ({len(searches.client_ms)} sequential calls)")
    print(
        f"  client     p50 {percentile(searches.client_ms, 50):6.2f} ms  "
        f"p95 {client_p95:6.2f} ms  max {max(searches.client_ms, default=float('nan')):6.2f} ms"
    )
    if searches.server_ms:
        print(
            f"  server     p50 {percentile(searches.server_ms, 50):6.2f} ms  "
            f"p95 {percentile(searches.server_ms, 95):6.2f} ms (Server-Timing)"
        )
    else:
        print("  server     no Server-Timing header on search_memory answers")
    return client_p95


def report_targets(
    first: Pass,
    second: Pass,
    search_p95: float,
    empty: float,
    writes: Writes,
    short: ShortQueries,
) -> None:
    r10, r10_again, r5 = first.recall(10), second.recall(10), first.recall(5)
    drift = r10_again - r10
    lines = [
        (
            f"R@10       {r10:.3f} first pass, {r10_again:.3f} second",
            f">= {TARGET_RECALL_10:g} on both",
            min(r10, r10_again) >= TARGET_RECALL_10,
        ),
        (
            f"R@5        {r5:.3f} first pass, {second.recall(5):.3f} second",
            f">= {TARGET_RECALL_5:g} on both",
            min(r5, second.recall(5)) >= TARGET_RECALL_5,
        ),
        (
            f"stability  R@10 second - first {drift:+.3f}",
            f"within {TARGET_STABILITY:g}",
            abs(round(drift, 6)) <= TARGET_STABILITY,  # 0.01 must not fail on float noise
        ),
        (
            f"nonsense   {empty:.1%} returned nothing",
            f">= {TARGET_NONSENSE_EMPTY:.0%}",
            empty >= TARGET_NONSENSE_EMPTY,
        ),
        (
            f"search     client p95 {search_p95:.2f} ms",
            f"<= {TARGET_SEARCH_P95_MS:g} ms",
            search_p95 <= TARGET_SEARCH_P95_MS,
        ),
        (
            f"held       {writes.statuses[202] / max(sum(writes.statuses.values()), 1):.1%} "
            "of writes answered 202",
            f"<= {TARGET_HELD:.0%}",
            writes.statuses[202] <= TARGET_HELD * sum(writes.statuses.values()),
        ),
        (
            f"short      {short.unrelated_empty:.1%} of unrelated short queries empty",
            f">= {TARGET_SHORT_EMPTY:.0%}",
            short.unrelated_empty >= TARGET_SHORT_EMPTY,
        ),
        (
            "exact      "
            + ", ".join(
                f"{n}/{len(short_queries.EXACT)} {s}" for s, n in short.exact_first.items()
            ),
            "all first",
            all(n == len(short_queries.EXACT) for n in short.exact_first.values()),
        ),
    ]
    print("\ntargets")
    for measured, target, ok in lines:
        print(f"  {measured:48} target {target:16} {verdict(ok)}")
    print(
        "  (search latency here is over a few users of ~180-300 facts; the latency target"
        " proper is bench/search.py's 100 users x 1,000 entries)"
    )


# --- main -------------------------------------------------------------------------------


@contextlib.contextmanager
def app_stack(data_dir: Path, valkey: Valkey) -> Iterator[tuple[Server, Workers]]:
    """The web server and the Celery workers as `make run` starts them, said in one line."""
    with (
        Server(WEB, data_dir, valkey) as server,
        Workers(CELERY_WORKERS, data_dir, server.port) as workers,
    ):
        print(
            f"stack      gunicorn {WEB.label} on 127.0.0.1:{server.port}, "
            f"{CELERY_WORKERS} Celery workers (--pool solo)"
        )
        yield server, workers


def run_short_only(data_dir: Path, valkey: Valkey) -> int:
    """The short-query set alone (a quick look after changing the floor)."""
    model = current_model()
    with app_stack(data_dir, valkey) as (server, _workers):
        profile_token = new_agent(PROFILE_USER)[2]
        write_profile(server.port, profile_token)
        if wait_for_vectors(model, time.perf_counter()) is None:
            print("\nshort queries: NOT all of the profile's rows were embedded in time")
        report_short_queries(run_short_queries(server.port, PROFILE_USER, profile_token))
    return 0


def run(conversations: list[Conversation], data_dir: Path, valkey: Valkey) -> int:
    model = current_model()
    print(f"embedder   {model} (the current model: rows count as embedded by it)")
    with app_stack(data_dir, valkey) as (server, workers):
        facts = sum(len(c.facts) for c in conversations)
        print(f"\nwriting {facts} facts through create_memory, one request at a time")
        with stack_meter(server, workers, valkey) as meter:
            writes = write_facts(server.port, conversations)
            embedded_after = wait_for_vectors(model, writes.started) if writes.ok else None
        report_writes(conversations, writes, embedded_after, model, meter.line)
        if not writes.ok:
            return EXIT_ALL_FAILED
        passes = []
        for title in ("first pass", "second pass (every earlier search counted as a use)"):
            with stack_meter(server, workers, valkey) as meter:
                passes.append(ask_all(server.port, conversations))
            report_pass(title, passes[-1], meter.line)
        if not passes[0].answers:
            return EXIT_ALL_FAILED
        print(f"\nR@10 second pass - first: {passes[1].recall(10) - passes[0].recall(10):+.3f}")
        searches = Searches()
        for result in passes:
            searches.merge(result.searches)
        search_p95 = report_latency(searches)
        # After both passes, so that their uses are not changed by these searches.
        empty = report_nonsense(*run_nonsense(server.port, conversations))
        profile_token = new_agent(PROFILE_USER)[2]
        write_profile(server.port, profile_token)
        if wait_for_vectors(model, time.perf_counter()) is None:
            print("\nshort queries: NOT all of the profile's rows were embedded in time")
        short = run_short_queries(server.port, PROFILE_USER, profile_token)
        report_short_queries(short)
        report_targets(*passes, search_p95, empty, writes, short)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conversations", type=int, default=5, help="how many conversations (default all 5)"
    )
    parser.add_argument(
        "--limit-questions",
        type=int,
        default=None,
        metavar="N",
        help="ask only the first N questions of each conversation (a quick run)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"the LoCoMo file (default {DEFAULT_DATA.relative_to(ROOT.parent)} beside the repo)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data dir for inspection")
    parser.add_argument(
        "--short-only", action="store_true", help="only the short-query set (no LoCoMo run)"
    )
    args = parser.parse_args()
    if not args.data.is_file():
        parser.error(
            f"no LoCoMo data at {args.data}: see ../shared/eval/README.md, or pass --data PATH"
        )
    if args.conversations < 1 or (args.limit_questions is not None and args.limit_questions < 1):
        parser.error("--conversations and --limit-questions must be at least 1")
    return args


def main() -> int:
    args = parse_args()
    conversations = load(args.data, args.conversations, args.limit_questions)
    data_dir = prepare_environment(
        "mnemo-retrieval-",
        MNEMO_API_RATE="1000000/s",
    )
    if args.keep:
        keep_data_dir()
    print_machine("Mnemo retrieval benchmark (LoCoMo)", ["django", "gunicorn", "celery"])
    print_data(args.data, conversations)
    try:
        with Valkey(data_dir) as valkey:
            setup_django()
            if args.short_only:
                code = run_short_only(data_dir, valkey)
            else:
                seed_users(conversations)
                code = run(conversations, data_dir, valkey)
    except ServerFailed as error:
        print(f"SERVER FAILED: {error}")
        print_logs(data_dir)
        return EXIT_SERVER_FAILED
    finally:
        if args.keep:
            print(f"\nkept       {data_dir}")
    return code


def print_logs(data_dir: Path, lines: int = 20) -> None:
    for log in sorted(data_dir.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        print(f"--- {log.name} (tail) ---", *tail, sep="\n")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the servers are stopped and the data dir removed on the way out
        sys.exit(130)
