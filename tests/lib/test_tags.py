"""Tags as typed and as stored (lib/tags.py), and that memories and work items take them
through that one rule."""

import pytest

from activity.actors import Actor
from lib.errors import InvalidInput
from lib.tags import clean_tags, normalize_tag
from memory.services import memory_upsert
from work.services import work_create


@pytest.mark.parametrize(
    ("label", "stored"),
    [
        ("Morning Routine", "morning-routine"),
        ("  Morning   routine ", "morning-routine"),
        ("data_model", "data_model"),
        ("Café", "cafe"),
        ("C++ / Rust", "c-rust"),
        ("--edge--", "edge"),
        ("x" * 45, "x" * 40),
        ("a" * 39 + " b", "a" * 39),  # the cut never leaves a trailing '-'
        ("???", ""),
    ],
)
def test_a_label_is_stored_as_a_tag(label, stored):
    assert normalize_tag(label) == stored


def test_clean_tags_sorts_merges_and_counts_after_normalizing():
    assert clean_tags(["Work", "work", " WORK ", "", "b c"], limit=2) == ["b-c", "work"]
    with pytest.raises(InvalidInput, match="At most 1 tags; there are 2"):
        clean_tags(["a", "b"], limit=1)
    with pytest.raises(InvalidInput, match="Tag '日本' has nothing Mnemo can keep") as raised:
        clean_tags(["日本"], limit=5)
    assert raised.value.field == "tags"


@pytest.mark.django_db
def test_memories_and_work_store_the_normalized_tags(alice):
    user = Actor.for_user(alice)
    write = memory_upsert(
        user=alice, key="fact:walk", value="Walks at 7", actor=user, tags=["Morning Routine"]
    )
    item = work_create(user=alice, title="Plan", body="", actor=user, tags=["Weekly Review"])

    assert write.memory.tags == ["morning-routine"]
    assert item.tags == ["weekly-review"]
