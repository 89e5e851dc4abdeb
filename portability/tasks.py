"""Celery tasks of import. Idempotent: a job is claimed before it runs, so a message
delivered twice runs it once (portability/importing.py `import_job_run`)."""

from __future__ import annotations

from celery import shared_task

from portability import importing


@shared_task(ignore_result=True)
def run_import(job_id: int) -> None:
    importing.import_job_run(job_id)
