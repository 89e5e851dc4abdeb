"""Memory search in other languages and scripts (`make bench`; never run by the tests).

The set, bench/data/multilingual.json, is one person's memories per language (Chinese,
Japanese, Russian, Arabic, German, and English as the control), about a dozen each on
shared topics, and seven queries per language written in that language, each naming the
memory that answers it: some are words of the memory ("绿茶", "Fahrrad"), some ask in
other words or other forms of them ("Где учится сестра?", "grüner Tee").

Through the shipped defaults, in a throwaway embedded PostgreSQL: one user who writes in
all of these languages holds every memory (keys `fact:<language>-<n>`), so each
query's wrong answers include the same topic in the other languages ("绿茶" beside
"緑茶", "Tee" beside "tea"). The memories are written with memory_upsert as the user,
embedded by the shipped default embedder (get_embedder(); e5 unless OPENAI_API_KEY is set,
which this bench unsets) as the workers embed them (search/indexing.py), then every query
is asked twice:

- keyword only: memory/search.py's rank_memories with no query vector, which is what search
  answers while the embedding provider is down (the keyword side and the words-only floor);
- fused: memory/search.py's search_memory, the path agents use (the query embedded, both
  sides, the relevance floor, the nudges).

A query is a hit at k when its memory is among the first k results. Prints R@1 and R@5 per
language for both, the misses with what came first, and the target: fused R@5 >= TARGET in
every language. A benchmark reports; the exit code is 0 whether the target is met or not.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# `python bench/multilingual.py` puts bench/ first on sys.path, where bench/search.py would
# shadow the project's `search` app; the project root goes there instead.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.common import prepare_environment, print_machine, verdict  # noqa: E402

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

DEFAULT_DATA = ROOT / "bench" / "data" / "multilingual.json"
TARGET = 0.9  # fused R@5 in every language
KS = (1, 5)


@dataclass
class Result:
    hits: dict[str, dict[int, int]] = field(
        default_factory=lambda: {"keyword": dict.fromkeys(KS, 0), "fused": dict.fromkeys(KS, 0)}
    )
    misses: list[str] = field(default_factory=list)
    asked: int = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))

    os.environ.pop("OPENAI_API_KEY", None)
    prepare_environment("mnemo-multilingual-")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    # Each write asks the workers for its vector through Valkey, which this bench does not
    # start: it embeds the rows itself, and the warning would repeat for every write.
    logging.getLogger("search.indexing").setLevel(logging.ERROR)

    print_machine("Mnemo multilingual search benchmark", ["django"])
    from search.embeddings import get_embedder

    print(f"embedder   {get_embedder().model} (the shipped default)")
    print(f"data       {args.data}")
    print()
    user = write(data["languages"])
    named = names(data["languages"])
    results = {
        code: ask(user, code, language, named) for code, language in data["languages"].items()
    }
    report(data, results)


def key_of(code: str, key: str) -> str:
    """fact:tea of Chinese -> fact:zh-tea."""
    kind, name = key.split(":", 1)
    return f"{kind}:{code}-{name}"


def stored_key(code: str, number: int) -> str:
    """The key a memory is stored under: fact:zh-3. A key's words are searched as the
    memory's own (weight A), and the set's English names ("tea") would match across
    languages; the product makes keys from the text itself."""
    return f"fact:{code}-{number}"


def write(languages: dict) -> AbstractBaseUser:
    """The user holding every language's memories, each with its vector."""
    from django.contrib.auth import get_user_model

    from activity.actors import Actor
    from memory.models import Memory
    from memory.services import memory_upsert
    from search.embeddings import get_embedder
    from search.indexing import embed_rows, rows_needing_vectors
    from search.registry import source_for

    user = get_user_model().objects.create_user(username="multilingual")
    for code, language in languages.items():
        for number, value in enumerate(language["memories"].values(), start=1):
            key = stored_key(code, number)
            memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user))
    embedder = get_embedder(source_for(Memory).embedder_role)
    embed_rows(rows_needing_vectors(source_for(Memory), embedder.model), embedder)
    return user


def names(languages: dict) -> dict[str, str]:
    """Stored key -> the set's name for it (fact:zh-1 -> fact:zh-tea)."""
    return {
        stored_key(code, number): key_of(code, key)
        for code, language in languages.items()
        for number, key in enumerate(language["memories"], start=1)
    }


def ask(user: AbstractBaseUser, code: str, language: dict, named: dict[str, str]) -> Result:
    from memory.models import Memory
    from memory.search import rank_memories, search_memory

    keys = {pk: named[key] for pk, key in Memory.objects.filter(user=user).values_list("pk", "key")}
    result = Result()
    for query, key in language["queries"]:
        expected = key_of(code, key)
        result.asked += 1
        ranked = rank_memories(user=user, query=query, vector=None, limit=max(KS))
        words_only = [keys[row.pk] for row in ranked]
        hits = search_memory(user=user, query=query, limit=max(KS))
        fused = [named[hit.memory.key] for hit in hits]
        for mode, found in (("keyword", words_only), ("fused", fused)):
            for k in KS:
                result.hits[mode][k] += expected in found[:k]
            if expected not in found[:1]:
                first = found[0] if found else "nothing"
                result.misses.append(f"{mode:<7} {query!r}: {expected} not first ({first} is)")
    return result


def report(data: dict, results: dict[str, Result]) -> None:
    print(f"{'language':<20} {'queries':>7}   keyword R@1  R@5   fused R@1  R@5")
    met = True
    for code, result in results.items():
        name = data["languages"][code]["name"]
        share = {mode: {k: result.hits[mode][k] / result.asked for k in KS} for mode in result.hits}
        met = met and share["fused"][5] >= TARGET
        print(
            f"{name:<20} {result.asked:>7}   "
            f"{share['keyword'][1]:>11.2f} {share['keyword'][5]:>4.2f}   "
            f"{share['fused'][1]:>9.2f} {share['fused'][5]:>4.2f}"
        )
    print()
    print(f"target     fused R@5 >= {TARGET} in every language: {verdict(met)}")
    print()
    print("misses at 1 (keyword only / fused):")
    for code, result in results.items():
        for miss in result.misses:
            print(f"  {code}  {miss}")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"\ntook {time.monotonic() - started:.0f} s")
