"""The Celery path with a real worker process: a write commits, its task is published on
commit, a separate `celery -A config worker` embeds it; a worker killed mid-batch leaves
rows that keyword search finds and `backfill_embeddings` completes.

The tests are transactional so the worker (another process, another connection) sees the
committed rows and the services' on-commit hooks really publish.
"""

from io import StringIO

import pytest
from django.core.management import call_command

from activity.actors import Actor
from context.models import DocumentChunk
from context.services import document_write
from memory.models import Memory
from memory.services import memory_upsert
from search.embeddings import get_embedder
from search.services import search_documents, search_memory
from tests.search.conftest import DOCUMENT, DOCUMENT_PATH, OPENAI_MODEL_ID, use_openai, wait_for
from tests.search.fake_openai import Reply, stored_vector

pytestmark = pytest.mark.django_db(transaction=True)

VECTORS_SECONDS = 30
MEMORY_KEY = "fact:parcel"
MEMORY_VALUE = "Order QX-88213 was refunded after the parcel arrived broken"


def write_document_and_memory(user):
    """Two writes, two commits, two tasks: embed_document, then embed_memory."""
    actor = Actor.for_user(user)
    document = document_write(user=user, path=DOCUMENT_PATH, content=DOCUMENT, actor=actor)
    memory = memory_upsert(user=user, key=MEMORY_KEY, value=MEMORY_VALUE, actor=actor).memory
    return memory, document


def chunks_of(document):
    return list(DocumentChunk.objects.filter(document=document).order_by("ordinal"))


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


def assert_local_vectors(memory, document):
    """The worker stored what this process's local model makes of the very same texts."""
    embedder = get_embedder()
    stored = [Memory.objects.get(pk=memory.pk), *chunks_of(document)]
    texts = [stored[0].value, *(chunk.text for chunk in stored[1:])]
    for row, want in zip(stored, embedder.embed(texts), strict=True):
        assert list(row.embedding) == pytest.approx(want, abs=1e-6)


def test_a_write_is_embedded_by_a_worker_on_the_filesystem_broker(
    local_provider, start_worker, alice
):
    worker = start_worker()

    memory, document = write_document_and_memory(alice)

    wait_for_vectors(memory, document, get_embedder().model, worker)
    assert_local_vectors(memory, document)
    assert "Connected to filesystem://" in worker.log()


def test_a_worker_killed_mid_batch_is_completed_by_backfill(
    local_provider, start_worker, openai_server, alice, settings
):
    openai_server.script(Reply(delay=120))  # the worker's first request hangs
    worker = start_worker(
        MNEMO_EMBEDDING_PROVIDER="openai",
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=openai_server.url,
        MNEMO_EMBEDDING_TIMEOUT="120",
        MNEMO_EMBEDDING_RETRIES="0",
    )

    memory, document = write_document_and_memory(alice)
    wait_for(
        lambda: openai_server.requests,
        seconds=VECTORS_SECONDS,
        what="the worker's embeddings request",
        log=worker.log_suffix,
    )
    worker.kill()

    chunks = chunks_of(document)
    # The worker was inside embed_document (its request carried both chunks); the memory's
    # task waited behind it in the queue and never ran.
    assert [request.json["input"] for request in openai_server.requests] == [
        [chunk.text for chunk in chunks]
    ]
    assert worker.process.returncode == -9
    assert Memory.objects.get(pk=memory.pk).embedding is None
    assert [(chunk.embedding, chunk.embedding_model) for chunk in chunks] == [(None, "")] * 2

    # Without vectors the rows are still found, by their words.
    (document_hit,) = search_documents(user=alice, query="who is supplier ZK-40417?")
    assert (document_hit.path, document_hit.chunk.ordinal) == (DOCUMENT_PATH, 0)
    assert (document_hit.ranks.keyword_rank, document_hit.ranks.vector_rank) == (1, None)
    (memory_hit,) = search_memory(user=alice, query="what about QX-88213?")
    assert memory_hit.memory.key == MEMORY_KEY
    assert (memory_hit.ranks.keyword_rank, memory_hit.ranks.vector_rank) == (1, None)

    use_openai(settings, openai_server)  # the server answers from now on
    out, err = StringIO(), StringIO()
    call_command("backfill_embeddings", stdout=out, stderr=err)

    assert out.getvalue() == (
        f"Embedded 1 memories and 2 document chunks with {OPENAI_MODEL_ID}.\n"
    )
    assert [request.json["input"] for request in openai_server.requests[1:]] == [
        [MEMORY_VALUE],
        [chunk.text for chunk in chunks],
    ]
    memory.refresh_from_db()
    assert memory.embedding_model == OPENAI_MODEL_ID
    assert list(memory.embedding) == pytest.approx(stored_vector(MEMORY_VALUE, 256), abs=1e-6)
    for chunk in chunks_of(document):
        assert chunk.embedding_model == OPENAI_MODEL_ID
        assert list(chunk.embedding) == pytest.approx(stored_vector(chunk.text, 256), abs=1e-6)


def test_a_write_is_embedded_by_a_worker_on_redis(
    local_provider, redis_url, celery_broker, start_worker, alice
):
    celery_broker(redis_url)  # this process publishes there too
    worker = start_worker(CELERY_BROKER_URL=redis_url)

    memory, document = write_document_and_memory(alice)

    wait_for_vectors(memory, document, get_embedder().model, worker)
    assert_local_vectors(memory, document)
    # Celery masks the (empty) password: "Connected to redis://:**@127.0.0.1:port/db".
    assert f"Connected to redis://:**@{redis_url.removeprefix('redis://')}" in worker.log()


def test_a_timed_out_embedding_keeps_the_write_and_the_vector_comes_later(
    local_provider, start_worker, openai_server, alice
):
    # The first request outlasts the worker's 1 s timeout; Celery retries the task and
    # the server answers the second time.
    openai_server.script(Reply(delay=5))
    worker = start_worker(
        MNEMO_EMBEDDING_PROVIDER="openai",
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=openai_server.url,
        MNEMO_EMBEDDING_TIMEOUT="1",
        MNEMO_EMBEDDING_RETRIES="0",
    )

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
