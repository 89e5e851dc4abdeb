"""Text quoted as data inside a prompt: a Markdown code fence that nothing in the text closes.

A document, a turn or a search result shown to a model is someone else's text: its
headings ("## Working memory", "### About you") must not read as the prompt's own
sections, and a fence inside it must not end the quote early. `data_block` puts the text in
a backtick fence longer than any run of backticks in it: CommonMark closes a fence only with
a run of the same character at least as long (spec 0.31, 4.5), so no line of the text can,
and everything between the fences is one code block, never a heading.

A model reads characters, not a parser's tokens, so the run is measured as a reader would
see it: backtick look-alikes count as backticks, and zero-width and combining characters
inside a run do not break it. "``\u200b`" reads as three, so the fence is four at least.
"""

from __future__ import annotations

import unicodedata

FENCE_CHAR = "`"
MIN_FENCE = 3
INFO = "text"
# Characters a reader takes for a backtick: the grave accent itself, the modifier letter
# grave (U+02CB), the reversed prime (U+2035), Greek varia (U+1FEF) and the fullwidth grave
# (U+FF40).
BACKTICK_LOOKALIKES = frozenset("`\u02cb\u2035\u1fef\uff40")
# Invisible inside a run: format characters (zero-width space and joiners, bidi marks) and
# combining marks, which draw on the character before them.
_INVISIBLE = frozenset({"Cf", "Mn", "Me"})


def fence_length(text: str) -> int:
    """The length of a backtick fence no run in `text` (as a reader sees it) reaches."""
    longest = run = 0
    for char in text:
        if char in BACKTICK_LOOKALIKES:
            run += 1
            longest = max(longest, run)
        elif unicodedata.category(char) not in _INVISIBLE:
            run = 0
    return max(MIN_FENCE, longest + 1)


def data_block(text: str, *, info: str = INFO) -> str:
    """`text` as one fenced code block (no trailing newline): quoted data, whatever it says."""
    fence = FENCE_CHAR * fence_length(text)
    return f"{fence}{info}\n{text}\n{fence}"
