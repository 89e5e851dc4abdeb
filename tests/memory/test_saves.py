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


def _identity(memory: Memory) -> tuple[int, object]:
    return memory.pk, memory.created_at


def test_restoring_a_deleted_memory_brings_back_the_same_memory(alice, you):
    from memory.services import memory_delete, memory_restore

    memory_upsert(user=alice, key="fact:tea", value="Drinks green tea", actor=you)
    memory_upsert(user=alice, key="fact:tea", value="Drinks oolong tea", actor=you)
    old = Memory.objects.get(user=alice, key="fact:tea")
    deletion = memory_delete(user=alice, key="fact:tea", actor=you)
    assert deletion.memory_id == old.pk  # the history keeps naming it while it is gone
    assert MemoryHistory.objects.filter(memory_id=old.pk).count() == 3

    write = memory_restore(user=alice, history_id=deletion.pk, actor=you)

    back = Memory.objects.get(user=alice, key="fact:tea")
    assert _identity(back) == _identity(old)
    assert write.memory.pk == old.pk
    assert back.value == "Drinks oolong tea"
    assert back.updated_at > old.updated_at
    actions = list(
        MemoryHistory.objects.filter(memory_id=old.pk)
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["create", "update", "delete", "restore"]


def test_delete_all_then_undo_keeps_every_id_and_creation_time(alice, you):
    from memory.bulk import memory_batch_undo, memory_delete_all

    for key, value in [("name", "Alice"), ("tone_slack", "casual"), ("fact:tea", "Tea")]:
        memory_upsert(user=alice, key=key, value=value, actor=you)
    before = {m.key: _identity(m) for m in Memory.objects.filter(user=alice)}

    deleted = memory_delete_all(user=alice, actor=you)
    assert Memory.objects.filter(user=alice).count() == 0
    undone = memory_batch_undo(user=alice, batch=deleted.batch, actor=you)

    assert sorted(undone.done) == sorted(before)
    after = {m.key: _identity(m) for m in Memory.objects.filter(user=alice)}
    assert after == before


def test_a_memory_added_again_under_a_deleted_key_is_a_new_memory(alice, you):
    """Only a restore brings the old memory back; adding the key again is a new one, and
    restoring the old deletion then changes that one in place (its id stays)."""
    from memory.services import memory_delete, memory_restore

    memory_upsert(user=alice, key="fact:tea", value="Tea", actor=you)
    old = Memory.objects.get(user=alice, key="fact:tea")
    deletion = memory_delete(user=alice, key="fact:tea", actor=you)
    memory_upsert(user=alice, key="fact:tea", value="Coffee", actor=you)
    new = Memory.objects.get(user=alice, key="fact:tea")
    assert new.pk != old.pk

    memory_restore(user=alice, history_id=deletion.pk, actor=you)

    assert Memory.objects.get(user=alice, key="fact:tea").pk == new.pk
    assert Memory.objects.get(user=alice, key="fact:tea").value == "Tea"


def test_adding_an_entry_that_is_there_already_adds_nothing_and_names_it(alice, you):
    from memory.entries import entry_create
    from memory.outcomes import DuplicateMemory

    first = entry_create(
        user=alice, kind="preference", value="Prefers oat milk in coffee.", actor=you
    )
    rows, events = MemoryHistory.objects.count(), ActivityEvent.objects.count()

    with pytest.raises(DuplicateMemory) as duplicate:
        entry_create(
            user=alice, kind="preference", value="  Prefers oat milk in coffee. ", actor=you
        )

    assert duplicate.value.existing.pk == first.memory.pk
    assert duplicate.value.existing.key == "preference:prefers-oat-milk-in-coffee"
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == [
        "preference:prefers-oat-milk-in-coffee"
    ]
    assert (MemoryHistory.objects.count(), ActivityEvent.objects.count()) == (rows, events)


def test_other_text_under_the_same_made_key_is_still_added_numbered(alice, you):
    """Only the same text is "there already": other words that make the same key are a new
    entry under the next number, and a typed key is the user's own choice."""
    from memory.entries import entry_create

    entry_create(user=alice, kind="fact", value="Lives in Berlin", actor=you)
    second = entry_create(user=alice, kind="fact", value="Lives in Berlin!", actor=you)
    typed = entry_create(user=alice, kind="fact", value="Lives in Berlin", actor=you, slug="home")

    assert (second.memory.key, typed.memory.key) == ("fact:lives-in-berlin-2", "fact:home")
    third = entry_create(user=alice, kind="fact", value="Lives in Berlin.", actor=you)
    assert third.memory.key == "fact:lives-in-berlin-3"


def test_a_duplicate_found_among_the_numbered_keys(alice, you):
    from memory.entries import entry_create
    from memory.outcomes import DuplicateMemory

    entry_create(user=alice, kind="fact", value="Lives in Berlin", actor=you)
    second = entry_create(user=alice, kind="fact", value="Lives in Berlin!", actor=you)

    with pytest.raises(DuplicateMemory) as duplicate:
        entry_create(user=alice, kind="fact", value="Lives in Berlin!", actor=you)
    assert duplicate.value.existing.key == second.memory.key


def test_an_agents_create_of_the_same_text_answers_duplicate_too(
    alice, you, alice_token, call_tool
):
    """The agent API says the same as the Entries tab: the text is there already, under
    this key, and nothing was added."""
    from memory.entries import entry_create

    first = entry_create(
        user=alice, kind="preference", value="Prefers oat milk in coffee.", actor=you
    )

    created = call_tool(
        alice_token,
        "create_memory",
        {"key": "preference:oat-milk", "value": "Prefers oat milk in coffee."},
    )
    stored = call_tool(
        alice_token,
        "memory_store",
        {"content": "Prefers oat milk in coffee.", "category": "preference", "share": True},
    )

    assert created.status_code == 200, created.json()
    assert created.json()["status"] == "duplicate"
    assert created.json()["memory"]["key"] == first.memory.key
    assert stored.status_code == 200, stored.json()
    assert stored.json()["status"] in ("duplicate", "unchanged")
    assert stored.json()["key"] == first.memory.key
    assert Memory.objects.filter(user=alice).count() == 1


def test_a_second_insert_of_a_restored_id_is_told_from_other_failures(alice, you):
    """Two restores of one deleted memory race to insert its id: the loser's failure is
    recognised (and retried as an update of the winner's row, memory/services.py _write)."""
    from django.db import IntegrityError, transaction

    from memory.write_sql import is_memory_id_violation, is_unique_key_violation

    tea = memory_upsert(user=alice, key="fact:tea", value="Tea", actor=you).memory
    with pytest.raises(IntegrityError) as same_id, transaction.atomic():
        Memory.objects.create(
            pk=tea.pk,
            user=alice,
            key="fact:coffee",
            value="Coffee",
            source="user_stated",
            confidence=1.0,
        )
    with pytest.raises(IntegrityError) as same_key, transaction.atomic():
        Memory.objects.create(
            user=alice, key="fact:tea", value="Tea", source="user_stated", confidence=1.0
        )

    assert is_memory_id_violation(same_id.value)
    assert not is_unique_key_violation(same_id.value)
    assert not is_memory_id_violation(same_key.value)
    assert is_unique_key_violation(same_key.value)
