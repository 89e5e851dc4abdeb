"""Celery tasks of import and export. Idempotent: a job is claimed before it runs, so a
message delivered twice runs it once (portability/importing.py `import_job_run`,
portability/exporting.py `export_job_run`)."""

from __future__ import annotations

from celery import shared_task

from portability import exporting, importing


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


@shared_task(ignore_result=True)
def run_export(job_id: int) -> None:
    exporting.export_job_run(job_id)


@shared_task(ignore_result=True)
def sweep_exports() -> None:
    """Beat, every minute: delete expired export files, fail exports that stopped on their
    last attempt, and send again those whose message was lost or whose worker stopped."""
    exporting.expire_exports()
    for job_id in exporting.stalled_export_ids():
        run_export.delay(job_id)
