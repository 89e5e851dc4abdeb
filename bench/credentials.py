"""What the credential check (lib/credentials.py) costs per write, and what it flags in a
large body of ordinary text.

    .tools/bin/uv run --frozen python bench/credentials.py
    .tools/bin/uv run --frozen python bench/credentials.py --scan .venv/lib/python3.12/site-packages

Needs no database: the check is plain Python. Prints the median and the best of five runs
of `find_credential` on:

- a typical memory (76 characters);
- a 2,000-character value (the longest memory value) of prose with dates;
- a 2,000-character value full of the words the rules look for ("password", "token",
  "key", digits, URLs), the slow case;
- a value holding a key (found by the first rules: the check stops there);
- a 1 MiB document (the largest an agent may write) of each of the two.

With --scan DIR it also runs `find_credentials` on every string literal of the Python
files under DIR (code, docstrings, test data: text that talks about passwords and keys
far more than memories do) and prints how many strings each kind flags, with examples.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lib.credentials import find_credential, find_credentials  # noqa: E402

BUDGET_US = 3000  # the write path's CPU budget per write: a few milliseconds

TYPICAL = "Prefers bullet points in reports, and a TL;DR at the top (since 2024-05-01)"
PROSE = (("Notes from the weekly review 2024-05-01: " + "the team chose PostgreSQL. ") * 40)[:2000]
DENSE = (
    (
        "The password policy changed; the Wi-Fi password is on the fridge. The API key "
        "rotation (token budget 2000) is in https://wiki.example.com/keys, call 555-2671. "
    )
    * 20
)[:2000]
KEY = "Deploy with " + "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
DOCUMENT = (PROSE * 600)[: 1 << 20]
DOCUMENT_DENSE = (DENSE * 600)[: 1 << 20]


def per_call_us(text: str, calls: int, runs: int = 5) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            find_credential(text)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times), min(times)


def scan(root: Path, examples: int) -> None:
    flagged: Counter[str] = Counter()
    shown: defaultdict[str, list[str]] = defaultdict(list)
    strings = files = 0
    for path in sorted(root.glob("**/*.py")):
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError, RecursionError):
            continue
        files += 1
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            strings += 1
            for found in find_credentials(node.value):
                flagged[found.kind] += 1
                around = node.value[max(0, found.start - 40) : found.end + 10]
                if len(shown[found.kind]) < examples:
                    shown[found.kind].append(f"{path.name}: {around!r}")
    print(f"\nscan of {root}: {strings:,} strings in {files:,} files")
    print(f"  flagged: {sum(flagged.values())} ({dict(flagged.most_common())})")
    for kind, lines in shown.items():
        print(f"  {kind}:")
        for line in lines:
            print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scan", type=Path, help="also scan the Python strings under this folder")
    parser.add_argument("--examples", type=int, default=5, help="examples shown per kind")
    args = parser.parse_args()

    print("find_credential, µs per check (median / best of 5 runs)")
    cases = [
        ("typical memory (76 chars)", TYPICAL, 20000),
        ("2,000 chars of prose", PROSE, 2000),
        ("2,000 chars dense with the rules' words", DENSE, 1000),
        ("a value holding a GitHub token", KEY, 20000),
        ("1 MiB document of prose", DOCUMENT, 5),
        ("1 MiB document dense with the rules' words", DOCUMENT_DENSE, 3),
    ]
    for name, text, calls in cases:
        assert (find_credential(text) is not None) == (text is KEY), name
        median, best = per_call_us(text, calls)
        verdict = "" if len(text) > 2000 else ("  met" if median <= BUDGET_US else "  NOT MET")
        print(f"  {name:42} {median:10.1f} / {best:10.1f}{verdict}")
    print(f"  (target: a memory value's check well inside the write's {BUDGET_US} µs budget)")
    if args.scan:
        scan(args.scan, args.examples)


if __name__ == "__main__":
    main()
