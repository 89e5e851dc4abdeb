"""Tags and platforms as typed and as stored (lib/tags.py), and that memories and work items
take them through that one rule."""

import pytest

from activity.actors import Actor
from lib.errors import InvalidInput
from lib.tags import (
    clean_platform,
    clean_tags,
    is_tag,
    normalize_platform,
    normalize_tag,
    tag_notes,
    tags_note,
)
from memory.services import memory_upsert
from work.services import work_create


@pytest.mark.parametrize(
    ("label", "stored"),
    [
        ("Morning Routine", "morning-routine"),
        ("  Morning   routine ", "morning-routine"),
        ("morning_routine", "morning-routine"),
        ("MORNING-ROUTINE", "morning-routine"),
        ("#morning-routine", "morning-routine"),
        ("data__model", "data-model"),
        ("Café", "café"),
        ("CAFÉ", "café"),
        ("Cafe\u0301", "café"),  # a combining accent is composed (NFKC)
        ("Straße", "strasse"),  # case folding, not only lower-casing
        ("日本語", "日本語"),
        ("日本語 メモ", "日本語-メモ"),
        ("Привет Мир", "привет-мир"),
        ("מילה עברית", "מילה-עברית"),
        ("مرحبا بالعالم", "مرحبا-بالعالم"),
        ("हिन्दी", "हिन्दी"),  # vowel signs are marks: kept with their letter
        ("Ｗｏｒｋ", "work"),  # full-width letters are plain ones
        ("Sushi 🍣", "sushi"),
        ("🍣 sushi 🍣", "sushi"),
        ("C++ / Rust", "c-rust"),
        ("--edge--", "edge"),
        ("x" * 45, "x" * 40),
        ("a" * 39 + " b", "a" * 39),  # the cut never leaves a trailing '-'
        ("🍣", ""),
        ("🍣\ufe0f", ""),  # an emoji's variation selector is a mark, but belongs to no letter
        ("👩\u200d💻", ""),
        ("???", ""),
        ("", ""),
    ],
)
def test_a_label_is_stored_as_a_tag(label, stored):
    assert normalize_tag(label) == stored
    # The rule is idempotent: a stored tag typed again is the same tag.
    assert normalize_tag(stored) == stored
    assert is_tag(stored) is bool(stored)


def test_is_tag_is_true_only_for_the_stored_form():
    assert is_tag("morning-routine")
    assert is_tag("日本語")
    assert not is_tag("Morning Routine")
    assert not is_tag("data_model")
    assert not is_tag("")


def test_clean_tags_sorts_merges_and_counts_after_normalizing():
    assert clean_tags(["Work", "work", " WORK ", "", "b c", "b_c"], limit=2) == ["b-c", "work"]
    with pytest.raises(InvalidInput, match="At most 1 tags; there are 2"):
        clean_tags(["a", "b"], limit=1)


def test_an_emoji_only_label_is_left_out_and_the_others_kept():
    assert clean_tags(["🍣", "Dinner", "日本"], limit=5) == ["dinner", "日本"]
    assert clean_tags(["🍣"], limit=5) == []
    # Left out before counting: an emoji does not take the place of a tag.
    assert clean_tags(["a", "🍣"], limit=1) == ["a"]


def test_clean_tags_refuses_what_is_not_a_list_of_text():
    with pytest.raises(InvalidInput, match="Tags must be a list of text labels") as raised:
        clean_tags("work", limit=5)
    assert raised.value.field == "tags"
    with pytest.raises(InvalidInput):
        clean_tags(["work", 3], limit=5)


def test_tag_notes_say_what_became_of_each_label_not_kept_as_typed():
    typed = ["Morning Routine", "🍣", "work", "#health", "work", "  ", "Café"]

    assert tag_notes(typed) == [
        "'Morning Routine' saved as #morning-routine",
        "'🍣' left out: a tag needs a letter or a digit",
        "'Café' saved as #café",
    ]
    assert tags_note(typed).startswith("Tags: 'Morning Routine' saved as #morning-routine; ")
    assert tags_note(["Morning Routine"]) == "Tag: 'Morning Routine' saved as #morning-routine."
    assert tags_note(["work", "#health", "日本語"]) == ""


@pytest.mark.parametrize(
    ("label", "stored"),
    [
        ("Microsoft Teams", "microsoft_teams"),
        ("microsoft teams", "microsoft_teams"),
        ("Microsoft-Teams", "microsoft_teams"),
        ("  Slack ", "slack"),
        ("gmail", "gmail"),
        ("Google Chat (work)", "google_chat_work"),
        ("Café Talk", "cafe_talk"),
        ("slack__dm", "slack_dm"),
        ("x" * 40, "x" * 32),
        ("微信", "wei_xin"),
        ("Телеграм", "telegram"),
        ("🍣", ""),
    ],
)
def test_a_platform_is_stored_in_the_form_of_its_style_keys(label, stored):
    assert normalize_platform(label) == stored
    assert normalize_platform(stored) == stored


def test_a_platform_with_nothing_to_name_it_by_is_refused_with_a_word():
    assert clean_platform("Microsoft Teams") == "microsoft_teams"
    assert clean_platform("微信") == "wei_xin"  # romanised, as keys are (lib/slugs.py)
    with pytest.raises(InvalidInput, match="Platform '🍣' has no letter a-z or digit") as raised:
        clean_platform("🍣")
    assert raised.value.field == "platform"


@pytest.mark.django_db
def test_memories_and_work_store_the_normalized_tags(alice):
    user = Actor.for_user(alice)
    write = memory_upsert(
        user=alice,
        key="fact:walk",
        value="Walks at 7",
        actor=user,
        tags=["Morning Routine", "🍣", "日本語"],
    )
    item = work_create(user=alice, title="Plan", body="", actor=user, tags=["Weekly Review", "🍣"])

    assert write.memory.tags == ["morning-routine", "日本語"]
    assert item.tags == ["weekly-review"]
