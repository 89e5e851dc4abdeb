"""Full-text search for any script: the functions every searchable table's tsvector and
every keyword query go through (search/keyword.py, docs/architecture.md "search").

Until now a row's words were `to_tsvector('english', text)`: English stemming and stop words
applied to every language, and text written without spaces (Chinese, Japanese, Thai) made
one lexeme per run of characters, so "绿茶" never found "我喜欢喝绿茶". Now:

- `mnemo_grams(text)`: each run of a script written without spaces (Han, kana, Hangul,
  Thai, Lao, Myanmar, Khmer) as its characters and character pairs ("绿茶" -> 绿 绿茶 茶),
  as Lucene's CJK bigram filter does; the query side (`mnemo_query_grams`) asks for the
  pairs only (a run of one character: that character), so "绿茶" matches the pair, not
  each character.
- `mnemo_text_config(text)`: 'english' when the text looks English, else 'simple' (words
  as written, lower-cased, no stop words dropped). A cheap guess by function words (the
  "short words" method of language identification): distinct English function words
  against distinct function words of the common Latin-script languages; a tie (usually
  none of either) is English unless the text has letters beyond ASCII (é, ü, Cyrillic,
  Arabic, Devanagari, ...). A text with no Latin letter at all is never English.
  Words shared by English and another language ("in", "was", "will", "an") are on
  neither list, nor are articles that English place names keep ("Los Angeles", "El Paso",
  "La Paz") or other languages' function words that are English words too ("hat", "met",
  "per", "con").
- `mnemo_text_tsvector(text[, config])`: the text outside those runs by its guessed
  configuration (or the one given: a memory's key and tags take its value's), followed by
  the runs' grams. All the functions are IMMUTABLE (they read nothing but their input and
  the built-in configurations), so generated columns can call them.
- `mnemo_query_terms(query)`: the query's terms, each with the lexemes that count as it:
  a word's English stem and the word as written (so an English row, stored stemmed,
  matches "running" by "run", and a German row, stored as written, matches "Hotels" by
  "hotels" whichever way the row was guessed), English stop words left out unless the
  query itself looks like another language ("Ich will ..." keeps "will"); and the grams
  of its runs without spaces. `mnemo_any_word_query(query)`: a tsquery of all of them,
  ORed.
"""

from django.db import migrations

# The scripts written without spaces between words (the ranges are Unicode blocks):
# ideographic iteration marks, hiragana and katakana, Hangul compatibility jamo, katakana
# extensions, CJK extension A, CJK unified ideographs, Hangul syllables, CJK compatibility
# ideographs, half-width katakana, Thai and Lao, Myanmar, Hangul jamo, Khmer, and the CJK
# ideographs beyond the BMP.
NO_SPACE = (
    r"[\u3005-\u3007\u3040-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff"
    r"\u1780-\u17ff\U00020000-\U0003134f]"
)

ENGLISH_WORDS = (
    "the and of to is are were be been i my you your it its with for on that this these "
    "those have has had not at from by we our he she they them their his her would do does "
    "did or but about what which who when where how there here than then if because into "
    "after before should could can just very some every prefers likes"
)

# German, French, Spanish, Italian, Portuguese, Dutch, Swedish, Danish/Norwegian, Polish,
# Indonesian, Turkish.
OTHER_WORDS = (
    "der die das und ist nicht ich ein eine einen einem zu mit den dem des sich auf für "
    "im wir auch mein meine meinen wie aber oder wenn bei nach noch nur sehr gern gerne "
    "immer zum zur vom ihr ihre sind habe wird uns kein keine "
    "les et est je une du de ne pas pour avec que qui dans sur mon ma mes nous vous il "
    "elle au aux ce cette sont mais ou très "
    "es en una por para mi yo se su sus lo muy pero como más está "
    "gli di che un io non sono della nel ho mio mia "
    "os um uma não eu meu minha da dos das em na "
    "het een ik niet op voor dat mijn zijn ook maar naar "
    "och att det jag inte og jeg ikke er "
    "jest nie się że jak "
    "yang ini itu saya tidak untuk dengan "
    "ve bir bu için çok"
)


def _array(words: str) -> str:
    return "'{" + ",".join(words.split()) + "}'::text[]"


# Written as a raw string (regular expressions, \1 back references) with the names above
# put in by _filled.
FUNCTIONS_SQL = r"""
CREATE FUNCTION mnemo_grams(t text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- The runs' characters, a space between two runs (no character of a run is a quote or
    -- a backslash, so each goes into the tsvector's text form as it is).
    chars text[] := regexp_split_to_array(regexp_replace(t, 'NOT_NO_SPACE+', ' ', 'g'), '');
    entries text[] := '{}';
    position int := 0;
BEGIN
    -- Each character and the pair it starts, at the character's position. A loop: pairing
    -- by regular expressions needs back references, and parsing the pairs' text with
    -- to_tsvector costs more than this whole loop (together 1.5 times its time).
    FOR i IN 1 .. cardinality(chars) LOOP
        CONTINUE WHEN chars[i] = ' ';
        position := least(position + 1, 16383);  -- a tsvector's largest position
        entries := entries || ('''' || chars[i] || ''':' || position);
        IF i < cardinality(chars) AND chars[i + 1] <> ' ' THEN
            entries := entries || ('''' || chars[i] || chars[i + 1] || ''':' || position);
        END IF;
    END LOOP;
    RETURN array_to_string(entries, ' ')::tsvector;
END
$$;

-- The query side's functions are plpgsql, not sql: a plpgsql function's statements are
-- planned once per connection, an sql function's body at every statement calling it.
CREATE FUNCTION mnemo_query_grams(q text) RETURNS SETOF text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF q !~ 'NO_SPACE' THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT g.gram
    FROM regexp_matches(q, 'NO_SPACE+', 'g') AS run (m)
         CROSS JOIN LATERAL generate_series(1, char_length(run.m[1])) AS i
         CROSS JOIN LATERAL (VALUES
             (CASE WHEN char_length(run.m[1]) = 1 THEN run.m[1] END),
             (CASE WHEN i < char_length(run.m[1]) THEN substr(run.m[1], i, 2) END)
         ) AS g (gram)
    WHERE g.gram IS NOT NULL;
END
$$;

CREATE FUNCTION mnemo_text_config(t text) RETURNS regconfig
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    rest text := t;
    words tsvector;
    english int;
    other int;
BEGIN
    IF t ~ 'NO_SPACE' THEN
        rest := regexp_replace(t, 'NO_SPACE+', ' ', 'g');
    END IF;
    IF rest !~ '[A-Za-z]' THEN
        RETURN 'simple'::regconfig;
    END IF;
    words := to_tsvector('simple'::regconfig, rest);
    english := length(words) - length(ts_delete(words, ENGLISH_WORDS));
    other := length(words) - length(ts_delete(words, OTHER_WORDS));
    IF english > other OR (english = other AND rest !~ '[\u00c0-\u1fff]') THEN
        RETURN 'english'::regconfig;
    END IF;
    RETURN 'simple'::regconfig;
END
$$;

CREATE FUNCTION mnemo_text_tsvector(t text, config regconfig) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF t !~ 'NO_SPACE' THEN
        RETURN to_tsvector(config, t);
    END IF;
    RETURN to_tsvector(config, regexp_replace(t, 'NO_SPACE+', ' ', 'g'))
        || mnemo_grams(t);
END
$$;

CREATE FUNCTION mnemo_text_tsvector(t text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN mnemo_text_tsvector(t, mnemo_text_config(t));
END
$$;

CREATE FUNCTION mnemo_query_terms(q text) RETURNS TABLE (term text, lexeme text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE ROWS 20 AS $$
BEGIN
    RETURN QUERY
    WITH rest AS (SELECT regexp_replace(q, 'NO_SPACE+', ' ', 'g') AS t),
    written AS (
        SELECT w.lexeme, w.positions FROM rest, unnest(to_tsvector('simple', rest.t)) AS w
    ),
    stemmed AS (
        SELECT s.lexeme, s.positions FROM rest, unnest(to_tsvector('english', rest.t)) AS s
    )
    SELECT s.lexeme, s.lexeme FROM stemmed AS s
    UNION
    SELECT s.lexeme, w.lexeme FROM stemmed AS s JOIN written AS w ON w.positions && s.positions
    UNION
    SELECT w.lexeme, w.lexeme FROM written AS w, rest
    WHERE NOT EXISTS (SELECT FROM stemmed AS s WHERE s.positions && w.positions)
      AND mnemo_text_config(rest.t) = 'simple'::regconfig
    UNION
    SELECT gram, gram FROM mnemo_query_grams(q) AS gram;
END
$$;

CREATE FUNCTION mnemo_any_word_query(q text) RETURNS tsquery
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (
        SELECT replace(
            array_to_tsvector(coalesce(array_agg(DISTINCT found.lexeme), '{}'))::text, ' ', ' | '
        )::tsquery
        FROM mnemo_query_terms(q) AS found
    );
END
$$;
"""


def _filled(sql: str) -> str:
    for name, value in (
        ("NOT_NO_SPACE", "[^" + NO_SPACE[1:]),
        ("NO_SPACE", NO_SPACE),
        ("ENGLISH_WORDS", _array(ENGLISH_WORDS)),
        ("OTHER_WORDS", _array(OTHER_WORDS)),
    ):
        sql = sql.replace(name, value)
    return sql


FUNCTIONS = _filled(FUNCTIONS_SQL)

DROP = """
DROP FUNCTION mnemo_any_word_query(text);
DROP FUNCTION mnemo_query_terms(text);
DROP FUNCTION mnemo_text_tsvector(text);
DROP FUNCTION mnemo_text_tsvector(text, regconfig);
DROP FUNCTION mnemo_text_config(text);
DROP FUNCTION mnemo_query_grams(text);
DROP FUNCTION mnemo_grams(text);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0002_searchlog_labels_and_system_searches"),
    ]

    operations = [migrations.RunSQL(FUNCTIONS, reverse_sql=DROP)]
