"""Text embeddings: which of three providers embeds a role's rows, and one embedder of each
per process.

- ``e5`` (memories' default without OPENAI_API_KEY): multilingual-e5-small, 4-bit, offline
  (search/e5_embedder.py).
- ``wordllama`` (documents' default without OPENAI_API_KEY): WordLlama's averaged token
  embeddings, offline, English only, fast enough for a large import
  (search/wordllama_embedder.py).
- ``openai``: any OpenAI-compatible server (search/openai_embedder.py).

What they share, the ``Embedder`` protocol and its errors, is in search/embedder_base.py.
Memories and documents may use different providers (``get_embedder("documents")``); a
search embeds its query once per model. ``embed`` is for stored rows (passages),
``embed_query`` for a search's query.

Every vector is L2-normalized. ``Embedder.model`` is the id stored next to each vector;
when it changes, ``manage.py reindex`` re-embeds.
"""

from __future__ import annotations

import functools
import threading
from array import array
from collections import OrderedDict

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from lib.threads import ProcessPool
from search.e5_embedder import E5Embedder, e5_thread
from search.embedder_base import Embedder, EmbeddingError
from search.openai_embedder import OpenAIEmbedder, sends_dimensions
from search.wordllama_embedder import WordLlamaEmbedder

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
    return e5_thread if isinstance(embedder, E5Embedder) else _query_threads


def get_query_embedder(role: str = "memories") -> Embedder:
    """The process's embedder for search queries over this role's rows (see
    build_query_embedder); call its embed_query."""
    provider = provider_name(role)
    with _lock:  # re-entrant: for a local model it is get_embedder()'s
        return _cached_query_embedder(provider)


class RecentQueryVectors:
    """The vectors of the last `size` queries this process embedded, by user, model id and
    exact query text: an agent asking the same thing again (a retry, another agent of the
    same user, the page after the API) gets its vector without embedding it again (e5 takes
    ~13 ms of a quiet machine's CPU for one, bench/README.md). The model id names the
    vector fully, so memories and documents embedded by the same model share an entry.
    The user is part of the key because a remembered vector answers faster: shared across
    users, that speed would tell one user what another asked lately.

    Vectors are kept as float32, what pgvector stores and compares (so a remembered
    vector ranks exactly as a fresh one): 1,024 of e5's 384 dimensions take 1.5 MiB.
    Thread-safe: a web process searches on several threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._vectors: OrderedDict[tuple[int, str, str], array[float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: int, model: str, query: str) -> list[float] | None:
        key = (user_id, model, query)
        with self._lock:
            vector = self._vectors.get(key)
            if vector is None:
                return None
            self._vectors.move_to_end(key)
        return vector.tolist()

    def put(self, user_id: int, model: str, query: str, vector: list[float]) -> None:
        kept, key = array("f", vector), (user_id, model, query)
        with self._lock:
            self._vectors[key] = kept
            self._vectors.move_to_end(key)
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def __len__(self) -> int:
        return len(self._vectors)


# How many recent queries' vectors a process keeps (RecentQueryVectors).
QUERY_VECTORS_KEPT = 1024
recent_query_vectors = RecentQueryVectors(QUERY_VECTORS_KEPT)


def reset_embedder() -> None:
    """Forget the process's embedders and the vectors they made of recent queries; the
    next calls build them from the settings."""
    with _lock:
        _cached_embedder.cache_clear()
        _cached_query_embedder.cache_clear()
        recent_query_vectors.clear()


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: object) -> None:
    # Tests that override the provider settings get an embedder that follows them.
    if setting.startswith(
        ("MNEMO_EMBEDDING_", "MNEMO_DOCUMENT_EMBEDDING_", "OPENAI_", "MNEMO_SEARCH_EMBED")
    ):
        reset_embedder()
