import pytest

from lib.errors import InvalidInput
from profiles.models import Agent
from profiles.services import agent_get_or_create


def test_agent_get_or_create_returns_the_existing_agent(alice):
    first = agent_get_or_create(user=alice, name="scout")

    assert agent_get_or_create(user=alice, name="scout").pk == first.pk
    assert Agent.objects.filter(user=alice).count() == 1


RULE = "Agent names are 1–64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit."


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Scout", RULE),
        ("-scout", RULE),
        ("my scout", RULE),
        ("a" * 65, RULE + " Ensure this value has at most 64 characters (it has 65)."),
        ("", "This field cannot be blank."),
    ],
)
def test_agent_get_or_create_refuses_bad_names_with_the_rule(alice, name, message):
    with pytest.raises(InvalidInput) as raised:
        agent_get_or_create(user=alice, name=name)

    assert raised.value.field == "name"
    assert raised.value.message == message
    assert not Agent.objects.exists()
