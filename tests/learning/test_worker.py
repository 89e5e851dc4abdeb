"""A reported turn is processed by a real Celery worker (`celery -A config worker`, as
`make run` starts it) on a real broker, against the fake LLM: the report answers 202 at
once, and the work happens in the worker."""

from __future__ import annotations

import json

import pytest

from llm.models import LLMCall, Turn, TurnStatus
from memory.models import Memory
from profiles.models import Profile
from tests.search.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

OBSERVATION = "The user keeps the weekly report in a shared spreadsheet."


def fake_model(request: dict) -> str:
    """NOOP to the consolidation, one observation to the capture."""
    system = " ".join(m["content"] for m in request["messages"] if m["role"] == "system")
    if "NOOP" in system:
        return "NOOP"
    return json.dumps([{"type": "discovery", "text": OBSERVATION, "tags": ["report"]}])


def test_a_turn_is_processed_by_the_worker(
    client, alice, alice_agent, alice_token, llm_server, valkey, start_worker
):
    Profile.objects.update_or_create(user=alice, defaults={"auto_learn": True})
    alice_agent.learns_from_turns = True
    alice_agent.save()
    llm_server.chat_default = fake_model
    worker = start_worker(
        MNEMO_LLM_BASE_URL=llm_server.url,
        MNEMO_LLM_MODEL="gpt-4o-mini",
        MNEMO_LLM_API_KEY="test",
        MNEMO_LLM_RETRIES="0",
    )

    response = client.post(
        "/api/v1/turns",
        data=json.dumps(
            {"user_message": "Where is the weekly report?", "assistant_reply": "In the sheet."}
        ),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice_token}",
    )

    assert response.status_code == 202
    turn_id = response.json()["id"]
    wait_for(
        lambda: Turn.objects.get(pk=turn_id).status == TurnStatus.DONE,
        seconds=30,
        what="the worker processing the turn",
        log=worker.log_suffix,
    )
    turn = Turn.objects.get(pk=turn_id)
    assert turn.outcome["profile"]["status"] == "noop"
    assert [m.value for m in Memory.objects.filter(user=alice, turn=turn)] == [OBSERVATION]
    assert LLMCall.objects.filter(turn=turn).count() == 2
