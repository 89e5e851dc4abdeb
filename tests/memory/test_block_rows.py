"""What a render keeps of each row between renders (memory/block_rows.py): never stale."""

from datetime import timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from lib.tokenizer import TokenCounter, count_utf8_bytes, get_token_counter
from memory import block_rows, working_memory
from memory.block_format import _as_data
from memory.block_rows import entry_line, forget_kept_rows
from memory.entries import memory_rename
from memory.models import Memory
from memory.services import memory_update, memory_upsert
from memory.working_memory import build_working_memory
from profiles.services import agent_set_read_rules


@pytest.fixture(autouse=True)
def nothing_kept():
    forget_kept_rows()
    yield
    forget_kept_rows()


def write(user, key, value):
    memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user))


def fresh(user, **kwargs):
    """The block made from nothing kept."""
    forget_kept_rows()
    return build_working_memory(user=user, **kwargs)


def assert_kept_rows_are_current(user, counter, limit):
    """Every row kept for `user` under its current stamp is what its key and value make now,
    its line counted by `counter`."""
    rows = {row.pk: row for row in Memory.objects.filter(user=user)}
    current = 0
    for (name, kept_limit, row_id, stamp), kept in block_rows._kept.items():
        row = rows.get(row_id)
        stamped = row is not None and stamp == (row.updated_at - block_rows._EPOCH) // timedelta(
            microseconds=1
        )
        if name != counter or kept_limit != limit or not stamped:
            continue
        current += 1
        value = _as_data(row.value)
        assert (kept.key, kept.value) == (row.key, value)
        assert kept.line == entry_line(row.key, value, limit)
        assert kept.tokens == (0 if kept.line is None else counter_count(kept.line))
    return current


def counter_count(line):
    return get_token_counter().count(line)


def test_kept_lines_and_counts_follow_create_update_and_rename(alice, settings):
    limit = settings.MNEMO_WORKING_MEMORY_LINE_CHARS
    counter = get_token_counter().name
    write(alice, "name", "Alice")
    write(alice, "fact:coffee", "Drinks black coffee")
    write(alice, "preference:reports", "Reports as bullet points")
    first = build_working_memory(user=alice, budget=2000)
    assert "- Fact: Drinks black coffee" in first.text
    assert assert_kept_rows_are_current(alice, counter, limit) == 3

    memory_update(
        user=alice, key="fact:coffee", value="Drinks green tea now", actor=Actor.for_user(alice)
    )
    updated = build_working_memory(user=alice, budget=2000)
    assert "- Fact: Drinks green tea now" in updated.text
    assert "coffee" not in updated.text.replace("fact:coffee", "")
    assert updated == fresh(alice, budget=2000)

    build_working_memory(user=alice, budget=2000)
    memory_rename(
        user=alice, key="fact:coffee", new_key="decision:tea", actor=Actor.for_user(alice)
    )
    renamed = build_working_memory(user=alice, budget=2000)
    assert "- Decided: Drinks green tea now" in renamed.text
    assert "decision:tea" in renamed.included
    assert "fact:coffee" not in renamed.included
    assert renamed == fresh(alice, budget=2000)
    build_working_memory(user=alice, budget=2000)
    assert assert_kept_rows_are_current(alice, counter, limit) == 3


def test_a_warm_render_is_the_fresh_render(alice):
    for n in range(40):
        write(alice, f"fact:item-{n}", f"Item {n} is worth remembering " * (n % 4 + 4))
    cold = build_working_memory(user=alice, budget=500)
    warm = build_working_memory(user=alice, budget=500)
    assert warm == cold == fresh(alice, budget=500)
    assert len(cold.included) < 40  # the budget chose


def test_another_tokenizer_counts_every_line_again(alice, monkeypatch):
    write(alice, "fact:one", "The first thing to remember")
    write(alice, "fact:two", "The second thing to remember")
    build_working_memory(user=alice, budget=2000)  # kept, counted by the configured counter

    asked = []

    def count(text):
        asked.append(text)
        return count_utf8_bytes(text)

    # A counter of another name (MNEMO_TOKENIZER changed) never uses the kept counts.
    monkeypatch.setattr(working_memory, "get_token_counter", lambda: TokenCounter("test:b", count))
    block = build_working_memory(user=alice, budget=2000)
    assert "- Fact: The first thing to remember" in asked
    assert "- Fact: The second thing to remember" in asked
    assert block.counter == "test:b"
    assert block.tokens == count_utf8_bytes(block.text)
    kept = [row for (name, *_), row in block_rows._kept.items() if name == "test:b"]
    assert sorted(row.tokens for row in kept) == sorted(count_utf8_bytes(row.line) for row in kept)


def test_another_line_length_makes_the_lines_again(alice, settings):
    write(alice, "fact:long", "word " * 100)
    settings.MNEMO_WORKING_MEMORY_LINE_CHARS = 300
    wide = build_working_memory(user=alice, budget=2000)
    settings.MNEMO_WORKING_MEMORY_LINE_CHARS = 60
    narrow = build_working_memory(user=alice, budget=2000)
    assert len(wide.lines[0].text) > 60
    assert len(narrow.lines[0].text) <= 60
    assert narrow == fresh(alice, budget=2000)


def test_a_row_changed_between_the_two_reads_shows_as_the_second_finds_it(alice, monkeypatch):
    write(alice, "fact:a", "Before")
    read_values = block_rows._read_values

    def write_in_between(*args, **kwargs):
        memory_update(user=alice, key="fact:a", value="After", actor=Actor.for_user(alice))
        return read_values(*args, **kwargs)

    monkeypatch.setattr(block_rows, "_read_values", write_in_between)
    assert "- Fact: After" in build_working_memory(user=alice, budget=2000).text
    monkeypatch.setattr(block_rows, "_read_values", read_values)
    assert build_working_memory(user=alice, budget=2000) == fresh(alice, budget=2000)


def test_as_of_is_rebuilt_from_history_whatever_is_kept(alice):
    write(alice, "fact:a", "Before")
    between = timezone.now()
    write(alice, "fact:a", "After")
    assert "- Fact: After" in build_working_memory(user=alice, budget=2000).text
    past = build_working_memory(user=alice, budget=2000, as_of=between)
    assert "- Fact: Before" in past.text
    assert past.tokens == get_token_counter().count(past.text)


def test_renders_stay_right_when_kept_rows_are_dropped(alice, bob, monkeypatch):
    monkeypatch.setattr(block_rows, "KEPT_ROWS", 4)
    for n in range(6):
        write(alice, f"fact:a{n}", f"Alice's item {n}")
        write(bob, f"fact:b{n}", f"Bob's item {n}")
    alice_first = build_working_memory(user=alice, budget=2000)
    bob_first = build_working_memory(user=bob, budget=2000)
    assert build_working_memory(user=alice, budget=2000) == alice_first
    assert build_working_memory(user=bob, budget=2000) == bob_first
    assert len(block_rows._kept) <= 4 + 6
    assert alice_first == fresh(alice, budget=2000)


def test_a_kept_block_is_the_callers_to_change_and_follows_pins_and_uses(alice):
    write(alice, "fact:a", "First")
    write(alice, "fact:b", "Second")
    first = build_working_memory(user=alice, budget=2000)
    first.included.clear()
    first.lines.clear()
    again = build_working_memory(user=alice, budget=2000)
    assert again.included == ["fact:b", "fact:a"]  # the most recently written first
    assert len(again.lines) == 2

    memory_update(user=alice, key="fact:a", pinned=True, actor=Actor.for_user(alice))
    pinned = build_working_memory(user=alice, budget=2000)
    assert pinned.included == ["fact:a", "fact:b"]
    assert pinned == fresh(alice, budget=2000)


def test_a_row_hidden_between_the_two_reads_is_left_out(alice, alice_agent, monkeypatch):
    agent_set_read_rules(
        agent=alice_agent, memory_rule="except", memory_tags=["secret"], document_rule="all"
    )
    write(alice, "fact:plan", "Meets the team on Monday")
    read_values = block_rows._read_values

    hidden = {"value": "The secret plan", "tags": ["secret"]}

    def hide_in_between(*args, **kwargs):
        memory_update(user=alice, key="fact:plan", actor=Actor.for_user(alice), **hidden)
        return read_values(*args, **kwargs)

    monkeypatch.setattr(block_rows, "_read_values", hide_in_between)
    block = build_working_memory(user=alice, budget=2000, agent=alice_agent)
    assert "secret" not in block.text
    assert block.included == []
