"""Fixtures of the import tests: uploads wait in a temporary data dir; an account with
something of every kind the import writes."""

import pytest

from activity.actors import Actor
from context.services import document_write
from memory.services import memory_upsert
from profiles.services import agent_get_or_create, profile_update
from work.services import work_create


@pytest.fixture(autouse=True)
def _imports_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path


@pytest.fixture
def alices_account(alice):
    """An account with something of every kind the import writes."""
    user = Actor.for_user(alice)
    agent = agent_get_or_create(user=alice, name="assistant", description="Desk helper")
    profile_update(user=alice, token_budget=3000, review_agent_memories=True)
    memory_upsert(user=alice, key="name", value="Alice Martin", actor=user)
    memory_upsert(
        user=alice,
        key="fact:likes-tea",
        value="Drinks green tea in the afternoon",
        actor=user,
        source="tp_extracted",
        confidence=0.6,
        tags=["food", "habits"],
        pinned=True,
    )
    memory_upsert(user=alice, key="tone_slack", value="casual", actor=user)
    document_write(user=alice, path="projects/plan.md", content="# Plan\n\nShip it.\n", actor=user)
    document_write(
        user=alice, agent=agent, path="AGENT_MEMORY.md", content="- knows Alice\n", actor=user
    )
    work_create(
        user=alice,
        title="Weekly report",
        body="# Week 12\n\n- done\n",
        actor=Actor.for_agent(agent),
        tags=["weekly"],
        metadata={"week": 12},
    )
    return alice
