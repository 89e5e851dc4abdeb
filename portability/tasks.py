"""Celery tasks of import. Idempotent: a job is claimed before it runs, so a message
delivered twice runs it once (portability/importing.py `import_job_run`)."""

from __future__ import annotations

from celery import shared_task

from portability import importing


@shared_task(ignore_result=True)
def run_import(job_id: int) -> None:
    importing.import_job_run(job_id)


@shared_task(ignore_result=True)
def sweep_imports() -> None:
    """Beat, every minute: send again the jobs whose message was lost or whose worker
    stopped; fail those that stopped on their last attempt."""
    importing.fail_exhausted_imports()
    for job_id in importing.stalled_import_ids():
        run_import.delay(job_id)
