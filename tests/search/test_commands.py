"""backfill_embeddings, reindex and the embedding task, run in this process.

The tests are not transactional, so the services' on-commit tasks never run: every write
leaves its rows without vectors, as a missed task would.
"""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from activity.actors import Actor
from context.models import DocumentChunk
from context.search import search_documents
from context.services import document_delete, document_write
from memory.models import Memory
from memory.search import search_memory
from memory.services import memory_delete, memory_upsert
from search import indexing, progress
from search.embeddings import get_embedder
from search.indexing import rows_needing_vectors, text_hash
from search.tasks import embed_pending
from tests.fake_openai import Reply, stored_vector
from tests.search.conftest import DOCUMENT, DOCUMENT_PATH, OPENAI_MODEL_ID, use_openai

pytestmark = pytest.mark.django_db

MEMORIES = {
    "fact:refund": "Order QX-88213 was refunded after the parcel arrived broken",
    "preference:tea": "Prefers green tea over coffee in the morning",
    "fact:employer": "Works at YARNNN as Head of Growth",
    "fact:home": "Lives in Singapore with a dog named Biscuit",
    "instruction:reports": "Send the weekly report on Fridays as bullet points",
    "decision:crm": "Chose HubSpot ticket HS-5521 as the CRM for the sales team",
}


def write_rows(user):
    actor = Actor.for_user(user)
    for key, value in MEMORIES.items():
        memory_upsert(user=user, key=key, value=value, actor=actor)
    return document_write(user=user, path=DOCUMENT_PATH, content=DOCUMENT, actor=actor)


def run(command, *args):
    out, err = StringIO(), StringIO()
    call_command(command, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def memories():
    return list(Memory.objects.order_by("pk"))


def chunks():
    return list(DocumentChunk.objects.order_by("pk"))


def models_of(rows):
    return [row.embedding_model for row in rows]


def texts_of(rows):
    return [row.value if isinstance(row, Memory) else row.text for row in rows]


def batch(rows):
    return sorted(texts_of(rows))


def assert_vectors(rows, want):
    assert len(rows) == len(want)
    for row, vector in zip(rows, want, strict=True):
        assert list(row.embedding) == pytest.approx(vector, abs=1e-6)
        assert row.embedded_hash == text_hash(texts_of([row])[0])


def assert_openai_vectors(rows):
    assert models_of(rows) == [OPENAI_MODEL_ID] * len(rows)
    assert_vectors(rows, [stored_vector(text, 256) for text in texts_of(rows)])


def bar(name, done, total):
    filled = 30 * done // total
    return f"\r{name:>8} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}"


def inputs(server, start=0):
    """The texts of each request the server received (in a batch, rows come in any order)."""
    return [sorted(request.json["input"]) for request in server.requests[start:]]


# --- backfill_embeddings --------------------------------------------------------------------


def test_backfill_embeds_every_row_without_a_vector(local_provider, alice, bob):
    write_rows(alice)
    memory_upsert(user=bob, key="fact:pet", value="Has a cat named Miso", actor=Actor.for_user(bob))
    model = get_embedder().model
    assert [row.embedding for row in memories() + chunks()] == [None] * 9

    out, err = run("backfill_embeddings")

    assert out == f"Embedded 7 memories and 2 document chunks with {model}.\n"
    assert err == (
        f"{bar('memories', 0, 7)}{bar('memories', 7, 7)}\n"
        f"{bar('chunks', 0, 2)}{bar('chunks', 2, 2)}\n"
    )
    rows = memories() + chunks()
    assert models_of(rows) == [model] * 9
    assert_vectors(rows, get_embedder().embed(texts_of(rows)))


def test_backfill_twice_does_nothing_the_second_time(local_provider, alice):
    write_rows(alice)
    run("backfill_embeddings")
    before = [(row.pk, row.embedded_hash) for row in memories() + chunks()]

    with CaptureQueriesContext(connection) as queries:
        out, err = run("backfill_embeddings")

    model = get_embedder().model
    assert out == f"Embedded 0 memories and 0 document chunks with {model}.\n"
    assert err == ""  # nothing to do, no bar
    assert not [query for query in queries if query["sql"].startswith("UPDATE")]
    assert [(row.pk, row.embedded_hash) for row in memories() + chunks()] == before


def test_quiet_progress_draws_no_bar(local_provider, alice):
    write_rows(alice)

    out, err = run("backfill_embeddings", "--quiet-progress")

    assert out.startswith("Embedded 6 memories and 2 document chunks")
    assert err == ""


def test_a_value_changed_through_the_services_is_embedded_again(local_provider, alice):
    document = write_rows(alice)
    run("backfill_embeddings")
    actor = Actor.for_user(alice)
    first_chunk_vector = list(chunks()[0].embedding)

    memory_upsert(user=alice, key="preference:tea", value="Prefers black coffee now", actor=actor)
    document_write(user=alice, path=DOCUMENT_PATH, content=DOCUMENT + " Signed off.", actor=actor)

    # The writes cleared the vectors they made stale, so backfill's query finds those rows.
    tea = Memory.objects.get(key="preference:tea")
    assert (tea.embedding, tea.embedding_model, tea.embedded_hash) == (None, "", "")
    assert list(rows_needing_vectors(Memory, get_embedder().model)) == [tea]
    assert [chunk.embedding is None for chunk in chunks()] == [False, True]
    out, _ = run("backfill_embeddings")

    assert out == f"Embedded 1 memories and 1 document chunks with {get_embedder().model}.\n"
    tea.refresh_from_db()
    assert_vectors([tea], get_embedder().embed(["Prefers black coffee now"]))
    first, second = DocumentChunk.objects.filter(document=document).order_by("ordinal")
    assert list(first.embedding) == pytest.approx(first_chunk_vector)  # unchanged, kept
    assert second.text.endswith("Signed off.")
    assert_vectors([second], get_embedder().embed([second.text]))


def test_a_value_changed_behind_the_services_back_is_left_alone(local_provider, alice):
    """backfill and the embedding task look for missing vectors and other models' vectors,
    not stale hashes: only a write through the services (which clears the vector) makes
    them embed the row again; embed_rows, given the row, compares the hash."""
    write_rows(alice)
    run("backfill_embeddings")
    tea = Memory.objects.get(key="preference:tea")
    Memory.objects.filter(pk=tea.pk).update(value="Prefers black coffee now")

    out, _ = run("backfill_embeddings")
    assert out.startswith("Embedded 0 memories and 0 document chunks")
    assert embed_pending() == 0
    tea.refresh_from_db()
    assert tea.embedded_hash == text_hash(MEMORIES["preference:tea"])  # stale

    assert indexing.embed_rows(Memory.objects.filter(pk=tea.pk), get_embedder()) == 1
    tea.refresh_from_db()
    assert_vectors([tea], get_embedder().embed(["Prefers black coffee now"]))


def test_backfill_stops_with_a_clear_error_when_the_provider_is_down(
    local_provider, openai_server, alice, settings
):
    write_rows(alice)
    use_openai(settings, openai_server)
    openai_server.script(Reply(status=503))  # no retries configured

    with pytest.raises(CommandError, match=r"HTTP 503.*\n.*run backfill_embeddings again"):
        run("backfill_embeddings")

    assert [row.embedding for row in memories()] == [None] * 6


def test_a_text_the_provider_refuses_is_skipped_and_reported(
    local_provider, openai_server, alice, settings
):
    write_rows(alice)
    refused = memory_upsert(
        user=alice, key="fact:refused", value="a REFUSE-ME text", actor=Actor.for_user(alice)
    ).memory
    use_openai(settings, openai_server)
    openai_server.refuse_containing = "REFUSE-ME"

    with pytest.raises(CommandError) as raised:
        run("backfill_embeddings")

    # Every other row, in the refused row's batch and after it, got its vector.
    assert [row.pk for row in memories() + chunks() if row.embedding is None] == [refused.pk]
    assert str(raised.value).startswith(
        "1 row(s) could not be embedded and are found by keywords only"
    )
    assert f"memory {refused.pk}: The embedding server" in str(raised.value)
    assert "input is too long for this model" in str(raised.value)
    # Once the cause is gone, the next run picks it up.
    openai_server.refuse_containing = None
    out, _ = run("backfill_embeddings")
    assert out.startswith("Embedded 1 memories and 0 document chunks")


def test_a_task_embeds_the_rest_of_a_document_around_a_refused_chunk(
    local_provider, openai_server, alice, settings
):
    words = [f"word{n}" for n in range(3000)]
    words[200] = "REFUSE-ME"  # in the second chunk only
    document_write(user=alice, path="long.md", content=" ".join(words), actor=Actor.for_user(alice))
    use_openai(settings, openai_server)
    openai_server.refuse_containing = "REFUSE-ME"

    embedded = embed_pending()

    missing = [row.ordinal for row in chunks() if row.embedding is None]
    assert (embedded, missing) == (len(chunks()) - 1, [1])
    assert "REFUSE-ME" in DocumentChunk.objects.get(ordinal=1).text


# --- reindex --------------------------------------------------------------------------------


@pytest.fixture
def embedded_locally(local_provider, alice):
    """alice's rows, all embedded by the local model."""
    write_rows(alice)
    run("backfill_embeddings")
    local_model = get_embedder().model
    assert set(models_of(memories() + chunks())) == {local_model}
    return local_model


def test_reindex_re_embeds_everything_with_the_new_model(embedded_locally, openai_server, settings):
    use_openai(settings, openai_server)

    out, err = run("reindex")

    assert out == f"Re-embedded 6 memories and 2 document chunks with {OPENAI_MODEL_ID}.\n"
    assert err == (
        f"{bar('memories', 0, 6)}{bar('memories', 6, 6)}\n"
        f"{bar('chunks', 0, 2)}{bar('chunks', 2, 2)}\n"
    )
    assert inputs(openai_server) == [batch(memories()), batch(chunks())]
    assert_openai_vectors(memories() + chunks())
    assert run("reindex")[0] == (
        f"Re-embedded 0 memories and 0 document chunks with {OPENAI_MODEL_ID}.\n"
    )
    assert len(openai_server.requests) == 2


def test_an_interrupted_reindex_resumes_where_it_stopped(
    embedded_locally, openai_server, settings, monkeypatch, alice
):
    monkeypatch.setattr(progress, "EMBED_BATCH", 2)  # commit every 2 rows
    monkeypatch.setattr(indexing, "EMBED_BATCH", 2)
    use_openai(settings, openai_server)
    # Two batches go through, then the server fails for good (no retries configured).
    openai_server.script(Reply(), Reply(), *[Reply(status=503)] * 10)

    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match=r"HTTP 503.*\n.*run reindex \(without --all\)"):
        call_command("reindex", stdout=out, stderr=err)

    assert out.getvalue() == ""
    assert err.getvalue() == (
        f"{bar('memories', 0, 6)}{bar('memories', 2, 6)}{bar('memories', 4, 6)}\n"
    )
    rows = memories()
    assert models_of(rows) == [OPENAI_MODEL_ID] * 4 + [embedded_locally] * 2
    assert_openai_vectors(rows[:4])
    assert set(models_of(chunks())) == {embedded_locally}

    # Meanwhile search still finds rows by their words, whichever model embedded them (the
    # query cannot be embedded while the server is down, so there is no vector side).
    (hit,) = search_memory(user=alice, query="which ticket is HS-5521?")
    assert (hit.memory.key, hit.ranks.keyword_rank, hit.ranks.vector_rank) == (
        "decision:crm",
        1,
        None,
    )
    assert hit.memory.embedding_model == embedded_locally
    (hit,) = search_memory(user=alice, query="what about QX-88213?")
    assert (hit.memory.key, hit.memory.embedding_model) == ("fact:refund", OPENAI_MODEL_ID)
    (document_hit,) = search_documents(user=alice, query="supplier ZK-40417")
    assert (document_hit.path, document_hit.ranks.keyword_rank) == (DOCUMENT_PATH, 1)

    openai_server.replies.clear()  # the server is back
    sent_before = len(openai_server.requests)
    out, err = run("reindex")

    assert out == f"Re-embedded 2 memories and 2 document chunks with {OPENAI_MODEL_ID}.\n"
    assert err == (
        f"{bar('memories', 0, 2)}{bar('memories', 2, 2)}\n"
        f"{bar('chunks', 0, 2)}{bar('chunks', 2, 2)}\n"
    )
    # Only what the first run had not done was sent again.
    assert inputs(openai_server, sent_before) == [batch(rows[4:]), batch(chunks())]
    assert_openai_vectors(memories() + chunks())


def test_reindex_all_re_embeds_rows_of_the_current_model_too(
    local_provider, openai_server, settings, alice
):
    write_rows(alice)
    use_openai(settings, openai_server)
    run("backfill_embeddings")
    assert run("reindex")[0].startswith("Re-embedded 0 memories and 0 document chunks")
    sent_before = len(openai_server.requests)

    out, err = run("reindex", "--all")

    assert out == f"Re-embedded 6 memories and 2 document chunks with {OPENAI_MODEL_ID}.\n"
    assert bar("memories", 6, 6) in err
    assert bar("chunks", 2, 2) in err
    assert inputs(openai_server, sent_before) == [batch(memories()), batch(chunks())]
    assert_openai_vectors(memories() + chunks())


# --- the task, called directly ----------------------------------------------------------------


def test_the_embedding_task_is_idempotent(local_provider, alice):
    write_rows(alice)

    assert embed_pending() == 8
    before = [(row.pk, row.embedded_hash) for row in memories() + chunks()]
    with CaptureQueriesContext(connection) as queries:
        assert embed_pending() == 0

    assert not [query for query in queries if query["sql"].startswith("UPDATE")]
    rows = memories() + chunks()
    assert [(row.pk, row.embedded_hash) for row in rows] == before
    assert models_of(rows) == [get_embedder().model] * 8
    assert_vectors(rows, get_embedder().embed(texts_of(rows)))


def test_deleted_rows_are_not_embedded(local_provider, alice):
    write_rows(alice)
    actor = Actor.for_user(alice)
    memory_delete(user=alice, key="preference:tea", actor=actor)
    document_delete(user=alice, path=DOCUMENT_PATH, actor=actor)

    assert embed_pending() == len(MEMORIES) - 1

    assert not DocumentChunk.objects.exists()
    rows = memories()
    assert sorted(texts_of(rows)) == sorted(
        value for key, value in MEMORIES.items() if key != "preference:tea"
    )
    assert_vectors(rows, get_embedder().embed(texts_of(rows)))


def test_a_value_rewritten_while_it_is_embedded_keeps_no_stale_vector(local_provider, alice):
    write_rows(alice)
    embedder = get_embedder()
    embed = embedder.embed

    def embed_while_the_user_rewrites_tea(texts):
        vectors = embed(texts)  # the task has read the old value and embedded it ...
        memory_upsert(  # ... when a newer value commits
            user=alice, key="preference:tea", value="Now drinks oolong", actor=Actor.for_user(alice)
        )
        return vectors

    embedder.embed = embed_while_the_user_rewrites_tea
    try:
        stored = indexing.embed_rows(Memory.objects.filter(user=alice), embedder)
    finally:
        del embedder.embed

    assert stored == len(MEMORIES) - 1
    tea = Memory.objects.get(key="preference:tea")
    assert tea.embedding is None  # the old value's vector was not stored over the new value
    others = list(Memory.objects.exclude(pk=tea.pk).order_by("key"))
    assert_vectors(others, embedder.embed([memory.value for memory in others]))
    assert models_of(others) == [embedder.model] * (len(MEMORIES) - 1)
