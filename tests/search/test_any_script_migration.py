"""The migrations to words for any script (search/migrations/0003_text_search_any_script.py,
memory/migrations/0016_search_vector_any_script.py,
context/migrations/0009_search_vector_any_script.py) recompute the rows already stored,
and go back to English-only words."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("memory", "0015_history_keeps_its_memory"),
    ("context", "0008_document_proposals"),
    ("search", "0002_searchlog_labels_and_system_searches"),
]
GERMAN = "Ich lese die Geschichte der Hunde"
CHINESE = "我喜欢喝绿茶"


def words(key):
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_vector::text FROM user_context WHERE key = %s", [key])
        return cursor.fetchone()[0]


def test_rows_written_before_are_recomputed_and_the_way_back_is_english(alice):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    memory_model = executor.loader.project_state(BEFORE).apps.get_model("memory", "Memory")
    for key, value in (("fact:de", GERMAN), ("fact:zh", CHINESE)):
        memory_model.objects.create(
            user_id=alice.pk, key=key, value=value, source="user_stated", confidence=1.0
        )
    assert "'geschicht'" in words("fact:de")  # English stems, before
    assert f"'{CHINESE}'" in words("fact:zh")  # the whole run as one word

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert "'geschichte'" in words("fact:de")
    assert "'geschicht'" not in words("fact:de")
    assert "'绿茶'" in words("fact:zh")

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert "'geschicht'" in words("fact:de")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert "'绿茶'" in words("fact:zh")
