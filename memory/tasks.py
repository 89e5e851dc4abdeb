"""Celery tasks of the memory layer. Idempotent: re-running one does no harm."""

from __future__ import annotations

from celery import shared_task

from memory import review


@shared_task
def expire_proposals() -> int:
    """Expire the review inbox's proposals past MNEMO_PROPOSAL_TTL_DAYS (beat, hourly)."""
    return review.proposals_expire()
