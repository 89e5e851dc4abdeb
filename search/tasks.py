"""Celery tasks of the search engine. Idempotent: re-running one does no harm.

`embed_pending`: writes request it (search/indexing.py), beat runs it every minute
(search/schedule.py, config/broker.py CELERY_BEAT_SCHEDULE) and the worker runs it when it
starts, so rows missed by a killed worker or a provider that was down are embedded
without anyone running backfill_embeddings.

`maintain_vector_indexes`: beat runs it every ten minutes; it builds the HNSW index of
each owner grown past MNEMO_SEARCH_OWN_INDEX_ROWS and drops those no longer needed
(search/vector_index.py). `manage.py vector_indexes` does the same at once, e.g. after a
big import.
"""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from search import indexing, vector_index
from search.embedder_base import EmbeddingUnavailable

# A provider that is down or rate-limiting: try again later, backing off. Meanwhile the
# rows are found by keywords, and the periodic run tries again every minute regardless.
RETRY = {
    "autoretry_for": (EmbeddingUnavailable,),
    "retry_backoff": 5,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 8,
}


@shared_task(**RETRY)
def embed_pending() -> int:
    return indexing.embed_pending()  # each source by its own role's embedder


@shared_task
def maintain_vector_indexes() -> dict[str, int]:
    """Build and drop per-owner vector indexes; what it did, as counts (a run that found
    another one under way does nothing: busy 1)."""
    done = vector_index.reconcile()
    return {
        "created": len(done.seconds),
        "dropped": len(done.drop),
        "failed": len(done.failed),
        "busy": int(done.busy),
    }


@worker_ready.connect
def _catch_up_on_start(**_: object) -> None:
    """A worker that (re)starts embeds what was missed while none was running."""
    embed_pending.delay()
