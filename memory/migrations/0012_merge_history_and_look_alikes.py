"""Issue 26: an agent's note that says what a memory says already is merged into it, kept
in its history as a `merge` row (memory/review_gate.py _merge_note); and the look-alike
groups of agents' notes the user chose to leave apart (memory/look_alike.py)."""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0011_occurred_at_and_session'),
        ('profiles', '0006_agent_display_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='LookAlikeDismissal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('memory_ids', django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField())),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'db_table': 'user_context_look_alike_dismissal',
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='memoryhistory',
            name='history_action',
        ),
        migrations.RemoveConstraint(
            model_name='memoryhistory',
            name='history_states_match_action',
        ),
        migrations.AlterField(
            model_name='memoryhistory',
            name='action',
            field=models.CharField(choices=[('create', 'Created'), ('update', 'Updated'), ('delete', 'Deleted'), ('restore', 'Restored'), ('rename', 'Renamed'), ('merge', 'Merged a note')], max_length=8),
        ),
        migrations.AddConstraint(
            model_name='memoryhistory',
            constraint=models.CheckConstraint(condition=models.Q(('action__in', ['create', 'update', 'delete', 'restore', 'rename', 'merge'])), name='history_action'),
        ),
        migrations.AddConstraint(
            model_name='memoryhistory',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('action', 'create'), ('after__isnull', False), ('before__isnull', True)), models.Q(('action', 'delete'), ('after__isnull', True), ('before__isnull', False)), models.Q(('action__in', ['update', 'restore']), ('after__isnull', False)), models.Q(('action', 'rename'), ('after__isnull', False), ('before__isnull', False)), models.Q(('action', 'merge'), ('after__has_key', 'merged'), ('before__isnull', False)), _connector='OR'), name='history_states_match_action'),
        ),
        migrations.AddField(
            model_name='lookalikedismissal',
            name='user',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='look_alike_dismissals', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='lookalikedismissal',
            index=models.Index(fields=['user', '-created_at'], name='look_alike_dismissal_user'),
        ),
        migrations.AddConstraint(
            model_name='lookalikedismissal',
            constraint=models.CheckConstraint(condition=models.Q(('memory_ids__len__gte', 2)), name='look_alike_dismissal_group'),
        ),
    ]
