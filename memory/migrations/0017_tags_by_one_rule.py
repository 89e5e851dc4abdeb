"""Issue 30: tags by the one rule of lib/tags.py, which now folds '_' into '-' ("data_model"
is data-model) and runs of '-' into one, and keeps letters of any script. Tags stored by
the rule before are rewritten in its form, in one transaction for every table that holds
tags: memories, work items and agents' read rules. Rules and memories must agree, or a tag
that hides memories from an agent would no longer name them."""

from django.db import migrations

from lib.tags import normalize_tag

BATCH = 2000


def _renormalise(model, field):
    changed = []
    rows = model.objects.exclude(**{field: []}).only("pk", field).order_by("pk")
    for row in rows.iterator(chunk_size=BATCH):
        tags = getattr(row, field)
        # The rule is idempotent: a tag already in today's form is left as it is.
        normal = sorted({normalize_tag(tag) for tag in tags} - {""})
        if normal != tags:
            setattr(row, field, normal)
            changed.append(row)
        if len(changed) >= BATCH:
            model.objects.bulk_update(changed, [field])
            changed = []
    if changed:
        model.objects.bulk_update(changed, [field])


def forwards(apps, schema_editor):
    _renormalise(apps.get_model("memory", "Memory"), "tags")
    _renormalise(apps.get_model("work", "WorkItem"), "tags")
    _renormalise(apps.get_model("profiles", "Agent"), "memory_tags")


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0016_search_vector_any_script"),
        ("work", "0004_workitem_deleted_at"),
        ("profiles", "0008_heartbeat_help_text"),
    ]

    operations = [
        # Backwards: tags in today's form are tags by the earlier rule too, but for letters
        # outside a-z, which that rule dropped; nothing to undo.
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
