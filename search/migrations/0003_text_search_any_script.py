"""Full-text search for any script: the functions every searchable table's tsvector and
every keyword query go through (search/keyword.py, docs/architecture.md "search").

Until now a row's words were `to_tsvector('english', text)`: English stemming and stop words
applied to every language, and text written without spaces (Chinese, Japanese, Thai) made
one lexeme per run of characters, so "绿茶" never found "我喜欢喝绿茶". Now:

- `mnemo_grams(text, unigrams)`: each run of a script written without spaces (Han, kana,
  Hangul, Thai, Lao, Myanmar, Khmer) as its characters and character pairs ("绿茶" ->
  绿 绿茶 茶), as Lucene's CJK bigram filter does; the query side asks for the pairs only
  (a run of one character: that character), so "绿茶" matches the pair, not each character.
- `mnemo_text_config(text)`: 'english' when the text looks English, else 'simple' (words
  as written, lower-cased, no stop words dropped). A cheap guess by function words (the
  "short words" method of language identification): distinct English function words
  against distinct function words of the common Latin-script languages; a tie (usually
  none of either) is English unless the text has letters beyond ASCII (é, ü, Cyrillic,
  Arabic, Devanagari, ...). A text with no Latin letter at all is never English.
  Words shared by English and another language ("in", "was", "will", "die", "an") are
  on neither list.
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
    "did an or but about what which who when where how there here than then if because into "
    "after before should could can just very some every prefers likes"
)

# German, French, Spanish, Italian, Portuguese, Dutch, Swedish, Danish/Norwegian, Polish,
# Indonesian, Turkish.
OTHER_WORDS = (
    "der die das und ist nicht ich ein eine einen einem zu mit den dem des sich auf für von "
    "im wir auch mein meine meinen wie aber oder wenn bei nach noch nur sehr gern gerne "
    "immer zum zur vom ihr ihre sind hat habe wird uns kein keine "
    "le la les et est je une du de ne pas pour avec que qui dans sur mon ma mes nous vous il "
    "elle au aux ce cette sont mais ou très "
    "el los las es en una por con para mi yo se del al su sus lo muy pero como más está son "
    "gli di che per un io non sono della nel ho mio mia "
    "os um uma não eu meu minha do da dos das em na "
    "het een van ik niet op met voor dat mijn zijn ook maar naar "
    "och att det jag inte og jeg ikke er til "
    "jest nie się że jak ale "
    "dan yang ini itu saya tidak untuk dengan "
    "ve bir bu için çok"
)


def _array(words: str) -> str:
    return "'{" + ",".join(words.split()) + "}'::text[]"


FUNCTIONS = f"""
CREATE FUNCTION mnemo_grams(t text, unigrams boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(g.gram, ' ' ORDER BY run.n, i, g.n), '')
    FROM regexp_matches(t, '{NO_SPACE}+', 'g') WITH ORDINALITY AS run (m, n)
         CROSS JOIN LATERAL generate_series(1, char_length(run.m[1])) AS i
         CROSS JOIN LATERAL (VALUES
             (1, CASE WHEN unigrams OR char_length(run.m[1]) = 1 THEN substr(run.m[1], i, 1) END),
             (2, CASE WHEN i < char_length(run.m[1]) THEN substr(run.m[1], i, 2) END)
         ) AS g (n, gram)
    WHERE g.gram IS NOT NULL
$$;

CREATE FUNCTION mnemo_text_config(t text) RETURNS regconfig
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    rest text := regexp_replace(t, '{NO_SPACE}+', ' ', 'g');
    words tsvector;
    english int;
    other int;
BEGIN
    IF rest !~ '[A-Za-z]' THEN
        RETURN 'simple'::regconfig;
    END IF;
    words := to_tsvector('simple'::regconfig, rest);
    english := length(words) - length(ts_delete(words, {_array(ENGLISH_WORDS)}));
    other := length(words) - length(ts_delete(words, {_array(OTHER_WORDS)}));
    IF english > other OR (english = other AND rest !~ '[\\u00c0-\\u1fff]') THEN
        RETURN 'english'::regconfig;
    END IF;
    RETURN 'simple'::regconfig;
END
$$;

CREATE FUNCTION mnemo_text_tsvector(t text, config regconfig) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF t !~ '{NO_SPACE}' THEN
        RETURN to_tsvector(config, t);
    END IF;
    RETURN to_tsvector(config, regexp_replace(t, '{NO_SPACE}+', ' ', 'g'))
        || to_tsvector('simple'::regconfig, mnemo_grams(t, true));
END
$$;

CREATE FUNCTION mnemo_text_tsvector(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT mnemo_text_tsvector(t, mnemo_text_config(t))
$$;

CREATE FUNCTION mnemo_query_terms(q text) RETURNS TABLE (term text, lexeme text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE ROWS 20 AS $$
    WITH rest AS (SELECT regexp_replace(q, '{NO_SPACE}+', ' ', 'g') AS t),
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
    SELECT gram, gram FROM regexp_split_to_table(mnemo_grams(q, false), ' ') AS gram
    WHERE gram <> ''
$$;

CREATE FUNCTION mnemo_any_word_query(q text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT replace(
        array_to_tsvector(coalesce(array_agg(DISTINCT lexeme), '{{}}'))::text, ' ', ' | '
    )::tsquery
    FROM mnemo_query_terms(q)
$$;
"""

DROP = """
DROP FUNCTION mnemo_any_word_query(text);
DROP FUNCTION mnemo_query_terms(text);
DROP FUNCTION mnemo_text_tsvector(text);
DROP FUNCTION mnemo_text_tsvector(text, regconfig);
DROP FUNCTION mnemo_text_config(text);
DROP FUNCTION mnemo_grams(text, boolean);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0002_searchlog_labels_and_system_searches"),
    ]

    operations = [migrations.RunSQL(FUNCTIONS, reverse_sql=DROP)]
