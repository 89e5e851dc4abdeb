"""The keyword side of search: Okapi BM25 over PostgreSQL full text, in one statement.

PostgreSQL's own ts_rank/ts_rank_cd count matches but know nothing of how rare a word is,
so a name that appears in half of someone's memories weighs as much as the one word that
singles out the answer. BM25 weighs each query word by its inverse document frequency
among the rows searched (one user's memories, or the chunks a caller may read), saturates
repeated words (k1) and normalises by length (b).

Everything is computed from the stored tsvector, so no extension and no second index is
needed, and the whole side stays one SQL statement the vector side joins by UNION ALL:

- the rows matching any query word are read once (through the same filter as before);
- the query's terms come from `mnemo_query_terms` (SQL in
  search/migrations/0003_text_search_any_script.py): a word is one term matched by its
  English stem or by the word as written (a row is stored stemmed when it looks English,
  as written otherwise), a pair of characters of text written without spaces another;
- `unnest(tsvector)` gives each matched row's lexemes with their positions and weights:
  the term frequency of a query term is its lexemes' number of positions, a position of weight A
  (a key word or tag, memory/models.py) counting KEY_WEIGHT times (BM25F's field weight);
  a row's length is its number of distinct lexemes (length(tsvector)), which needs no
  second pass over its text;
- document frequency is counted over the matched rows (a row with the word matches);
  N is the number of rows searched; the average length is taken over the matched rows,
  which read it for free where a scan of every row would cost as much as the search.

N of a large scope is remembered (`ScopeSizes`): counting is a second pass over every row
in scope, and a minute of writes moves N of LARGE_SCOPE rows or more, and with it every
word's IDF, by a few in a thousand. The statement that counted says N with its rows, so
remembering it costs no statement; a smaller scope, whose IDF a few writes do move, is
counted in the statement every time, where it is as cheap as a lookup.

Each row also gets its coverage: the share of the query's total IDF that it matches, so
the relevance floor can tell "shares one common word" from "is about this". A query word
that no row has is weighed as if one row had it: as rare as can be, but not so heavy that
for a user with three memories a query of one known and one unknown word covers nothing.
"""

from __future__ import annotations

import threading
import time

from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import QuerySet

K1 = 1.2
B = 0.75
KEY_WEIGHT = 2.0
SIDE = "keyword"  # the first column of this side's rows in the search statement


class AnyWordQuery(SearchQuery):
    """A tsquery matching any of the query's terms (`mnemo_any_word_query`, SQL in
    search/migrations/0003_text_search_any_script.py): each word as its English stem and
    as written, English stop words left out unless the query looks like another language,
    text written without spaces as character pairs; all ORed.

    plainto_tsquery and websearch_to_tsquery AND every word, and a question asked in the
    user's own words rarely shares all of its words with a short fact."""

    template = "mnemo_any_word_query(%(expressions)s)"

    def __init__(self, value: str) -> None:
        super().__init__(value)


def keyword_side(
    rows: QuerySet, query: str, candidates: int, columns: tuple[str, ...]
) -> list[tuple]:
    """The best `candidates` of `rows` matching any word of the query, best first, as
    (SIDE, BM25 score, coverage, pk, *columns); N of a large scope is remembered on the
    way (`ScopeSizes`)."""
    count_sql, count_params = rows.order_by().values_list("pk").query.sql_with_params()
    scope = (count_sql, repr(count_params))  # what names a scope: its rows' SQL, parameters
    known = scope_sizes.get(scope)
    if known is None:
        searched = _counted(count_sql, count_params)
    else:
        searched = ("SELECT %s::float8 AS n", [known])
    sql, params = _keyword_side_sql(rows, query, candidates, columns, searched)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    if found and known is None:  # counted by this statement
        scope_sizes.put(scope, int(found[0][-1]))
    return [row[:-1] for row in found]


def keyword_side_sql(
    rows: QuerySet, query: str, candidates: int, columns: tuple[str, ...]
) -> tuple[str, list]:
    """SQL and params of a SELECT of (SIDE, BM25 score, coverage, pk, *columns, N) for
    the best `candidates` of `rows` matching any word of the query, best first, N (the
    rows in scope) counted by the statement."""
    searched = _counted(*rows.order_by().values_list("pk").query.sql_with_params())
    return _keyword_side_sql(rows, query, candidates, columns, searched)


def _counted(count_sql: str, count_params: tuple | list) -> tuple[str, list]:
    return f"SELECT count(*)::float8 AS n FROM ({count_sql}) AS scope", [*count_params]  # noqa: S608


def _keyword_side_sql(
    rows: QuerySet,
    query: str,
    candidates: int,
    columns: tuple[str, ...],
    searched: tuple[str, list],
) -> tuple[str, list]:
    matched_sql, matched_params = (
        rows.filter(search_vector=AnyWordQuery(query))
        .order_by()
        .values_list("pk", "search_vector", *columns)
        .query.sql_with_params()
    )
    searched_sql, count_params = searched
    extra = [f"c{i}" for i in range(len(columns))]
    names = ", ".join(["id", "search_vector", *extra])
    picked = "".join(f", m.{name}" for name in extra)
    sql = f"""
        SELECT * FROM (
            WITH matched ({names}) AS MATERIALIZED ({matched_sql}),
            terms AS MATERIALIZED (SELECT term, lexeme FROM mnemo_query_terms(%s)),
            searched AS MATERIALIZED ({searched_sql}),
            tf AS (
                SELECT m.id, terms.term, max(length(m.search_vector)) AS dl,
                       sum(coalesce((SELECT sum(CASE w WHEN 'A' THEN %s ELSE 1.0 END)::float8
                                     FROM unnest(t.weights) AS w), 1)) AS tf
                FROM matched m CROSS JOIN LATERAL unnest(m.search_vector) AS t
                JOIN terms ON terms.lexeme = t.lexeme
                GROUP BY m.id, terms.term
            ),
            df AS (SELECT term, count(*)::float8 AS df FROM tf GROUP BY term),
            idf AS (
                SELECT asked.term,
                       ln(1 + (searched.n - seen.df + 0.5) / (seen.df + 0.5)) AS idf
                FROM (SELECT DISTINCT term FROM terms) AS asked CROSS JOIN searched
                LEFT JOIN df USING (term)
                CROSS JOIN LATERAL (SELECT greatest(df.df, 1) AS df) AS seen
            ),
            average AS (SELECT greatest(avg(length(search_vector)), 1)::float8 AS dl FROM matched),
            scored AS (
                SELECT tf.id,
                       sum(idf.idf * tf.tf * (%s + 1)
                           / (tf.tf + %s * (1 - %s + %s * tf.dl / average.dl))) AS score,
                       sum(idf.idf) / nullif((SELECT sum(idf) FROM idf), 0) AS coverage
                FROM tf JOIN idf USING (term) CROSS JOIN average
                GROUP BY tf.id
                ORDER BY score DESC, tf.id
                LIMIT %s
            )
            SELECT %s AS side, s.score, s.coverage, m.id{picked}, searched.n
            FROM scored s JOIN matched m USING (id) CROSS JOIN searched
        ) AS keyword_side
    """  # noqa: S608 - names come from the models, values are parameters
    params = [*matched_params, query, *count_params, KEY_WEIGHT, K1, K1, B, B, candidates, SIDE]
    return sql, params


class ScopeSizes:
    """The row counts (N of the IDF) of the large scopes searched lately, per process.

    A count is kept for `seconds` after the statement that made it, and given back only
    when it is at least `large`: a smaller scope is counted in every statement, exactly.
    At most `kept` scopes are remembered. Thread-safe: a web process searches on several
    threads."""

    def __init__(self, *, large: int, seconds: float, kept: int = 4096) -> None:
        self._large = large
        self._seconds = seconds
        self._kept = kept
        self._sizes: dict[tuple[str, str], tuple[int, float]] = {}
        self._lock = threading.Lock()

    def get(self, scope: tuple[str, str]) -> int | None:
        """The scope's row count when it is large and was counted lately, else None (put
        keeps large counts only)."""
        with self._lock:
            kept = self._sizes.get(scope)
        return kept[0] if kept is not None and time.monotonic() < kept[1] else None

    def put(self, scope: tuple[str, str], rows: int) -> None:
        if rows < self._large:
            return
        now = time.monotonic()
        with self._lock:
            if scope not in self._sizes and len(self._sizes) >= self._kept:
                expired = [key for key, (_, until) in self._sizes.items() if until <= now]
                for key in expired or list(self._sizes):  # none expired: start afresh
                    del self._sizes[key]
            self._sizes[scope] = (rows, now + self._seconds)

    def clear(self) -> None:
        with self._lock:
            self._sizes.clear()


# A scope of at least LARGE_SCOPE rows is counted at most once every SCOPE_SIZE_SECONDS
# (`ScopeSizes`): a minute's writes then move its N by a few in a thousand.
LARGE_SCOPE = 500
SCOPE_SIZE_SECONDS = 60.0
scope_sizes = ScopeSizes(large=LARGE_SCOPE, seconds=SCOPE_SIZE_SECONDS)
