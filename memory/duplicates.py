"""Near-duplicates: does a new agent memory say what one of the same kind already says?

The best-known complaint about memory services is that most of what agents store is junk
and repeats. So before an agent's new entry becomes a row (memory/services.py), it is
compared with the user's entries of the same kind:

- the same text, ignoring case and spacing, is a duplicate whatever the model;
- otherwise the new text, embedded as a search query, is compared with their stored
  passage vectors (same model): at or above the model's threshold the nearest one is
  "near". As a query, e5 tells the same from the merely related far better than passage
  to passage (bench/README.md: recall .63 against .22 at precision .95); the other models
  embed queries and passages alike. Thresholds are calibrated per model on 151
  hand-written pairs (bench/duplicates.py); a model with none (and no
  MNEMO_DUPLICATE_THRESHOLD) compares text only.

A near one either adds nothing (every word of the new text, stemmed and without stop
words, is already in it: a duplicate) or adds something (a contradiction, a detail),
which becomes a proposal to update it: a false "near" costs the user a look in the review
inbox (where "keep both" adds it after all), never a lost memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection

from lib.search_fields import vector_literal
from memory.models import Memory
from search.embeddings import (
    E5_MODEL_ID,
    WORDLLAMA_MODEL_ID,
    EmbeddingError,
    get_query_embedder,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

# Cosine similarity of the new text (as a query) and a stored entry at or above which they
# say the same or are about the same thing, by embedding model: the lowest threshold with
# precision >= 0.95 and at most 5% of distinct pairs merged (bench/duplicates.py;
# bench/README.md "Near-duplicate threshold").
CALIBRATED_THRESHOLDS = {
    E5_MODEL_ID: 0.885,
    WORDLLAMA_MODEL_ID: 0.66,
}
# And at least this share of the new text's words must be in the entry: two facts about
# one subject are close in meaning, a restatement also shares its words. In the development
# conversations (bench/duplicates.py --locomo 5), 41.8% of the observations came within
# 0.885 of an earlier, mostly different one; 19.0% with this rule, which costs a sixth of
# the same-meaning pairs found (recall .62 -> .53).
MIN_SHARED_WORDS = 0.5


@dataclass(frozen=True)
class NearMatch:
    memory: Memory
    similarity: float  # 1.0 for the same text
    adds_something: bool  # the new text has words the existing one lacks


@dataclass(frozen=True)
class Vector:
    values: list[float]
    model: str


def threshold_for(model: str) -> float | None:
    """The similarity that makes two passages near for this model; None: compare text only."""
    override = settings.MNEMO_DUPLICATE_THRESHOLD
    if override is not None:
        return override
    return CALIBRATED_THRESHOLDS.get(model)


def find_near_duplicate(*, user: AbstractBaseUser, key: str, value: str) -> NearMatch | None:
    """The user's entry of the same kind as `key` nearest to `value`, if near enough.

    None also when the user has `key` already: that is a write to it, not a new row.
    """
    if not settings.MNEMO_MERGE_NEAR_DUPLICATES:
        return None
    kind = key.partition(":")[0]
    has_key, same_text, may_be_near = _look(user, kind, key, value)
    if has_key or not may_be_near:
        return None
    if same_text is not None:
        return NearMatch(Memory.objects.get(pk=same_text), 1.0, adds_something=False)
    vector = _embed_query(value)
    threshold = None if vector is None else threshold_for(vector.model)
    if threshold is None:
        return None
    nearest = _nearest(user, kind, key, value, vector, threshold)
    if nearest is None:
        return None
    memory_id, similarity, new_words = nearest
    return NearMatch(Memory.objects.get(pk=memory_id), similarity, adds_something=new_words > 0)


def _normalized(text: str) -> str:
    """Lower case, one space between words, no closing full stop or exclamation mark."""
    return " ".join(text.lower().split()).rstrip(" .!")


# Up to this many closing full stops, exclamation marks and spaces after a stored text's
# last word: stored texts have no space around them (memory/services.py strips them).
_TRAILING = 3


def _look(user: AbstractBaseUser, kind: str, key: str, value: str) -> tuple[bool, int | None, bool]:
    """In one statement, with no embedding: whether the user has `key`; else the id of an
    entry of the kind with the same text (as _normalized, with the stored text's own
    spacing); and whether any entry of the kind holds at least half of the new text's words
    (is_near's second condition, read from the stored search vector, whose words include
    the key's and tags': a necessary condition). Only then is the text embedded, so most
    new entries cost no embedding. The length test keeps lower() off nearly every row (a
    regular expression over 1,000 rows cost 10 ms a write)."""
    table = connection.ops.quote_name(Memory._meta.db_table)
    same_kind = f"FROM {table} WHERE user_id = %(user)s AND key LIKE %(prefix)s AND key <> %(key)s"
    sql = (
        f"SELECT has_key, CASE WHEN has_key THEN NULL ELSE (SELECT id {same_kind} "  # noqa: S608 - the model's table
        "AND length(value) BETWEEN %(shortest)s AND %(longest)s "
        "AND rtrim(lower(value), ' .!') = %(normalized)s ORDER BY id LIMIT 1) END, "
        f"NOT has_key AND EXISTS (SELECT {same_kind} AND search_vector @@ new.any_word "
        "AND (SELECT count(*) FROM unnest(new.words) AS word "
        "WHERE word = ANY (tsvector_to_array(search_vector))) >= %(share)s * new.count) "
        f"FROM (SELECT EXISTS (SELECT FROM {table} WHERE user_id = %(user)s AND key = %(key)s)"
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
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _embed_query(value: str) -> Vector | None:
    """`value` embedded as a query; None when the provider is unavailable (the write goes
    on, compared by text only)."""
    try:
        embedder = get_query_embedder("memories")
        (values,) = embedder.embed_query([value])
    except EmbeddingError:
        return None
    return Vector(values=values, model=embedder.model)


# The words of `new` not among the words of `old`, and how many words `new` has, compared
# as the keyword side indexes them (the english configuration: stemmed, stop words dropped).
# `new` and `old` are SQL expressions. bench/duplicates.py calls word_counts below.
_WORDS = "tsvector_to_array(to_tsvector('english', {}))"
_WORD_COUNTS_SQL = (
    "(SELECT count(*) FROM (SELECT unnest("  # noqa: S608 - constants
    + _WORDS.format("{new}")
    + ") EXCEPT "
    "SELECT unnest(" + _WORDS.format("{old}") + ")) AS new_words), "
    "cardinality(" + _WORDS.format("{new}") + ")"
)
NEAREST_CANDIDATES = 5


def is_near(similarity: float, new_words: int, words: int, threshold: float) -> bool:
    """Near: as close in meaning as the threshold, and sharing at least half its words."""
    shared = 1.0 if words == 0 else 1 - new_words / words
    return similarity >= threshold and shared >= MIN_SHARED_WORDS


def word_counts(pairs: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """For each (new, old): the words of new that old lacks, and the words of new."""
    sql = (
        "SELECT "  # noqa: S608 - constants
        + _WORD_COUNTS_SQL.format(new="p.new", old="p.old")
        + " FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS p(new, old, n) ORDER BY n"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [[new for new, _ in pairs], [old for _, old in pairs]])
        return [(int(missing), int(total)) for missing, total in cursor.fetchall()]


def _nearest(
    user: AbstractBaseUser, kind: str, key: str, value: str, vector: Vector, threshold: float
) -> tuple[int, float, int] | None:
    """(id, similarity, words of `value` it lacks) of the nearest row of the kind that is
    near (is_near), among the few nearest by the rows' stored vectors of the same model."""
    table = connection.ops.quote_name(Memory._meta.db_table)
    sql = (
        "SELECT id, 1 - (embedding <=> %(vector)s::vector) AS similarity, "  # noqa: S608 - the model's table
        + _WORD_COUNTS_SQL.format(new="%(value)s", old="value")
        + f" FROM {table} WHERE user_id = %(user)s AND key LIKE %(prefix)s AND key <> %(key)s "
        "AND embedding_model = %(model)s AND embedding IS NOT NULL "
        "ORDER BY embedding <=> %(vector)s::vector LIMIT %(limit)s"
    )
    params = {
        "vector": vector_literal(vector.values),
        "value": value,
        "user": user.pk,
        "prefix": f"{kind}:%",
        "key": key,
        "model": vector.model,
        "limit": NEAREST_CANDIDATES,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for memory_id, similarity, new_words, words in rows:
        if is_near(float(similarity), new_words, words, threshold):
            return memory_id, float(similarity), int(new_words)
    return None
