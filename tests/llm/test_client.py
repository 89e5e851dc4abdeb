"""llm/client.py against the fake OpenAI-compatible server: the call, its record, the
budget, the bounds."""

from __future__ import annotations

import pytest

from activity.models import ActivityEvent, EventType
from lib.errors import LLMNotConfigured
from llm.client import (
    LLMBudgetReached,
    LLMUnavailable,
    complete,
    llm_configured,
    llm_description,
    model_encoding,
)
from llm.models import CallOutcome, LLMCall
from profiles.models import Profile
from tests.fake_openai import ChatReply

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "Say NOOP please"}]
ANSWER = 50


def test_unconfigured_refuses_without_calling(no_llm, alice):
    assert not llm_configured()
    with pytest.raises(LLMNotConfigured) as raised:
        complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=ANSWER)
    assert "MNEMO_LLM_MODEL" in raised.value.message
    assert not LLMCall.objects.exists()


def test_a_call_records_model_tokens_and_latency(llm_server, alice):
    llm_server.script_chat(
        ChatReply("hello there", usage={"prompt_tokens": 17, "completion_tokens": 3})
    )

    answer = complete(user=alice, purpose="capture", messages=MESSAGES, max_tokens=ANSWER)

    assert answer.text == "hello there"
    assert (answer.prompt_tokens, answer.completion_tokens) == (17, 3)
    call = LLMCall.objects.get()
    assert (call.user, call.purpose, call.model) == (alice, "capture", "gpt-4o-mini")
    assert (call.prompt_tokens, call.completion_tokens, call.outcome) == (17, 3, CallOutcome.OK)
    assert call.latency_ms >= 0
    assert call.pk == answer.call_id
    sent = llm_server.chat_requests[0]
    assert sent.json["model"] == "gpt-4o-mini"
    assert sent.json["messages"] == MESSAGES
    assert sent.json["max_tokens"] == ANSWER
    assert sent.headers["authorization"] == "Bearer test"
    assert llm_description() == f"gpt-4o-mini at {llm_server.url.split('/')[2]}"


def test_every_call_names_its_answers_bound(llm_server, alice):
    # No default: a caller that forgets max_tokens fails at once, before any call.
    with pytest.raises(TypeError, match="max_tokens"):
        complete(user=alice, purpose="test", messages=MESSAGES)
    for bad in (0, -5, True, 10.5, None):
        with pytest.raises(ValueError, match="max_tokens"):
            complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=bad)
    assert llm_server.chat_requests == []
    assert not LLMCall.objects.exists()


def test_a_server_without_usage_is_counted_with_the_models_tokenizer(llm_server, alice):
    llm_server.script_chat(ChatReply("one two three", usage={}))

    answer = complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=ANSWER)

    assert answer.prompt_tokens > 0
    assert answer.completion_tokens == 3
    assert model_encoding() == "o200k_base"  # what tiktoken names for gpt-4o-mini


def test_a_timeout_is_bounded_and_recorded(llm_server, alice, settings):
    settings.MNEMO_LLM_TIMEOUT = 0.3
    llm_server.script_chat(ChatReply("late", delay=3))

    with pytest.raises(LLMUnavailable) as raised:
        complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=ANSWER)

    assert "did not answer within 0.3 s" in raised.value.reason
    call = LLMCall.objects.get()
    assert call.outcome == CallOutcome.TIMEOUT
    assert call.latency_ms < 2500


def test_retries_are_bounded(llm_server, alice, settings):
    settings.MNEMO_LLM_RETRIES = 1
    llm_server.script_chat(ChatReply(status=500), ChatReply(status=500), ChatReply("never"))

    with pytest.raises(LLMUnavailable) as raised:
        complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=ANSWER)

    assert "answered 500" in raised.value.reason
    assert len(llm_server.chat_requests) == 2  # the first try and one retry, no more


def test_the_daily_budget_stops_calls_and_says_so_once(llm_server, alice):
    Profile.objects.create(user=alice, llm_daily_tokens=1000)
    llm_server.script_chat(ChatReply("big", usage={"prompt_tokens": 990, "completion_tokens": 20}))
    complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=ANSWER)

    for _ in range(2):
        with pytest.raises(LLMBudgetReached) as raised:
            complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=ANSWER)
        assert "1,010 of 1,000" in raised.value.reason

    assert len(llm_server.chat_requests) == 1
    [event] = ActivityEvent.objects.filter(event_type=EventType.LLM_BUDGET_REACHED)
    assert event.user == alice
    assert event.payload == {"used": 1010, "budget": 1000}


def test_the_budget_is_per_user(llm_server, alice, bob):
    Profile.objects.create(user=alice, llm_daily_tokens=1000)
    llm_server.script_chat(ChatReply("big", usage={"prompt_tokens": 2000, "completion_tokens": 0}))
    complete(user=alice, purpose="test", messages=MESSAGES, max_tokens=ANSWER)

    assert complete(user=bob, purpose="test", messages=MESSAGES, max_tokens=ANSWER).text == "NOOP"
