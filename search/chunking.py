"""Split a document into overlapping passages for search.

A chunk is a passage the embedding model reads whole. multilingual-e5-small (the offline
model, search/e5_embedder.py) attends over at most 512 tokens; a longer text is embedded as
the average of windows read separately, which blurs a passage's meaning. Measured with
e5's tokenizer: plain English prose takes about 1.4 tokens a word (5.6 characters),
technical markdown about 2.2 a word or 0.33 a character, code and HTML 0.35-0.39 a
character. So a chunk ends after CHUNK_WORDS words or before MAX_CHUNK_CHARS characters,
whichever comes first: about 210 words of prose (~300 tokens), 120-180 of markdown or
code; 96% of this README's chunks and 98% of the installed packages' descriptions fit in
512 tokens (median 370-385). A document is found by its best passage (search returns
the best chunk per document). WordLlama reads any length, but a shorter passage makes its
averaged vector more specific too.

Each chunk after the first starts so that it shares OVERLAP of the previous chunk's
words. A trailing chunk that would add fewer than MIN_TAIL_WORDS new words is merged into
the previous chunk instead, when the two fit in MAX_CHUNK_CHARS. Chunks are cut from the
original text, so line breaks and markdown inside a chunk are kept.

Text with few spaces has few "words": a run of non-space characters longer than
MAX_WORD_CHARS counts as several words, and Chinese and Japanese (written without spaces,
about 0.55 tokens a character) count one word per SPACELESS_WORD_CHARS characters, so a
chunk of them holds about 660 characters (~380 tokens). The character limit also keeps
every chunk far below what a PostgreSQL tsvector holds (1 MB). Random-looking strings
(base64, hashes) take up to 0.76 tokens a character; a chunk of those may pass the window,
and e5 then averages its windows.
"""

from __future__ import annotations

import re

CHUNK_WORDS = 220
OVERLAP = 0.15
MIN_TAIL_WORDS = 30
MAX_CHUNK_CHARS = 1200
MAX_WORD_CHARS = 100
SPACELESS_WORD_CHARS = 3
# Chinese and Japanese: CJK punctuation (not U+3000, a space), kana, Han (with its
# extensions and compatibility ideographs), half- and full-width forms.
_SPACELESS = (
    "\u2e80-\u2fdf\u3001-\u303f\u3040-\u30ff\u31c0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f"
)
# A word: up to SPACELESS_WORD_CHARS Chinese or Japanese characters, or up to
# MAX_WORD_CHARS other non-space characters (a longer run comes as several words).
_WORD = re.compile(
    rf"[{_SPACELESS}]{{1,{SPACELESS_WORD_CHARS}}}|[^\s{_SPACELESS}]{{1,{MAX_WORD_CHARS}}}"
)


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
    """(start, end) of each word (see _WORD)."""
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
