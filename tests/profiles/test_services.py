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


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("typed", "name", "display_name"),
    [
        ("Claude Desktop", "claude-desktop", "Claude Desktop"),
        ("  Claude   Desktop ", "claude-desktop", "Claude Desktop"),
        ("cursor", "cursor", ""),
        ("Mon Agent Café", "mon-agent-cafe", "Mon Agent Café"),
        ("Асистент", "asistent", "Асистент"),
        ("日本語", "ri-ben-yu", "日本語"),
        ("مساعد\x00", "msd", "مساعد"),
        ("???", "agent-a03b221c", "???"),
    ],
)
def test_an_agent_is_named_as_typed_and_its_name_derived(alice, typed, name, display_name):
    from profiles.services import agent_create

    agent = agent_create(user=alice, display_name=typed, description=" Desk  helper ")

    assert (agent.name, agent.display_name, agent.description) == (
        name,
        display_name,
        "Desk helper",
    )
    assert str(agent) == agent.label == (display_name or name)


@pytest.mark.django_db
def test_agent_names_that_clash_or_keep_nothing_are_refused_clearly(alice):
    from lib.errors import Conflict, InvalidInput
    from profiles.services import agent_create

    agent_create(user=alice, display_name="Claude Desktop")

    with pytest.raises(Conflict) as clash:
        agent_create(user=alice, display_name="claude  desktop!")
    with pytest.raises(InvalidInput) as empty:
        agent_create(user=alice, display_name=" \x00\t ")

    assert clash.value.message == (
        "You already have the agent 'Claude Desktop' (named 'claude-desktop' in paths and "
        "tokens); choose another name."
    )
    assert empty.value.field == "name"
    assert empty.value.message == "Give the agent a name."
