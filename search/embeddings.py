"""Text embeddings: one small interface, two providers.

- ``local`` (the default without OPENAI_API_KEY): WordLlama's l2_supercat 256-dimension
  token embeddings, averaged, from the files its PyPI wheel ships. Never touches the
  network: the files are opened by path; wordllama's own loader is not used, because it
  looks for the tokenizer in ``wordllama/tokenizer/`` while the wheel ships it in
  ``wordllama/tokenizers/``, then falls back to ``~/.cache`` and a Hugging Face download.
- ``openai``: the ``openai`` client against any OpenAI-compatible server, batched, with
  explicit timeouts and its own retry loop (exponential backoff, Retry-After honored).

Every vector is L2-normalized. ``Embedder.model`` is the id stored next to each vector;
when it changes, ``manage.py reindex`` re-embeds.

Errors: ``EmbeddingError`` is permanent (bad configuration, a refused request, a vector of
the wrong length, a blank text); ``EmbeddingUnavailable`` is transient (429, 5xx, timeouts,
connection errors after the retries) and worth retrying later.
"""

from __future__ import annotations

import email.utils
import functools
import hashlib
import importlib.util
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

if TYPE_CHECKING:
    import numpy as np
    import openai

logger = logging.getLogger(__name__)


class EmbeddingError(Exception):
    """Texts could not be embedded, and trying again as things are will not help."""


class EmbeddingUnavailable(EmbeddingError):
    """The provider is rate-limiting, failing or unreachable; try again later.

    ``retry_after`` is the wait the server asked for, in seconds, when it said one.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Embedder(Protocol):
    model: str  # stable id stored next to every vector it made
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order; [] for []."""
        ...


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one string")
    texts = list(texts)
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {position} is a {type(text).__name__}, not a str")
        if not text.strip():
            raise EmbeddingError(
                f"text {position} of {len(texts)} is blank; there is nothing to embed "
                "(leave blank texts out)"
            )
    return texts


# --- local: WordLlama from its wheel ------------------------------------------------------

WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIMENSIONS = 256
WORDLLAMA_WEIGHTS = f"weights/{WORDLLAMA_CONFIG}_{WORDLLAMA_DIMENSIONS}.safetensors"
WORDLLAMA_TOKENIZER = f"tokenizers/{WORDLLAMA_CONFIG}_tokenizer_config.json"
WORDLLAMA_TENSOR = "embedding.weight"
# SHA-256 over the weights then the tokenizer file of wordllama 0.4.0.post1. Other files
# (another wordllama release) get their own model id, so their vectors are re-embedded
# by `manage.py reindex` instead of being compared with these.
WORDLLAMA_FILES_SHA256 = "4d243a4b2daee65802d68699e288b9347fd45097303dc232205a660a82b5171e"
LOCAL_MODEL_ID = f"local:wordllama-l2-supercat-{WORDLLAMA_DIMENSIONS}"
# Words whose token ids are remembered; past this the memo starts afresh.
WORD_MEMO_LIMIT = 100_000
WORD_MEMO_MAX_LENGTH = 64  # longer "words" (URLs, hashes) are tokenized every time


def wordllama_dir() -> Path:
    """The installed wordllama package's folder, found without importing the package."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "The local embedding model needs the `wordllama` package; run `uv sync` "
            "(or set OPENAI_API_KEY to embed with an OpenAI-compatible server)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


class LocalEmbedder:
    """WordLlama: the mean of the text's token embeddings, L2-normalized.

    The tokenizer is Llama 2's BPE with no pre-tokenizer, so on its own it runs BPE over a
    whole text as one word, which is slow on long chunks. No merge in its vocabulary
    crosses a word boundary (only runs of "▁" do), so splitting on whitespace and
    tokenizing each word gives the same ids as the whole text with its whitespace runs
    collapsed, and each word's ids can be remembered. The result equals
    ``WordLlamaInference.embed(" ".join(text.split()), norm=True)`` (tested).
    """

    dimensions = WORDLLAMA_DIMENSIONS

    def __init__(self, package_dir: Path | None = None) -> None:
        import numpy as np
        from safetensors import safe_open
        from tokenizers import Tokenizer

        folder = package_dir or wordllama_dir()
        weights, tokenizer = folder / WORDLLAMA_WEIGHTS, folder / WORDLLAMA_TOKENIZER
        for path in (weights, tokenizer):
            if not path.is_file():
                raise EmbeddingError(
                    f"The local embedding model file {path} is missing; reinstall the "
                    "`wordllama` package (its wheel ships the weights and the tokenizer)."
                )
        digest = hashlib.sha256(weights.read_bytes())
        digest.update(tokenizer.read_bytes())
        self.model = LOCAL_MODEL_ID
        if digest.hexdigest() != WORDLLAMA_FILES_SHA256:
            self.model = f"{LOCAL_MODEL_ID}+{digest.hexdigest()[:12]}"
            logger.warning("wordllama's files differ from the known ones; model id %s", self.model)

        with safe_open(str(weights), framework="np") as tensors:
            matrix = tensors.get_tensor(WORDLLAMA_TENSOR)
        if matrix.ndim != 2 or matrix.shape[1] != self.dimensions:
            raise EmbeddingError(f"{weights} holds a {matrix.shape} matrix, not (n, 256)")
        # Kept as stored (float16: 16 MB instead of 32 in every process that embeds); rows
        # are widened to float32 when summed, which float16 -> float32 does exactly.
        self._matrix: np.ndarray = np.ascontiguousarray(matrix)
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._memo: dict[str, list[int]] = {}

    def _word_ids(self, words: set[str]) -> dict[str, list[int]]:
        """Token ids of each word, from the memo or the tokenizer (then remembered)."""
        memo = self._memo  # another thread may swap in a fresh memo; this call keeps its own
        found: dict[str, list[int]] = {}
        missing = []
        for word in words:
            ids = memo.get(word)
            if ids is None:
                missing.append(word)
            else:
                found[word] = ids
        if missing:
            encodings = self._tokenizer.encode_batch(missing, add_special_tokens=False)
            new = {word: encoding.ids for word, encoding in zip(missing, encodings, strict=True)}
            found.update(new)
            keep = {word: ids for word, ids in new.items() if len(word) <= WORD_MEMO_MAX_LENGTH}
            if len(memo) + len(keep) > WORD_MEMO_LIMIT:
                self._memo = keep
            else:
                memo.update(keep)
        return found

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        texts = _check_texts(texts)
        if not texts:
            return []
        split = [text.split() for text in texts]
        ids_of = self._word_ids(set(chain.from_iterable(split))).__getitem__
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for row, words in enumerate(split):
            ids = np.fromiter(chain.from_iterable(map(ids_of, words)), dtype=np.intp)
            # The mean's length is normalized away, so the sum will do.
            vectors[row] = np.ones(len(ids), dtype=np.float32) @ self._matrix[ids].astype(
                np.float32
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(norms > 0):
            raise EmbeddingError("the local model made a zero vector")
        return (vectors / norms).tolist()


# --- openai: any OpenAI-compatible server -------------------------------------------------

# Statuses worth another try, as the openai client itself sees them.
TRANSIENT_STATUSES = frozenset({408, 409, 429})


def sends_dimensions(model: str, setting: str) -> bool:
    """Whether requests carry `dimensions`: auto sends it to text-embedding-3* only."""
    if setting == "auto":
        return model.startswith("text-embedding-3")
    return setting == "true"


class OpenAIEmbedder:
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
            max_retries=0,  # the loop in _request retries, so its behavior is ours
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = _check_texts(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self.batch_size]))
        return vectors

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


# --- choosing one -------------------------------------------------------------------------

_lock = threading.RLock()


def provider_name() -> str:
    """`local` or `openai`, from MNEMO_EMBEDDING_PROVIDER (auto: openai iff a key is set)."""
    choice = settings.MNEMO_EMBEDDING_PROVIDER
    if choice == "auto":
        return "openai" if settings.OPENAI_API_KEY else "local"
    if choice not in ("local", "openai"):
        raise EmbeddingError(f"MNEMO_EMBEDDING_PROVIDER={choice!r} is not auto, local or openai")
    return choice


def build_embedder() -> Embedder:
    """A new embedder as the settings say (get_embedder() keeps one per process)."""
    if provider_name() == "local":
        return LocalEmbedder()
    return _openai_embedder(
        connect_timeout=settings.MNEMO_EMBEDDING_CONNECT_TIMEOUT,
        read_timeout=settings.MNEMO_EMBEDDING_TIMEOUT,
        retries=settings.MNEMO_EMBEDDING_RETRIES,
    )


def build_query_embedder() -> Embedder:
    """The embedder for a search's query: the same model, but one try within
    MNEMO_SEARCH_EMBED_TIMEOUT, so a slow or failing provider holds a search up no longer
    than that (the keyword side answers meanwhile). Indexing keeps the patient one."""
    if provider_name() == "local":
        return get_embedder()
    deadline = settings.MNEMO_SEARCH_EMBED_TIMEOUT
    return _openai_embedder(
        connect_timeout=min(settings.MNEMO_EMBEDDING_CONNECT_TIMEOUT, deadline),
        read_timeout=deadline,
        retries=0,
    )


def _openai_embedder(*, connect_timeout: float, read_timeout: float, retries: int) -> Embedder:
    return OpenAIEmbedder(
        api_key=settings.OPENAI_API_KEY,
        base_url=settings.OPENAI_BASE_URL or None,
        model=settings.MNEMO_EMBEDDING_MODEL,
        dimensions=settings.MNEMO_EMBEDDING_DIMENSIONS,
        send_dimensions=sends_dimensions(
            settings.MNEMO_EMBEDDING_MODEL, settings.MNEMO_EMBEDDING_SEND_DIMENSIONS
        ),
        batch_size=settings.MNEMO_EMBEDDING_BATCH_SIZE,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries=retries,
        backoff=settings.MNEMO_EMBEDDING_BACKOFF,
        backoff_max=settings.MNEMO_EMBEDDING_BACKOFF_MAX,
    )


@functools.cache
def _cached_embedder() -> Embedder:
    return build_embedder()


@functools.cache
def _cached_query_embedder() -> Embedder:
    return build_query_embedder()


def get_embedder() -> Embedder:
    """The process's embedder, built on first use (the local model loads in ~0.2 s)."""
    with _lock:  # two threads' first calls build one model, not two
        return _cached_embedder()


def get_query_embedder() -> Embedder:
    """The process's embedder for search queries (see build_query_embedder)."""
    with _lock:  # re-entrant: for the local model it is get_embedder()'s
        return _cached_query_embedder()


def reset_embedder() -> None:
    """Forget the process's embedders; the next calls build them from the settings."""
    with _lock:
        _cached_embedder.cache_clear()
        _cached_query_embedder.cache_clear()


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: object) -> None:
    # Tests that override the provider settings get an embedder that follows them.
    if setting.startswith(("MNEMO_EMBEDDING_", "OPENAI_", "MNEMO_SEARCH_EMBED")):
        reset_embedder()
