"""Near-duplicates: does a new agent memory say what one of the same kind already says?

The best-known complaint about memory services is that most of what agents store is junk
and repeats. So before an agent's new entry becomes a row (memory/services.py), it is
compared with the user's entries of the same kind, in one statement and one small
embedding:

- the same text, ignoring case, spacing and a closing full stop, is a duplicate;
- otherwise an entry is near when it holds at least half of the new text's words
  (stemmed, without stop words) and the two texts' WordLlama vectors are at least the
  calibrated similarity apart. WordLlama compares them on the spot, whatever model embeds
  the rows: offline, in about a millisecond, with no thread pool and no network on the
  write path (e5 there cut agent writes from about 200 to 36 a second under load,
  bench/README.md). On 151 hand-written pairs it finds as many of the same-meaning pairs
  as e5 at the same precision (bench/duplicates.py).

A near one either adds nothing (every word of the new text is already in it: a duplicate,
merged into the near one's history) or adds something (a contradiction, a detail): beside
an agent's note it is stored as its own row, and only a change to what the user stated
becomes a proposal (memory/review_gate.py _near_entry). A false "near" costs the user a look
in the review inbox (where "keep both" adds it after all) or a history row, never a lost
memory. Agents' notes that look alike are suggested for tidying by memory/look_alike.py,
with the same rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy
from django.conf import settings
from django.db import connection

from memory.models import Memory
from memory.visibility import rule_sql
from search.embedder_base import EmbeddingError
from search.embeddings import get_text_comparer

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from profiles.models import Agent

# WordLlama's cosine similarity of two texts at or above which they say the same or are
# about the same thing: the lowest threshold with precision >= 0.95 and at most 5% of
# distinct pairs merged, with some margin (bench/duplicates.py; bench/README.md
# "Near-duplicate threshold"). MNEMO_DUPLICATE_THRESHOLD overrides it.
CALIBRATED_THRESHOLD = 0.66
# And at least this share of the new text's words must be in the entry: two facts about
# one subject are close in meaning, a restatement also shares its words. In the development
# conversations (bench/duplicates.py --locomo 5), 41.8% of the observations came within
# e5's 0.885 of an earlier, mostly different one; 19.0% with this rule.
MIN_SHARED_WORDS = 0.5
# The entries sharing most words with the new text that are compared by meaning.
CANDIDATES = 20


@dataclass(frozen=True)
class NearMatch:
    """The entry found near, as the check read it (not locked: memory/review_gate.py locks
    it when the new entry is to be merged into it or proposed as its change)."""

    id: int
    key: str
    value: str
    source: str
    similarity: float  # 1.0 for the same text
    adds_something: bool  # the new text has words the existing one lacks


@dataclass(frozen=True)
class Candidate:
    id: int
    key: str
    value: str
    source: str
    new_words: int  # words of the new text this entry lacks
    words: int  # words of the new text


def near_threshold() -> float:
    """The similarity that makes two texts near."""
    override = settings.MNEMO_DUPLICATE_THRESHOLD
    return CALIBRATED_THRESHOLD if override is None else override


def is_near(similarity: float, new_words: int, words: int, threshold: float) -> bool:
    """Near: as close in meaning as the threshold, and sharing at least half its words."""
    shared = 1.0 if words == 0 else 1 - new_words / words
    return similarity >= threshold and shared >= MIN_SHARED_WORDS


def find_near_duplicate(
    *, user: AbstractBaseUser, key: str, value: str, agent: Agent | None = None
) -> NearMatch | None:
    """The user's entry of the same kind as `key` nearest to `value`, if near enough;
    for an agent's write, only among the entries its read rule lets it read
    (memory/visibility.py): a merge into, or a proposal on, a memory hidden from it would
    tell it what that memory says.

    None also when the user has `key` already: that is a write to it, not a new row.
    """
    if not settings.MNEMO_MERGE_NEAR_DUPLICATES:
        return None
    has_key, same_text, candidates = _look(user, key.partition(":")[0], key, value, agent)
    if has_key:
        return None
    if same_text is not None:
        return NearMatch(*same_text, similarity=1.0, adds_something=False)
    if not candidates:
        return None
    similarities = _similarities(value, [candidate.value for candidate in candidates])
    near = [
        (similarity, candidate)
        for similarity, candidate in zip(similarities, candidates, strict=True)
        if is_near(similarity, candidate.new_words, candidate.words, near_threshold())
    ]
    if not near:
        return None
    similarity, best = max(near, key=lambda pair: (pair[0], -pair[1].id))
    return NearMatch(
        best.id,
        best.key,
        best.value,
        best.source,
        similarity=similarity,
        adds_something=best.new_words > 0,
    )


def _similarities(value: str, others: list[str]) -> list[float]:
    """Cosine similarity of `value` with each of `others`; all 0 if WordLlama cannot be
    loaded (then only the same text is a duplicate)."""
    try:
        vectors = numpy.asarray(get_text_comparer().embed([value, *others]), dtype=numpy.float32)
    except EmbeddingError:
        return [0.0] * len(others)
    # One matrix product: the dot products in Python were the write's largest own cost
    # (20 candidates x 256 dimensions, bench/README.md issue 29).
    return (vectors[1:] @ vectors[0]).tolist()


# The words of `new` not among the words of `old`, and how many words `new` has, compared
# as the keyword side indexes them (mnemo_text_tsvector, SQL in
# search/migrations/0003_text_search_any_script.py: English stemmed, stop words dropped;
# other text as written; text without spaces as character pairs). `new` and `old` are SQL
# expressions.
_WORDS = "tsvector_to_array(mnemo_text_tsvector({}))"
_MISSING_SQL = (
    "(SELECT count(*) FROM (SELECT unnest("  # noqa: S608 - constants
    + _WORDS.format("{new}")
    + ") EXCEPT "
    "SELECT unnest(" + _WORDS.format("{old}") + ")) AS new_words)"
)
_COUNT_SQL = "cardinality(" + _WORDS.format("{new}") + ")"  # for word_counts


def _normalized(text: str) -> str:
    """Lower case, one space between words, no closing full stop or exclamation mark."""
    return " ".join(text.lower().split()).rstrip(" .!")


# Up to this many closing full stops, exclamation marks and spaces after a stored text's
# last word: stored texts have no space around them (memory/validation.py strips them).
_TRAILING = 3


def _look(
    user: AbstractBaseUser, kind: str, key: str, value: str, agent: Agent | None = None
) -> tuple[bool, tuple[int, str, str, str] | None, list[Candidate]]:
    """In one statement: whether the user has `key`; else the id, key, text and source of
    an entry of the kind with the same text (as _normalized, with the stored text's own
    spacing), and the entries of the kind holding at least half of the new text's words,
    most shared first.

    Rows are picked by the words of their stored search vector (which include the key's
    and tags': a necessary condition, and no parsing); each pick's exact counts come from
    its text. The length test keeps lower() off nearly every row (a regular expression
    over 1,000 rows cost 10 ms a write)."""
    table = connection.ops.quote_name(Memory._meta.db_table)
    # The user's memory only: an agent's own note is no one else's duplicate.
    same_kind = (
        f"FROM {table} WHERE user_id = %(user)s AND owner_agent_id IS NULL "
        "AND key LIKE %(prefix)s AND key <> %(key)s"
    )
    rule, rule_params = rule_sql(agent)
    if rule:
        same_kind += f" AND {rule}"
    # How many of the new text's words the row's vector holds: what deleting them removes.
    shared = "length(search_vector) - length(ts_delete(search_vector, new.words))"
    sql = (
        "SELECT has_key, CASE WHEN has_key THEN NULL ELSE (SELECT "  # noqa: S608 - the model's table
        f"json_build_array(id, key, value, source) {same_kind} "
        "AND length(value) BETWEEN %(shortest)s AND %(longest)s "
        "AND rtrim(lower(value), ' .!') = %(normalized)s ORDER BY id LIMIT 1) END, "
        "CASE WHEN has_key THEN NULL ELSE (SELECT json_agg(json_build_array(id, key, value, "
        "source, "
        + _MISSING_SQL.format(new="%(value)s", old="value")
        + ", new.count)) FROM (SELECT id, key, value, source FROM (SELECT id, key, value, "
        "source, "
        + f"{shared} AS shared {same_kind} AND search_vector @@ new.any_word) AS matched "  # noqa: S608 - names
        "WHERE shared >= %(share)s * new.count ORDER BY shared DESC, id "
        "LIMIT %(candidates)s) AS picked) END "
        f"FROM (SELECT EXISTS (SELECT FROM {table} WHERE user_id = %(user)s "
        "AND owner_agent_id IS NULL AND key = %(key)s)"
        " AS has_key) AS mine, "
        "(SELECT words, cardinality(words) AS count, (SELECT string_agg(quote_literal(word), "
        "' | ') FROM unnest(words) AS word)::tsquery AS any_word FROM (SELECT "
        + _WORDS.format("%(value)s")
        + " AS words) AS parsed) AS new"
    )
    normalized = _normalized(value)
    params = {
        "user": user.pk,
        "key": key,
        "prefix": f"{kind}:%",
        "normalized": normalized,
        "shortest": len(normalized),
        "longest": len(normalized) + _TRAILING,
        "value": value,
        "share": MIN_SHARED_WORDS,
        "candidates": CANDIDATES,
        **rule_params,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        has_key, same_text, picked = cursor.fetchone()
    if isinstance(picked, str):
        picked = json.loads(picked)
    if isinstance(same_text, str):
        same_text = json.loads(same_text)
    candidates = [Candidate(*row) for row in picked or []]
    return has_key, None if same_text is None else tuple(same_text), candidates


def word_counts(pairs: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """For each (new, old): the words of new that old lacks, and the words of new, as the
    check counts them (bench/duplicates.py)."""
    sql = (
        "SELECT "  # noqa: S608 - constants
        + _MISSING_SQL.format(new="p.new", old="p.old")
        + ", "
        + _COUNT_SQL.format(new="p.new")
        + " FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS p(new, old, n) ORDER BY n"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [[new for new, _ in pairs], [old for _, old in pairs]])
        return [(int(missing), int(total)) for missing, total in cursor.fetchall()]
