"""Turn reports (`POST /api/v1/turns`) and their processing (learning/pipeline.py)."""

from __future__ import annotations

import datetime
import json

import pytest
from django.utils import timezone

from activity.models import ActivityEvent, EventType
from learning import pipeline, tasks
from llm.models import LLMCall, Turn, TurnStatus
from memory.models import Memory
from profiles.models import Profile
from profiles.services import token_create
from tests.factories import AgentFactory
from tests.fake_openai import ChatReply

pytestmark = pytest.mark.django_db

URL = "/api/v1/turns"
TURN = {
    "user_message": "Remember that I prefer short answers. We decided to use Postgres.",
    "assistant_reply": "Understood, I will keep answers short.",
    "tool_outputs": [{"name": "search_memory", "text": "no results"}],
}


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """The turn ids sent to Celery (the suite's broker is in memory and has no worker)."""
    ids: list[int] = []
    monkeypatch.setattr(tasks.process_turn, "delay", ids.append)
    return ids


@pytest.fixture
def learning_on(alice, alice_agent):
    Profile.objects.update_or_create(user=alice, defaults={"auto_learn": True})
    alice_agent.learns_from_turns = True
    alice_agent.save()
    return alice_agent


def report(client, token: str, body: dict | None = None, **extra):
    return client.post(
        URL,
        data=json.dumps(TURN if body is None else body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **extra,
    )


# --- the report ------------------------------------------------------------------------------


def test_learning_off_for_the_account_is_accepted_and_says_so(
    client, alice, alice_token, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = report(client, alice_token)

    assert response.status_code == 202
    body = response.json()
    assert body["learning"] is False
    assert body["status"] == "skipped"
    assert "Settings" in body["reason"]
    assert sent == []
    turn = Turn.objects.get()
    assert turn.user == alice
    assert turn.user_message == TURN["user_message"]
    assert turn.tool_outputs == TURN["tool_outputs"]
    event = ActivityEvent.objects.get(event_type=EventType.TURN_REPORTED)
    assert event.payload["learning"] is False
    assert event.actor_agent.name == "assistant"


def test_learning_off_for_the_agent_names_the_agent(client, alice, alice_agent, alice_token, sent):
    Profile.objects.update_or_create(user=alice, defaults={"auto_learn": True})

    body = report(client, alice_token).json()

    assert body["learning"] is False
    assert "agent 'assistant'" in body["reason"]
    assert "Agents page" in body["reason"]


def test_a_paused_memory_learns_nothing(client, alice, learning_on, alice_token, sent):
    Profile.objects.filter(user=alice).update(memory_paused=True)

    body = report(client, alice_token).json()

    assert body["learning"] is False
    assert "paused" in body["reason"]


def test_learning_on_queues_the_work_after_commit(
    client, learning_on, alice_token, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = report(client, alice_token)

    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["learning"], body["duplicate"]) == ("queued", True, False)
    assert sent == [body["id"]]


def test_the_same_turn_id_twice_does_the_work_once(
    client, learning_on, alice_token, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first = report(client, alice_token, TURN | {"turn_id": "chat-1:4"}).json()
        again = report(client, alice_token, TURN | {"turn_id": "chat-1:4"}).json()

    assert again["id"] == first["id"]
    assert again["duplicate"] is True
    assert Turn.objects.count() == 1
    assert sent == [first["id"]]
    assert ActivityEvent.objects.filter(event_type=EventType.TURN_REPORTED).count() == 1


def test_turn_ids_are_per_agent(client, alice, learning_on, alice_token, sent):
    other = AgentFactory(user=alice, name="other")
    other_token = token_create(agent=other).raw

    first = report(client, alice_token, TURN | {"turn_id": "1"}).json()
    second = report(client, other_token, TURN | {"turn_id": "1"}).json()

    assert first["id"] != second["id"]
    assert second["duplicate"] is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"user_message": " ", "assistant_reply": ""}, "user_message"),
        (TURN | {"surprise": 1}, "surprise"),
        (TURN | {"tool_outputs": [{"name": "x"}]}, "tool_outputs"),
        (TURN | {"tool_outputs": "text"}, "tool_outputs"),
        (TURN | {"turn_id": "x" * 129}, "turn_id"),
        (TURN | {"session": "x" * 101}, "session"),
        (TURN | {"session": "chat\n42"}, "session"),
        (TURN | {"session": 42}, "session"),
        ({"assistant_reply": "only a reply"}, "user_message"),
    ],
)
def test_bad_reports_are_refused_and_nothing_is_stored(
    client, learning_on, alice_token, body, field
):
    response = report(client, alice_token, body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["field"].startswith(field)
    assert not Turn.objects.exists()


def test_reports_need_an_agent_token(client):
    response = client.post(URL, data=json.dumps(TURN), content_type="application/json")

    assert response.status_code == 401


def test_an_agent_reads_its_users_turns_only(client, learning_on, alice_token, bob_token, sent):
    turn_id = report(client, alice_token).json()["id"]

    own = client.get(f"{URL}/{turn_id}", HTTP_AUTHORIZATION=f"Bearer {alice_token}")
    other = client.get(f"{URL}/{turn_id}", HTTP_AUTHORIZATION=f"Bearer {bob_token}")

    assert own.status_code == 200
    assert own.json()["status"] == "queued"
    assert other.status_code == 404


def test_the_answer_says_when_no_llm_is_configured(client, learning_on, alice_token, sent, no_llm):
    body = report(client, alice_token).json()

    assert "cue phrases" in body["llm"]
    assert "MNEMO_LLM_MODEL" in body["llm"]


# --- processing --------------------------------------------------------------------------------


def queued_turn(client, token: str, body: dict | None = None) -> Turn:
    return Turn.objects.get(pk=report(client, token, body).json()["id"])


def test_a_turn_without_an_llm_is_captured_by_cue_phrases(
    client, alice, learning_on, alice_token, sent, no_llm
):
    turn = queued_turn(client, alice_token)

    processed = pipeline.process_turn(turn.pk)

    assert processed.status == TurnStatus.DONE
    assert processed.outcome["profile"]["status"] == "off"
    assert processed.outcome["capture"]["method"] == "cues"
    captured = Memory.objects.filter(user=alice, turn=turn)
    assert {memory.source for memory in captured} == {"tp_extracted"}
    assert any("short answers" in memory.value for memory in captured)
    assert any(memory.key.startswith("decision:") for memory in captured)
    event = ActivityEvent.objects.get(event_type=EventType.TURN_PROCESSED)
    assert event.payload["turn_id"] == turn.pk
    assert event.payload["profile"] == "off"
    assert event.payload["captured"] == captured.count()
    assert not LLMCall.objects.exists()


def test_a_turn_with_the_llm_counts_its_tokens(
    client, alice, learning_on, alice_token, sent, llm_server
):
    llm_server.script_chat(
        ChatReply("NOOP", usage={"prompt_tokens": 300, "completion_tokens": 1}),
        ChatReply("[]", usage={"prompt_tokens": 200, "completion_tokens": 2}),
    )
    turn = queued_turn(client, alice_token)

    processed = pipeline.process_turn(turn.pk)

    assert processed.outcome["profile"]["status"] == "noop"
    assert processed.outcome["capture"]["method"] == "llm"
    assert (processed.outcome["prompt_tokens"], processed.outcome["completion_tokens"]) == (500, 3)
    assert LLMCall.objects.filter(turn=turn).count() == 2
    event = ActivityEvent.objects.get(event_type=EventType.TURN_PROCESSED)
    assert (event.payload["prompt_tokens"], event.payload["completion_tokens"]) == (500, 3)
    assert not Memory.objects.filter(user=alice).exists()


def test_what_is_captured_from_a_turn_carries_its_session_and_time(
    client, alice, learning_on, alice_token, sent, llm_server
):
    llm_server.script_chat(
        ChatReply("NOOP"),
        ChatReply(
            json.dumps(
                [
                    {"type": "decision", "text": "The team uses PostgreSQL for the event store"},
                    {"type": "preference", "text": "The user wants short answers"},
                ]
            )
        ),
    )
    answer = report(client, alice_token, TURN | {"session": "  chat-42  "}).json()
    assert answer["session"] == "chat-42"
    turn = Turn.objects.get(pk=answer["id"])
    assert turn.session == "chat-42"
    # Processed a while after it was received: the memories were said when it was received.
    Turn.objects.filter(pk=turn.pk).update(
        received_at=datetime.datetime(2026, 3, 1, 9, 30, tzinfo=datetime.UTC)
    )

    processed = pipeline.process_turn(turn.pk)

    assert processed.outcome["capture"]["method"] == "llm"
    captured = list(Memory.objects.filter(user=alice, turn=turn).order_by("key"))
    assert [memory.key.split(":")[0] for memory in captured] == ["decision", "preference"]
    for memory in captured:
        assert (memory.session, memory.occurred_at) == (
            "chat-42",
            datetime.datetime(2026, 3, 1, 9, 30, tzinfo=datetime.UTC),
        )
    read = client.post(
        "/api/v1/tools/get_memory",
        data=json.dumps({"key": captured[0].key}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice_token}",
    ).json()["memory"]
    assert (read["session"], read["occurred_at"]) == ("chat-42", "2026-03-01T09:30:00Z")


def test_a_turn_without_a_session_captures_memories_without_one(
    client, alice, learning_on, alice_token, sent, no_llm
):
    turn = queued_turn(client, alice_token)
    assert turn.session == ""

    pipeline.process_turn(turn.pk)

    captured = Memory.objects.filter(user=alice, turn=turn)
    assert captured.exists()
    assert {(memory.session, memory.occurred_at) for memory in captured} == {("", turn.received_at)}


def test_a_turn_is_processed_once(client, learning_on, alice_token, sent, no_llm):
    turn = queued_turn(client, alice_token)

    assert pipeline.process_turn(turn.pk) is not None
    assert pipeline.process_turn(turn.pk) is None
    assert ActivityEvent.objects.filter(event_type=EventType.TURN_PROCESSED).count() == 1


def test_a_skipped_turn_is_never_processed(client, alice_token, sent, no_llm):
    turn = queued_turn(client, alice_token)

    assert pipeline.process_turn(turn.pk) is None
    assert Turn.objects.get(pk=turn.pk).status == TurnStatus.SKIPPED


def test_pausing_before_processing_learns_nothing(
    client, alice, learning_on, alice_token, sent, no_llm
):
    turn = queued_turn(client, alice_token)
    Profile.objects.filter(user=alice).update(memory_paused=True)

    processed = pipeline.process_turn(turn.pk)

    assert processed.outcome == {"paused": True}
    assert not Memory.objects.filter(user=alice).exists()


def test_a_failing_step_leaves_the_turn_for_the_sweep_then_fails_it(
    client, learning_on, alice_token, sent, no_llm, monkeypatch
):
    turn = queued_turn(client, alice_token)

    def broken(turn):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pipeline, "capture", broken)
    for attempt in range(1, pipeline.MAX_ATTEMPTS + 1):
        Turn.objects.filter(pk=turn.pk).update(claimed_at=None)  # the lease expired
        with pytest.raises(RuntimeError):
            pipeline.process_turn(turn.pk)
        state = Turn.objects.get(pk=turn.pk)
        assert state.attempts == attempt

    assert state.status == TurnStatus.FAILED
    assert "disk full" in state.outcome["error"]
    assert pipeline.process_turn(turn.pk) is None


def test_the_sweep_sends_lost_and_abandoned_turns(client, learning_on, alice_token, sent, no_llm):
    now = timezone.now()
    lost = queued_turn(client, alice_token)
    fresh = queued_turn(client, alice_token)
    abandoned = queued_turn(client, alice_token)
    working = queued_turn(client, alice_token)
    Turn.objects.filter(pk__in=[lost.pk, abandoned.pk, working.pk]).update(
        received_at=now - datetime.timedelta(minutes=5)
    )
    Turn.objects.filter(pk=abandoned.pk).update(
        claimed_at=now - pipeline.CLAIM_LEASE - datetime.timedelta(seconds=1), attempts=1
    )
    Turn.objects.filter(pk=working.pk).update(claimed_at=now, attempts=1)
    sent.clear()

    assert tasks.process_pending_turns() == 2

    assert sorted(sent) == sorted([lost.pk, abandoned.pk])
    assert fresh.pk not in sent


def test_the_sweep_fails_turns_out_of_attempts(client, learning_on, alice_token, sent, no_llm):
    turn = queued_turn(client, alice_token)
    Turn.objects.filter(pk=turn.pk).update(
        attempts=pipeline.MAX_ATTEMPTS,
        claimed_at=timezone.now() - pipeline.CLAIM_LEASE - datetime.timedelta(seconds=1),
    )

    tasks.process_pending_turns()

    state = Turn.objects.get(pk=turn.pk)
    assert state.status == TurnStatus.FAILED
    assert "did not finish" in state.outcome["error"]
    assert turn.pk not in sent


def test_an_accepted_captured_observation_keeps_its_turn(
    client, alice, learning_on, alice_token, sent, no_llm
):
    from activity.actors import Actor
    from memory.models import MemoryProposal
    from memory.review import proposal_accept

    Profile.objects.filter(user=alice).update(review_agent_memories=True)
    turn = queued_turn(client, alice_token)
    pipeline.process_turn(turn.pk)
    proposals = MemoryProposal.objects.filter(user=alice, turn=turn)
    assert proposals.exists()
    assert not Memory.objects.filter(user=alice).exists()

    for proposal in proposals:
        proposal_accept(user=alice, proposal_id=proposal.pk, actor=Actor.for_user(alice))

    accepted = Memory.objects.filter(user=alice)
    assert accepted.count() == proposals.count()
    assert {memory.turn_id for memory in accepted} == {turn.pk}
