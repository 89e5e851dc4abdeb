"""Times an import before issue 25 could store but Python cannot read back.

The import took any ISO 8601 time: "0001-01-01T00:00:00+14:00" is before the year 1 in
UTC, which PostgreSQL keeps (as a BC date) and psycopg refuses to load ("timestamp too
small"), so every page reading the row failed; a time past 9999 in UTC fails the same way.
Replayed history (memory history, document versions) and the creation time another tool's
memory kept (portability/importers.py) were written so. Such a time becomes 1970-01-01
(too early) or the moment of the migration (too late); the import now refuses both
(portability/validation/reading.py parse_time).
"""

from django.db import migrations

TABLES = ("user_context_history", "context_documentversion", "user_context")
REPAIR = "\n".join(
    f"UPDATE {table} SET created_at = CASE WHEN created_at < '1970-01-01 00:00:00+00' "
    "THEN '1970-01-01 00:00:00+00'::timestamptz ELSE now() END "
    "WHERE created_at < '1970-01-01 00:00:00+00' OR created_at >= '9999-12-31 00:00:00+00';"
    for table in TABLES
)


class Migration(migrations.Migration):
    dependencies = [
        ("portability", "0003_export_job"),
        ("memory", "0010_history_batch"),
        ("context", "0007_version_created_at_default"),
    ]

    operations = [migrations.RunSQL(REPAIR, reverse_sql=migrations.RunSQL.noop)]
