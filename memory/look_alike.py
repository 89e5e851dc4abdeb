"""Agents' notes that look alike: a suggestion to tidy them, not a queue (issue 26).

An agent's note near another agent's note is stored as its own row when it adds something
(memory/review_gate.py _near_entry), so nothing an agent writes waits for the user. Some of
those rows end up saying much the same; the Inbox says so in one line ("12 notes look
alike — merge?") and its page (memory/look_alike_views.py) shows the groups: the user may
merge a group (memory/bulk.py memory_merge_look_alikes: keep one, delete the others as one
undoable action) or leave it as it is (memory/entries.py look_alike_dismiss), or ignore
the line altogether.

Alike is memory/duplicates.py's rule: two notes of one kind whose WordLlama vectors reach
the calibrated similarity, the shorter sharing at least half its words with the other.

Computed when asked, never stored. The cost is bounded by NOTES, the agents' notes changed
most recently: one query, one WordLlama call and a few matrix products per kind (200 notes
that all look alike: 130 ms measured on 2 cores under a load average of 9, most of it the
query and WordLlama's embeddings, which take about 12 ms for 200 texts on an idle core).
Stored groups would be stale after every write and need a task, a table and their
invalidation for a line the user may never read; and the Inbox page does not wait for it:
it asks for the line in a request of its own once it has loaded
(templates/memory/inbox.html, `look_alike_line`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchVectorField
from django.db.models import Func, TextField

from memory.duplicates import MIN_SHARED_WORDS, near_threshold
from memory.models import LookAlikeDismissal, Memory, Source
from search.embedder_base import EmbeddingError
from search.embeddings import get_text_comparer

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

# The agents' notes compared: the most recently changed. Older look-alikes were shown while
# they were recent (or are tidied as newer ones come).
NOTES = 200
# The newest choices to leave a group as it is that are honoured.
DISMISSALS = 500


@dataclass(frozen=True)
class LookAlikeGroup:
    """Notes of one kind that look alike: the one suggested to keep first (it says the
    most), then the others, the most recently changed first."""

    kind: str
    notes: tuple[Memory, ...]

    @property
    def keep(self) -> Memory:
        return self.notes[0]

    @property
    def ids(self) -> list[int]:
        return sorted(note.pk for note in self.notes)


def look_alike_groups(*, user: AbstractBaseUser) -> list[LookAlikeGroup]:
    """The groups of the user's agents' notes that look alike, biggest first, leaving out a
    group made only of notes the user chose to leave as they are. Empty when WordLlama
    cannot be loaded."""
    notes = list(_recent_notes(user))
    if len(notes) < 2:
        return []
    vectors = _vectors([note.value for note in notes])
    if vectors is None:
        return []
    by_kind: dict[str, list[int]] = defaultdict(list)
    for index, note in enumerate(notes):
        by_kind[note.kind].append(index)
    left = _left_as_they_are(user)
    groups = [
        LookAlikeGroup(kind, members)
        for kind, indexes in by_kind.items()
        if len(indexes) > 1
        for members in _groups([notes[i] for i in indexes], vectors[indexes])
    ]
    shown = [group for group in groups if not any(set(group.ids) <= ids for ids in left)]
    return sorted(shown, key=lambda group: (-len(group.notes), -_newest(group)))


def _recent_notes(user: AbstractBaseUser) -> list[Memory]:
    """The NOTES entries agents wrote (not the user) changed most recently, newest first,
    each with its `words` as memory/duplicates.py counts them."""
    # memory/duplicates.py words_sql, as the ORM writes it.
    words = Func(
        Func("value", function="mnemo_text_tsvector", output_field=SearchVectorField()),
        function="tsvector_to_array",
        output_field=ArrayField(TextField()),
    )
    return list(
        Memory.objects.filter(user=user, owner_agent=None, key__contains=":")
        .exclude(source=Source.USER_STATED)
        .annotate(words=words)
        .order_by("-updated_at", "-id")[:NOTES]
    )


def _vectors(texts: list[str]) -> np.ndarray | None:
    try:
        return np.asarray(get_text_comparer().embed(texts), dtype=np.float32)
    except EmbeddingError:
        return None


def _left_as_they_are(user: AbstractBaseUser) -> list[set[int]]:
    rows = LookAlikeDismissal.objects.filter(user=user).values_list("memory_ids", flat=True)
    return [set(ids) for ids in rows[:DISMISSALS]]


def _alike(notes: list[Memory], vectors: np.ndarray) -> np.ndarray:
    """Which pairs of `notes` look alike, as a boolean matrix: memory/duplicates.py is_near
    for every pair at once, the note with fewer words taken as the new text (the share of
    its words the other holds; all of them when it has none)."""
    vocabulary = {word: n for n, word in enumerate({w for note in notes for w in note.words})}
    has = np.zeros((len(notes), len(vocabulary)), dtype=np.float32)
    for row, note in enumerate(notes):
        has[row, [vocabulary[word] for word in note.words]] = 1.0
    shared = has @ has.T  # words each pair has in common
    words = has.sum(axis=1)
    fewer = np.minimum.outer(words, words)
    alike = (vectors @ vectors.T >= near_threshold()) & (shared >= MIN_SHARED_WORDS * fewer)
    np.fill_diagonal(alike, False)
    return alike


def _groups(notes: list[Memory], vectors: np.ndarray) -> list[tuple[Memory, ...]]:
    """Groups of `notes` (newest first, one kind) that look alike: each around the note
    alike to most of those not in a group yet (ties: the newest), with those; greedy, so a
    chain of notes each a little like the next does not make one group of unlike ends."""
    alike = _alike(notes, vectors)
    words = np.array([len(note.words) for note in notes])
    free = np.ones(len(notes), dtype=bool)
    groups = []
    while True:
        degrees = np.where(free, (alike & free).sum(axis=1), 0)
        seed = int(np.argmax(degrees))  # the first of the highest: the newest
        if degrees[seed] == 0:
            return groups
        members = np.flatnonzero((alike[seed] & free) | (np.arange(len(notes)) == seed))
        free[members] = False
        keep = int(members[np.argmax(words[members])])  # says the most; ties: the newest
        groups.append((notes[keep], *(notes[i] for i in members if i != keep)))


def _newest(group: LookAlikeGroup) -> float:
    return max(note.updated_at for note in group.notes).timestamp()
