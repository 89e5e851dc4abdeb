"""A memory's words for any script: the key's and tags' words (weight A) and the value's,
each through search's mnemo_text_tsvector (search/migrations/0003_text_search_any_script.py)
in the language guessed from the value: character pairs for text written without spaces,
English stemming only for a value that looks English, other text as written.

The function keeps its name and arguments, so the model does not change; a generated
column is not recomputed when its function is replaced, so the column is dropped and
added again, which recomputes it for every existing row (as 0005 did).
"""

import django.contrib.postgres.search
from django.db import migrations, models

# The key's and tags' words are read in the value's language: a key or a tag is a few
# words, too few to guess from ("fact:de-allergy" would be German by its "de").
FUNCTION = """
CREATE OR REPLACE FUNCTION mnemo_memory_tsvector(key text, tags text[], value text)
RETURNS tsvector LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    config regconfig := mnemo_text_config(value);
BEGIN
    RETURN setweight(
               mnemo_text_tsvector(
                   translate(key, ':-_./', '     ') || ' ' || array_to_string(tags, ' '),
                   config),
               'A')
           || mnemo_text_tsvector(value, config);
END
$$
"""

ENGLISH_ONLY = """
DROP FUNCTION mnemo_memory_tsvector(text, text[], text);
CREATE FUNCTION mnemo_memory_tsvector(key text, tags text[], value text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(
               to_tsvector('english'::regconfig,
                           translate(key, ':-_./', '     ') || ' ' || array_to_string(tags, ' ')),
               'A')
           || to_tsvector('english'::regconfig, value)
$$
"""


def _column() -> models.GeneratedField:
    return models.GeneratedField(
        db_persist=True,
        expression=models.Func(
            "key",
            "tags",
            "value",
            function="mnemo_memory_tsvector",
            output_field=django.contrib.postgres.search.SearchVectorField(),
        ),
        output_field=django.contrib.postgres.search.SearchVectorField(),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0015_history_keeps_its_memory"),
        ("search", "0003_text_search_any_script"),
    ]

    operations = [
        migrations.RemoveField(model_name="memory", name="search_vector"),
        migrations.RunSQL(FUNCTION, reverse_sql=ENGLISH_ONLY),
        migrations.AddField(model_name="memory", name="search_vector", field=_column()),
    ]
