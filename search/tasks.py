"""Celery tasks that embed after a write commits. Idempotent: re-running one does no harm."""

from __future__ import annotations

from celery import shared_task

from context.models import DocumentChunk
from memory.models import Memory
from search.embeddings import EmbeddingUnavailable, get_embedder
from search.indexing import embed_chunks, embed_memories

# A provider that is down or rate-limiting: try again later, backing off; after the last
# retry the row stays without a vector (keyword search still finds it) until
# `manage.py backfill_embeddings` or the next write picks it up.
RETRY = {
    "autoretry_for": (EmbeddingUnavailable,),
    "retry_backoff": 5,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 8,
}


@shared_task(**RETRY)
def embed_memory(memory_id: int) -> int:
    return embed_memories(Memory.objects.filter(pk=memory_id), get_embedder())


@shared_task(**RETRY)
def embed_document(document_id: int) -> int:
    chunks = DocumentChunk.objects.filter(document_id=document_id).order_by("ordinal")
    return embed_chunks(chunks, get_embedder())
