"""Hybrid search with the real local embedder on a small fixed corpus, and isolation."""

import datetime
import math
import threading
import time
from array import array

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from activity.actors import Actor
from context.models import DocumentChunk
from context.search import search_documents, search_everything
from context.services import document_write
from memory import search as memory_search
from memory.models import Memory, Source
from memory.search import search_memory
from memory.services import memory_delete, memory_upsert
from search.embeddings import RecentQueryVectors, get_embedder, get_query_embedder
from search.indexing import embed_rows, rows_needing_vectors
from search.keyword import LARGE_SCOPE, ScopeSizes
from search.models import SearchLog
from search.ranking import HIGHLIGHT_END, HIGHLIGHT_START, QueryVector, reset_query_cooldown
from search.registry import sources
from search.services import search_stats
from tests.fake_openai import Reply
from tests.search.conftest import use_openai

pytestmark = pytest.mark.django_db

CORPUS = {
    "fact:refund": "Order QX-88213 was refunded on 3 March after the parcel arrived broken",
    "preference:tea": "Prefers green tea over coffee in the morning",
    "fact:employer": "Works at YARNNN as Head of Growth",
    "fact:home": "Lives in Singapore with a dog named Biscuit",
    "instruction:reports": "Send the weekly report on Fridays as bullet points",
    "fact:hobby": "Plays the cello in an amateur orchestra on weekends",
    "decision:crm": "Chose HubSpot as the CRM for the sales team",
}


def index_everything():
    for source in sources():
        embedder = get_embedder(source.embedder_role)
        embed_rows(rows_needing_vectors(source, embedder.model), embedder)


def remember(user, corpus=CORPUS):
    for key, value in corpus.items():
        memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user))


@pytest.fixture
def corpus(alice):
    remember(alice)
    index_everything()
    return alice


def keys(hits):
    return [hit.memory.key for hit in hits]


def test_every_row_gets_a_vector_from_the_configured_model(corpus):
    model = get_embedder().model
    assert Memory.objects.filter(user=corpus).count() == len(CORPUS)
    assert not rows_needing_vectors(Memory, model).exists()
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {model}


def test_an_exact_rare_token_is_found_by_the_keyword_side(corpus):
    hits = search_memory(user=corpus, query="what happened with QX-88213?")

    assert keys(hits)[0] == "fact:refund"
    assert hits[0].ranks.keyword_rank == 1


def test_a_paraphrase_with_no_shared_words_is_found_by_the_vector_side(corpus):
    query = "which hot beverage does she drink at breakfast"

    hits = search_memory(user=corpus, query=query)

    tea = next(hit for hit in hits if hit.memory.key == "preference:tea")
    assert tea.ranks.keyword_rank is None
    assert tea.ranks.vector_rank == 1
    assert keys(hits)[0] == "preference:tea"


def test_an_item_found_by_both_sides_comes_first(corpus):
    # "report" matches the weekly report by keyword; meaning favours it too.
    hits = search_memory(user=corpus, query="weekly report format")

    first = hits[0]
    assert first.memory.key == "instruction:reports"
    assert first.ranks.keyword_rank is not None
    assert first.ranks.vector_rank is not None
    assert first.ranks.fused == pytest.approx(0.7 * first.ranks.vector + 0.3 * first.ranks.keyword)
    assert first.ranks.keyword == 1.0  # the best BM25 of the query


def test_rows_matching_more_of_the_query_rank_higher_by_keywords(alice):
    # Inserted so that neither id order gives the right ranking.
    remember(
        alice,
        {
            "fact:one": "Roses need sun",
            "fact:three": "Spring roses bloom in the garden",
            "fact:two": "The garden roses are pruned in March",
        },
    )  # not embedded: the keyword side alone

    hits = search_memory(user=alice, query="spring garden roses")

    assert [(hit.memory.key, hit.ranks.keyword_rank) for hit in hits] == [
        ("fact:three", 1),
        ("fact:two", 2),
        ("fact:one", 3),
    ]


HANDMADE_MODEL = "test:handmade-3"


def set_vector(user, key, vector):
    Memory.objects.filter(user=user, key=key).update(
        embedding=vector, embedding_model=HANDMADE_MODEL, embedded_hash="x"
    )


def test_a_row_near_on_both_sides_outranks_one_barely_ahead_on_one(alice, monkeypatch):
    remember(
        alice,
        {
            # keyword #1, far in meaning: it has its vector (a row still waiting for one
            # would stand on its coverage, every word here, and come first: issue 26,
            # tests/search/test_short_queries.py)
            "fact:words": "alpine lake kayak trip",
            "fact:both": "alpine hut near the pass",  # keyword #2, vector #2 (0.95)
            "fact:meaning": "mountain weekend plans",  # no shared word, vector #1 (1.0)
            "fact:far": "tax return paperwork",  # no shared word, far in meaning (0.0)
        },
    )
    set_vector(alice, "fact:meaning", [1.0, 0.0, 0.0])
    set_vector(alice, "fact:both", [0.95, math.sqrt(1 - 0.95**2), 0.0])
    set_vector(alice, "fact:far", [0.0, 0.0, 1.0])
    set_vector(alice, "fact:words", [0.0, 0.0, 1.0])
    query = QueryVector(model=HANDMADE_MODEL, vector=[1.0, 0.0, 0.0])
    monkeypatch.setattr(memory_search, "query_vector_soon", lambda _query, _role, **_: query)

    hits = search_memory(user=alice, query="alpine lake kayak")

    ranks = {hit.memory.key: (hit.ranks.keyword_rank, hit.ranks.vector_rank) for hit in hits}
    assert ranks == {
        "fact:words": (1, 3),
        "fact:both": (2, 2),
        "fact:meaning": (None, 1),
        "fact:far": (None, 4),
    }
    assert keys(hits) == ["fact:both", "fact:meaning", "fact:words", "fact:far"]
    # A model with no calibrated floor: meaning spreads from the farthest candidate (0).
    both = hits[0].ranks
    assert both.vector == pytest.approx(0.95)
    assert both.fused == pytest.approx(0.7 * 0.95 + 0.3 * both.keyword)
    assert [hit.ranks.fused for hit in hits[1:]] == [pytest.approx(0.7), 0.3, 0.0]


def test_during_a_model_change_only_the_new_models_vectors_are_compared(
    corpus, openai_server, settings
):
    use_openai(settings, openai_server)  # every row still has a local-model vector

    hits = search_memory(user=corpus, query="what happened with QX-88213?")

    assert len(openai_server.requests) == 1  # the query was embedded by the new model
    assert keys(hits)[0] == "fact:refund"  # found by its words
    assert [hit.ranks.vector_rank for hit in hits] == [None] * len(hits)
    # As reindex reaches a row, that row takes part by meaning again.
    embed_rows(Memory.objects.filter(key="preference:tea"), get_embedder())
    hits = search_memory(user=corpus, query="Prefers green tea over coffee in the morning")
    by_meaning = [hit.memory.key for hit in hits if hit.ranks.vector_rank is not None]
    assert by_meaning == ["preference:tea"]


def test_a_question_matches_on_any_of_its_words(corpus):
    # "cat" is in no memory; "dog" is in the value and "home" in the key of one.
    hits = search_memory(user=corpus, query="is there a dog or a cat at home?")
    assert "fact:home" in keys(hits)
    home = next(hit for hit in hits if hit.memory.key == "fact:home")
    assert home.ranks.keyword_rank == 1


def test_fresher_and_more_used_memories_rank_higher(alice, alice_agent, monkeypatch, settings):
    # Equally good matches (the same words, the same vector), so the nudges decide; an
    # agent's second entry saying what the first says is merged unless that is off.
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False
    notes = {"fact:first": "flat white coffee", "fact:second": "coffee, flat white"}
    for key, value in notes.items():  # an agent's notes, which fade with age
        memory_upsert(user=alice, key=key, value=value, actor=Actor.for_agent(alice_agent))
    for key in notes:
        set_vector(alice, key, [1.0, 0.0, 0.0])
    query = QueryVector(model=HANDMADE_MODEL, vector=[1.0, 0.0, 0.0])
    monkeypatch.setattr(memory_search, "query_vector_soon", lambda _query, _role, **_: query)
    old = timezone.now() - datetime.timedelta(days=30)
    Memory.objects.filter(key="fact:first").update(updated_at=old)

    hits = search_memory(user=alice, query="flat white coffee")

    assert keys(hits) == ["fact:second", "fact:first"]
    assert [hit.ranks.fused for hit in hits] == [pytest.approx(1.0)] * 2
    assert hits[0].freshness == pytest.approx(1, abs=1e-6)
    assert hits[1].freshness == pytest.approx(1 - 0.05 * (1 - 0.5 ** (30 / 180)), rel=1e-4)
    assert hits[1].score == pytest.approx(hits[1].ranks.fused * hits[1].freshness)
    Memory.objects.filter(key="fact:first").update(updated_at=timezone.now(), access_count=40)
    used = search_memory(user=alice, query="flat white coffee")
    assert keys(used) == ["fact:first", "fact:second"]
    # Ranked by the count before this search; the hit shows the count after it.
    assert used[0].use_factor == pytest.approx(1 + 0.05 * math.log1p(40) / math.log1p(100))
    assert used[0].memory.access_count == 41


def test_a_search_is_three_statements_and_its_hits_count_as_a_use(corpus):
    with CaptureQueriesContext(connection) as queries:
        search_memory(user=corpus, query="weekly report, tea and the cello", limit=3)
    # The keyword side, the vector side; the use counts and the log row in one more.
    keyword, vector, record = (q["sql"] for q in queries)
    assert "keyword_side" in keyword
    assert "<=>" in vector
    assert 'UPDATE "user_context" SET access_count = access_count + 1' in record
    assert 'INSERT INTO "search_searchlog"' in record
    assert sorted(Memory.objects.filter(access_count=1).values_list("key", flat=True)) == sorted(
        ["instruction:reports", "preference:tea", "fact:hobby"]
    )

    Memory.objects.update(access_count=0, last_accessed_at=None)
    search_memory(user=corpus, query="QX-88213", limit=1)
    refund = Memory.objects.get(key="fact:refund")
    assert refund.access_count == 1
    assert refund.last_accessed_at is not None
    assert Memory.objects.get(key="fact:hobby").access_count == 0


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_the_counts_and_log_skip_the_flush_but_a_callers_transaction_keeps_it(alice):
    remember(alice)
    with CaptureQueriesContext(connection) as queries:
        hits = search_memory(user=alice, query="green tea", limit=2)
    record = queries[-1]["sql"]
    assert record.startswith(
        "WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)), used AS (UPDATE"
    )
    assert "FROM relaxed)" in record  # the log row's INSERT reads it, so it runs
    assert hits[0].memory.access_count == 1
    assert SearchLog.objects.filter(user=alice).count() == 1
    assert synchronous_commit() == "on"  # set for the search's own transaction only

    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries:
            search_memory(user=alice, query="green tea", limit=2)
        assert synchronous_commit() == "on"  # the caller's commit still waits for the disk
    assert not any("synchronous_commit" in q["sql"] for q in queries)
    assert Memory.objects.get(key="preference:tea").access_count == 2
    assert SearchLog.objects.filter(user=alice).count() == 2


def test_kind_and_tags_filter(alice):
    remember(alice)
    memory_upsert(
        user=alice,
        key="fact:tea-shop",
        value="Buys tea at the corner shop",
        tags=["shopping"],
        actor=Actor.for_user(alice),
    )
    index_everything()

    assert keys(search_memory(user=alice, query="tea", kind="preference")) == ["preference:tea"]
    assert keys(search_memory(user=alice, query="tea", tags=["shopping"])) == ["fact:tea-shop"]


def test_a_row_without_a_vector_is_still_found_by_keywords(alice):
    remember(alice)  # not embedded
    hits = search_memory(user=alice, query="HubSpot")
    assert keys(hits) == ["decision:crm"]
    assert hits[0].ranks.vector_rank is None


def test_a_slow_provider_holds_a_search_up_to_its_deadline_then_rests(
    corpus, openai_server, settings
):
    use_openai(settings, openai_server, MNEMO_EMBEDDING_RETRIES=3, MNEMO_SEARCH_EMBED_TIMEOUT=0.3)
    openai_server.script(Reply(delay=20), Reply(delay=20))
    started = time.monotonic()

    hits = search_memory(user=corpus, query="what happened with QX-88213?")

    # One try, cut off at the deadline (the indexing embedder would have tried 4 times,
    # 5 s each); the keyword side answered.
    assert time.monotonic() - started < 10
    assert len(openai_server.requests) == 1
    assert (keys(hits)[0], hits[0].ranks.vector_rank) == ("fact:refund", None)
    # Searches right after it do not call the provider at all.
    again = search_memory(user=corpus, query="QX-88213")
    assert keys(again)[0] == "fact:refund"
    assert len(openai_server.requests) == 1
    # After the cooldown the provider is asked again.
    reset_query_cooldown()
    search_memory(user=corpus, query="QX-88213")
    assert len(openai_server.requests) == 2


def test_the_keyword_side_runs_while_the_query_is_embedded(corpus, monkeypatch):
    keyword_side_done = threading.Event()
    embedder = get_query_embedder(memory_search.MEMORY_ROLE)
    embed_query = embedder.embed_query

    def embed_after_the_keyword_side(texts):
        # Runs on the embedding's own thread; a search that waited for the vector before
        # its keyword side would leave this waiting, and the search would fail.
        assert keyword_side_done.wait(timeout=10), "the keyword side waited for the vector"
        return embed_query(texts)

    def note_the_keyword_side(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "keyword_side" in sql:
            keyword_side_done.set()
        return result

    monkeypatch.setattr(embedder, "embed_query", embed_after_the_keyword_side)
    with connection.execute_wrapper(note_the_keyword_side):
        hits = search_memory(user=corpus, query="Who makes the weekly report?")

    assert keys(hits)[0] == "instruction:reports"
    assert hits[0].ranks.vector_rank is not None  # the vector came, and was used


def test_the_search_box_embeds_the_query_once_when_both_layers_share_a_model(
    alice, openai_server, settings
):
    use_openai(settings, openai_server)  # documents follow the memories' provider: one model
    remember(alice)  # not embedded by that model yet: found by their words

    results = search_everything(user=alice, query="the weekly report")

    assert [request.json["input"] for request in openai_server.requests] == [["the weekly report"]]
    assert keys(results.memories) == ["instruction:reports"]


def test_a_repeated_query_is_not_embedded_again(alice, openai_server, settings):
    use_openai(settings, openai_server)
    remember(alice)

    first = search_memory(user=alice, query="the weekly report")
    again = search_memory(user=alice, query="the weekly report")
    other = search_memory(user=alice, query="the weekly report ")  # stripped: the same query
    search_memory(user=alice, query="the Weekly report")  # another text: embedded

    inputs = [request.json["input"] for request in openai_server.requests]
    assert inputs == [["the weekly report"], ["the Weekly report"]]
    assert keys(first) == keys(again) == keys(other) == ["instruction:reports"]


def test_recent_query_vectors_keep_the_latest_and_the_float32_values():
    recent = RecentQueryVectors(2)
    recent.put(1, "m", "one", [0.1, 0.2])
    recent.put(1, "m", "two", [0.3, 0.4])
    assert recent.get(1, "m", "one") == [pytest.approx(0.1), pytest.approx(0.2)]  # the latest
    recent.put(1, "m", "three", [0.5, 0.6])  # drops "two", the least recently used

    assert recent.get(1, "m", "two") is None
    assert recent.get(1, "other model", "one") is None
    assert recent.get(2, "m", "one") is None  # another user's
    assert recent.get(1, "m", "one") == list(array("f", [0.1, 0.2]))  # what pgvector stores
    assert len(recent) == 2


def test_another_users_same_query_is_embedded_for_them(alice, bob, openai_server, settings):
    """A remembered vector answers sooner; shared, that would tell bob what alice asked."""
    use_openai(settings, openai_server)
    remember(alice)

    search_memory(user=alice, query="the weekly report")
    search_memory(user=bob, query="the weekly report")
    search_memory(user=bob, query="the weekly report")

    inputs = [request.json["input"] for request in openai_server.requests]
    assert inputs == [["the weekly report"], ["the weekly report"]]


def test_a_large_scope_is_counted_once_a_minute_and_ranks_the_same(alice):
    stated = {"user": alice, "source": Source.USER_STATED, "confidence": 1.0}
    filler = "Filler note {} about the garden, the weather and the weekend"
    Memory.objects.bulk_create(
        Memory(key=f"fact:filler-{n}", value=filler.format(n), **stated) for n in range(LARGE_SCOPE)
    )
    remember(alice)

    with CaptureQueriesContext(connection) as first_queries:
        first = search_memory(user=alice, query="the weekly report on the weekend")
    with CaptureQueriesContext(connection) as again_queries:
        again = search_memory(user=alice, query="the weekly report on the weekend")

    def keyword_statement(queries):
        return next(q["sql"] for q in queries if "keyword_side" in q["sql"])

    assert "AS scope" in keyword_statement(first_queries)
    assert "AS scope" not in keyword_statement(again_queries)  # N remembered
    assert keys(first)[0] == "instruction:reports"
    assert [(hit.memory.key, hit.ranks.keyword) for hit in again] == [
        (hit.memory.key, hit.ranks.keyword) for hit in first
    ]


def test_scope_sizes_keep_only_large_scopes_and_only_for_a_while(monkeypatch):
    sizes = ScopeSizes(large=100, seconds=60, kept=2)
    now = [1000.0]
    monkeypatch.setattr("search.keyword.time.monotonic", lambda: now[0])
    sizes.put(("small", "[]"), 99)
    sizes.put(("large", "[]"), 100)
    assert sizes.get(("small", "[]")) is None  # counted in the statement every time
    assert sizes.get(("large", "[]")) == 100
    now[0] += 60
    assert sizes.get(("large", "[]")) is None  # counted again
    sizes.put(("other", "[]"), 500)
    sizes.put(("third", "[]"), 700)  # full: the expired count goes
    assert sizes.get(("third", "[]")) == 700
    assert sizes.get(("other", "[]")) == 500


def test_a_memory_deleted_while_searching_is_left_out(corpus, monkeypatch):
    rank = memory_search.rank_memories

    def rank_then_delete(**kwargs):
        ranked = rank(**kwargs)
        memory_delete(user=corpus, key="fact:refund", actor=Actor.for_user(corpus))
        return ranked

    monkeypatch.setattr(memory_search, "rank_memories", rank_then_delete)

    hits = search_memory(user=corpus, query="QX-88213 refunded parcel, weekly report")

    assert hits
    assert "fact:refund" not in keys(hits)
    assert SearchLog.objects.get(user=corpus).results == len(hits)


def test_a_changed_value_drops_its_stale_vector(corpus):
    memory_upsert(
        user=corpus, key="fact:hobby", value="Runs marathons", actor=Actor.for_user(corpus)
    )
    hobby = Memory.objects.get(key="fact:hobby")
    assert (hobby.embedding_model, hobby.embedded_hash) == ("", "")
    assert list(rows_needing_vectors(Memory, get_embedder().model)) == [hobby]


def test_users_only_ever_find_their_own_memories(alice, bob):
    remember(alice)
    remember(bob, {key: value + " (bob)" for key, value in CORPUS.items()})
    index_everything()

    for user in (alice, bob):
        for query in ("QX-88213", "which hot beverage at breakfast", "weekly report"):
            hits = search_memory(user=user, query=query, limit=50)
            assert hits
            assert {hit.memory.user_id for hit in hits} == {user.pk}


def test_every_search_is_logged_with_its_latency(corpus, bob):
    search_memory(user=corpus, query="tea")
    search_memory(user=corpus, query="report")
    search_documents(user=corpus, query="report")
    search_everything(user=corpus, query="report")

    logs = SearchLog.objects.filter(user=corpus)
    assert sorted(logs.values_list("tool", flat=True)) == [
        "memory_search",
        "page",
        "search_memory",
        "search_memory",
    ]
    assert all(latency > 0 for latency in logs.values_list("latency_ms", flat=True))
    stats = search_stats(user=corpus)
    latencies = {
        tool: list(logs.filter(tool=tool).values_list("latency_ms", flat=True))
        for tool in ("search_memory", "memory_search", "page")
    }
    assert stats.queries == 4
    assert stats.average_ms == pytest.approx(sum(sum(v) for v in latencies.values()) / 4)
    assert stats.by_tool == [
        ("Agents: search_memory (memories)", 2, pytest.approx(sum(latencies["search_memory"]) / 2)),
        ("Agents: memory_search (documents)", 1, pytest.approx(latencies["memory_search"][0])),
        ("You: the search box", 1, pytest.approx(latencies["page"][0])),
    ]
    empty = search_stats(user=bob)
    assert (empty.queries, empty.average_ms, empty.by_tool) == (0, 0.0, [])


@pytest.mark.parametrize(
    ("query", "limit"), [("", 10), ("   ", 10), ("x" * 1001, 10), ("a", 0), ("a\x00b", 10)]
)
def test_bad_query_or_limit_is_refused(alice, query, limit):
    from lib.errors import InvalidInput

    with pytest.raises(InvalidInput):
        search_memory(user=alice, query=query, limit=limit)


# --- documents -----------------------------------------------------------------------------

LONG_NOTE = " ".join(
    ["The quarterly planning offsite is in Lisbon."]
    + ["Filler sentence about nothing in particular."] * 200
    + ["Budget approval for the offsite needs the CFO signature QZ-7741."]
)


def write(user, path, content, agent=None):
    return document_write(
        user=user, agent=agent, path=path, content=content, actor=Actor.for_user(user)
    )


def test_documents_are_chunked_on_write_and_found_with_highlights(alice):
    write(alice, "projects/offsite.md", LONG_NOTE)
    write(alice, "notes/garden.md", "Planted tomatoes and basil in the garden.")
    index_everything()

    hits = search_documents(user=alice, query="CFO signature QZ-7741")

    assert hits[0].path == "projects/offsite.md"
    assert (
        hits[0].chunk.ordinal
        == DocumentChunk.objects.filter(document__path=hits[0].path).count() - 1
    )
    assert f"{HIGHLIGHT_START}QZ-7741{HIGHLIGHT_END}" in hits[0].snippet or (
        f"{HIGHLIGHT_START}signature{HIGHLIGHT_END}" in hits[0].snippet
    )
    assert [hit.path for hit in hits].count("projects/offsite.md") == 1


def test_the_consolidated_profile_is_no_agents_search_result_but_the_search_boxs(alice):
    # Already in every system prompt; an agent finding it would get the whole profile again.
    document_write(
        user=alice,
        path="USER_MEMORY.md",
        content="# Profile\n\n- Keeps bees on the roof of the QZ-9 building",
        actor=Actor.system(),
    )
    write(alice, "notes/bees.md", "The bees on the roof of QZ-9 swarmed in June.")
    write(alice, "shared-by-me/USER_MEMORY.md", "Bees of QZ-9, a note that only shares the name.")
    index_everything()

    found = [hit.path for hit in search_documents(user=alice, query="bees QZ-9 roof")]
    boxed = [hit.path for hit in search_everything(user=alice, query="bees QZ-9 roof").documents]

    assert sorted(found) == ["notes/bees.md", "shared-by-me/USER_MEMORY.md"]
    assert "USER_MEMORY.md" in boxed


def test_document_search_by_meaning(alice, settings):
    settings.MNEMO_DOCUMENT_EMBEDDING_PROVIDER = "e5"  # WordLlama puts these words at 0.22
    write(alice, "notes/garden.md", "Planted tomatoes and basil in the vegetable patch.")
    write(alice, "notes/car.md", "The car needs new tyres before winter.")
    index_everything()

    hits = search_documents(user=alice, query="growing herbs outdoors")

    assert hits[0].path == "notes/garden.md"


def test_path_prefix_limits_the_documents(alice):
    write(alice, "daily/2026-11-20.md", "- 09:00 Called the plumber about the leak")
    write(alice, "notes/house.md", "The plumber fixed the leak")
    index_everything()

    hits = search_documents(user=alice, query="plumber", path_prefix="daily/")
    assert [hit.path for hit in hits] == ["daily/2026-11-20.md"]


def test_rewriting_a_document_replaces_its_chunks(alice):
    write(alice, "n.md", "alpha bravo")
    index_everything()
    write(alice, "n.md", "charlie delta")

    assert list(DocumentChunk.objects.values_list("text", "embedding_model")) == [
        ("charlie delta", "")
    ]
    assert search_documents(user=alice, query="alpha") == []
    assert [hit.path for hit in search_documents(user=alice, query="delta")] == ["n.md"]


def test_document_scopes(alice, bob, alice_agent):
    from tests.factories import AgentFactory

    other_agent = AgentFactory(user=alice, name="researcher")
    write(alice, "mine.md", "shared word zebra")
    write(alice, "AGENT_MEMORY.md", "private zebra notes", agent=alice_agent)
    write(alice, "AGENT_MEMORY.md", "other agent zebra", agent=other_agent)
    write(bob, "bobs.md", "bob's zebra")
    document_write(user=None, path="handbook.md", content="company zebra", actor=Actor.system())
    document_write(user=None, path="SOUL.md", content="company zebra soul", actor=Actor.system())

    def found(**scope):
        return sorted(
            (hit.path, hit.scope) for hit in search_documents(query="zebra", limit=50, **scope)
        )

    assert found(user=alice, agent=alice_agent) == [
        ("AGENT_MEMORY.md", "agent"),
        ("mine.md", "user"),
    ]
    assert found(user=alice, agent=other_agent) == [
        ("AGENT_MEMORY.md", "agent"),
        ("mine.md", "user"),
    ]
    # The user's own search box sees every one of their agents' notes.
    everything = search_everything(user=alice, query="zebra", limit=50).documents
    assert sorted((hit.path, hit.chunk.document.agent_id) for hit in everything) == [
        ("AGENT_MEMORY.md", alice_agent.pk),
        ("AGENT_MEMORY.md", other_agent.pk),
        ("mine.md", None),
    ]
    assert found(user=bob) == [("bobs.md", "user")]
    assert found(user=bob, include_global=True) == [("bobs.md", "user"), ("handbook.md", "global")]
    assert found(user=None) == [("SOUL.md", "global"), ("handbook.md", "global")]
    private = search_documents(user=alice, agent=other_agent, query="private")
    assert [hit.chunk.text for hit in private] == []
