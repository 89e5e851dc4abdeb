from django.db import connection


def test_database_is_embedded_postgres_with_pgvector(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version_num')::int")
        (version,) = cursor.fetchone()
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (vector_version,) = cursor.fetchone()
    assert connection.vendor == "postgresql"
    assert version >= 180000
    assert vector_version.startswith("0.8")
