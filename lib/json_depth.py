"""How deep a JSON text nests, found without parsing it: json.loads recurses, so a deep
enough text ends in a RecursionError instead of an answer. The agent API (lib/api.py) and
the import (portability/validation/reading.py) refuse deeper texts before parsing them."""

from __future__ import annotations

import operator
import re
from itertools import accumulate, repeat

# No tool takes more than a few levels; deeper bodies are refused before json.loads, whose
# recursion would otherwise end in a RecursionError (a 500) a few thousand levels down.
MAX_JSON_DEPTH = 100
# What is left of a JSON text once its escapes are gone: a string, or an unterminated one
# running to the end (so the pattern always matches at a quote and never rescans).
_JSON_STRING = re.compile(rb'"[^"]*(?:"|\Z)')
_NOT_A_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
# Openers become 2 and closers 0: each byte minus 1 is the step in depth.
_DEPTH_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_DEPTH_CHUNK = 65536


def json_nesting_exceeds(raw: bytes, limit: int) -> bool:
    """Whether a JSON text nests arrays and objects more than `limit` deep, found without
    parsing or recursing (brackets inside strings do not count). Linear in the text, and
    stops at the first level past the limit."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    # `\\` then `\"` go first, so no escaped quote ends a string below.
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    steps = _JSON_STRING.sub(b"", unescaped).translate(_DEPTH_STEPS, _NOT_A_BRACKET)
    if b"\x02" * (limit + 1) in steps:
        return True
    depth = 0
    for start in range(0, len(steps), _DEPTH_CHUNK):
        chunk = steps[start : start + _DEPTH_CHUNK]
        depths = list(accumulate(map(operator.sub, chunk, repeat(1)), initial=depth))
        if max(depths) > limit:
            return True
        depth = depths[-1]
    return False
