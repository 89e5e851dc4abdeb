"""Keep a chunk's vector in its row where it fits: toast_tuple_target = 4080 on
context_documentchunk.

The same change as memory/migrations/0006_vectors_in_the_row.py, for the same reason: a
chunk's vector (STORAGE EXTERNAL, 1,544 bytes at 384 dimensions) was moved out of the row
as soon as the row passed ~2 kB. A chunk's text and tsvector are compressed first and, in
a row still over 4080 bytes, the largest value (usually the text) moves out before the
vector does.

Only the table's option changes (a brief lock, no rewrite): rows written from now on keep
their vector inline; a document's chunks are rewritten whenever the document changes.
`VACUUM FULL context_documentchunk` (an exclusive lock while it copies) or pg_repack moves
the rest at once, if an admin wants it.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("context", "0003_documentchunk"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE context_documentchunk SET (toast_tuple_target = 4080)",
            reverse_sql="ALTER TABLE context_documentchunk RESET (toast_tuple_target)",
        ),
    ]
