"""The model steps evaluated on the configured model (`make bench`; the tests run it against
the scripted server).

Runs the three steps that ask the LLM over the hand-written cases of bench/llm_cases.json,
each case for a user of its own on a throwaway embedded PostgreSQL:

* consolidation (learning/consolidation.py `consolidate`): the case's profile is stored as the
  user's USER_MEMORY.md, its turn is consolidated, and what Mnemo kept is checked;
* capture (learning/capture.py `capture`): the turn's observations as Mnemo noted them;
* ask_memory (briefing/ask.py): the case's memories are stored and embedded, then asked.

Each case's checks: the format was valid (Mnemo could use the answer, after its one retry
at most), NOOP or a rewrite as expected (capture: nothing, or something, noted), each fact
the turn states found in what was kept, and no fact it does not support written. A step's
score is the share of its checks passed; target ≥ TARGET_SCORE, printed `met` or `NOT MET`.
Beside the score: the LLM's tokens (LLMCall rows) and its latency per call. When
consolidation's answer is refused, Mnemo must keep the old profile: the bench says so for
every refusal, and prints BUG if the profile changed anyway.

The model is the service's: MNEMO_LLM_MODEL, MNEMO_LLM_BASE_URL, MNEMO_LLM_API_KEY (and
MNEMO_LLM_TIMEOUT, MNEMO_LLM_TOKENIZER), read by config/settings.py. Without one, it says
so and exits 0. A benchmark reports, it does not gate.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project (Django settings, apps) and bench.common

from bench.common import percentile, prepare_environment, print_machine, verdict  # noqa: E402

CASES_FILE = ROOT / "bench" / "llm_cases.json"
STEPS = ("consolidation", "capture", "ask")
TARGET_SCORE = 0.9
ASK_TOKENS = 200  # ask_memory's default answer budget
MAX_SHOWN_CHARS = 160  # of a kept text quoted under a missed check

Fact = Sequence[str]  # spellings, any of which counts
Print = Callable[[str], None]


# --- matching facts -------------------------------------------------------------------------


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def fact_pattern(spelling: str) -> re.Pattern[str]:
    """A spelling as whole words, case-insensitive; a trailing * takes any ending."""
    prefix = spelling.endswith("*")
    core = re.escape(_normal(spelling.rstrip("*")))
    return re.compile(rf"(?<!\w){core}" + ("" if prefix else r"(?!\w)"))


def found_spelling(fact: Fact, text: str) -> str | None:
    """The first of the fact's spellings that the text holds, or None."""
    normal = _normal(text)
    return next((spelling for spelling in fact if fact_pattern(spelling).search(normal)), None)


# --- results --------------------------------------------------------------------------------


@dataclass
class Check:
    kind: str  # format, decision, fact, invented
    name: str
    ok: bool
    detail: str = ""


@dataclass
class CaseResult:
    step: str
    case_id: str
    language: str
    checks: list[Check] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latencies_ms: list[int] = field(default_factory=list)
    kept: str = ""  # what Mnemo kept: the profile, the observations, the answer
    answers: list[str] = field(default_factory=list)  # the model's answers, as sent
    refused: bool = False  # consolidation: the answer was refused in the end
    old_profile_kept: bool | None = None  # consolidation: after a refusal, unchanged?

    def passed(self) -> int:
        return sum(check.ok for check in self.checks)


@dataclass
class StepReport:
    step: str
    results: list[CaseResult]

    def checks(self, kind: str | None = None) -> list[Check]:
        return [c for r in self.results for c in r.checks if kind is None or c.kind == kind]

    @property
    def score(self) -> float:
        checks = self.checks()
        return sum(c.ok for c in checks) / len(checks) if checks else 1.0

    @property
    def met(self) -> bool:
        return self.score >= TARGET_SCORE

    def tokens(self) -> tuple[int, int]:
        return (
            sum(r.prompt_tokens for r in self.results),
            sum(r.completion_tokens for r in self.results),
        )

    def latencies(self) -> list[int]:
        return [ms for r in self.results for ms in r.latencies_ms]


def _fact_checks(case: dict[str, Any], text: str, *, wrote: bool) -> list[Check]:
    """Each stated fact must be in `text`; each unsupported one must not be, when the model
    wrote it (text the model did not write invents nothing)."""
    checks = []
    for fact in case.get("must_appear", []):
        spelling = found_spelling(fact, text)
        checks.append(Check("fact", f"keeps {fact[0]!r}", spelling is not None))
    for fact in case.get("must_not_appear", []):
        spelling = found_spelling(fact, text) if wrote else None
        detail = f"wrote {spelling!r}" if spelling else ""
        checks.append(Check("invented", f"does not write {fact[0]!r}", spelling is None, detail))
    return checks


# --- one user per case ----------------------------------------------------------------------


def _case_user(step: str, case: dict[str, Any]) -> tuple[Any, Any]:
    """A fresh user learning from turns, with an agent and room in the daily LLM budget."""
    from django.contrib.auth import get_user_model

    from profiles.models import MAX_LLM_DAILY_TOKENS, Profile
    from profiles.services import agent_get_or_create, agent_set_learning

    username = f"llm-bench-{step}-{case['id']}"[:150]
    user = get_user_model().objects.create_user(username)  # no password: never signs in
    Profile.objects.update_or_create(
        user=user, defaults={"auto_learn": True, "llm_daily_tokens": MAX_LLM_DAILY_TOKENS}
    )
    agent = agent_set_learning(
        agent=agent_get_or_create(user=user, name="bench"), learns_from_turns=True
    )
    return user, agent


def _turn(user: Any, agent: Any, case: dict[str, Any]) -> Any:
    from llm.models import Turn, TurnStatus

    return Turn.objects.create(
        user=user,
        agent=agent,
        status=TurnStatus.QUEUED,
        user_message=case["user_message"],
        assistant_reply=case["assistant_reply"],
    )


def _calls(result: CaseResult, user: Any) -> None:
    from llm.models import LLMCall

    for prompt, completion, latency in LLMCall.objects.filter(user=user).values_list(
        "prompt_tokens", "completion_tokens", "latency_ms"
    ):
        result.prompt_tokens += prompt
        result.completion_tokens += completion
        result.latencies_ms.append(latency)


# --- the steps ------------------------------------------------------------------------------


def run_consolidation(case: dict[str, Any], *, budget: int) -> CaseResult:
    from activity.actors import Actor
    from context.services import PROFILE_PATH, document_write
    from learning.consolidation import consolidate
    from learning.outcomes import ProfileStatus
    from learning.user_memory_doc import profile_frontmatter, render_profile
    from learning.user_memory_loading import load_profile
    from profiles.models import Profile

    user, agent = _case_user("consolidation", case)
    Profile.objects.filter(user=user).update(profile_budget=budget)
    if case.get("profile") is not None:
        document_write(
            user=user,
            path=PROFILE_PATH,
            content=render_profile(
                frontmatter=profile_frontmatter(user, turn_count=0), sections=case["profile"]
            ),
            actor=Actor.for_user(user),
        )
    before = load_profile(user)
    outcome = consolidate(_turn(user, agent, case))
    after = load_profile(user)
    result = CaseResult("consolidation", case["id"], case.get("language", ""), kept=after.text)
    attempts = f"{outcome.attempts} call(s)"
    result.checks.append(
        Check(
            "format",
            "answer usable (NOOP or the exact format)",
            outcome.status in (ProfileStatus.NOOP, ProfileStatus.REWRITTEN),
            f"{outcome.status}, {attempts}: {outcome.reason}".rstrip(": "),
        )
    )
    expected = ProfileStatus.NOOP if case["expect"] == "noop" else ProfileStatus.REWRITTEN
    result.checks.append(
        Check("decision", f"answers {case['expect']}", outcome.status == expected, outcome.status)
    )
    result.checks += _fact_checks(case, after.text, wrote=outcome.status == ProfileStatus.REWRITTEN)
    if outcome.status == ProfileStatus.FAILED:
        result.refused = True
        # The same stored version (or still none: the empty profile is rendered anew,
        # with the time, at every load).
        result.old_profile_kept = (after.exists, after.version_id) == (
            before.exists,
            before.version_id,
        )
    _calls(result, user)
    return result


def run_capture(case: dict[str, Any]) -> CaseResult:
    from learning.capture import capture

    user, agent = _case_user("capture", case)
    outcome = capture(_turn(user, agent, case))
    texts = [observation.text for observation in outcome.observations]
    result = CaseResult("capture", case["id"], case.get("language", ""), kept="\n".join(texts))
    usable = outcome.method == "llm" and not outcome.failed
    detail = f"{outcome.method}, {outcome.attempts} call(s): {outcome.reason}".rstrip(": ")
    result.checks.append(Check("format", "answer usable (a JSON list)", usable, detail))
    if case.get("expect_none"):
        decision = Check("decision", "notes nothing", usable and not texts, f"{len(texts)} noted")
    else:
        decision = Check("decision", "notes something", bool(texts), f"{len(texts)} noted")
    result.checks.append(decision)
    result.checks += _fact_checks(case, result.kept, wrote=bool(texts))
    _calls(result, user)
    return result


def run_ask(case: dict[str, Any]) -> CaseResult:
    from activity.actors import Actor
    from briefing.ask import ask_memory
    from memory.services import memory_upsert
    from search.indexing import embed_pending

    user, agent = _case_user("ask", case)
    for key, value in case["memories"].items():
        memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user))
    embed_pending()  # as the worker would: the vector side of the search sees them
    answer = ask_memory(user=user, agent=agent, question=case["question"], max_tokens=ASK_TOKENS)
    result = CaseResult("ask", case["id"], case.get("language", ""), kept=answer.answer)
    usable = answer.summarized and bool(answer.answer.strip())
    result.checks.append(
        Check("format", "the model answered", usable, answer.note or f"{answer.tokens} tokens")
    )
    result.checks += _fact_checks(case, answer.answer, wrote=answer.summarized)
    _calls(result, user)
    return result


def run_bench(
    cases: dict[str, list[dict[str, Any]]],
    *,
    steps: Sequence[str] = STEPS,
    budget: int | None = None,
    out: Print = print,
) -> list[StepReport]:
    """Every case of the chosen steps, each printed as it finishes; the step reports."""
    from profiles.models import DEFAULT_PROFILE_BUDGET

    runners: dict[str, Callable[[dict[str, Any]], CaseResult]] = {
        "consolidation": lambda case: run_consolidation(
            case, budget=budget or DEFAULT_PROFILE_BUDGET
        ),
        "capture": run_capture,
        "ask": run_ask,
    }
    reports = []
    for step in steps:
        out(f"\n{step}")
        results = []
        for case in cases.get(step, []):
            started = time.perf_counter()
            with _answers_kept() as answers:
                result = runners[step](case)
            result.answers = answers
            show_case(result, time.perf_counter() - started, out)
            results.append(result)
        report = StepReport(step, results)
        show_step(report, out)
        reports.append(report)
    return reports


@contextlib.contextmanager
def _answers_kept() -> Iterator[list[str]]:
    """The text of each answer the model gives inside the block, for the report: Mnemo
    keeps only its counts (LLMCall), and a refused answer is worth seeing."""
    from llm import client

    answers: list[str] = []
    read = client._answer_text

    def keeping(response: object) -> str:
        answers.append(read(response))
        return answers[-1]

    client._answer_text = keeping
    try:
        yield answers
    finally:
        client._answer_text = read


# --- printing -------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def show_case(result: CaseResult, seconds: float, out: Print) -> None:
    total = len(result.checks)
    mark = "ok  " if result.passed() == total else "MISS"
    out(
        f"  {mark} {result.case_id:<24} {result.language:<3} {result.passed()}/{total} checks  "
        f"{len(result.latencies_ms)} call(s)  {result.prompt_tokens:,}+"
        f"{result.completion_tokens:,} tokens  {seconds:.1f} s"
    )
    for check in result.checks:
        if not check.ok:
            detail = f" ({_one_line(check.detail)})" if check.detail else ""
            out(f"         missed: {check.name}{detail}")
    if result.passed() < total:
        if result.answers:
            out(f"         model's last answer: {_one_line(result.answers[-1]) or '(empty)'}")
        out(f"         kept: {_one_line(result.kept) or '(nothing)'}")
    if result.refused:
        if result.old_profile_kept:
            out("         refused: Mnemo kept the old profile")
        else:
            out("         BUG: the answer was refused but the profile changed")


def show_step(report: StepReport, out: Print) -> None:
    parts = []
    for kind, label in (
        ("format", "format valid"),
        ("decision", "NOOP/rewrite right" if report.step == "consolidation" else "noted or not"),
        ("fact", "facts kept"),
        ("invented", "nothing invented"),
    ):
        checks = report.checks(kind)
        if checks:
            parts.append(f"{label} {sum(c.ok for c in checks)}/{len(checks)}")
    prompt, completion = report.tokens()
    cases = len(report.results) or 1
    latencies = report.latencies()
    passed = sum(c.ok for c in report.checks())
    out(
        f"  {report.step}: score {report.score:.2f} ({passed}/{len(report.checks())} checks; "
        + "; ".join(parts)
        + ")"
    )
    out(
        f"    tokens {prompt:,} prompt + {completion:,} completion "
        f"({(prompt + completion) / cases:,.0f} per case); {len(latencies)} calls, latency per "
        f"call p50 {percentile(latencies, 50):,.0f} ms, p95 {percentile(latencies, 95):,.0f} ms"
    )
    refused = [r for r in report.results if r.refused]
    if refused:
        kept = sum(bool(r.old_profile_kept) for r in refused)
        out(f"    refused answers {len(refused)}, old profile kept {kept}/{len(refused)}")
    out(f"    score ≥ {TARGET_SCORE:.2f}: {verdict(report.met)}")


def load_cases(path: Path = CASES_FILE, *, only: str = "") -> dict[str, list[dict[str, Any]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {step: [case for case in data.get(step, []) if only in case["id"]] for step in STEPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=CASES_FILE)
    parser.add_argument(
        "--steps", default=",".join(STEPS), help="comma-separated: " + ", ".join(STEPS)
    )
    parser.add_argument("--only", default="", help="only the cases whose id holds this text")
    parser.add_argument(
        "--profile-budget", type=int, default=None, help="tokens (default: the product's)"
    )
    args = parser.parse_args()
    steps = [step for step in args.steps.split(",") if step]
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps: {', '.join(sorted(unknown))}")
    prepare_environment(
        "mnemo-bench-llm-",
        CELERY_BROKER_URL="memory://",  # nothing is sent to a worker: the bench embeds itself
        CACHE_URL="locmemcache://",
        MNEMO_EMBEDDING_PROVIDER="wordllama",
    )
    import django

    django.setup()
    from django.core.management import call_command

    from llm.client import llm_configured, llm_description, model_token_counter

    print_machine("bench/llm.py: the model steps on the configured model", ["Django", "openai"])
    if not llm_configured():
        print(
            "no model configured: set MNEMO_LLM_MODEL and MNEMO_LLM_BASE_URL (or "
            "MNEMO_LLM_API_KEY for api.openai.com) to run it; nothing measured"
        )
        return
    # The counter actually used: o200k_base is not shipped, so offline it is cl100k_base.
    print(f"model      {llm_description()}, tokens counted as {model_token_counter().name}")
    call_command("migrate", verbosity=0)
    reports = run_bench(
        load_cases(args.cases, only=args.only), steps=steps, budget=args.profile_budget
    )
    print("\nall targets met" if all(r.met for r in reports) else "\nsome targets NOT MET")


if __name__ == "__main__":
    main()
