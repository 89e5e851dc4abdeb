"""USER_MEMORY.md as the assistant reads it: the stored document (learning/user_memory_doc.py
is its format) loaded before each turn (`load_profile`, `GET /api/v1/profile-memory`, the
system prompt) and cut to the user's profile budget (`cap_profile`), and what the Settings
page says when the stored text is over that budget (`profile_over_budget`).

A stored profile is read as one version (`read_stored_profile`); its turn_count is the live
count (`served_text`). Tokens are counted with the consolidating model's tokenizer
(`model_token_counter()`), as learning/consolidation.py counts a rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from context.models import Document, DocumentVersion
from context.services import PROFILE_PATH
from context.versions import NEWEST_FIRST
from learning.user_memory_doc import (
    BULLET,
    EMPTY_MARK,
    FRONTMATTER_FENCE,
    empty_profile,
    processed_turn_count,
    short_quote,
    with_turn_count,
)
from lib.errors import LLMNotConfigured
from llm.client import llm_configured, model_token_counter
from profiles.services import profile_for_user

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from lib.tokenizer import TokenCounter


@dataclass(frozen=True)
class LoadedProfile:
    """The profile as the assistant receives it before a turn."""

    text: str
    tokens: int  # of `text`, counted with `tokenizer`
    cut: bool  # bullets (or, failing that, the end) were left out to fit the budget
    budget: int  # the user's profile budget
    tokenizer: str  # the consolidating model's tokenizer, e.g. "tiktoken:o200k_base"
    version_id: int | None  # the stored version served (None for the empty profile)
    exists: bool  # False: nothing stored yet, this is the empty profile


@dataclass(frozen=True)
class OverBudget:
    """A stored profile longer than the user's budget, and what the assistant reads of it."""

    tokens: int  # of the stored text
    budget: int
    kept_bullets: int  # the first bullets the assistant reads (and consolidation starts from)
    bullets: int  # all the stored text's bullets
    first_left_out: str  # the first line the assistant does not read (cut to MAX_QUOTE_CHARS)
    version_id: int | None

    @property
    def over_by(self) -> int:
        return self.tokens - self.budget


@dataclass(frozen=True)
class StoredProfile:
    """One stored version of the profile: its text and its id (None when written around
    the services)."""

    body: str
    version_id: int | None


# --- loading ----------------------------------------------------------------------------------


def load_profile(user: AbstractBaseUser) -> LoadedProfile:
    """The profile for the assistant to read before a turn, within the user's budget.

    A stored profile is served even without an LLM (the user may have written it, and it
    stays theirs). With nothing stored, the empty profile, unless no LLM is configured:
    then nothing will ever fill it, and LLMNotConfigured says how to turn it on."""
    stored = read_stored_profile(user)
    if stored is None:
        if not llm_configured():
            raise LLMNotConfigured(
                "There is no consolidated profile yet, and only an LLM writes one. "
                + LLMNotConfigured().message
            )
        text, version_id = empty_profile(user), None
    else:
        text = served_text(user, stored)
        version_id = stored.version_id
    budget = profile_for_user(user).profile_budget
    counter = model_token_counter()
    text, tokens, cut = cap_profile(text, budget=budget, counter=counter)
    return LoadedProfile(
        text=text,
        tokens=tokens,
        cut=cut,
        budget=budget,
        tokenizer=counter.name,
        version_id=version_id,
        exists=stored is not None,
    )


def served_text(user: AbstractBaseUser, stored: StoredProfile) -> str:
    # turn_count counts every processed turn, NOOPs included, while last_updated says
    # when the text last changed. Rewriting the document after a NOOP just to bump the
    # count would add a version per turn with no change in it, so the stored count is
    # only the one at the last rewrite and the live count is put in here, when read.
    return with_turn_count(stored.body, processed_turn_count(user))


def profile_over_budget(user: AbstractBaseUser) -> OverBudget | None:
    """The stored profile's overrun of the user's budget (None when it fits or is not
    stored), counted as `load_profile` counts it."""
    stored = read_stored_profile(user)
    if stored is None:
        return None
    budget = profile_for_user(user).profile_budget
    counter = model_token_counter()
    text = served_text(user, stored)
    tokens = counter.count(text)
    if tokens <= budget:
        return None
    capped, _, _ = cap_profile(text, budget=budget, counter=counter)
    left_out = left_out_lines(text, capped)
    return OverBudget(
        tokens=tokens,
        budget=budget,
        kept_bullets=count_bullets(capped),
        bullets=count_bullets(text),
        first_left_out=short_quote(left_out[0]) if left_out else "",
        version_id=stored.version_id,
    )


def count_bullets(text: str) -> int:
    """The bullets of a profile's body (its frontmatter aside), as cap_profile counts them."""
    lines = text.splitlines()
    return sum(1 for line in lines[_body_start(lines) :] if line.startswith(BULLET))


def left_out_lines(text: str, capped: str) -> list[str]:
    """The non-blank lines of `text` that `cap_profile` left out of `capped`: the dropped
    bullets, and for a cut in prose, the line it cut and every line after it."""
    kept = capped.splitlines()
    position = 0
    left_out = []
    for line in text.splitlines():
        # The `_(empty)_` the cap wrote into a section it emptied is not in `text`.
        while position < len(kept) and kept[position] == EMPTY_MARK != line:
            position += 1
        if position < len(kept) and kept[position] == line:
            position += 1
        elif line.strip():
            left_out.append(line)
    return left_out


def cap_profile(text: str, *, budget: int, counter: TokenCounter) -> tuple[str, int, bool]:
    """The text within `budget` tokens, its tokens, and whether anything was left out.

    Whole bullet lines go first, from the end upward (the last sections, recent topics and
    open questions, are the most passing), keeping the frontmatter and the headings. Only
    when that is not enough (a user's edit with long prose) is the rest cut at a word
    boundary."""
    tokens = counter.count(text)
    if tokens <= budget:
        return text, tokens, False
    lines = text.splitlines(keepends=True)
    start = _body_start(lines)
    bullets = [i for i in range(start, len(lines)) if lines[i].startswith(BULLET)]

    def keeping(kept: int) -> str:
        return _without_lines(lines, dropped=set(bullets[kept:]))

    if counter.count(keeping(0)) > budget:
        capped = _cut_to_budget(keeping(0), budget=budget, counter=counter)
        return capped, counter.count(capped), True
    # The most bullets that fit: keeping none fits and keeping all does not. Bisection
    # counts log(n) texts instead of one per dropped line.
    fits, over = 0, len(bullets)
    while over - fits > 1:
        middle = (fits + over) // 2
        if counter.count(keeping(middle)) <= budget:
            fits = middle
        else:
            over = middle
    capped = keeping(fits)
    return capped, counter.count(capped), True


def _without_lines(lines: list[str], *, dropped: set[int]) -> str:
    """The text without the `dropped` bullet lines; a section they leave with nothing in it
    says `_(empty)_`, so the capped profile keeps the format (consolidation sends it to the
    model, which would otherwise copy a blank section and be refused for it)."""
    kept: list[str] = []
    heading = None  # the index in `kept` of the current section's heading
    emptied = False  # the current section lost bullets and has nothing left
    for index, line in enumerate(lines):
        if line.startswith("## "):
            if emptied and heading is not None:
                kept.insert(heading + 1, f"{EMPTY_MARK}\n")
            heading, emptied = len(kept), False
        if index in dropped:
            emptied = emptied or (heading is not None and _section_is_blank(kept, heading))
            continue
        if heading is not None and line.strip() and not line.startswith("## "):
            emptied = False
        kept.append(line)
    if emptied and heading is not None:
        if not kept[-1].endswith("\n"):
            kept[-1] += "\n"
        kept.insert(heading + 1, f"{EMPTY_MARK}\n")
    return "".join(kept)


def _section_is_blank(kept: list[str], heading: int) -> bool:
    return not any(line.strip() for line in kept[heading + 1 :])


def _body_start(lines: list[str]) -> int:
    """The index of the first line after the frontmatter (0 without one)."""
    if not lines or lines[0].strip() != FRONTMATTER_FENCE:
        return 0
    for index in range(1, len(lines)):
        if lines[index].strip() == FRONTMATTER_FENCE:
            return index + 1
    return 0


def _cut_to_budget(text: str, *, budget: int, counter: TokenCounter) -> str:
    # The counter only counts, so the cut is made where a BPE token starts: before
    # whitespace, at a word boundary. The longest such prefix within the budget is found by
    # bisection; character positions are the fallback for a text without spaces.
    def prefix(end: int) -> str:
        return text[:end].rstrip() + "\n"

    cuts = [0] + [index for index, char in enumerate(text) if char.isspace()]
    if len(cuts) == 1 or counter.count(prefix(cuts[1])) > budget:
        cuts = list(range(len(text) + 1))
    fits, over = 0, len(cuts)
    while over - fits > 1:
        middle = (fits + over) // 2
        if counter.count(prefix(cuts[middle])) <= budget:
            fits = middle
        else:
            over = middle
    return prefix(cuts[fits])


def read_stored_profile(user: AbstractBaseUser) -> StoredProfile | None:
    document = Document.objects.filter(user=user, agent=None, path=PROFILE_PATH).only("pk").first()
    if document is None:
        return None
    # The text and the id of one version, from one row: reading the document's body and then
    # its newest version's id could pair an older text with a newer id, and a write based on
    # that pair would overwrite an edit it never saw.
    newest = (
        DocumentVersion.objects.filter(document=document)
        .order_by(*NEWEST_FIRST)
        .values_list("pk", "body")
        .first()
    )
    if newest is None:  # a document written around the services: its body is all there is
        return StoredProfile(body=document.body, version_id=None)
    return StoredProfile(body=newest[1], version_id=newest[0])
