"""profiles/naming.py: one name for an agent everywhere, and what a person may call it."""

import pytest
from django.template import Context, Template

from activity.actors import Actor
from profiles.models import Agent
from profiles.naming import DELETED_AGENT, agent_name, clean_display_name


def test_an_agent_is_named_by_its_display_name_else_its_name():
    assert agent_name(Agent(name="asistent", display_name="Асистент")) == "Асистент"
    assert agent_name(Agent(name="cursor", display_name="")) == "cursor"
    assert agent_name(None) == DELETED_AGENT == "a deleted agent"


def test_the_filter_and_the_actor_labels_use_the_same_name():
    agent = Agent(name="asistent", display_name="Асистент")
    rendered = Template("{% load profiles_extras %}{{ agent|agent_name }}|{{ gone|agent_name }}")

    assert rendered.render(Context({"agent": agent, "gone": None})) == "Асистент|a deleted agent"
    assert Actor.for_agent(agent).label == "agent Асистент"
    assert agent.label == str(agent) == "Асистент"


@pytest.mark.parametrize(
    ("typed", "kept"),
    [
        ("  Claude \t Desktop\n", "Claude Desktop"),
        ("Асистент\x00\x07", "Асистент"),
        ("\u202eevil\u202c name", "evil name"),
        ("مساعد\u200cي", "مساعد\u200cي"),  # a non-joiner some scripts need is kept
        ("👩\u200d💻 coder", "👩\u200d💻 coder"),
        ("\x00\x1b", ""),
    ],
)
def test_a_display_name_keeps_any_script_and_drops_controls(typed, kept):
    assert clean_display_name(typed) == kept
