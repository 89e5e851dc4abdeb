"""HeartbeatRun now belongs to briefing/ (briefing/migrations/0001_heartbeat_run_from_learning.py
takes it over): it leaves learning's state only. Its table, learning_heartbeatrun, stays
where it is, under briefing's model."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('learning', '0001_heartbeat_runs'),
        ('briefing', '0001_heartbeat_run_from_learning'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='HeartbeatRun')],
            database_operations=[],
        ),
    ]
