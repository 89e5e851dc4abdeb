"""A chunk's words for any script, through search's mnemo_text_tsvector
(search/migrations/0003_text_search_any_script.py). A generated column's expression cannot
be altered in place: the column and its GIN index are dropped and added again, which
recomputes the column for every existing chunk."""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("context", "0008_document_proposals"),
        ("search", "0003_text_search_any_script"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="documentchunk", name="chunk_fts"),
        migrations.RemoveField(model_name="documentchunk", name="search_vector"),
        migrations.AddField(
            model_name="documentchunk",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    "text",
                    function="mnemo_text_tsvector",
                    output_field=django.contrib.postgres.search.SearchVectorField(),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="documentchunk",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["search_vector"], name="chunk_fts"
            ),
        ),
    ]
