"""What each agent reads, as the user sets it: profiles/services.py agent_set_read_rules and
the Agents page's form (profiles/views.py agent_read_rules)."""

import pytest
from django.db import IntegrityError, transaction

from lib.errors import InvalidInput
from profiles.models import Agent
from profiles.services import agent_set_read_rules
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def rules_of(agent: Agent) -> tuple[str, list[str], str, list[str]]:
    agent = Agent.objects.get(pk=agent.pk)
    return agent.memory_rule, agent.memory_tags, agent.document_rule, agent.document_folders


def test_a_new_agent_reads_everything(alice_agent):
    assert rules_of(alice_agent) == ("all", [], "all", [])


def test_tags_and_folders_are_stored_normalised(alice_agent):
    agent_set_read_rules(
        agent=alice_agent,
        memory_rule="except",
        memory_tags=["#Health", "private", "health", " "],
        document_rule="only",
        document_folders=["/projects/acme/", "journal", "projects/acme"],
    )

    assert rules_of(alice_agent) == (
        "except",
        ["health", "private"],
        "only",
        ["journal", "projects/acme"],
    )


def test_all_drops_what_was_typed_beside_it(alice_agent):
    agent_set_read_rules(
        agent=alice_agent, memory_rule="all", memory_tags=["health"], document_rule="all"
    )

    assert rules_of(alice_agent) == ("all", [], "all", [])


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"memory_rule": "some"}, "memory_rule"),
        ({"memory_rule": "only"}, "memory_tags"),
        ({"memory_rule": "except", "memory_tags": ["!!!"]}, "memory_tags"),
        ({"document_rule": "except"}, "document_folders"),
        ({"document_rule": "only", "document_folders": ["../up"]}, "document_folders"),
        ({"document_rule": "only", "document_folders": ["a/./b"]}, "document_folders"),
        ({"document_rule": "only", "document_folders": ["a\x00b"]}, "document_folders"),
    ],
)
def test_a_bad_rule_is_refused_and_nothing_changes(alice_agent, changes, field):
    agent_set_read_rules(
        agent=alice_agent, memory_rule="except", memory_tags=["health"], document_rule="all"
    )
    arguments = {"memory_rule": "all", "document_rule": "all", **changes}

    with pytest.raises(InvalidInput) as refused:
        agent_set_read_rules(agent=alice_agent, **arguments)

    assert refused.value.field == field
    assert rules_of(alice_agent) == ("except", ["health"], "all", [])


def test_the_database_refuses_a_rule_without_its_tags(alice_agent):
    with transaction.atomic(), pytest.raises(IntegrityError):
        Agent.objects.filter(pk=alice_agent.pk).update(memory_rule="only")


# --- the Agents page ----------------------------------------------------------------------


def test_the_page_shows_each_agents_rules(client, alice, alice_agent):
    agent_set_read_rules(
        agent=alice_agent,
        memory_rule="except",
        memory_tags=["health"],
        document_rule="only",
        document_folders=["projects"],
    )
    client.force_login(alice)

    page = client.get("/agents/").content.decode()

    assert f'id="agent-{alice_agent.pk}-rules"' in page
    assert '<option value="except" selected>' in page
    assert 'value="#health"' in page
    assert '<option value="only" selected>' in page
    assert 'value="projects"' in page
    assert "consolidated profile" in page


def test_saving_the_form_with_htmx_answers_its_part(client, alice, alice_agent):
    client.force_login(alice)

    response = client.post(
        f"/agents/{alice_agent.pk}/read-rules/",
        {
            "memory_rule": "only",
            "memory_tags": "#work, clients",
            "document_rule": "except",
            "document_folders": "journal private/",
        },
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith(f'<div class="agent-rules" id="agent-{alice_agent.pk}-rules"')
    assert "Saved what" in body
    assert rules_of(alice_agent) == ("only", ["clients", "work"], "except", ["journal", "private"])


def test_saving_without_javascript_redirects_with_a_message(client, alice, alice_agent):
    client.force_login(alice)

    response = client.post(
        f"/agents/{alice_agent.pk}/read-rules/",
        {"memory_rule": "except", "memory_tags": "health", "document_rule": "all"},
        follow=True,
    )

    assert response.redirect_chain == [("/agents/", 302)]
    assert "Saved what" in response.content.decode()
    assert rules_of(alice_agent)[:2] == ("except", ["health"])


def test_a_refused_rule_shows_its_error_on_its_field(client, alice, alice_agent):
    client.force_login(alice)
    other = AgentFactory(user=alice, name="other")

    htmx = client.post(
        f"/agents/{alice_agent.pk}/read-rules/",
        {"memory_rule": "only", "memory_tags": "", "document_rule": "all"},
        headers={"HX-Request": "true"},
    )
    plain = client.post(
        f"/agents/{alice_agent.pk}/read-rules/",
        {"memory_rule": "only", "memory_tags": "<>", "document_rule": "all"},
    )

    assert htmx.status_code == 200
    assert "Name at least one tag" in htmx.content.decode()
    assert plain.status_code == 400
    page = plain.content.decode()
    assert page.count('class="field-error"') == 1  # on this agent's card, not on other's
    assert "Tag &#x27;&lt;&gt;&#x27;" in page
    assert "Tag '<>'" not in page
    assert rules_of(alice_agent) == rules_of(other) == ("all", [], "all", [])


def test_another_users_agent_is_not_found(client, bob, alice_agent):
    client.force_login(bob)

    response = client.post(
        f"/agents/{alice_agent.pk}/read-rules/",
        {"memory_rule": "except", "memory_tags": "health", "document_rule": "all"},
    )

    assert response.status_code == 404
    assert rules_of(alice_agent) == ("all", [], "all", [])


# --- the admin ----------------------------------------------------------------------------


def admin_post(client, agent, **rules):
    form = {
        "user": agent.user_id,
        "name": agent.name,
        "display_name": "",
        "description": "",
        "memory_rule": "all",
        "memory_tags": "",
        "document_rule": "all",
        "document_folders": "",
        **rules,
    }
    return client.post(f"/admin/profiles/agent/{agent.pk}/change/", form)


def test_the_admin_sets_rules_checked_as_the_page_does(client, superuser, alice_agent):
    client.force_login(superuser)

    saved = admin_post(client, alice_agent, memory_rule="only", memory_tags="#Work,Clients")
    refused = admin_post(client, alice_agent, document_rule="except", document_folders="")

    assert saved.status_code == 302, saved.content
    assert refused.status_code == 200
    assert "Name at least one folder for this rule." in refused.content.decode()
    assert rules_of(alice_agent) == ("only", ["clients", "work"], "all", [])
