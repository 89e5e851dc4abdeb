"""Celery tasks that embed after writes commit. Idempotent: re-running one does no harm.

`embed_pending` is the only task: writes request it (search/indexing.py), beat runs it
every minute (config/settings.py CELERY_BEAT_SCHEDULE) and the worker runs it when it
starts, so rows missed by a killed worker or a provider that was down are embedded
without anyone running backfill_embeddings.
"""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from search import indexing
from search.embeddings import EmbeddingUnavailable

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


@worker_ready.connect
def _catch_up_on_start(**_: object) -> None:
    """A worker that (re)starts embeds what was missed while none was running."""
    embed_pending.delay()
