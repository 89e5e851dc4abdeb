"""Calibrating the ranking's constants in one process (never run by the tests or `make bench`).

The product's own ranking (memory/search.py rank_memories, search/fusion.py) over the
LoCoMo development facts and bench/short_queries.py's profile, each written with the
services into a throwaway embedded PostgreSQL and embedded by the current model, with
`session` = session-N and `occurred_at` = that session's date (as bench/retrieval.py
writes them through the API). Each question's query vector and each side's candidates are
computed once; every variant of the constants is then scored from them:
R@5/R@10 on the questions, and on the short-query set the share of unrelated queries
that return nothing and the related and exact-words queries whose row comes first.

    .venv/bin/python bench/ranking_lab.py

bench/retrieval.py measures the shipped defaults through the API; this script is how the
defaults were chosen (bench/README.md, "Short queries, time and conversations").
"""

from __future__ import annotations

import datetime
import itertools
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import short_queries  # noqa: E402
from bench.api import Valkey, new_agent, setup_django  # noqa: E402
from bench.common import prepare_environment  # noqa: E402
from bench.retrieval import (  # noqa: E402
    DEFAULT_DATA,
    NONSENSE_QUERIES,
    first_hit,
    load,
)


def main() -> None:
    data_dir = prepare_environment("mnemo-lab-")
    with Valkey(data_dir):  # the cache and broker the writes reach (no worker: embedded here)
        setup_django()
        run()


def run() -> None:
    from django.utils import timezone

    import memory.search as memory_search
    from activity.actors import Actor
    from memory.models import Memory
    from memory.selectors import user_zone
    from memory.services import memory_upsert
    from search import fusion, ranking
    from search.embeddings import get_embedder
    from search.indexing import embed_rows, rows_needing_vectors
    from search.periods import find_period, without_period
    from search.registry import sources

    # Beside the repository, or beside the worktrees' folder (a git worktree one level down).
    data = next(
        path
        for path in (DEFAULT_DATA, ROOT.parent.parent / "shared" / "eval" / DEFAULT_DATA.name)
        if path.is_file()
    )
    conversations = load(data, 5, None)
    users = {}
    started = time.perf_counter()
    for conversation in conversations:
        user = users[conversation.name] = new_agent(conversation.name)[0]
        for fact in conversation.facts:
            memory_upsert(user=user, key=fact.key, value=fact.text, actor=Actor.for_user(user))
        for fact in conversation.facts:
            Memory.objects.filter(user=user, key=fact.key).update(
                session=fact.session,
                occurred_at=conversation.dates[fact.session].replace(tzinfo=datetime.UTC),
            )
    profile = users["profile"] = new_agent("profile")[0]
    for key, value in short_queries.PROFILE.items():
        memory_upsert(user=profile, key=key, value=value, actor=Actor.for_user(profile))
    for source in sources():
        embedder = get_embedder(source.embedder_role)
        embed_rows(rows_needing_vectors(source, embedder.model), embedder)
    print(f"written and embedded in {time.perf_counter() - started:.0f} s", flush=True)

    vectors: dict[str, Any] = {}

    def vector_of(query: str, role: str) -> Any:
        if query not in vectors:
            vectors[query] = ranking.resolved(ranking.query_vector_soon(query, role, user_id=0))
        return vectors[query]

    captured: dict[tuple, tuple] = {}
    real_fuse = ranking.fuse
    real_fusion_fuse = fusion.fuse

    def cached_fuse(rows, query, vector, *columns, closest=False, keyword_query=None):
        # The query's vector is a part of the key: a variant may embed other words.
        key = (str(rows.query), query, keyword_query, columns, vector and vector.vector[0])
        if key not in captured:
            seen = {}

            def capture(keyword_rows, vector_rows, **kwargs):
                seen.update(keyword=keyword_rows, vector=vector_rows, pending=kwargs["pending"])
                return real_fusion_fuse(keyword_rows, vector_rows, **kwargs)

            ranking.fusion.fuse = capture
            try:
                _, values = real_fuse(
                    rows, query, vector, *columns, closest=True, keyword_query=keyword_query
                )
            finally:
                ranking.fusion.fuse = real_fusion_fuse
            captured[key] = (seen, values)
        seen, values = captured[key]
        fused = fusion.fuse(
            seen["keyword"],
            seen["vector"],
            floor=ranking.floor_for(vector, query),
            enforce_floor=not closest,
            vector_weight=weights["vector"],
            keyword_weight=1 - weights["vector"],
            pending=seen["pending"],
        )
        return fused, values

    memory_search.fuse = cached_fuse

    def ask(user, query: str) -> list[str]:
        embedded = query
        if options["embed_without_period"]:
            period = find_period(query, now=timezone.now(), zone=user_zone(user))
            embedded = without_period(query, period)
        vector = vector_of(embedded, memory_search.MEMORY_ROLE)
        ranked = memory_search.rank_memories(user=user, query=query, vector=vector, limit=10)
        keys = dict(Memory.objects.filter(pk__in=[r.pk for r in ranked]).values_list("pk", "key"))
        return [keys[r.pk] for r in ranked]

    def evaluate(label: str) -> None:
        hits5 = hits10 = asked = 0
        by_category: dict[int, list[int]] = {}
        for conversation in conversations:
            dialogs = conversation.dialogs_of()
            for question in conversation.questions:
                rank = first_hit(
                    ask(users[conversation.name], question.text), dialogs, question.evidence
                )
                asked += 1
                hits5 += rank is not None and rank <= 5
                hits10 += rank is not None and rank <= 10
                by_category.setdefault(question.category, []).append(
                    rank is not None and rank <= 10
                )
        empty = sum(not ask(profile, q) for q in short_queries.UNRELATED) / len(
            short_queries.UNRELATED
        )
        related = sum((ask(profile, q)[:1] == [k]) for q, k in short_queries.RELATED.items()) / len(
            short_queries.RELATED
        )
        exact = sum((ask(profile, q)[:1] == [k]) for q, k in short_queries.EXACT.items())
        nonsense = sum(
            not ask(users[c.name], q) for c in conversations for q in NONSENSE_QUERIES
        ) / (len(conversations) * len(NONSENSE_QUERIES))
        categories = " ".join(f"{c}:{sum(v) / len(v):.3f}" for c, v in sorted(by_category.items()))
        print(
            f"{label:44} R@5 {hits5 / asked:.3f} R@10 {hits10 / asked:.3f} ({categories}) "
            f"short-empty {empty:.0%} related-first {related:.0%} exact-first "
            f"{exact}/{len(short_queries.EXACT)} nonsense-empty {nonsense:.0%}",
            flush=True,
        )

    model = get_embedder(memory_search.MEMORY_ROLE).model.split("+")[0]
    e5 = fusion.CALIBRATED_FLOORS[model]
    options = {"embed_without_period": False}
    weights = {"vector": 0.7}
    grid = {
        "span": [0.10],
        "raise": [0.025],
        "bonus": [0.0, 0.2],
        "pull": [0.0, 0.3],
        "hits": [3],
        "strong": [0.5],
        "strip": [0],  # 1: the vector side embeds the query without its period too
        "vw": [0.7],  # the meaning side's weight in the blend (MNEMO_SEARCH_VECTOR_WEIGHT)
    }

    def run_grid(grid: dict[str, list[float]], queue: list[str]) -> None:
        grid = dict(grid)
        for arguments in queue:
            name, values = arguments.split("=")
            grid[name] = [float(value) for value in values.split(",")]
        for values in itertools.product(*grid.values()):
            chosen = dict(zip(grid, values, strict=True))
            fusion.CALIBRATED_FLOORS[model] = fusion.Floor(
                query=e5.query,
                row=e5.row,
                strong=e5.row + chosen["span"] if chosen["span"] else None,
            )
            fusion.SHORT_RAISE = chosen["raise"]
            memory_search.PERIOD_BONUS = chosen["bonus"]
            ranking.EPISODE_PULL = chosen["pull"]
            ranking.STRONG_HITS = int(chosen["hits"])
            ranking.STRONG_SCORE = chosen["strong"]
            options["embed_without_period"] = bool(chosen["strip"])
            weights["vector"] = chosen["vw"]
            evaluate(" ".join(f"{k}={v:g}" for k, v in chosen.items()))

    queue = [argument for argument in sys.argv[1:] if "=" in argument]
    follow = next((Path(a) for a in sys.argv[1:] if "=" not in a), None)
    done = 0
    while True:
        run_grid(grid, queue)
        if follow is None:
            return
        # More grids, one a line, appended to the file named on the command line.
        while len(lines := follow.read_text().splitlines()) <= done:
            time.sleep(1)
        queue, done = lines[done].split(), done + 1


if __name__ == "__main__":
    main()
