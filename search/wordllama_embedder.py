"""The ``wordllama`` embedder (documents' default without OPENAI_API_KEY; search/embeddings.py
chooses it): WordLlama's l2_supercat 256-dimension token embeddings, averaged, from the files
its PyPI wheel ships; English only and weaker than e5, but ~160,000 words per core-second, so
a 100,000-word import embeds in under a second where e5 needs minutes of CPU. The files are
opened by path: wordllama's own loader looks for the tokenizer in ``wordllama/tokenizer/``
while the wheel ships it in ``wordllama/tokenizers/``, then falls back to ``~/.cache`` and a
Hugging Face download. It never touches the network.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from search.embedder_base import EmbeddingError, check_texts, package_dir

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

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

        texts = check_texts(texts)
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
