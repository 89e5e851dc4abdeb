"""Which writes queue an embedding task, and when: after commit, on every write path that
changes text, never for a rolled-back write, and never at the cost of the write itself.

`delay` is replaced by a recorder here; tests/search/test_worker.py runs the real tasks
through a real broker and worker."""

import logging

import pytest
from django.db import transaction
from kombu.exceptions import OperationalError

from activity.actors import Actor
from context.services import (
    append_daily_memory,
    document_append,
    document_delete,
    document_restore,
    document_write,
)
from memory.models import Memory, MemoryHistory
from memory.services import memory_delete, memory_restore, memory_update, memory_upsert
from search import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    """(task name, id) of every task sent to the broker, in order."""
    sent = []
    for name in ("embed_memory", "embed_document"):
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "delay", lambda pk, name=name: sent.append((name, pk)))
    return sent


def test_each_memory_write_that_changes_the_value_queues_its_embedding(
    alice, queued, django_capture_on_commit_callbacks
):
    me = Actor.for_user(alice)

    with django_capture_on_commit_callbacks(execute=True):
        tea = memory_upsert(user=alice, key="fact:tea", value="green tea", actor=me).memory
    with django_capture_on_commit_callbacks(execute=True):
        memory_upsert(user=alice, key="fact:tea", value="green tea", actor=me)  # same value
        memory_update(user=alice, key="fact:tea", pinned=True, actor=me)  # not the text
    with django_capture_on_commit_callbacks(execute=True):
        memory_update(user=alice, key="fact:tea", value="black tea", actor=me)
    created = MemoryHistory.objects.get(key="fact:tea", action="create")
    with django_capture_on_commit_callbacks(execute=True):
        memory_restore(user=alice, history_id=created.pk, actor=me)  # green tea again
    with django_capture_on_commit_callbacks(execute=True):
        deleted = memory_delete(user=alice, key="fact:tea", actor=me)
    with django_capture_on_commit_callbacks(execute=True):
        back = memory_restore(user=alice, history_id=deleted.pk, actor=me).memory

    assert queued == [
        ("embed_memory", tea.pk),  # created
        ("embed_memory", tea.pk),  # value changed
        ("embed_memory", tea.pk),  # restored to another value
        ("embed_memory", back.pk),  # restored after its deletion
    ]


def test_each_document_write_queues_its_chunks_embedding(
    alice, queued, django_capture_on_commit_callbacks
):
    me = Actor.for_user(alice)

    with django_capture_on_commit_callbacks(execute=True):
        notes = document_write(user=alice, path="notes.md", content="first", actor=me)
    with django_capture_on_commit_callbacks(execute=True):
        document_append(user=alice, path="notes.md", content="second", actor=me)
    with django_capture_on_commit_callbacks(execute=True):
        daily = append_daily_memory(user=alice, content="a line", actor=me)
    with django_capture_on_commit_callbacks(execute=True):
        gone = document_delete(user=alice, path="notes.md", actor=me)
    with django_capture_on_commit_callbacks(execute=True):
        back = document_restore(user=alice, version_id=gone.pk, actor=me)
    with django_capture_on_commit_callbacks(execute=True):
        document_write(user=alice, path="empty.md", content="  \n", actor=me)  # no words

    assert queued == [
        ("embed_document", notes.pk),
        ("embed_document", notes.pk),
        ("embed_document", daily.pk),
        ("embed_document", back.pk),
    ]


def test_a_rolled_back_write_queues_nothing(alice, queued, django_capture_on_commit_callbacks):
    me = Actor.for_user(alice)

    def write_then_fail():
        with transaction.atomic():
            memory_upsert(user=alice, key="fact:tea", value="green tea", actor=me)
            document_write(user=alice, path="notes.md", content="words", actor=me)
            raise RuntimeError("the caller's transaction fails after the writes")

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
    ):
        write_then_fail()

    assert (callbacks, queued) == ([], [])
    assert not Memory.objects.exists()


def test_a_broker_that_is_down_does_not_undo_the_write(
    alice, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    def broker_down(pk):
        raise OperationalError("[Errno 111] Connection refused")

    monkeypatch.setattr(tasks.embed_memory, "delay", broker_down)

    with (
        caplog.at_level(logging.WARNING, logger="search.indexing"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        write = memory_upsert(user=alice, key="fact:tea", value="tea", actor=Actor.for_user(alice))

    assert Memory.objects.get(pk=write.memory.pk).value == "tea"
    assert Memory.objects.get(pk=write.memory.pk).embedding is None
    assert [record.getMessage() for record in caplog.records] == [
        f"Could not enqueue embed_memory({write.memory.pk}): "
        "OperationalError('[Errno 111] Connection refused'); run backfill_embeddings"
    ]
