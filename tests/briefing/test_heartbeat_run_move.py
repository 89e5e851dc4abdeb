"""HeartbeatRun's move from learning/ to briefing/
(briefing/migrations/0001_heartbeat_run_from_learning.py,
learning/migrations/0002_heartbeat_run_to_briefing.py): a database migrated before the move
keeps its rows in the same table, and the model's content type follows it, both ways."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_move_keeps_the_rows_and_takes_the_content_type_along(alice):
    from django.contrib.contenttypes.models import ContentType

    executor = MigrationExecutor(connection)
    executor.migrate([("learning", "0001_heartbeat_runs"), ("briefing", None)])
    assert not ContentType.objects.filter(app_label="briefing", model="heartbeatrun").exists()
    old = ContentType.objects.get(app_label="learning", model="heartbeatrun")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO learning_heartbeatrun (user_id, trigger, started_at, outcome, reason,"
            " webhook_status, webhook_attempts, webhook_last_error) VALUES"
            " (%s, 'schedule', now(), 'running', '', '', 0, '')",
            [alice.pk],
        )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    ContentType.objects.clear_cache()
    from briefing.models import HeartbeatRun

    assert HeartbeatRun.objects.filter(user=alice).count() == 1
    moved = ContentType.objects.get(pk=old.pk)
    assert (moved.app_label, moved.model) == ("briefing", "heartbeatrun")
