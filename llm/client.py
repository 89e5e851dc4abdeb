"""Chat completions through the `openai` client, against any OpenAI-compatible server.

Every call goes through `complete()`: it refuses when no model is configured
(LLMNotConfigured, which the API answers 503 llm_not_configured) or when the user's daily
token budget is spent (LLMBudgetReached, with one `llm_budget_reached` activity event per
day), bounds the call (the answer's max_tokens, which every caller must give; connect and
read timeouts; MNEMO_LLM_RETRIES more tries on timeouts, connection errors, 429 and 5xx)
and records it as an LLMCall row: model, prompt and completion tokens, latency and
outcome, whatever happened.

Call it outside a transaction: the call takes seconds, and its LLMCall row must stay
even when the caller's work is rolled back.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from activity import events
from activity.models import ActivityEvent, EventType
from lib.errors import LLMNotConfigured
from lib.tokenizer import TokenCounter, token_counter_for
from llm.models import CallOutcome, LLMCall, Turn
from profiles.models import Profile

if TYPE_CHECKING:
    import openai
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)

KEYLESS = "not-needed"  # local servers take any key; the client insists on one
MAX_ERROR_CHARS = 300


class LLMError(Exception):
    """An LLM call gave no usable answer; `reason` says why, in words a user can read."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LLMUnavailable(LLMError):
    """The server did not answer in time, could not be reached, or refused, after the
    bounded tries."""


class LLMBudgetReached(LLMError):
    """The user's LLM tokens for today (UTC) are spent; no call was made."""


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    call_id: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def llm_configured() -> bool:
    """A model is named and there is a server to send it to."""
    server = settings.MNEMO_LLM_BASE_URL or settings.MNEMO_LLM_API_KEY
    return bool(settings.MNEMO_LLM_MODEL and server)


def require_llm() -> None:
    if not llm_configured():
        raise LLMNotConfigured()


def llm_description() -> str:
    """Which model on which server, for the pages (never the key)."""
    if not llm_configured():
        return ""
    host = urlsplit(settings.MNEMO_LLM_BASE_URL).netloc or "api.openai.com"
    return f"{settings.MNEMO_LLM_MODEL} at {host}"


def model_token_counter() -> TokenCounter:
    """Counts tokens as the consolidating model does: MNEMO_LLM_TOKENIZER, else the
    encoding tiktoken names for MNEMO_LLM_MODEL, else MNEMO_TOKENIZER (a model tiktoken
    does not know, e.g. a local Llama: its own tokenizer is not available offline)."""
    return token_counter_for(model_encoding())


def model_encoding() -> str:
    if settings.MNEMO_LLM_TOKENIZER:
        return settings.MNEMO_LLM_TOKENIZER
    import tiktoken.model

    try:
        return tiktoken.model.encoding_name_for_model(settings.MNEMO_LLM_MODEL)
    except KeyError:
        return settings.MNEMO_TOKENIZER


# --- usage and the daily budget -------------------------------------------------------------


def day_start(now: datetime.datetime | None = None) -> datetime.datetime:
    """Midnight UTC of `now`'s day: budgets and "today" count in UTC days."""
    now = now or timezone.now()
    return now.astimezone(datetime.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def tokens_used_since(user: AbstractBaseUser, since: datetime.datetime) -> int:
    totals = LLMCall.objects.filter(user=user, created_at__gte=since).aggregate(
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens")
    )
    return (totals["prompt"] or 0) + (totals["completion"] or 0)


def daily_budget(user: AbstractBaseUser) -> int:
    budget = Profile.objects.filter(user=user).values_list("llm_daily_tokens", flat=True).first()
    return budget if budget is not None else Profile._meta.get_field("llm_daily_tokens").default


def check_budget(user: AbstractBaseUser) -> None:
    """Raise LLMBudgetReached when today's tokens reached the user's budget, recording
    `llm_budget_reached` the first time it happens in a day."""
    start = day_start()
    used = tokens_used_since(user, start)
    budget = daily_budget(user)
    if used < budget:
        return
    already_said = ActivityEvent.objects.filter(
        user=user, event_type=EventType.LLM_BUDGET_REACHED, created_at__gte=start
    ).exists()
    if not already_said:
        events.llm_budget_reached(user=user, used=used, budget=budget)
    raise LLMBudgetReached(
        f"today's LLM budget is spent ({used:,} of {budget:,} tokens); it starts again at "
        "midnight UTC, or raise it on the Settings page"
    )


# --- the call ---------------------------------------------------------------------------------


def complete(
    *,
    user: AbstractBaseUser,
    purpose: str,
    messages: Sequence[dict[str, str]],
    max_tokens: int,
    turn: Turn | None = None,
) -> Completion:
    """Ask the configured model; the answer's text and its counted tokens.

    max_tokens bounds the answer and has no default: every caller says what its answer
    needs, so no call can cost an unbounded completion (a server's own default may be the
    model's whole context).

    Raises LLMNotConfigured, LLMBudgetReached (no call made) or LLMUnavailable (the call
    failed after its tries; recorded all the same)."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a whole number of at least 1, not {max_tokens!r}")
    require_llm()
    check_budget(user)
    model = settings.MNEMO_LLM_MODEL
    started = time.monotonic()
    record = functools.partial(
        LLMCall.objects.create, user=user, turn=turn, purpose=purpose, model=model
    )
    openai = _openai()
    try:
        response = _client().chat.completions.create(
            model=model, messages=list(messages), temperature=0, max_tokens=max_tokens
        )
    except openai.APITimeoutError:
        reason = f"the model did not answer within {settings.MNEMO_LLM_TIMEOUT:g} s"
        record(latency_ms=_elapsed_ms(started), outcome=CallOutcome.TIMEOUT, error=reason)
        raise LLMUnavailable(reason) from None
    except openai.APIStatusError as error:
        reason = _clip(f"the model server answered {error.status_code}: {_message(error)}")
        record(latency_ms=_elapsed_ms(started), outcome=CallOutcome.ERROR, error=reason)
        raise LLMUnavailable(reason) from None
    except (openai.OpenAIError, ValueError) as error:  # connection errors, bodies it cannot read
        reason = _clip(f"the model server could not be used: {error}")
        record(latency_ms=_elapsed_ms(started), outcome=CallOutcome.ERROR, error=reason)
        raise LLMUnavailable(reason) from None
    latency_ms = _elapsed_ms(started)
    text = _answer_text(response)
    prompt_tokens, completion_tokens = _usage(response, messages, text)
    call = record(
        latency_ms=latency_ms,
        outcome=CallOutcome.OK,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
    return Completion(
        text=text,
        model=getattr(response, "model", None) or model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency_ms=latency_ms,
        call_id=call.pk,
    )


def _openai():  # the module, imported when first needed
    import openai

    return openai


def _client() -> openai.OpenAI:
    return _cached_client(
        settings.MNEMO_LLM_BASE_URL,
        settings.MNEMO_LLM_API_KEY,
        settings.MNEMO_LLM_TIMEOUT,
        settings.MNEMO_LLM_CONNECT_TIMEOUT,
        settings.MNEMO_LLM_RETRIES,
    )


@functools.cache
def _cached_client(
    base_url: str, api_key: str, read_timeout: float, connect_timeout: float, retries: int
) -> openai.OpenAI:
    # Keyed by the settings, so a test (or a reload) that changes them gets a new client.
    openai = _openai()
    return openai.OpenAI(
        api_key=api_key or KEYLESS,
        base_url=base_url or None,
        timeout=openai.Timeout(read_timeout, connect=connect_timeout),
        max_retries=retries,  # the client's own backoff, honouring Retry-After
    )


def _answer_text(response: object) -> str:
    choices = getattr(response, "choices", None) or []
    if not choices:
        return ""
    message = getattr(choices[0], "message", None)
    return (getattr(message, "content", None) or "").strip()


def _usage(response: object, messages: Sequence[dict[str, str]], text: str) -> tuple[int, int]:
    """The server's token counts; counted here when it reports none (some local servers)."""
    usage = getattr(response, "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if isinstance(prompt, int) and isinstance(completion, int):
        return prompt, completion
    count = model_token_counter().count
    return sum(count(message.get("content") or "") for message in messages), count(text)


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
    return str(error.message)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
