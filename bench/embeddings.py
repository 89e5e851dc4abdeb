"""Throughput of the local embedding model (WordLlama), in texts per second.

    .tools/bin/uv run --frozen python bench/embeddings.py [--texts 2000] [--processes 2]

Needs no database. The texts are synthetic: words drawn with a Zipf distribution from
the ~20k whole-word pieces of WordLlama's own vocabulary, so word repetition is like
natural text's (which matters: LocalEmbedder remembers each word's token ids). Prints,
for 150-word texts and 800-word chunks:

- LocalEmbedder, a fresh one (cold word memo) and again on new texts (warm memo);
- wordllama's own WordLlamaInference.embed on the same texts, for comparison;
- N warm processes embedding at once (as N Celery workers would), their total texts/s.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DATABASE_URL", "postgres://bench:unused@127.0.0.1:1/none")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("MNEMO_EMBEDDING_PROVIDER", "local")


def vocabulary() -> list[str]:
    import json

    from search.wordllama_embedder import WORDLLAMA_TOKENIZER, wordllama_dir

    config = json.loads((wordllama_dir() / WORDLLAMA_TOKENIZER).read_text())
    pieces = sorted(config["model"]["vocab"].items(), key=lambda item: item[1])
    return [piece[1:] for piece, _ in pieces if piece.startswith("▁") and piece[1:].isalpha()]


def make_texts(count: int, words: int, seed: int) -> list[str]:
    import numpy as np

    vocab = vocabulary()
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.1, size=(count, words)), len(vocab)) - 1
    return [" ".join(vocab[rank] for rank in row) for row in ranks]


def rate(embed, texts: list[str], batch: int = 64) -> float:
    start = time.perf_counter()
    for offset in range(0, len(texts), batch):
        embed(texts[offset : offset + batch])
    return len(texts) / (time.perf_counter() - start)


def worker(args: tuple[int, int, int]) -> tuple[int, float, float]:
    import django

    django.setup()
    from search.wordllama_embedder import LocalEmbedder

    count, words, seed = args
    texts = make_texts(count, words, seed)
    embedder = LocalEmbedder()
    embedder.embed(make_texts(count // 2, words, seed + 100))  # a worker that has run a while
    start = time.perf_counter()
    for offset in range(0, len(texts), 64):
        embedder.embed(texts[offset : offset + 64])
    return count, start, time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=2000, help="texts per measurement")
    parser.add_argument("--processes", type=int, default=2, help="processes for the total")
    options = parser.parse_args()

    import django

    django.setup()
    from tokenizers import Tokenizer
    from wordllama import WordLlamaInference

    from search.wordllama_embedder import WORDLLAMA_TOKENIZER, LocalEmbedder, wordllama_dir

    print(
        f"{os.cpu_count()} CPUs; TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM')}"
    )
    started = time.perf_counter()
    embedder = LocalEmbedder()
    print(f"model {embedder.model} loaded in {time.perf_counter() - started:.2f} s")
    tokenizer = Tokenizer.from_file(str(wordllama_dir() / WORDLLAMA_TOKENIZER))
    reference = WordLlamaInference(embedder._matrix, tokenizer)

    for words in (150, 800):
        count = options.texts if words == 150 else max(options.texts // 2, 64)
        first, second = make_texts(count, words, seed=1), make_texts(count, words, seed=2)
        cold = rate(LocalEmbedder().embed, first)
        warm = rate(embedder.embed, first) and rate(embedder.embed, second)
        theirs = rate(lambda batch: reference.embed(batch, norm=True), second, batch=16)
        with multiprocessing.get_context("spawn").Pool(options.processes) as pool:
            runs = pool.map(worker, [(count, words, 10 + n) for n in range(options.processes)])
        total = sum(n for n, _, _ in runs) / (
            max(e for _, _, e in runs) - min(s for _, s, _ in runs)
        )
        print(
            f"{words:>4}-word texts: LocalEmbedder {cold:,.0f}/s cold, {warm:,.0f}/s warm; "
            f"WordLlamaInference.embed {theirs:,.0f}/s; "
            f"{options.processes} processes together {total:,.0f}/s"
        )


if __name__ == "__main__":
    main()
