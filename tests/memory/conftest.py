"""Actors the memory tests write as: the user themself, and their agent."""

import pytest

from activity.actors import Actor


@pytest.fixture
def you(alice):
    return Actor.for_user(alice)


@pytest.fixture
def agent(alice_agent):
    return Actor.for_agent(alice_agent)
