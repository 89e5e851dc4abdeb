"""Split a document into overlapping chunks of words for search.

About CHUNK_WORDS words per chunk, each starting CHUNK_WORDS * (1 - OVERLAP) words after the
previous one, so neighbours share 15% of their words. A trailing chunk that would add fewer
than MIN_TAIL_WORDS new words is merged into the previous chunk instead. Chunks are cut
from the original text, so line breaks and markdown inside a chunk are kept.
"""

from __future__ import annotations

import re

CHUNK_WORDS = 800
OVERLAP = 0.15
MIN_TAIL_WORDS = 50
_WORD = re.compile(r"\S+")


def split_into_chunks(
    text: str,
    *,
    size: int = CHUNK_WORDS,
    overlap: float = OVERLAP,
    min_tail: int = MIN_TAIL_WORDS,
) -> list[str]:
    spans = [match.span() for match in _WORD.finditer(text)]
    if not spans:
        return []
    step = max(1, round(size * (1 - overlap)))
    bounds: list[tuple[int, int]] = []  # word index ranges [first, last)
    start = 0
    while True:
        end = min(start + size, len(spans))
        bounds.append((start, end))
        if end == len(spans):
            break
        start += step
    if len(bounds) > 1:
        previous_end = bounds[-2][1]
        if bounds[-1][1] - previous_end < min_tail:
            bounds[-2:] = [(bounds[-2][0], bounds[-1][1])]
    return [text[spans[first][0] : spans[last - 1][1]] for first, last in bounds]
