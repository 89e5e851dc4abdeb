"""Import benchmark (`make bench`; never run by the tests): the account bench/export.py
seeds (10,000 memories, 1,000 documents of 2,000 words, 50,000 activity rows) is exported,
then imported into a new, empty account the way the import page does it (a job made with
`import_job_create`, run by `import_job_run` as the Celery task would), on a throwaway
embedded PostgreSQL. Embedding runs afterwards in the background and is not counted here
(the suite's broker is in memory; nothing embeds during the run).

Target: ≤ 60 s for the import. A benchmark reports, it does not gate.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# bench/search.py would shadow the project's `search` app; the project root goes first.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.common import prepare_environment, print_machine, verdict  # noqa: E402

if TYPE_CHECKING:
    from django.core.files.uploadedfile import SimpleUploadedFile

TARGET_SECONDS = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--documents", type=int, default=1_000)
    parser.add_argument("--words", type=int, default=2_000)
    parser.add_argument("--activity", type=int, default=50_000)
    args = parser.parse_args()

    # No worker and no Valkey here: tasks go to an in-memory broker, the embedding flags to
    # this process's cache (otherwise every write's commit would try the absent socket).
    prepare_environment(
        "mnemo-bench-import-", CELERY_BROKER_URL="memory://", CACHE_URL="locmemcache://"
    )
    import django
    from django.core.management import call_command

    django.setup()  # starts the throwaway embedded PostgreSQL
    call_command("migrate", verbosity=0, interactive=False)
    print_machine("Import benchmark", ["Django", "psycopg"])

    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile

    from bench.export import seed
    from portability.export import write_export
    from portability.importing import import_job_create, import_job_run
    from portability.models import ImportJob

    started = time.perf_counter()
    source = seed(args)
    print(f"seeded     {time.perf_counter() - started:.1f} s")
    with tempfile.TemporaryFile() as archive:
        write_export(source, archive)
        size = archive.tell()
        archive.seek(0)
        upload = SimpleUploadedFile("export.zip", archive.read(), "application/zip")
    print(f"archive    {size / 2**20:.1f} MiB")

    target = get_user_model().objects.create_user(username="importer")
    job = import_job_create(user=target, kind="mnemo", mode="merge", upload=upload)
    started = time.perf_counter()
    import_job_run(job.pk)
    seconds = time.perf_counter() - started
    job = ImportJob.objects.get(pk=job.pk)
    print(f"job        {job.status}: {job.summary.get('sections')}")
    print(
        f"time       {seconds:.1f} s (target ≤ {TARGET_SECONDS:.0f} s): "
        f"{verdict(seconds <= TARGET_SECONDS)}"
    )
    check = _check_seconds(target, upload)
    print(f"check      {check:.1f} s: the check alone (portability/validation/), included above")


def _check_seconds(user: object, upload: SimpleUploadedFile) -> float:
    """The check the job runs before writing (portability/validation/), timed alone on the
    same archive: it reads every member once and writes nothing to the account."""
    from portability.importing import import_job_create
    from portability.report import Report
    from portability.validation.archive import check_archive

    upload.seek(0)
    job = import_job_create(user=user, kind="mnemo", mode="merge", upload=upload)
    with job.file.open("rb") as archive:
        started = time.perf_counter()
        check_archive(user=user, fileobj=archive, report=Report(job)).archive.close()
        return time.perf_counter() - started


if __name__ == "__main__":
    main()
