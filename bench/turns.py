"""The turn pipeline's own cost (`make bench`; never run by the tests).

Reports turns as an agent would (`POST /api/v1/turns` through Django's test client, with a
bearer token) and processes each one as the Celery worker does
(`learning.pipeline.process_turn`), against a fake OpenAI-compatible LLM that answers at
once (tests/fake_openai.py, on 127.0.0.1). What is left is Mnemo's time per turn: the
report, claiming the turn, building the prompts, the openai client's round trips to a
server that does no work, checking the answers, the profile's document write, the
observations' memory writes with their review and near-duplicate checks, and the
activity. The LLM's own time is reported beside it (LLMCall.latency_ms), and subtracted.

Two runs on one throwaway embedded PostgreSQL, a user holding 500 entries:
* with the LLM: every third turn the model rewrites the profile, otherwise NOOP; each
  turn it returns two observations (half of them already known: duplicates);
* without an LLM: cue-phrase capture only.

Target: p95 ≤ 50 ms of Mnemo's time per turn. A benchmark reports, it does not gate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project (Django settings, apps) and bench.common

from bench.common import percentile, prepare_environment, print_machine, verdict  # noqa: E402

TARGET_P95_MS = 50.0
SEEDED_ENTRIES = 500
TOPICS = [
    "the quarterly report",
    "the Postgres upgrade",
    "the hiring plan",
    "the Berlin offsite",
    "the onboarding docs",
    "the pricing page",
    "the mobile release",
    "the security review",
]
SECTIONS = [
    "Identity",
    "Communication Preferences",
    "Work Context",
    "Skills & Expertise",
    "Recent Topics",
    "Open Questions / Follow-ups",
]


def turn_text(number: int) -> tuple[str, str, list[dict[str, str]]]:
    topic = TOPICS[number % len(TOPICS)]
    user = (
        f"Let's go over {topic} (item {number}). Remember that I prefer bullet points "
        f"for {topic}. We decided to ship {topic} on Friday."
    )
    reply = (
        f"Here are the bullet points for {topic}. I learned that the team owner for "
        f"item {number} is on leave. TODO: send the summary of {topic} to the team."
    )
    tools = [{"name": "search_memory", "text": f"3 results about {topic}; none newer than May."}]
    return user, reply, tools


class FakeModel:
    """The fake LLM's answers: a valid profile rewrite every third consolidation, NOOP
    otherwise; two observations per capture, one of them the same every time."""

    def __init__(self) -> None:
        self.consolidations = 0
        self.captures = 0

    def answer(self, request: dict[str, Any]) -> str:
        system = next((m["content"] for m in request["messages"] if m["role"] == "system"), "")
        if "NOOP" in system:
            return self.consolidation()
        return self.capture()

    def consolidation(self) -> str:
        self.consolidations += 1
        if self.consolidations % 3:
            return "NOOP"
        topics = TOPICS[: 1 + self.consolidations % len(TOPICS)]
        bodies = {
            "Identity": ["- Works on product and operations"],
            "Communication Preferences": ["- Prefers bullet points"],
            "Work Context": [f"- Turn {self.consolidations} of the bench"],
            "Skills & Expertise": ["_(empty)_"],
            "Recent Topics": [f"- {topic}" for topic in topics],
            "Open Questions / Follow-ups": ["_(empty)_"],
        }
        lines = [
            "---",
            "user_id: 1",
            "schema_version: 1",
            "last_updated: 2026-01-01T00:00:00+00:00",
            "turn_count: 1",
            "---",
            "",
            "# User Memory",
        ]
        for section in SECTIONS:
            lines += ["", f"## {section}", *bodies[section]]
        return "\n".join(lines) + "\n"

    def capture(self) -> str:
        self.captures += 1
        return json.dumps(
            [
                {
                    "type": "preference",
                    "text": "The user prefers bullet points in summaries.",
                    "tags": ["format"],
                },
                {
                    "type": "task",
                    "text": f"Send the summary of item {self.captures} to the team.",
                    "tags": ["summary"],
                },
            ]
        )


def seed(agent: Any) -> None:
    from activity.actors import Actor
    from memory.services import memory_upsert

    actor = Actor.for_user(agent.user)
    for number in range(SEEDED_ENTRIES):
        topic = TOPICS[number % len(TOPICS)]
        memory_upsert(
            user=agent.user,
            key=f"fact:seed-{number}",
            value=f"Seed note {number}: {topic} was discussed with owner {number % 17}.",
            actor=actor,
        )


def run(client: Any, token: str, turns: int, label: str) -> dict[str, list[float]]:
    from learning.pipeline import process_turn
    from llm.models import LLMCall

    report_ms: list[float] = []
    mnemo_ms: list[float] = []
    llm_ms: list[float] = []
    for number in range(turns):
        user, reply, tools = turn_text(number)
        body = {
            "user_message": user,
            "assistant_reply": reply,
            "tool_outputs": tools,
            "turn_id": f"{label}-{number}",
        }
        started = time.perf_counter()
        response = client.post(
            "/api/v1/turns",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        reported = time.perf_counter()
        if response.status_code != 202:
            raise SystemExit(f"report answered {response.status_code}: {response.content!r}")
        turn = process_turn(response.json()["id"])
        finished = time.perf_counter()
        if turn is None or turn.status != "done":
            raise SystemExit(f"turn {number} was not processed: {turn and turn.outcome}")
        llm = sum(LLMCall.objects.filter(turn=turn).values_list("latency_ms", flat=True))
        report_ms.append((reported - started) * 1000)
        llm_ms.append(float(llm))
        mnemo_ms.append((finished - started) * 1000 - llm)
    return {"report": report_ms, "mnemo": mnemo_ms, "llm": llm_ms}


def show(label: str, numbers: dict[str, list[float]]) -> bool:
    mnemo = numbers["mnemo"]
    p95 = percentile(mnemo, 95)
    print(f"\n{label}: {len(mnemo)} turns")
    numbers["total"] = [m + llm for m, llm in zip(mnemo, numbers["llm"], strict=True)]
    for name in ("report", "mnemo", "llm", "total"):
        values = numbers[name]
        print(
            f"  {name:<7} p50 {percentile(values, 50):7.1f} ms  p95 {percentile(values, 95):7.1f}"
            f" ms  max {max(values):7.1f} ms"
        )
    met = p95 <= TARGET_P95_MS
    print(
        f"  Mnemo's time per turn p95 {p95:.1f} ms (target ≤ {TARGET_P95_MS:g} ms): {verdict(met)}"
    )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    prepare_environment(
        "mnemo-bench-turns-",
        CELERY_BROKER_URL="memory://",  # process_turn is called here, as the worker would
        CACHE_URL="locmemcache://",
        MNEMO_API_RATE="1000000/s",
        MNEMO_EMBEDDING_PROVIDER="wordllama",
    )
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from profiles.models import Profile
    from profiles.services import agent_get_or_create, agent_set_learning, token_create
    from tests.fake_openai import FakeOpenAI

    print_machine("bench/turns.py: the turn pipeline's own cost", ["Django", "openai"])
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")  # no password: never signs in
    Profile.objects.update_or_create(user=user, defaults={"auto_learn": True})
    agent = agent_set_learning(
        agent=agent_get_or_create(user=user, name="bench"), learns_from_turns=True
    )
    token = token_create(agent=agent).raw
    seed(agent)
    client = Client(HTTP_HOST="127.0.0.1")
    results = []
    model = FakeModel()
    with FakeOpenAI() as server:
        server.chat_default = model.answer
        settings.MNEMO_LLM_BASE_URL = server.url
        settings.MNEMO_LLM_MODEL = "gpt-4o-mini"
        settings.MNEMO_LLM_API_KEY = "bench"
        results.append(
            show("with the LLM (fake, answers at once)", run(client, token, args.turns, "llm"))
        )
        print(f"  model calls: {len(server.chat_requests)}")
    settings.MNEMO_LLM_MODEL = ""
    settings.MNEMO_LLM_BASE_URL = ""
    settings.MNEMO_LLM_API_KEY = ""
    results.append(show("without an LLM (cue phrases)", run(client, token, args.turns, "cues")))
    print("\nall targets met" if all(results) else "\nsome targets NOT MET")


if __name__ == "__main__":
    main()
