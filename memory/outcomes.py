"""What a write of memory returns (MemoryWrite), or raises instead of applying: the
proposal it waits as (ReviewRequired) or the memory that already says it (DuplicateMemory).
The API and the pages answer from these; memory/services.py and memory/review_gate.py make
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lib.credentials import Credential, find_credential
from lib.errors import ServiceError

if TYPE_CHECKING:
    from memory.models import Memory, MemoryHistory, MemoryProposal


@dataclass(frozen=True)
class MemoryWrite:
    memory: Memory
    created: bool
    history: MemoryHistory | None  # None: the write changed nothing, so nothing was recorded

    @property
    def changed(self) -> bool:
        return self.history is not None

    @property
    def status(self) -> str:
        """ "created", "updated" or "unchanged", as the API and memory_set report it."""
        if self.created:
            return "created"
        return "updated" if self.changed else "unchanged"

    @property
    def credential(self) -> Credential | None:
        """What looks like a credential in the memory's text or tags. Only the user's
        writes can hold one (agents' are refused: _refuse_credentials); the pages warn."""
        texts = [self.memory.value, *self.memory.tags]
        return next(filter(None, map(find_credential, texts)), None)


class ReviewRequired(ServiceError):
    """An agent's write did not apply: it waits in the user's review inbox as `proposal`
    (it would change or delete what the user stated, adds to a memory the user stated, or
    the user reviews agents' new memories). The API answers 202 pending_review."""

    code = "pending_review"

    def __init__(self, proposal: MemoryProposal) -> None:
        super().__init__(
            f"'{proposal.key}' waits for the user's review (proposal {proposal.pk}).",
            field="key",
        )
        self.proposal = proposal


class DuplicateMemory(ServiceError):
    """An agent's new memory says what `existing` already says: no row was added, and the
    note is kept in `existing`'s history as `history`, a merge (None when the same agent
    had said it there already)."""

    code = "duplicate"

    def __init__(
        self, existing: Memory, similarity: float, history: MemoryHistory | None = None
    ) -> None:
        super().__init__(f"'{existing.key}' already says this; nothing was added.", field="value")
        self.existing = existing
        self.similarity = similarity
        self.history = history
