"""Split a document into overlapping chunks of words for search.

About CHUNK_WORDS words per chunk; each chunk after the first starts so that it shares
OVERLAP of the previous chunk's words. A trailing chunk that would add fewer than
MIN_TAIL_WORDS new words is merged into the previous chunk instead. Chunks are cut from
the original text, so line breaks and markdown inside a chunk are kept.

Text with few spaces (a CSV line, a minified file, Japanese or Chinese prose) has few
"words", so a chunk also ends before it passes MAX_CHUNK_CHARS characters, and a "word"
longer than MAX_WORD_CHARS counts as several. That keeps every chunk within what an
embedding model takes in one input and what a PostgreSQL tsvector holds (1 MB).
"""

from __future__ import annotations

import re

CHUNK_WORDS = 800
OVERLAP = 0.15
MIN_TAIL_WORDS = 50
MAX_CHUNK_CHARS = 8000
MAX_WORD_CHARS = 100
_WORD = re.compile(rf"\S{{1,{MAX_WORD_CHARS}}}")  # a longer run of non-spaces: several words


def split_into_chunks(
    text: str,
    *,
    size: int = CHUNK_WORDS,
    overlap: float = OVERLAP,
    min_tail: int = MIN_TAIL_WORDS,
    max_chars: int = MAX_CHUNK_CHARS,
) -> list[str]:
    spans = _word_spans(text)
    if not spans:
        return []
    bounds: list[tuple[int, int]] = []  # word index ranges [first, last)
    start = 0
    while True:
        end = _chunk_end(spans, start, size, max_chars)
        bounds.append((start, end))
        if end == len(spans):
            break
        start = max(start + 1, end - round((end - start) * overlap))
    if len(bounds) > 1:
        (first, previous_end), (_, last_end) = bounds[-2], bounds[-1]
        merged_chars = spans[last_end - 1][1] - spans[first][0]
        if last_end - previous_end < min_tail and merged_chars <= max_chars:
            bounds[-2:] = [(first, last_end)]
    return [text[spans[first][0] : spans[last - 1][1]] for first, last in bounds]


def _word_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each word; a word over MAX_WORD_CHARS comes as several."""
    return [match.span() for match in _WORD.finditer(text)]


def _chunk_end(spans: list[tuple[int, int]], start: int, size: int, max_chars: int) -> int:
    """Where the chunk starting at word `start` ends: after `size` words, or before the
    word that would take it past max_chars (at least one word)."""
    end = min(start + size, len(spans))
    limit = spans[start][0] + max_chars
    if spans[end - 1][1] <= limit:
        return end
    low, high = start + 1, end - 1  # the first word always fits (MAX_WORD_CHARS < max_chars)
    while low < high:  # the largest `last` with spans[last - 1] ending within the limit
        middle = (low + high + 1) // 2
        if spans[middle - 1][1] <= limit:
            low = middle
        else:
            high = middle - 1
    return low
