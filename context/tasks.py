"""Celery tasks of the context layer. Idempotent: re-running one does no harm."""

from __future__ import annotations

from celery import shared_task

from context import review


@shared_task
def expire_document_proposals() -> int:
    """Expire the review inbox's document proposals past MNEMO_PROPOSAL_TTL_DAYS (beat,
    hourly)."""
    return review.document_proposals_expire()
