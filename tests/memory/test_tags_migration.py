"""memory/migrations/0017_tags_by_one_rule.py: tags stored by the rule before issue 30
("data_model", "a--b") are rewritten in today's form in every table that holds tags, so a
read rule and the memories it names keep agreeing; a history state stored before still
restores and compares (memory/snapshots.py)."""

import importlib

import pytest
from django.apps import apps

from activity.actors import Actor
from memory.models import Memory, MemoryHistory
from memory.services import memory_restore, memory_upsert
from memory.visibility import may_read
from profiles.models import Agent
from profiles.services import agent_set_read_rules
from work.models import WorkItem
from work.services import work_create

pytestmark = pytest.mark.django_db

migration = importlib.import_module("memory.migrations.0017_tags_by_one_rule")


def test_stored_tags_are_rewritten_together_in_todays_form(alice, alice_agent):
    you = Actor.for_user(alice)
    memory = memory_upsert(user=alice, key="fact:plan", value="A plan", actor=you).memory
    untouched = memory_upsert(
        user=alice, key="fact:tea", value="Tea", actor=you, tags=["tea"]
    ).memory
    item = work_create(user=alice, title="Plan", body="", actor=you)
    agent_set_read_rules(
        agent=alice_agent, memory_rule="except", memory_tags=["private"], document_rule="all"
    )
    # As the rule before stored them (it kept '_' and runs of '-').
    Memory.objects.filter(pk=memory.pk).update(tags=["data_model", "private_life", "a--b"])
    WorkItem.objects.filter(pk=item.pk).update(tags=["weekly_review", "weekly-review"])
    Agent.objects.filter(pk=alice_agent.pk).update(memory_tags=["private_life"])
    before = Memory.objects.get(pk=untouched.pk).updated_at

    migration.forwards(apps, None)

    memory.refresh_from_db()
    assert memory.tags == ["a-b", "data-model", "private-life"]
    assert WorkItem.objects.get(pk=item.pk).tags == ["weekly-review"]
    alice_agent.refresh_from_db()
    assert alice_agent.memory_tags == ["private-life"]
    # The rule still hides the memory it named before.
    assert not may_read(memory, alice_agent)
    assert Memory.objects.get(pk=untouched.pk).updated_at == before
    # Run again, nothing changes: the rule is idempotent.
    migration.forwards(apps, None)
    memory.refresh_from_db()
    assert memory.tags == ["a-b", "data-model", "private-life"]


def test_a_state_stored_by_the_earlier_rule_restores_in_todays_form(alice):
    you = Actor.for_user(alice)
    first = memory_upsert(user=alice, key="fact:plan", value="A plan", actor=you)
    entry = MemoryHistory.objects.get(memory=first.memory)
    MemoryHistory.objects.filter(pk=entry.pk).update(after={**entry.after, "tags": ["data_model"]})
    memory_upsert(user=alice, key="fact:plan", value="Another plan", actor=you)

    restored = memory_restore(user=alice, history_id=entry.pk, actor=you)

    assert (restored.memory.value, restored.memory.tags) == ("A plan", ["data-model"])
