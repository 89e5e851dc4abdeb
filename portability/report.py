"""An import's report (Report): what it did, item by item, saved on its job as it goes.
The check (portability/validation/archive.py), the application (portability/applying.py,
portability/replaying.py) and other tools' importers (portability/importers.py) add to it;
the job (portability/importing.py) finishes it."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from portability.models import ImportJob, ImportStatus
from portability.validation.reading import shown

# The job's logger, as before the report had a module of its own.
logger = logging.getLogger("portability.importing")

# What a job's summary lists, whatever the archive holds; the counters count everything.
MAX_LISTED_REFUSALS = 200
MAX_LISTED_OTHERS = 300
MAX_NOTES = 20
ITEM_CHARS = 200
REASON_CHARS = 400
PROGRESS_EVERY_SECONDS = 0.5


@dataclass
class Report:
    """What the import did, item by item; saved on the job as it goes (the page polls it).

    Bounded whatever the archive holds: every item is counted, the first
    MAX_LISTED_REFUSALS refusals and MAX_LISTED_OTHERS other items are listed, and text from
    the archive is stored as `shown` makes it (escaped, cut)."""

    job: ImportJob
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("created", "updated", "skipped", "refused", "pending"), 0
        )
    )
    sections: dict[str, dict[str, int]] = field(default_factory=dict)
    items: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    processed: int = 0
    total: int = 0
    writing: bool = False  # whether the import has started writing to the account
    listed: dict[str, int] = field(default_factory=lambda: {"refused": 0, "other": 0})
    unlisted: dict[str, int] = field(default_factory=lambda: {"refused": 0, "other": 0})
    _saved_at: float = 0.0

    def set_total(self, total: int) -> None:
        self.total = max(total, self.processed, 0)
        ImportJob.objects.filter(pk=self.job.pk).update(total=self.total)

    def add(self, section: str, item: str, outcome: str, reason: str = "") -> None:
        self.counts[outcome] += 1
        per = self.sections.setdefault(section, dict.fromkeys(self.counts, 0))
        per[outcome] += 1
        kind = "refused" if outcome == "refused" else "other"
        room = MAX_LISTED_REFUSALS if kind == "refused" else MAX_LISTED_OTHERS
        if self.listed[kind] < room:
            self.listed[kind] += 1
            self.items.append(
                {
                    "section": section,
                    "item": shown(item, ITEM_CHARS),
                    "outcome": outcome,
                    "reason": shown(reason, REASON_CHARS),
                }
            )
        else:
            self.unlisted[kind] += 1
        self.step()

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(shown(text, REASON_CHARS))

    def count(self, section: str, outcome: str, number: int) -> None:
        """Count `number` rows of a section without listing each, nor adding them to the
        job's item counters (a history's rows are not items of the account)."""
        if not number:
            return
        per = self.sections.setdefault(section, dict.fromkeys(self.counts, 0))
        per[outcome] += number
        self.step()

    def step(self) -> None:
        self.processed += 1
        self.alive()

    def alive(self) -> None:
        """Save the progress if it is due: the page shows it, and beat's sweep takes a job
        silent for IMPORT_LEASE for one whose worker stopped."""
        if time.monotonic() - self._saved_at >= PROGRESS_EVERY_SECONDS:
            self._save()

    def _save(self, **extra: Any) -> None:
        self._saved_at = time.monotonic()
        ImportJob.objects.filter(pk=self.job.pk).update(
            progressed_at=timezone.now(),
            processed=self.processed,
            # While the archive is checked the total is not known yet (0: "checking").
            total=max(self.total, self.processed) if self.total else 0,
            **self.counts,
            **extra,
        )

    def finish(self, *, status: str, error: str = "") -> None:
        """Save the outcome. Never raises: should the summary not save, the outcome is
        saved without it, so the job ends and its page stops polling either way."""
        if status == ImportStatus.DONE:
            self.total = max(self.total, self.processed)
        summary = {
            "sections": self.sections,
            "items": self.items,
            "notes": self.notes,
            "unlisted": self.unlisted,
        }
        done = {"status": status, "finished_at": timezone.now()}
        for saved in (
            {**done, "error": shown(error, 2000), "summary": summary},
            {**done, "error": shown(error or "The import's summary could not be saved.", 2000)},
        ):
            try:
                with transaction.atomic():
                    self._save(**saved)
            except Exception:
                logger.exception("Import %s: its outcome did not save", self.job.pk)
            else:
                return
