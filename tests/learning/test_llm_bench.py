"""bench/llm.py against the scripted model server: a model that answers every case as the
case file expects scores 1.0 on each step; one that breaks the profile's format and invents
facts is reported (NOT MET, the missed checks named), and Mnemo refuses its profile and
keeps the old one."""

import json

import pytest

from bench.llm import CASES_FILE, found_spelling, load_cases, run_bench
from learning.user_memory_doc import render_profile

pytestmark = pytest.mark.django_db

CASES = load_cases(CASES_FILE)


def _messages_text(request: dict) -> tuple[str, str]:
    messages = request["messages"]
    system = next(m["content"] for m in messages if m["role"] == "system")
    rest = "\n".join(m["content"] for m in messages if m["role"] != "system")
    return system, rest


def _case_of(step: str, text: str) -> dict:
    field = "question" if step == "ask" else "user_message"
    [case] = [case for case in CASES[step] if case[field] in text]
    return case


def _step_of(system: str) -> str:
    if system.startswith("You keep a user's memory profile"):
        return "consolidation"
    if system.startswith("You read one turn"):
        return "capture"
    assert system.startswith("You answer a question"), system[:80]
    return "ask"


def _stated(case: dict) -> list[str]:
    return [fact[0].rstrip("*") for fact in case["must_appear"]]


def right_answer(request: dict) -> str:
    """What a good model answers: NOOP or a valid profile holding the stated facts, the
    observations that state them, an answer that names them."""
    system, text = _messages_text(request)
    step = _step_of(system)
    case = _case_of(step, text)
    facts = _stated(case)
    if step == "consolidation":
        if case["expect"] == "noop":
            return "NOOP"
        bullets = [f"Noted about the user: {fact}" for fact in facts]
        return render_profile(
            frontmatter={
                "user_id": 1,
                "schema_version": 1,
                "last_updated": "2026-01-01T00:00:00+00:00",
                "turn_count": 1,
            },
            sections={"Identity": bullets},
        )
    if step == "capture":
        if case["expect_none"]:
            return "[]"
        said = " and ".join(facts)
        return json.dumps([{"type": "discovery", "text": f"The user said this: {said}."}])
    return "From the memories: " + ", ".join(facts) + "."


def bad_answer(request: dict) -> str:
    """What a weak model answers: prose instead of a profile, and invented facts."""
    system, text = _messages_text(request)
    step = _step_of(system)
    case = _case_of(step, text)
    invented = [fact[0].rstrip("*") for fact in case["must_not_appear"]]
    if step == "consolidation":
        return "Sure! Here is the updated profile: the user likes " + " and ".join(
            invented or ["cats"]
        )
    if step == "capture":
        said = " and ".join([*_stated(case), *invented]) or "likes talking about the weather"
        return json.dumps([{"type": "discovery", "text": f"The user mentioned {said} today."}])
    return "The user probably prefers " + " and ".join(invented or ["nothing"]) + "."


def run(llm_server, answer) -> tuple[list, str]:
    llm_server.chat_default = answer
    printed: list[str] = []
    reports = run_bench(load_cases(CASES_FILE), out=printed.append)
    return reports, "\n".join(printed)


def test_the_case_file_is_complete_and_in_several_languages():
    assert {step: len(cases) >= 4 for step, cases in CASES.items()} == {
        "consolidation": True,
        "capture": True,
        "ask": True,
    }
    languages = {case["language"] for cases in CASES.values() for case in cases}
    assert len(languages) >= 4
    assert any(case["expect"] == "noop" for case in CASES["consolidation"])
    assert any(case["expect_none"] for case in CASES["capture"])
    for cases in CASES.values():
        for case in cases:
            assert (
                case["must_appear"]
                or case["must_not_appear"]
                or case.get("expect") == "noop"
                or case.get("expect_none")
            ), case["id"]


def test_facts_match_whole_words_in_any_case_and_a_star_takes_any_ending():
    assert found_spelling(["Lisbon", "Lisboa"], "Moved to LISBOA in May") == "Lisboa"
    assert found_spelling(["Max"], "answers within max_tokens") is None
    assert found_spelling(["Max"], "The dog is called Max.") == "Max"
    assert found_spelling(["bullet*"], "Prefers bullets") == "bullet*"
    assert found_spelling(["bullet"], "Prefers bullets") is None
    assert found_spelling(["Tomás"], "tomás es alérgico") == "Tomás"


def test_a_model_that_answers_right_scores_full_on_every_step(llm_server):
    reports, printed = run(llm_server, right_answer)

    assert [report.step for report in reports] == ["consolidation", "capture", "ask"]
    for report in reports:
        missed = [(r.case_id, c.name) for r in report.results for c in r.checks if not c.ok]
        assert missed == [], report.step
        assert report.score == 1.0
        assert report.met
        assert len(report.results) == len(CASES[report.step])
        prompt, completion = report.tokens()
        assert prompt > 0
        assert completion > 0
    consolidation = reports[0]
    # NOOP cases make one call each, rewrites one, capture one per case, ask one per case.
    assert len(consolidation.latencies()) == len(CASES["consolidation"])
    assert "NOT MET" not in printed
    assert printed.count("score ≥ 0.90: met") == 3
    assert "latency per call p50" in printed


def test_a_weak_model_is_reported_and_its_profile_refused(llm_server):
    from learning.user_memory_loading import load_profile
    from profiles.models import Profile

    reports, printed = run(llm_server, bad_answer)

    consolidation, capture, ask = reports
    assert not consolidation.met
    assert not capture.met
    assert not ask.met
    assert printed.count("score ≥ 0.90: NOT MET") == 3
    # Every consolidation answer broke the format: refused twice (two calls), nothing written.
    formats = consolidation.checks("format")
    assert [check.ok for check in formats] == [False] * len(CASES["consolidation"])
    assert all(len(result.latencies_ms) == 2 for result in consolidation.results)
    assert all(r.refused and r.old_profile_kept for r in consolidation.results)
    assert "refused: Mnemo kept the old profile" in printed
    assert "model's last answer: Sure! Here is the updated profile" in printed
    assert "BUG" not in printed
    lisbon = Profile.objects.get(user__username="llm-bench-consolidation-en-moved-to-lisbon")
    kept = load_profile(lisbon.user).text
    assert "Lives in Berlin" in kept
    assert "Lisbon" not in kept
    # The invented facts are named where they were written.
    invented = [c for c in capture.checks("invented") if not c.ok]
    assert "does not write 'canary'" in [check.name for check in invented]
    assert "missed: does not write 'matcha' (wrote 'matcha')" in printed
    assert "notes nothing" in printed  # the small talk it noted anyway
