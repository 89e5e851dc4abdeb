"""The ``openai`` embedder (search/embeddings.py chooses it): the ``openai`` client against any
OpenAI-compatible server, batched, with explicit timeouts and its own retry loop
(exponential backoff, Retry-After honored).
"""

from __future__ import annotations

import email.utils
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from search.embedder_base import EmbeddingError, EmbeddingUnavailable, check_texts

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

# Statuses worth another try, as the openai client itself sees them.
TRANSIENT_STATUSES = frozenset({408, 409, 429})


def sends_dimensions(model: str, setting: str) -> bool:
    """Whether requests carry `dimensions`: auto sends it to text-embedding-3* only."""
    if setting == "auto":
        return model.startswith("text-embedding-3")
    return setting == "true"


class OpenAIEmbedder:
    passage_words = None  # the server's model decides; it refuses a text too long for it

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str = "text-embedding-3-small",
        dimensions: int = 256,
        send_dimensions: bool = True,
        batch_size: int = 64,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        if not api_key:
            raise EmbeddingError(
                "The openai embedding provider needs OPENAI_API_KEY (any non-empty value "
                "for a server without keys)."
            )
        if batch_size < 1 or dimensions < 1 or retries < 0:
            raise EmbeddingError("batch_size and dimensions must be ≥ 1, retries ≥ 0")
        self.model = f"openai:{model}:{dimensions}"
        self.dimensions = dimensions
        self.model_name = model
        self.send_dimensions = send_dimensions
        self.batch_size = batch_size
        self.retries = retries
        self.backoff = backoff
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._openai = openai
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=base_url or None,
            timeout=openai.Timeout(read_timeout, connect=connect_timeout),
            # The loop in _request retries instead of the client's max_retries (llm/client.py
            # uses those): the client's waits are fixed (0.5 s doubling to 8 s, jittered) and
            # it sleeps through a Retry-After of up to two minutes, where MNEMO_EMBEDDING_BACKOFF
            # and _BACKOFF_MAX set the waits and a longer Retry-After ends the tries at once,
            # so the indexing task retries later instead of holding a worker.
            max_retries=0,
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = check_texts(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self.batch_size]))
        return vectors

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        response = self._request(batch)
        try:
            data = sorted(response.data, key=lambda item: item.index)
            indexes = [item.index for item in data]
            vectors = [[float(value) for value in item.embedding] for item in data]
        except (AttributeError, TypeError, ValueError) as error:
            raise EmbeddingError(f"{self._where()} sent an unusable answer: {error}") from error
        if indexes != list(range(len(batch))):
            raise EmbeddingError(
                f"{self._where()} answered {len(data)} embeddings with indexes "
                f"{indexes[:10]} for {len(batch)} inputs"
            )
        for position, vector in enumerate(vectors):
            if len(vector) != self.dimensions:
                raise EmbeddingError(self._wrong_length(len(vector)))
            norm = math.sqrt(math.fsum(value * value for value in vector))
            if not (norm > 0 and math.isfinite(norm)):
                raise EmbeddingError(f"{self._where()} returned a zero or non-finite vector")
            vectors[position] = [value / norm for value in vector]
        return vectors

    def _request(self, batch: list[str]) -> Any:
        """One embeddings request, retried on transient failures."""
        openai = self._openai
        extra: dict[str, Any] = {"dimensions": self.dimensions} if self.send_dimensions else {}
        for attempt in range(self.retries + 1):
            try:
                return self._client.embeddings.create(model=self.model_name, input=batch, **extra)
            except openai.APIStatusError as error:
                if error.status_code not in TRANSIENT_STATUSES and error.status_code < 500:
                    raise EmbeddingError(self._refused(error)) from error
                reason = f"HTTP {error.status_code}"
                retry_after = _retry_after(error.response.headers)
            except openai.APIConnectionError as error:  # timeouts included
                reason = "timed out" if isinstance(error, openai.APITimeoutError) else str(error)
                retry_after = None
            except (openai.OpenAIError, ValueError) as error:  # e.g. a body it cannot parse
                raise EmbeddingError(f"{self._where()} sent an unusable answer: {error}") from error
            message = f"{self._where()} failed {attempt + 1} time(s), last: {reason}"
            if attempt == self.retries:
                raise EmbeddingUnavailable(message, retry_after=retry_after)
            if retry_after is None:
                delay = min(self.backoff * 2**attempt, self.backoff_max)
            elif retry_after <= self.backoff_max:
                delay = retry_after
            else:  # not worth holding a worker for; the caller retries later
                raise EmbeddingUnavailable(
                    f"{message}, asked to wait {retry_after:g} s", retry_after=retry_after
                )
            logger.info("%s; retrying in %.2f s", message, delay)
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _where(self) -> str:
        return f"The embedding server {self._client.base_url} (model {self.model_name})"

    def _wrong_length(self, length: int) -> str:
        if self.send_dimensions:
            hint = (
                f"the model ignores `dimensions`; set MNEMO_EMBEDDING_DIMENSIONS={length} "
                "and MNEMO_EMBEDDING_SEND_DIMENSIONS=false"
            )
        else:
            hint = (
                f"set MNEMO_EMBEDDING_DIMENSIONS={length}, or MNEMO_EMBEDDING_SEND_DIMENSIONS"
                f"=true if the model can shorten its vectors to {self.dimensions}"
            )
        return (
            f"{self._where()} returned {length}-dimension vectors, but "
            f"MNEMO_EMBEDDING_DIMENSIONS={self.dimensions}: {hint} (then run manage.py reindex)."
        )

    def _refused(self, error: openai.APIStatusError) -> str:
        status = error.status_code
        hints = {
            401: "check OPENAI_API_KEY",
            403: "check OPENAI_API_KEY and the key's permissions",
            404: "check MNEMO_EMBEDDING_MODEL and OPENAI_BASE_URL (it usually ends in /v1)",
        }
        hint = hints.get(status)
        if hint is None and self.send_dimensions:
            hint = "if the model takes no `dimensions`, set MNEMO_EMBEDDING_SEND_DIMENSIONS=false"
        body = error.body  # the `error` object of an OpenAI-style answer
        detail = body.get("message") if isinstance(body, dict) else None
        message = f"{self._where()} refused the request (HTTP {status}: {detail or error.message})"
        return f"{message}; {hint}." if hint else f"{message}."


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if given."""
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(header)
        if raw is None:
            continue
        try:
            seconds = float(raw) / divisor
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                continue
            seconds = (when - datetime.now(UTC)).total_seconds()
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return None
