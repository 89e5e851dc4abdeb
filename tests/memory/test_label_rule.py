"""The working memory leaves out an entry's kind label where the text says it already
(memory/block_format.py `repeats_label`, used by memory/block_rows.py `entry_line`)."""

import pytest

from activity.actors import Actor
from memory.block_format import LABEL_WORDS, repeats_label
from memory.block_rows import ENTRY_LABELS, entry_line, forget_kept_rows
from memory.keys import ENTRY_KINDS
from memory.services import memory_upsert
from memory.working_memory import build_working_memory


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("preference", "Prefers oat milk in coffee."),
        ("preference", "prefers: oat milk"),
        ("preference", "I prefer bullet points"),
        ("preference", "The user prefers short answers"),
        ("preference", "Preference for dark mode"),
        ("decision", "Decided: ship on Fridays"),
        ("decision", "We decided to use PostgreSQL"),
        ("decision", "DECISION: weekly review on Mondays"),
        ("discovery", "Discovered that the cache was stale"),
        ("bugfix", "Fixed the login loop by clearing cookies"),
        ("instruction", "Note that reports need a TL;DR"),
        ("task", "Task: renew the passport"),
        ("fact", "Fact: the office moved"),
    ],
)
def test_a_text_that_says_its_kind_loses_the_label(kind, value):
    assert repeats_label(kind, value)
    assert entry_line(f"{kind}:x", value, 200) == f"- {value}"


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("preference", "Oat milk in coffee"),
        ("preference", "Likes to prefer nothing"),  # the word, but not first
        ("preference", "Preferably short answers"),  # starts like it, another word
        ("instruction", "Notebook reviews on Fridays"),
        ("fact", "Factory tour on Monday"),
        ("decision", "Nobody decided anything"),  # "nobody" is not a subject the rule knows
        # Other languages keep their label: none of their words is one of these.
        ("preference", "Bevorzugt Hafermilch im Kaffee"),
        ("preference", "Préfère le lait d'avoine"),
        ("preference", "Предпочитает овсяное молоко"),
        ("decision", "我们决定使用 PostgreSQL"),
        ("decision", "قررنا استخدام PostgreSQL"),
        ("preference", ""),
    ],
)
def test_a_text_that_does_not_keeps_the_label(kind, value):
    assert not repeats_label(kind, value)
    if value:
        assert entry_line(f"{kind}:x", value, 200) == f"- {ENTRY_LABELS[kind]} {value}"


def test_every_kind_has_its_words():
    assert set(LABEL_WORDS) == set(ENTRY_KINDS) == set(ENTRY_LABELS)
    for kind, label in ENTRY_LABELS.items():
        # The label's own word is one of them: "Note: Note that …" never shows.
        assert label.rstrip(":").casefold() in LABEL_WORDS[kind]


def test_the_block_shows_each_line_once(alice):
    forget_kept_rows()
    actor = Actor.for_user(alice)
    memory_upsert(user=alice, key="preference:oat", value="Prefers oat milk.", actor=actor)
    memory_upsert(user=alice, key="decision:pg", value="We decided on PostgreSQL", actor=actor)
    memory_upsert(user=alice, key="fact:tea", value="Drinks green tea", actor=actor)

    text = build_working_memory(user=alice).text

    assert "- Prefers oat milk.\n" in text
    assert "- We decided on PostgreSQL\n" in text
    assert "- Fact: Drinks green tea\n" in text
    assert "Prefers: Prefers" not in text
    assert "Decided: We decided" not in text
