"""Bulk actions on memories (memory/bulk.py): each row through the services with its own
history row and event, refusals per row, one batch id, and undoing a batch as one."""

from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent
from lib.errors import Conflict, Forbidden, InvalidInput, NotFound
from memory.bulk import (
    BulkAction,
    RowStatus,
    memory_batch_undo,
    memory_bulk_delete,
    memory_bulk_pin,
    memory_bulk_tag,
    memory_delete_all,
)
from memory.models import MAX_TAGS, Memory, MemoryHistory
from memory.selectors import deleted_batch_list, memory_batch
from memory.services import memory_delete, memory_restore, memory_update, memory_upsert


def say(user, key, value, **kwargs):
    return memory_upsert(
        user=user, key=key, value=value, actor=Actor.for_user(user), **kwargs
    ).memory


def state(user):
    """Every memory of the user: key -> (value, tags, pinned)."""
    return {
        memory.key: (memory.value, list(memory.tags), memory.pinned)
        for memory in Memory.objects.filter(user=user)
    }


def history_since(user, mark):
    return list(
        MemoryHistory.objects.filter(user=user, pk__gt=mark)
        .order_by("pk")
        .values_list("key", "action", "batch")
    )


def events_since(user, mark):
    return [
        (event_type, payload["key"], payload.get("batch"), payload["history_id"])
        for event_type, payload in ActivityEvent.objects.filter(user=user, pk__gt=mark)
        .order_by("pk")
        .values_list("event_type", "payload")
    ]


def marks():
    history = MemoryHistory.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    event = ActivityEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    return history, event


@pytest.fixture
def three(alice):
    """Three entries of alice's, by key."""
    return {
        "tea": say(alice, "fact:tea", "Drinks green tea", tags=["food"]),
        "bullets": say(alice, "preference:bullets", "Bullet points", pinned=True),
        "stack": say(alice, "decision:stack", "Use Django", tags=["work"]),
    }


def test_bulk_delete_writes_a_history_row_and_an_event_per_row_under_one_batch(alice, three):
    me = Actor.for_user(alice)
    history_mark, event_mark = marks()

    result = memory_bulk_delete(
        user=alice, memory_ids=[three["tea"].pk, three["stack"].pk], actor=me
    )

    assert result.action == BulkAction.DELETE
    assert sorted(result.done) == ["decision:stack", "fact:tea"]
    assert (result.refused, result.unchanged, result.missing) == ([], [], 0)
    assert list(state(alice)) == ["preference:bullets"]
    rows = history_since(alice, history_mark)
    assert sorted(rows) == [
        ("decision:stack", "delete", result.batch),
        ("fact:tea", "delete", result.batch),
    ]
    ids = dict(MemoryHistory.objects.filter(batch=result.batch).values_list("key", "pk"))
    assert sorted(events_since(alice, event_mark)) == [
        ("memory_deleted", "decision:stack", str(result.batch), ids["decision:stack"]),
        ("memory_deleted", "fact:tea", str(result.batch), ids["fact:tea"]),
    ]


def test_bulk_tag_normalises_skips_unchanged_rows_and_refuses_one_row_alone(alice, three):
    me = Actor.for_user(alice)
    full = say(alice, "fact:full", "Has every tag", tags=[f"t{n}" for n in range(MAX_TAGS)])
    say(alice, "fact:other", "Not selected")
    memory_update(user=alice, key="decision:stack", actor=me, tags=["work", "morning-routine"])
    history_mark, event_mark = marks()

    result = memory_bulk_tag(
        user=alice,
        memory_ids=[three["tea"].pk, three["stack"].pk, full.pk],
        actor=me,
        add=["Morning Routine"],
        remove=["FOOD"],
    )

    assert result.done == ["fact:tea"]
    assert result.unchanged == ["decision:stack"]  # it had the tag, and not "food"
    assert [(row.key, row.message) for row in result.refused] == [
        ("fact:full", f"At most {MAX_TAGS} tags; there are {MAX_TAGS + 1}.")
    ]
    after = state(alice)
    assert after["fact:tea"] == ("Drinks green tea", ["morning-routine"], False)
    assert after["decision:stack"] == ("Use Django", ["morning-routine", "work"], False)
    assert after["fact:full"][1] == sorted(f"t{n}" for n in range(MAX_TAGS))
    assert after["fact:other"] == ("Not selected", [], False)
    assert history_since(alice, history_mark) == [("fact:tea", "update", result.batch)]
    (event,) = events_since(alice, event_mark)
    assert event[:3] == ("memory_written", "fact:tea", str(result.batch))


def test_bulk_tag_refuses_a_tag_that_keeps_nothing_before_any_row(alice, three):
    me = Actor.for_user(alice)
    before, mark = state(alice), marks()
    for add, remove in ((["!!!"], []), ([], [])):
        with pytest.raises(InvalidInput) as refused:
            memory_bulk_tag(
                user=alice, memory_ids=[three["tea"].pk], actor=me, add=add, remove=remove
            )
        assert refused.value.field == "tags"
    assert state(alice) == before
    assert marks() == mark


def test_bulk_pin_and_unpin_leave_rows_already_so(alice, three):
    me = Actor.for_user(alice)
    ids = [three["tea"].pk, three["bullets"].pk]
    history_mark, _ = marks()

    pinned = memory_bulk_pin(user=alice, memory_ids=ids, actor=me, pinned=True)
    assert (pinned.action, pinned.done, pinned.unchanged) == (
        BulkAction.PIN,
        ["fact:tea"],
        ["preference:bullets"],
    )
    unpinned = memory_bulk_pin(user=alice, memory_ids=ids, actor=me, pinned=False)
    assert sorted(unpinned.done) == ["fact:tea", "preference:bullets"]
    assert {key: value[2] for key, value in state(alice).items()} == {
        "fact:tea": False,
        "preference:bullets": False,
        "decision:stack": False,
    }
    assert history_since(alice, history_mark) == [
        ("fact:tea", "update", pinned.batch),
        ("fact:tea", "update", unpinned.batch),
        ("preference:bullets", "update", unpinned.batch),
    ]
    assert pinned.batch != unpinned.batch


def test_nothing_changed_means_no_batch_to_undo(alice, three):
    result = memory_bulk_pin(
        user=alice, memory_ids=[three["bullets"].pk], actor=Actor.for_user(alice), pinned=True
    )
    assert (result.done, result.unchanged, result.batch) == ([], ["preference:bullets"], None)


def test_undo_restores_every_deleted_row_with_its_tags_and_pin(alice, three):
    me = Actor.for_user(alice)
    before = state(alice)
    deleted = memory_bulk_delete(user=alice, memory_ids=[m.pk for m in three.values()], actor=me)
    assert state(alice) == {}
    assert memory_batch(user=alice, batch=deleted.batch).gone == 3
    history_mark, event_mark = marks()

    undone = memory_batch_undo(user=alice, batch=deleted.batch, actor=me)

    assert (undone.action, sorted(undone.done), undone.refused) == (
        BulkAction.UNDO,
        sorted(before),
        [],
    )
    assert state(alice) == before
    restores = history_since(alice, history_mark)
    assert sorted(restores) == sorted((key, "restore", None) for key in before)
    assert sorted(event[:2] for event in events_since(alice, event_mark)) == sorted(
        ("memory_written", key) for key in before
    )
    # Nothing is left to undo: a second undo changes nothing and says each is back.
    again = memory_batch_undo(user=alice, batch=deleted.batch, actor=me)
    assert (again.done, sorted(again.unchanged)) == ([], sorted(before))
    assert len(history_since(alice, history_mark)) == 3
    assert deleted_batch_list(user=alice, since=timezone.now() - timedelta(days=1)) == []


def test_undo_leaves_a_key_added_again_since_and_says_so(alice, three):
    me = Actor.for_user(alice)
    deleted = memory_bulk_delete(user=alice, memory_ids=[m.pk for m in three.values()], actor=me)
    say(alice, "fact:tea", "Drinks black coffee now")
    (listed,) = deleted_batch_list(user=alice, since=timezone.now() - timedelta(days=1))
    assert (listed.batch, listed.count, listed.gone) == (deleted.batch, 3, 2)

    undone = memory_batch_undo(user=alice, batch=deleted.batch, actor=me)

    assert sorted(undone.done) == ["decision:stack", "preference:bullets"]
    assert [(row.key, row.status, row.message) for row in undone.refused] == [
        ("fact:tea", RowStatus.REFUSED, "'fact:tea' was added again since; it is left as it is.")
    ]
    assert state(alice)["fact:tea"] == ("Drinks black coffee now", [], False)
    assert state(alice)["preference:bullets"] == ("Bullet points", [], True)


def test_undo_passes_over_a_key_deleted_again_since(alice, three):
    me = Actor.for_user(alice)
    deleted = memory_bulk_delete(user=alice, memory_ids=[three["tea"].pk], actor=me)
    say(alice, "fact:tea", "Back for a while")
    memory_delete(user=alice, key="fact:tea", actor=me)

    undone = memory_batch_undo(user=alice, batch=deleted.batch, actor=me)

    assert [row.message for row in undone.refused] == [
        "'fact:tea' was added again and deleted since; restore it from Recently deleted."
    ]
    assert "fact:tea" not in state(alice)


def test_undo_of_a_retag_puts_tags_back_unless_changed_since(alice, three):
    me = Actor.for_user(alice)
    tagged = memory_bulk_tag(
        user=alice,
        memory_ids=[three["tea"].pk, three["stack"].pk, three["bullets"].pk],
        actor=me,
        add=["later"],
    )
    memory_update(user=alice, key="decision:stack", actor=me, value="Use Django and htmx")
    memory_delete(user=alice, key="preference:bullets", actor=me)

    undone = memory_batch_undo(user=alice, batch=tagged.batch, actor=me)

    assert undone.done == ["fact:tea"]
    assert sorted(row.message for row in undone.refused) == [
        "'decision:stack' was changed since; it is left as it is.",
        "'preference:bullets' was deleted since; it is left as it is.",
    ]
    assert state(alice) == {
        "fact:tea": ("Drinks green tea", ["food"], False),
        "decision:stack": ("Use Django and htmx", ["later", "work"], False),
    }


def test_undo_follows_an_entry_renamed_since(alice, three):
    from memory.entries import memory_rename

    me = Actor.for_user(alice)
    pinned = memory_bulk_pin(user=alice, memory_ids=[three["tea"].pk], actor=me, pinned=True)
    memory_rename(user=alice, key="fact:tea", new_key="preference:tea", actor=me)

    undone = memory_batch_undo(user=alice, batch=pinned.batch, actor=me)

    assert undone.done == ["preference:tea"]
    assert state(alice)["preference:tea"] == ("Drinks green tea", ["food"], False)


def test_restore_as_undo_checks_the_state_under_the_lock(alice, three):
    """memory_restore(undo=True) itself refuses to pass over a later change: the guard the
    bulk undo relies on when a write lands between its look and its restore."""
    me = Actor.for_user(alice)
    history = memory_delete(user=alice, key="fact:tea", actor=me)
    say(alice, "fact:tea", "Someone added it again")
    with pytest.raises(Conflict):
        memory_restore(user=alice, history_id=history.pk, actor=me, undo=True)
    assert state(alice)["fact:tea"] == ("Someone added it again", [], False)

    change = memory_update(user=alice, key="decision:stack", actor=me, pinned=True).history
    memory_update(user=alice, key="decision:stack", actor=me, value="Changed")
    with pytest.raises(Conflict):
        memory_restore(user=alice, history_id=change.pk, actor=me, undo=True)
    assert state(alice)["decision:stack"] == ("Changed", ["work"], True)


def test_delete_all_takes_profile_styles_and_entries_and_one_undo_brings_them_back(
    alice, bob, three
):
    say(alice, "name", "Alice")
    say(alice, "tone_slack", "casual")
    say(bob, "fact:bobs", "Bob's own")
    before = state(alice)
    history_mark, event_mark = marks()

    result = memory_delete_all(user=alice, actor=Actor.for_user(alice))

    assert (result.action, sorted(result.done), result.refused) == (
        BulkAction.DELETE_ALL,
        sorted(before),
        [],
    )
    assert state(alice) == {}
    assert state(bob) == {"fact:bobs": ("Bob's own", [], False)}
    assert sorted(history_since(alice, history_mark)) == sorted(
        (key, "delete", result.batch) for key in before
    )
    assert len(events_since(alice, event_mark)) == len(before)

    memory_batch_undo(user=alice, batch=result.batch, actor=Actor.for_user(alice))
    assert state(alice) == before


def test_bobs_ids_in_alices_request_touch_nothing_of_bobs(alice, bob, three):
    bobs = say(bob, "fact:bobs", "Bob's own", tags=["mine"])
    me = Actor.for_user(alice)
    bob_before, bob_history = state(bob), MemoryHistory.objects.filter(user=bob).count()

    deleted = memory_bulk_delete(user=alice, memory_ids=[bobs.pk, three["tea"].pk], actor=me)
    tagged = memory_bulk_tag(user=alice, memory_ids=[bobs.pk], actor=me, add=["x"])
    pinned = memory_bulk_pin(user=alice, memory_ids=[bobs.pk], actor=me, pinned=True)

    assert (deleted.done, deleted.missing) == (["fact:tea"], 1)
    assert (tagged.done, tagged.missing, tagged.batch) == ([], 1, None)
    assert (pinned.done, pinned.missing) == ([], 1)
    # Bob cannot undo (or even find) Alice's batch, and Alice's undo never touches Bob's.
    with pytest.raises(NotFound):
        memory_batch_undo(user=bob, batch=deleted.batch, actor=Actor.for_user(bob))
    assert "fact:tea" not in state(alice)
    bob_batch = memory_bulk_delete(user=bob, memory_ids=[bobs.pk], actor=Actor.for_user(bob))
    with pytest.raises(NotFound):
        memory_batch_undo(user=alice, batch=bob_batch.batch, actor=me)
    assert memory_batch(user=alice, batch=bob_batch.batch) is None
    memory_batch_undo(user=bob, batch=bob_batch.batch, actor=Actor.for_user(bob))
    assert state(bob) == bob_before
    assert MemoryHistory.objects.filter(user=bob).count() == bob_history + 2


def test_undo_is_open_for_the_configured_days_only(alice, three, settings):
    me = Actor.for_user(alice)
    deleted = memory_bulk_delete(user=alice, memory_ids=[three["tea"].pk], actor=me)
    since = timezone.now() - timedelta(days=settings.MNEMO_UNDO_DAYS)
    assert settings.MNEMO_UNDO_DAYS == 30
    MemoryHistory.objects.filter(batch=deleted.batch).update(
        created_at=timezone.now() - timedelta(days=29, hours=23)
    )
    assert [batch.batch for batch in deleted_batch_list(user=alice, since=since)] == [deleted.batch]
    MemoryHistory.objects.filter(batch=deleted.batch).update(
        created_at=timezone.now() - timedelta(days=30, minutes=1)
    )
    mark = marks()

    with pytest.raises(InvalidInput) as refused:
        memory_batch_undo(user=alice, batch=deleted.batch, actor=me)

    assert "more than 30 days ago" in refused.value.message
    assert "fact:tea" not in state(alice)
    assert marks() == mark
    assert deleted_batch_list(user=alice, since=since) == []
    # The setting moves the window.
    settings.MNEMO_UNDO_DAYS = 31
    assert memory_batch_undo(user=alice, batch=deleted.batch, actor=me).done == ["fact:tea"]


def test_only_the_user_acts_in_bulk(alice, alice_agent, three):
    agent = Actor.for_agent(alice_agent)
    before, mark = state(alice), marks()
    calls = [
        lambda: memory_bulk_delete(user=alice, memory_ids=[three["tea"].pk], actor=agent),
        lambda: memory_bulk_tag(user=alice, memory_ids=[three["tea"].pk], actor=agent, add=["x"]),
        lambda: memory_bulk_pin(user=alice, memory_ids=[three["tea"].pk], actor=agent, pinned=True),
        lambda: memory_delete_all(user=alice, actor=agent),
    ]
    for call in calls:
        with pytest.raises(Forbidden):
            call()
    assert (state(alice), marks()) == (before, mark)


def test_a_selection_must_name_something_and_not_too_much(alice, three):
    me = Actor.for_user(alice)
    with pytest.raises(InvalidInput):
        memory_bulk_delete(user=alice, memory_ids=[], actor=me)
    with pytest.raises(InvalidInput) as refused:
        memory_bulk_delete(user=alice, memory_ids=range(1, 502), actor=me)
    assert "at most 500" in refused.value.message
    assert len(state(alice)) == 3
