"""Keep a memory's vector in its row: toast_tuple_target = 4080 on user_context.

pgvector's types are STORAGE EXTERNAL, and a row with a 384-dimension vector (1,544 bytes)
plus its key, value, tsvector and hash is just over PostgreSQL's default TOAST threshold
(~2 kB), so the vector moved to the TOAST table: every row the vector side's exact scan
read cost a TOAST index lookup and another page (bench/README.md, bench/heavy.py: 59% of
rows, and the exact scan of a 10,000-row user 153 → 16 ms p50 once they stay in the row).
With the target at 4080 bytes a row is toasted only when it is larger than that.

Only the table's option changes here (a brief SHARE UPDATE EXCLUSIVE lock, no rewrite):
rows written from now on, new or updated, keep their vector inline; rows already TOASTed
stay so until they are updated. Rewriting them here would take VACUUM FULL's ACCESS
EXCLUSIVE lock for as long as the copy takes: no memory could be read or written, which is
not a migration's to decide on a large table. An admin who wants every row inline at once
runs, at a quiet moment, `VACUUM FULL user_context` (or pg_repack, which locks only briefly).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0005_search_key_and_tags"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE user_context SET (toast_tuple_target = 4080)",
            reverse_sql="ALTER TABLE user_context RESET (toast_tuple_target)",
        ),
    ]
