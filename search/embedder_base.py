"""What every embedder shares (search/embeddings.py chooses one): the `Embedder` protocol,
its two errors, the check of the texts it is given, and finding a model's package folder.

Errors: ``EmbeddingError`` is permanent (bad configuration, a refused request, a vector of
the wrong length, a blank text); ``EmbeddingUnavailable`` is transient (429, 5xx, timeouts,
connection errors after the retries) and worth retrying later.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol


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


def check_texts(texts: Sequence[str]) -> list[str]:
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


def package_dir(package: str, missing: str) -> Path:
    """An installed package's folder, found without importing the package; `missing` is
    the error's message when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(missing)
    return Path(next(iter(spec.submodule_search_locations)))
