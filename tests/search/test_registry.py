"""A source the engine has never heard of: registered at run time, embedded by the same
runner and commands as memories and chunks, and ranked by the same two sides.

The model is made here, in an isolated app registry, with its own table for this test only;
search/ imports nothing of it (tests/search/test_layering.py)."""

from io import StringIO

import pytest
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.management import call_command
from django.db import connection, models
from django.test.utils import isolate_apps

from search import indexing
from search.embeddings import get_embedder
from search.fields import EmbeddingFields
from search.ranking import fuse, query_vector_soon
from search.registry import SearchSource, register, source_for, sources, unregister

pytestmark = pytest.mark.django_db

NOTES = {
    "parcel": "Order QX-88213 was refunded after the parcel arrived broken",
    "tea": "Prefers green tea over coffee in the morning",
    "cello": "Plays the cello in an amateur orchestra on weekends",
}


@pytest.fixture
def notes():
    """A registered source "note" over a table of this test's own (rolled back with it)."""
    with isolate_apps("search"):

        class Note(EmbeddingFields):
            text = models.TextField()
            search_vector = models.GeneratedField(
                expression=SearchVector("text", config="english"),
                output_field=SearchVectorField(),
                db_persist=True,
            )

            class Meta:
                app_label = "search"
                db_table = "test_registry_note"

    with connection.schema_editor() as editor:
        editor.create_model(Note)
    source = register(
        SearchSource(
            name="note", model=Note, text_field="text", embedder_role="memories", plural="notes"
        )
    )
    yield source
    unregister("note")


def test_a_registered_source_is_listed_after_the_apps_own(notes):
    assert [source.name for source in sources()] == ["memory", "document", "note"]
    assert source_for(notes.model) is notes
    unregister("note")
    assert [source.name for source in sources()] == ["memory", "document"]
    with pytest.raises(LookupError):
        source_for(notes.model)
    register(notes)


def test_one_model_is_one_source(notes):
    with pytest.raises(ValueError, match="already the source 'note'"):
        register(SearchSource("other", notes.model, "text", "memories", "others"))


def test_its_rows_are_embedded_and_ranked_like_any_other(notes):
    note = notes.model
    rows = {name: note.objects.create(text=text) for name, text in NOTES.items()}
    embedder = get_embedder(notes.embedder_role)

    assert indexing.embed_pending() == len(NOTES)

    stored = note.objects.defer(None).order_by("pk")
    assert [row.embedding_model for row in stored] == [embedder.model] * len(NOTES)
    assert [row.embedded_hash for row in stored] == [
        indexing.text_hash(text) for text in NOTES.values()
    ]
    assert list(stored[0].embedding) == pytest.approx(embedder.embed([NOTES["parcel"]])[0])

    query = "which hot beverage does she drink at breakfast"
    fused, (texts,) = fuse(
        note.objects.all(), query, query_vector_soon(query, "memories", user_id=0), "text"
    )
    best, ranks = next(iter(fused.items()))
    assert best == rows["tea"].pk
    assert (ranks.keyword_rank, ranks.vector_rank) == (None, 1)
    assert texts[best] == NOTES["tea"]

    fused, _ = fuse(note.objects.all(), "QX-88213 parcel", None)
    assert list(fused) == [rows["parcel"].pk]


def test_the_commands_go_through_every_source(notes):
    note = notes.model
    note.objects.create(text=NOTES["cello"])
    out = StringIO()

    call_command("backfill_embeddings", "--quiet-progress", stdout=out)

    model = get_embedder().model
    assert out.getvalue() == (
        f"Embedded 0 memories and 0 document chunks and 1 notes with {model}.\n"
    )
    assert note.objects.get().embedding_model == model
    call_command("reindex", "--all", "--quiet-progress", stdout=out)
    assert out.getvalue().endswith(
        f"Re-embedded 0 memories and 0 document chunks and 1 notes with {model}.\n"
    )
