"""Saves that mean what they say (issue 30): the profile form's one Save is one transaction
(every field or none, one history row per changed field), and a restore brings back the
same memory (its id, its creation time, its history links)."""

import pytest

from activity.models import ActivityEvent
from lib.errors import InvalidInput
from memory.models import HistoryAction, Memory, MemoryHistory
from memory.services import memory_set_many, memory_upsert


def _profile(user) -> dict[str, str]:
    return dict(Memory.objects.filter(user=user).values_list("key", "value"))


def test_profile_save_is_all_or_nothing(alice, you):
    memory_upsert(user=alice, key="name", value="Alice", actor=you)
    memory_upsert(user=alice, key="role", value="Analyst", actor=you)
    rows, events = MemoryHistory.objects.count(), ActivityEvent.objects.count()

    # The fields sort before timezone, so name, role and company are written, then undone.
    with pytest.raises(InvalidInput) as refused:
        memory_set_many(
            user=alice,
            values={
                "name": "Alice Smith",
                "role": "Head of Growth",
                "company": "YARNNN",
                "timezone": "Mars/Olympus_Mons",
            },
            actor=you,
        )

    assert refused.value.field == "timezone"
    assert _profile(alice) == {"name": "Alice", "role": "Analyst"}
    assert MemoryHistory.objects.count() == rows
    assert ActivityEvent.objects.count() == events


def test_profile_save_writes_one_history_row_per_changed_field(alice, you):
    memory_upsert(user=alice, key="name", value="Alice", actor=you)
    memory_upsert(user=alice, key="company", value="Acme", actor=you)
    before = set(MemoryHistory.objects.values_list("pk", flat=True))

    results = memory_set_many(
        user=alice,
        values={"name": "Alice", "role": "Head of Growth", "company": "", "summary": ""},
        actor=you,
    )

    assert {key: status for key, (status, _) in results.items()} == {
        "name": "unchanged",
        "role": "created",
        "company": "deleted",
        "summary": "unchanged",
    }
    assert list(results) == ["name", "role", "company", "summary"]  # as given
    new = MemoryHistory.objects.exclude(pk__in=before).order_by("key")
    assert [(row.key, row.action) for row in new] == [
        ("company", HistoryAction.DELETE),
        ("role", HistoryAction.CREATE),
    ]
    assert _profile(alice) == {"name": "Alice", "role": "Head of Growth"}
