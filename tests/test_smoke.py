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


def test_pages_leak_no_template_syntax(client, alice):
    """A multi-line {# #} comment, or a typo in a tag, shows up as text on the page."""
    client.force_login(alice)
    for path in ("/", "/?tab=styles", "/?tab=entries", "/activity/", "/work/", "/agents/"):
        html = client.get(path).content.decode()
        for marker in ("{#", "#}", "{%", "%}", "{{", "}}"):
            assert marker not in html, (path, marker)
