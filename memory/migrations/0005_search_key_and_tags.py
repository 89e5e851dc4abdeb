"""Index the words of a memory's key and tags beside its value, so a search for "coffee"
finds the entry tagged #coffee and `preference:oat-milk` matches "oat milk".

A generated column may only call IMMUTABLE functions and array_to_string is STABLE (it
formats any element type); for text[] its result depends on nothing but its input, so
the wrapper is declared IMMUTABLE. A generated column's expression cannot be altered in
place: the column is dropped and added again, which recomputes it for every row.
"""

import django.contrib.postgres.search
from django.db import migrations, models

FUNCTION = """
CREATE OR REPLACE FUNCTION mnemo_memory_tsvector(key text, tags text[], value text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(
               to_tsvector('english'::regconfig,
                           translate(key, ':-_./', '     ') || ' ' || array_to_string(tags, ' ')),
               'A')
           || to_tsvector('english'::regconfig, value)
$$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0004_drop_fts_gin_index"),
    ]

    operations = [
        migrations.RunSQL(
            FUNCTION, reverse_sql="DROP FUNCTION mnemo_memory_tsvector(text, text[], text)"
        ),
        migrations.RemoveField(model_name="memory", name="search_vector"),
        migrations.AddField(
            model_name="memory",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    "key",
                    "tags",
                    "value",
                    function="mnemo_memory_tsvector",
                    output_field=django.contrib.postgres.search.SearchVectorField(),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
    ]
