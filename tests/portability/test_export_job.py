"""Export prepared in the background (portability/exporting.py): the job writes the same
archive as the streamed download, its page shows progress then the file, only its owner
may fetch it, it expires, and a stopped worker's job is sent again."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from activity.actors import Actor
from memory.services import memory_upsert
from portability import exporting, tasks
from portability.export import write_export
from portability.models import ExportJob, ImportStatus

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


@pytest.fixture
def alice_with_memories(alice):
    user = Actor.for_user(alice)
    for n in range(30):
        memory_upsert(user=alice, key=f"fact:item-{n:02d}", value=f"Item {n}", actor=user)
    return alice


@pytest.fixture
def sent(monkeypatch):
    """The jobs sent to the worker (run here by hand, as the worker would)."""
    ids: list[int] = []
    monkeypatch.setattr(tasks.run_export, "delay", ids.append)
    return ids


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_prepare_shows_progress_then_the_file_with_the_same_archive(
    client, alice_with_memories, sent, django_capture_on_commit_callbacks, monkeypatch
):
    client.force_login(alice_with_memories)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/settings/export/prepare/")
    job = ExportJob.objects.get(user=alice_with_memories)
    assert response.status_code == 302
    assert response["Location"] == f"/settings/export/{job.pk}/"
    assert sent == [job.pk]

    waiting = client.get(job.url(), headers=HX).content.decode()
    assert 'hx-trigger="every 1s"' in waiting  # the bar polls while the job runs
    assert f"0 of {job.total} lines and files written" in waiting

    monkeypatch.setattr(exporting, "PROGRESS_EVERY_SECONDS", 0)  # save every step
    seen: list[int] = []
    original = exporting._Progress.step

    def step(progress):
        original(progress)
        seen.append(ExportJob.objects.get(pk=job.pk).processed)

    monkeypatch.setattr(exporting._Progress, "step", step)
    tasks.run_export(job.pk)

    job.refresh_from_db()
    assert job.status == ImportStatus.DONE
    assert seen[:3] == [1, 2, 3]  # the page saw the count grow as it went
    assert job.processed == job.total > 30
    done = client.get(job.url(), headers=HX).content.decode()
    assert "every 1s" not in done
    assert f'href="/settings/export/{job.pk}/download"' in done
    download = client.get(f"/settings/export/{job.pk}/download")
    assert download.status_code == 200
    assert download["Content-Disposition"].startswith('attachment; filename="mnemo-export-')
    prepared = _members(b"".join(download.streaming_content))
    streamed = io.BytesIO()
    write_export(alice_with_memories, streamed)
    expected = _members(streamed.getvalue())
    assert prepared.keys() == expected.keys()
    for name in expected:
        if name != "manifest.json":  # it names the moment of the export
            assert prepared[name] == expected[name], name


def test_only_the_owner_sees_or_downloads_an_export(client, alice_with_memories, bob, sent):
    job = exporting.export_job_create(user=alice_with_memories)
    exporting.export_job_run(job.pk)
    client.force_login(bob)

    assert client.get(f"/settings/export/{job.pk}/").status_code == 404
    assert client.get(f"/settings/export/{job.pk}/download").status_code == 404


def test_one_export_at_a_time(client, alice, sent):
    client.force_login(alice)
    first = client.post("/settings/export/prepare/")
    second = client.post("/settings/export/prepare/", follow=True)

    assert ExportJob.objects.filter(user=alice).count() == 1
    assert first["Location"] == second.redirect_chain[0][0]
    assert "An export of your account is being prepared already." in second.content.decode()


def test_an_expired_file_is_deleted_and_no_longer_offered(client, alice, sent):
    job = exporting.export_job_create(user=alice)
    exporting.export_job_run(job.pk)
    job.refresh_from_db()
    path = Path(job.file.path)
    assert path.exists()

    assert exporting.expire_exports(timezone.now() + exporting.KEEP_FOR + timedelta(1)) == 1

    job.refresh_from_db()
    assert not path.exists()
    assert job.file.name == ""
    client.force_login(alice)
    assert client.get(f"/settings/export/{job.pk}/download").status_code == 404
    assert "This archive's file has expired." in client.get(job.url()).content.decode()


def test_a_stopped_worker_is_replaced_and_a_third_stop_fails(alice, sent):
    job = exporting.export_job_create(user=alice)
    long_ago = timezone.now() - exporting.EXPORT_LEASE - timedelta(seconds=1)
    ExportJob.objects.filter(pk=job.pk).update(
        status=ImportStatus.RUNNING, attempts=1, progressed_at=long_ago
    )
    sent.clear()

    tasks.sweep_exports()
    assert sent == [job.pk]
    tasks.run_export(job.pk)
    job.refresh_from_db()
    assert (job.status, job.attempts) == (ImportStatus.DONE, 2)

    ExportJob.objects.filter(pk=job.pk).update(
        status=ImportStatus.RUNNING, attempts=3, progressed_at=long_ago, expires_at=None
    )
    sent.clear()
    tasks.sweep_exports()
    job.refresh_from_db()
    assert sent == []
    assert job.status == ImportStatus.FAILED
    assert job.error.startswith("The export stopped three times")


def test_settings_offer_both_ways(client, alice):
    client.force_login(alice)
    html = client.get("/settings/").content.decode()
    assert 'action="/settings/export/prepare/"' in html
    assert 'href="/settings/export/"' in html
