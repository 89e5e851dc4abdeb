"""HeartbeatRun moves from learning/ to briefing/ (issue 28: one purpose per app) in Django's
state only: its table keeps its name (`db_table`), so no row moves and the database is not
touched. learning/migrations/0002_heartbeat_run_to_briefing.py drops it from learning's
state after this one has taken it over. The content type follows, so the admin's log entries
and the model's permissions keep pointing at it."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def content_type_to(app_label: str, other: str):
    def move(apps, schema_editor):
        content_types = apps.get_model("contenttypes", "ContentType")
        if not content_types.objects.filter(app_label=app_label, model="heartbeatrun").exists():
            content_types.objects.filter(app_label=other, model="heartbeatrun").update(
                app_label=app_label
            )

    return move


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('learning', '0001_heartbeat_runs'),
        ('work', '0002_heartbeat_kind'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='HeartbeatRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('trigger', models.CharField(choices=[('schedule', 'Schedule'), ('manual', 'Run now')], default='schedule', max_length=16)),
                        ('started_at', models.DateTimeField()),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('outcome', models.CharField(choices=[('running', 'Running'), ('ok', 'Nothing to report'), ('finding', 'Finding'), ('failed', 'Failed'), ('skipped', 'Skipped')], default='running', max_length=16)),
                        ('reason', models.TextField(blank=True, help_text='Why it was skipped or failed.')),
                        ('next_due_at', models.DateTimeField(blank=True, help_text='When the schedule may run the checklist again.', null=True)),
                        ('finding_seen_at', models.DateTimeField(blank=True, help_text='When the user opened the findings (the nav count).', null=True)),
                        ('webhook_status', models.CharField(blank=True, choices=[('', 'No webhook'), ('pending', 'Sending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='', max_length=16)),
                        ('webhook_attempts', models.PositiveSmallIntegerField(default=0)),
                        ('webhook_last_error', models.CharField(blank=True, max_length=300)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='heartbeat_runs', to=settings.AUTH_USER_MODEL)),
                        ('work_item', models.ForeignKey(blank=True, help_text='The finding, when the model reported one.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='heartbeat_runs', to='work.workitem')),
                    ],
                    options={
                        'db_table': 'learning_heartbeatrun',
                        'ordering': ['-started_at', '-id'],
                        'indexes': [models.Index(fields=['user', '-started_at'], name='heartbeat_user_recent')],
                        'constraints': [models.UniqueConstraint(condition=models.Q(('outcome', 'running')), fields=('user',), name='heartbeat_one_running_per_user', violation_error_message='A heartbeat is already running for this user.'), models.CheckConstraint(condition=models.Q(('outcome__in', ['running', 'ok', 'finding', 'failed', 'skipped'])), name='heartbeat_outcome'), models.CheckConstraint(condition=models.Q(('trigger__in', ['schedule', 'manual'])), name='heartbeat_trigger'), models.CheckConstraint(condition=models.Q(('webhook_status__in', ['', 'pending', 'delivered', 'failed'])), name='heartbeat_webhook'), models.CheckConstraint(condition=models.Q(models.Q(('finished_at__isnull', True), ('next_due_at__isnull', True), ('outcome', 'running')), models.Q(models.Q(('outcome', 'running'), _negated=True), ('finished_at__isnull', False), ('next_due_at__isnull', False)), _connector='OR'), name='heartbeat_finished_consistent'), models.CheckConstraint(condition=models.Q(('work_item__isnull', True), ('outcome', 'finding'), _connector='OR'), name='heartbeat_work_item_is_finding'), models.CheckConstraint(condition=models.Q(('webhook_attempts__lte', 10)), name='heartbeat_webhook_attempts_bounded')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            content_type_to("briefing", "learning"), content_type_to("learning", "briefing")
        ),
    ]
