"""Which writes request embeddings, and what the runner does with the request.

After a write that changes text commits, `request_embedding` raises the pending flag in
the cache and, only if it was down, sends one `embed_pending` task; a rolled-back write
requests nothing, and a broker or cache that is down never costs the write. The runner
(`search.indexing.embed_pending`) holds a lease while it embeds, pass by pass, every row
without a vector by the current model, until a pass finds nothing and the flag is down.

Here `delay` is replaced by a recorder and the cache is this process's own (LocMemCache);
tests/search/test_worker.py runs the task through Valkey and a real worker process.
"""

import logging
import socket

import pytest
from django.core.cache import cache
from django.db import transaction
from kombu.exceptions import OperationalError

from activity.actors import Actor
from config.celery import app as celery_app
from context.history import document_restore
from context.models import DocumentChunk, DocumentVersion
from context.services import document_append, document_delete, document_write
from context.well_known import append_daily_memory
from memory.models import Memory, MemoryHistory
from memory.services import memory_delete, memory_restore, memory_update, memory_upsert
from search import indexing, tasks
from search.embeddings import get_embedder
from search.indexing import LEASE_KEY, PENDING_KEY, text_hash
from tests.fake_openai import stored_vector
from tests.search.conftest import DOCUMENT, DOCUMENT_PATH, OPENAI_MODEL_ID, use_openai

pytestmark = pytest.mark.django_db

ENQUEUE_WARNING = (
    "Could not enqueue embed_pending: OperationalError('[Errno 111] Connection refused'); "
    "the periodic run will embed it"
)


@pytest.fixture
def sent(monkeypatch):
    """One entry per embed_pending task sent: the pending flag as it was when it was sent."""
    calls = []
    monkeypatch.setattr(tasks.embed_pending, "delay", lambda: calls.append(cache.get(PENDING_KEY)))
    return calls


@pytest.fixture
def commit(sent, django_capture_on_commit_callbacks):
    """commit(write) runs the write, then its on-commit hooks, and returns how many tasks it
    sent. Then it takes the flag down, as the task's runner does when it starts, so each
    write is judged on its own."""

    def run(write):
        before = len(sent)
        with django_capture_on_commit_callbacks(execute=True):
            write()
        cache.delete(PENDING_KEY)
        return len(sent) - before

    return run


# --- which writes request embeddings --------------------------------------------------------


def test_each_memory_write_that_changes_the_value_requests_embedding(alice, commit, sent):
    me = Actor.for_user(alice)

    def same_value_then_pin():
        memory_upsert(user=alice, key="fact:tea", value="green tea", actor=me)
        memory_update(user=alice, key="fact:tea", pinned=True, actor=me)

    assert (
        commit(lambda: memory_upsert(user=alice, key="fact:tea", value="green tea", actor=me)) == 1
    )
    assert commit(same_value_then_pin) == 0
    assert (
        commit(lambda: memory_update(user=alice, key="fact:tea", value="black tea", actor=me)) == 1
    )
    created = MemoryHistory.objects.get(key="fact:tea", action="create")
    # Back to green tea: another value than the row holds.
    assert commit(lambda: memory_restore(user=alice, history_id=created.pk, actor=me)) == 1
    assert commit(lambda: memory_delete(user=alice, key="fact:tea", actor=me)) == 0
    deleted = MemoryHistory.objects.get(key="fact:tea", action="delete")
    assert commit(lambda: memory_restore(user=alice, history_id=deleted.pk, actor=me)) == 1

    # Each task went out with the flag already up, so writes meanwhile send none.
    assert sent == [1, 1, 1, 1]
    assert Memory.objects.get(key="fact:tea").value == "green tea"


def test_each_document_write_with_words_requests_embedding(alice, commit, sent):
    me = Actor.for_user(alice)
    assert commit(lambda: document_write(user=alice, path="notes.md", content="one", actor=me)) == 1
    assert (
        commit(lambda: document_append(user=alice, path="notes.md", content="two", actor=me)) == 1
    )
    assert commit(lambda: append_daily_memory(user=alice, content="a line", actor=me)) == 1
    assert commit(lambda: document_delete(user=alice, path="notes.md", actor=me)) == 0
    deleted = DocumentVersion.objects.get(path="notes.md", action="delete")
    assert commit(lambda: document_restore(user=alice, version_id=deleted.pk, actor=me)) == 1
    # No words, no chunks: nothing to embed.
    assert (
        commit(lambda: document_write(user=alice, path="empty.md", content="  \n", actor=me)) == 0
    )

    assert sent == [1, 1, 1, 1]
    assert DocumentChunk.objects.filter(document__path="empty.md").count() == 0


def test_a_rolled_back_write_requests_nothing(alice, sent, django_capture_on_commit_callbacks):
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

    assert (callbacks, sent, cache.get(PENDING_KEY)) == ([], [], None)
    assert not Memory.objects.exists()
    assert not DocumentChunk.objects.exists()


def test_a_burst_of_writes_sends_one_task_while_the_flag_is_up(
    alice, sent, django_capture_on_commit_callbacks
):
    me = Actor.for_user(alice)
    requests = 0
    for n in range(20):
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            memory_upsert(user=alice, key=f"fact:n{n}", value=f"fact number {n}", actor=me)
        requests += len(callbacks)
    with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
        # One transaction, three writes: three requests, on one commit.
        memory_upsert(user=alice, key="fact:tea", value="green tea", actor=me)
        document_write(user=alice, path="a.md", content="alpha", actor=me)
        document_write(user=alice, path="b.md", content="beta", actor=me)
    requests += len(callbacks)

    assert requests == 23  # every write asked ...
    assert sent == [1]  # ... and one task went out
    assert cache.get(PENDING_KEY) == 1

    # A runner takes the flag down when it starts a pass: the next write sends a task again.
    cache.delete(PENDING_KEY)
    with django_capture_on_commit_callbacks(execute=True):
        memory_upsert(user=alice, key="fact:coffee", value="black coffee", actor=me)
    assert sent == [1, 1]


def test_a_broker_that_is_down_does_not_undo_the_write_and_the_next_write_tries_again(
    alice, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    broker = {"up": False}
    attempts = []

    def delay():
        attempts.append((broker["up"], cache.get(PENDING_KEY)))
        if not broker["up"]:
            raise OperationalError("[Errno 111] Connection refused")

    monkeypatch.setattr(tasks.embed_pending, "delay", delay)
    me = Actor.for_user(alice)

    with (
        caplog.at_level(logging.WARNING, logger="search.indexing"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        write = memory_upsert(user=alice, key="fact:tea", value="tea", actor=me)

    stored = Memory.objects.get(pk=write.memory.pk)
    assert (stored.value, stored.embedding) == ("tea", None)
    assert [record.getMessage() for record in caplog.records] == [ENQUEUE_WARNING]
    # The flag came down with the failed send: no task is on its way, so none may be promised.
    assert cache.get(PENDING_KEY) is None

    broker["up"] = True
    with django_capture_on_commit_callbacks(execute=True):
        memory_upsert(user=alice, key="fact:coffee", value="coffee", actor=me)

    assert attempts == [(False, 1), (True, 1)]
    assert cache.get(PENDING_KEY) == 1
    assert len(caplog.records) == 1


def test_the_task_goes_to_the_broker_in_the_settings(settings):
    assert settings.CELERY_BROKER_URL == "memory://"
    with celery_app.connection_for_write() as connection:
        queue = connection.SimpleQueue("celery")
        queue.clear()

        tasks.embed_pending.delay()

        message = queue.get(timeout=1)
        assert message.headers["task"] == "search.tasks.embed_pending"
        message.ack()
        queue.close()


def test_a_cache_that_is_down_does_not_undo_the_write(
    alice, settings, sent, caplog, django_capture_on_commit_callbacks
):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/1",
        }
    }

    with (
        caplog.at_level(logging.WARNING, logger="search.indexing"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        write = memory_upsert(user=alice, key="fact:tea", value="tea", actor=Actor.for_user(alice))

    assert Memory.objects.get(pk=write.memory.pk).value == "tea"
    assert sent == []
    (message,) = [record.getMessage() for record in caplog.records]
    # redis-py 8's repr of its ConnectionError is just "network:ConnectionError".
    assert message.startswith("Could not reach the cache to request embeddings: ")
    assert "ConnectionError" in message


# --- the runner: embed_pending --------------------------------------------------------------

MEMORIES = {
    "fact:refund": "Order QX-88213 was refunded after the parcel arrived broken",
    "preference:tea": "Prefers green tea over coffee in the morning",
    "fact:home": "Lives in Singapore with a dog named Biscuit",
}


def write_rows(alice, bob):
    """Three memories and a two-chunk document of alice's, a memory of bob's: no vectors
    (the test is one transaction, so no on-commit request is sent)."""
    me = Actor.for_user(alice)
    for key, value in MEMORIES.items():
        memory_upsert(user=alice, key=key, value=value, actor=me)
    document_write(user=alice, path=DOCUMENT_PATH, content=DOCUMENT, actor=me)
    memory_upsert(user=bob, key="fact:pet", value="Has a cat named Miso", actor=Actor.for_user(bob))


def rows():
    return [*Memory.objects.order_by("pk"), *DocumentChunk.objects.order_by("pk")]


def text_of(row):
    return row.value if isinstance(row, Memory) else row.text


def missing():
    return [text_of(row) for row in rows() if row.embedding is None]


def assert_embedded_by(embedder, expected_vector=None):
    """Every row has the vector `embedder` (or expected_vector(text)) makes of its text."""
    stored = rows()
    texts = [text_of(row) for row in stored]
    want = [expected_vector(t) for t in texts] if expected_vector else embedder.embed(texts)
    assert [row.embedding_model for row in stored] == [embedder.model] * len(stored)
    assert [row.embedded_hash for row in stored] == [text_hash(text) for text in texts]
    for row, vector in zip(stored, want, strict=True):
        assert list(row.embedding) == pytest.approx(vector, abs=1e-6)


def inputs(server, start=0):
    """The texts of each request the fake server received, sorted within a request."""
    return [sorted(request.json["input"]) for request in server.requests[start:]]


class Passes:
    """Records (rows read, vectors stored) of each pass of the runner; `after[n]()` runs
    right after pass n (from 1), before the runner looks at the flag."""

    LIMIT = 20

    def __init__(self, real):
        self.real = real
        self.results = []
        self.after = {}

    def __call__(self, embedder, refused):
        result = self.real(embedder, refused)
        self.results.append(result)
        if len(self.results) > self.LIMIT:
            raise AssertionError(f"the runner does not stop: passes {self.results}")
        action = self.after.pop(len(self.results), None)
        if action is not None:
            action()
        return result


@pytest.fixture
def passes(monkeypatch):
    recorder = Passes(indexing._embed_a_pass)
    monkeypatch.setattr(indexing, "_embed_a_pass", recorder)
    return recorder


def test_the_runner_embeds_every_missing_row_and_lets_go(local_provider, alice, bob, passes):
    write_rows(alice, bob)
    cache.add(PENDING_KEY, 1)  # as the writes' request left it
    embedder = get_embedder()

    assert indexing.embed_pending(embedder) == 6

    assert passes.results == [(6, 6), (0, 0)]
    assert missing() == []
    assert_embedded_by(embedder)
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)
    assert indexing.embed_pending(embedder) == 0  # nothing is left
    assert passes.results[2:] == [(0, 0)]


def test_the_runner_goes_on_while_passes_find_rows(local_provider, alice, bob, passes, monkeypatch):
    monkeypatch.setattr(indexing, "PASS_ROWS", 2)
    write_rows(alice, bob)  # four memories, two chunks

    assert indexing.embed_pending(get_embedder()) == 6

    # Two of each kind a pass; the flag was never up, the rows kept it going.
    assert passes.results == [(4, 4), (2, 2), (0, 0)]
    assert missing() == []


def test_a_second_runner_leaves_the_work_to_the_lease_holder(local_provider, alice, bob, passes):
    write_rows(alice, bob)
    cache.add(LEASE_KEY, "another runner", 60)
    cache.add(PENDING_KEY, 1)

    assert indexing.embed_pending(get_embedder()) == 0

    assert passes.results == []
    assert len(missing()) == 6
    assert cache.get(LEASE_KEY) == "another runner"  # not taken from its holder
    assert cache.get(PENDING_KEY) == 1  # still up for the holder's last look

    cache.delete(LEASE_KEY)  # once the holder has let go, a runner does the work
    assert indexing.embed_pending(get_embedder()) == 6
    assert missing() == []


def test_a_write_during_the_last_pass_is_embedded_by_the_same_run(
    local_provider, alice, bob, passes, sent, django_capture_on_commit_callbacks
):
    write_rows(alice, bob)
    late = "Arrived while the runner was finishing"

    def write_late():  # commits after the second pass read nothing, before the flag check
        with django_capture_on_commit_callbacks(execute=True):
            memory_upsert(user=alice, key="fact:late", value=late, actor=Actor.for_user(alice))

    passes.after[2] = write_late
    embedder = get_embedder()

    assert indexing.embed_pending(embedder) == 7

    assert passes.results == [(6, 6), (0, 0), (1, 1), (0, 0)]
    assert missing() == []
    assert_embedded_by(embedder)
    assert sent == [1]  # the write sent its task too: it will find the work done
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)


class ReleaseHook:
    """The cache, but `on_release()` runs right after the runner deletes its lease."""

    def __init__(self, real, on_release):
        self.real = real
        self.on_release = on_release
        self.releases = 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def delete(self, key, *args, **kwargs):
        result = self.real.delete(key, *args, **kwargs)
        if key == LEASE_KEY:
            self.releases += 1
            if self.releases == 1:
                self.on_release()
        return result


def test_a_runner_whose_lease_expired_leaves_the_next_holders_lease_alone(
    local_provider, alice, bob, passes
):
    write_rows(alice, bob)

    def lease_expires_and_another_runner_takes_it():
        cache.delete(LEASE_KEY)  # as the expiry would, mid-pass
        assert cache.add(LEASE_KEY, "runner B", 60)

    passes.after[1] = lease_expires_and_another_runner_takes_it

    assert indexing.embed_pending(get_embedder()) == 6

    assert missing() == []
    assert cache.get(LEASE_KEY) == "runner B"


def test_a_write_as_the_runner_lets_go_is_embedded_by_the_same_run(
    local_provider, alice, bob, passes, sent, monkeypatch, django_capture_on_commit_callbacks
):
    write_rows(alice, bob)
    late = "Arrived just as the runner let go"

    def write_late():
        with django_capture_on_commit_callbacks(execute=True):
            memory_upsert(user=alice, key="fact:late", value=late, actor=Actor.for_user(alice))

    hook = ReleaseHook(indexing.cache, write_late)
    monkeypatch.setattr(indexing, "cache", hook)

    assert indexing.embed_pending(get_embedder()) == 7

    # The write's task could not have taken the lease yet; the runner, looking at the flag
    # after letting go, took the lease again and embedded it.
    assert sent == [1]
    assert hook.releases == 2
    assert passes.results == [(6, 6), (0, 0), (1, 1), (0, 0)]
    assert missing() == []
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)


def test_a_text_changed_while_it_is_embedded_gets_the_new_texts_vector(
    local_provider, alice, bob, passes
):
    write_rows(alice, bob)
    embedder = get_embedder()
    embed = embedder.embed
    rewritten = []

    def embed_while_the_user_rewrites_tea(texts):
        vectors = embed(texts)
        if not rewritten:  # the first batch has read the old value when a newer one commits
            rewritten.append(
                memory_upsert(
                    user=alice,
                    key="preference:tea",
                    value="Now drinks oolong",
                    actor=Actor.for_user(alice),
                )
            )
        return vectors

    embedder.embed = embed_while_the_user_rewrites_tea
    try:
        assert indexing.embed_pending(embedder) == 6
    finally:
        del embedder.embed

    # The first pass could not store tea's old vector over its new value; the next read it.
    assert passes.results == [(6, 5), (1, 1), (0, 0)]
    assert Memory.objects.get(key="preference:tea").value == "Now drinks oolong"
    assert_embedded_by(embedder)


def test_a_row_the_provider_refuses_does_not_keep_the_runner_going(
    local_provider, openai_server, settings, alice, bob, passes
):
    write_rows(alice, bob)
    refused = memory_upsert(
        user=alice, key="fact:refused", value="a REFUSE-ME text", actor=Actor.for_user(alice)
    ).memory
    use_openai(settings, openai_server)
    openai_server.refuse_containing = "REFUSE-ME"
    memory_texts = [memory.value for memory in Memory.objects.order_by("pk")]
    chunk_texts = [chunk.text for chunk in DocumentChunk.objects.order_by("pk")]

    assert indexing.embed_pending(get_embedder()) == 6

    # Pass one: the memories' batch is refused, so each memory is sent alone, and the
    # refused one is left out of pass two, which finds nothing: the run ends.
    assert passes.results == [(7, 6), (0, 0)]
    assert inputs(openai_server) == [
        sorted(memory_texts),
        *([text] for text in memory_texts),
        sorted(chunk_texts),
    ]
    assert missing() == [refused.value]
    assert [text_of(row) for row in rows() if row.embedding_model == OPENAI_MODEL_ID] == [
        text for text in memory_texts + chunk_texts if text != refused.value
    ]
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)

    # The next run tries the refused row again, and only it.
    sent_before = len(openai_server.requests)
    assert indexing.embed_pending(get_embedder()) == 0
    assert inputs(openai_server, sent_before) == [[refused.value], [refused.value]]
    openai_server.refuse_containing = None
    assert indexing.embed_pending(get_embedder()) == 1
    assert missing() == []


def test_vectors_of_another_model_count_as_missing(
    local_provider, openai_server, settings, alice, bob
):
    write_rows(alice, bob)
    assert indexing.embed_pending(get_embedder()) == 6
    assert_embedded_by(get_embedder())
    use_openai(settings, openai_server)  # the model changes

    assert indexing.embed_pending(get_embedder()) == 6

    memory_texts = [memory.value for memory in Memory.objects.order_by("pk")]
    chunk_texts = [chunk.text for chunk in DocumentChunk.objects.order_by("pk")]
    assert inputs(openai_server) == [sorted(memory_texts), sorted(chunk_texts)]
    assert_embedded_by(get_embedder(), lambda text: stored_vector(text, 256))
    assert indexing.embed_pending(get_embedder()) == 0  # the new model's vectors are current
    assert len(openai_server.requests) == 2
