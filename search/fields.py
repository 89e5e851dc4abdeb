"""Columns every searchable row carries: its vector and what made it."""

from collections.abc import Iterable

from django.db import models
from pgvector.django import VectorField

# Heavy columns that only search reads: the vector, and the tsvector that searchable models
# generate from their text.
SEARCH_COLUMNS = ("embedding", "search_vector")


class WithoutSearchColumnsManager(models.Manager):
    """Rows without their vector and tsvector: pages and the API never need them, and
    parsing hundreds of vectors would slow every list (search/ranking.py asks for them)."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().defer(*SEARCH_COLUMNS)


class EmbeddingFields(models.Model):
    # No fixed dimension: vectors are compared only with vectors of the same model
    # (embedding_model); the vector side scans one user's rows, or uses that user's own
    # partial HNSW index, which fixes the dimension per index (search/vector_index.py).
    embedding = VectorField(null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=120, blank=True, editable=False)
    embedded_hash = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="SHA-256 of the text the vector was made from; a rewrite of the same text "
        "skips the work.",
    )

    objects = WithoutSearchColumnsManager()

    class Meta:
        abstract = True


def vector_literal(vector: Iterable[float]) -> str:
    """pgvector's text form of a vector, with the 9 significant digits that bring every
    float32 back exactly; about twice as fast as pgvector.Vector.to_text's repr()."""
    return "[" + ",".join([format(value, ".9g") for value in vector]) + "]"
