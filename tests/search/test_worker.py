"""The Celery path with real worker processes on a Valkey server of the test's own, which
is Celery's broker and the Django cache for this process and the workers alike (as in
`make run`): a write commits, raises the pending flag and sends `embed_pending`; a worker
runs it and embeds. A worker killed mid-batch leaves rows that keyword search finds and
that the next worker embeds when it starts; a provider that times out delays a vector,
never loses the write.

The tests are transactional so the worker (another process, another connection) sees the
committed rows and the services' on-commit hooks really publish.
"""

import re

import pytest
from django.core.cache import cache

from activity.actors import Actor
from context.models import DocumentChunk
from context.search import search_documents
from context.services import document_write
from memory.models import Memory
from memory.search import search_memory
from memory.services import memory_upsert
from search import tasks
from search.embeddings import get_embedder
from search.indexing import LEASE_KEY, PENDING_KEY
from tests.fake_openai import Reply, stored_vector
from tests.search.conftest import DOCUMENT, DOCUMENT_PATH, OPENAI_MODEL_ID, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

VECTORS_SECONDS = 30
MEMORY_KEY = "fact:parcel"
MEMORY_VALUE = "Order QX-88213 was refunded after the parcel arrived broken"
SUCCEEDED = re.compile(r"Task search\.tasks\.embed_pending\[[^\]]+\] succeeded in \S+s: (\d+)")


def openai_worker_env(server, **overrides: str) -> dict[str, str]:
    return {
        "MNEMO_EMBEDDING_PROVIDER": "openai",
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": server.url,
        "MNEMO_EMBEDDING_RETRIES": "0",
    } | overrides


def write_document_and_memory(user):
    """Two writes, two commits: each raises the flag if it is down and then sends a task."""
    actor = Actor.for_user(user)
    document = document_write(user=user, path=DOCUMENT_PATH, content=DOCUMENT, actor=actor)
    memory = memory_upsert(user=user, key=MEMORY_KEY, value=MEMORY_VALUE, actor=actor).memory
    return memory, document


def chunks_of(document):
    return list(DocumentChunk.objects.filter(document=document).order_by("ordinal"))


def runs(worker):
    """What each embed_pending the worker finished returned (rows embedded), in order."""
    return [int(count) for count in SUCCEEDED.findall(worker.log())]


def wait_for_vectors(memory, document, model, worker):
    def embedded():
        memory_model = Memory.objects.get(pk=memory.pk).embedding_model
        chunks = chunks_of(document)
        return (
            memory_model == model
            and len(chunks) == 2
            and all(chunk.embedding is not None for chunk in chunks)
            and {chunk.embedding_model for chunk in chunks} == {model}
        )

    wait_for(
        embedded,
        seconds=VECTORS_SECONDS,
        what=f"vectors by {model} for the memory and both chunks",
        log=worker.log_suffix,
    )


def wait_until_the_runner_let_go(worker):
    """The flag this process raised and the lease are down in the shared cache: the
    worker's runner saw this process's flag, cleared it and released its lease."""
    wait_for(
        lambda: cache.get(PENDING_KEY) is None and cache.get(LEASE_KEY) is None,
        seconds=VECTORS_SECONDS,
        what="the worker's runner to clear the pending flag and release its lease",
        log=worker.log_suffix,
    )


def assert_local_vectors(memory, document):
    """The worker stored what this process's local model makes of the very same texts."""
    embedder = get_embedder()
    stored = [Memory.objects.get(pk=memory.pk), *chunks_of(document)]
    texts = [stored[0].value, *(chunk.text for chunk in stored[1:])]
    for row, want in zip(stored, embedder.embed(texts), strict=True):
        assert list(row.embedding) == pytest.approx(want, abs=1e-6)


def assert_openai_vectors(memory, document):
    memory.refresh_from_db()
    assert memory.embedding_model == OPENAI_MODEL_ID
    assert list(memory.embedding) == pytest.approx(stored_vector(MEMORY_VALUE, 256), abs=1e-6)
    for chunk in chunks_of(document):
        assert chunk.embedding_model == OPENAI_MODEL_ID
        assert list(chunk.embedding) == pytest.approx(stored_vector(chunk.text, 256), abs=1e-6)


def test_a_write_is_embedded_by_a_worker_on_valkey(local_provider, valkey, start_worker, alice):
    worker = start_worker()

    memory, document = write_document_and_memory(alice)

    wait_for_vectors(memory, document, get_embedder().model, worker)
    assert_local_vectors(memory, document)
    wait_until_the_runner_let_go(worker)
    # Each row was embedded once, however the writes' runs split them.
    wait_for(
        lambda: sum(runs(worker)) == 3,
        seconds=VECTORS_SECONDS,
        what="runs that embedded 3 rows in all",
        log=worker.log_suffix,
    )
    # Celery masks the (empty) password: "Connected to redis://:**@127.0.0.1:port/0".
    assert f"Connected to redis://:**@127.0.0.1:{valkey.port}/0" in worker.log()


def test_a_lease_held_in_another_process_keeps_the_worker_out(
    local_provider, valkey, start_worker, alice
):
    worker = start_worker()
    wait_for(
        lambda: runs(worker) == [0],
        seconds=VECTORS_SECONDS,
        what="the catch-up run on start, with nothing to embed",
        log=worker.log_suffix,
    )
    assert cache.add(LEASE_KEY, "a runner in this process", 60)

    memory = memory_upsert(
        user=alice, key=MEMORY_KEY, value=MEMORY_VALUE, actor=Actor.for_user(alice)
    ).memory

    wait_for(
        lambda: runs(worker) == [0, 0],
        seconds=VECTORS_SECONDS,
        what="the write's task, leaving the work to the lease holder",
        log=worker.log_suffix,
    )
    assert Memory.objects.get(pk=memory.pk).embedding is None
    assert cache.get(LEASE_KEY) == "a runner in this process"
    assert cache.get(PENDING_KEY) == 1  # up, for the holder's last look

    # The holder lets go, sees the flag up and runs again: here, through the worker.
    cache.delete(LEASE_KEY)
    tasks.embed_pending.delay()

    wait_for(
        lambda: runs(worker) == [0, 0, 1],
        seconds=VECTORS_SECONDS,
        what="the next run to embed the memory",
        log=worker.log_suffix,
    )
    assert Memory.objects.get(pk=memory.pk).embedding_model == get_embedder().model
    assert (cache.get(PENDING_KEY), cache.get(LEASE_KEY)) == (None, None)


def test_a_worker_killed_mid_batch_leaves_rows_the_next_worker_embeds_on_start(
    local_provider, valkey, start_worker, openai_server, alice
):
    openai_server.script(Reply(delay=120))  # the worker's first request hangs
    worker = start_worker(**openai_worker_env(openai_server, MNEMO_EMBEDDING_TIMEOUT="120"))

    memory, document = write_document_and_memory(alice)
    wait_for(
        lambda: openai_server.requests,
        seconds=VECTORS_SECONDS,
        what="the worker's embeddings request",
        log=worker.log_suffix,
    )
    worker.kill()

    assert worker.process.returncode == -9
    chunks = chunks_of(document)
    chunk_texts = sorted(chunk.text for chunk in chunks)
    # The runner was inside its first batch: the memory's, if the memory had committed when
    # its pass read the missing rows, or else the document's chunks.
    (hung,) = openai_server.requests
    assert sorted(hung.json["input"]) in ([MEMORY_VALUE], chunk_texts)
    assert Memory.objects.get(pk=memory.pk).embedding is None
    assert [(chunk.embedding, chunk.embedding_model) for chunk in chunks] == [(None, "")] * 2

    # Without vectors the rows are still found, by their words.
    (document_hit,) = search_documents(user=alice, query="who is supplier ZK-40417?")
    assert (document_hit.path, document_hit.chunk.ordinal) == (DOCUMENT_PATH, 0)
    assert (document_hit.ranks.keyword_rank, document_hit.ranks.vector_rank) == (1, None)
    (memory_hit,) = search_memory(user=alice, query="what about QX-88213?")
    assert memory_hit.memory.key == MEMORY_KEY
    assert (memory_hit.ranks.keyword_rank, memory_hit.ranks.vector_rank) == (1, None)

    # A new worker embeds them by itself when it starts: no write, no backfill_embeddings.
    # (The server answers at once from now on.)
    new_worker = start_worker(**openai_worker_env(openai_server, MNEMO_EMBEDDING_TIMEOUT="5"))

    wait_for_vectors(memory, document, OPENAI_MODEL_ID, new_worker)
    assert_openai_vectors(memory, document)
    # Each text was sent once more, in whatever batches the runs made.
    sent_again = [text for request in openai_server.requests[1:] for text in request.json["input"]]
    assert sorted(sent_again) == sorted([MEMORY_VALUE, *chunk_texts])


def test_a_timed_out_embedding_keeps_the_write_and_the_vector_comes_later(
    local_provider, valkey, start_worker, openai_server, alice
):
    # The first request outlasts the worker's 1 s timeout; Celery retries the task and
    # the server answers the second time.
    openai_server.script(Reply(delay=5))
    worker = start_worker(**openai_worker_env(openai_server, MNEMO_EMBEDDING_TIMEOUT="1"))

    memory = memory_upsert(
        user=alice, key=MEMORY_KEY, value=MEMORY_VALUE, actor=Actor.for_user(alice)
    ).memory

    # The write committed before any embedding was tried, and it stays.
    assert Memory.objects.get(pk=memory.pk).value == MEMORY_VALUE
    wait_for(
        lambda: Memory.objects.get(pk=memory.pk).embedding_model == OPENAI_MODEL_ID,
        seconds=VECTORS_SECONDS,
        what="the vector after the task's retry",
        log=worker.log_suffix,
    )
    assert [request.json["input"] for request in openai_server.requests] == [[MEMORY_VALUE]] * 2
    assert "Retry in" in worker.log()
    stored = Memory.objects.get(pk=memory.pk)
    assert stored.value == MEMORY_VALUE
    assert list(stored.embedding) == pytest.approx(stored_vector(MEMORY_VALUE, 256), abs=1e-6)
    wait_until_the_runner_let_go(worker)
