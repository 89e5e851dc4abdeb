"""Secrets never become memories through the assistant loop: an observation the model (or a
cue phrase) finds that looks like a credential is skipped and reported without the secret,
the others are stored; a profile rewrite that adds a credential is not written."""

from __future__ import annotations

import json

import pytest

from context.services import PROFILE_PATH
from learning.capture import capture
from learning.consolidation import consolidate
from learning.outcomes import ProfileStatus
from llm.models import Turn, TurnStatus
from memory.models import Memory, MemoryProposal
from tests.fake_openai import ChatReply
from tests.learning.test_user_memory import answer, profile_document, store
from tests.lib.test_credentials import token

pytestmark = pytest.mark.django_db

GITHUB = "gh" + f"p_{token(36)}"


def make_turn(user, agent, user_message: str) -> Turn:
    return Turn.objects.create(
        user=user,
        agent=agent,
        user_message=user_message,
        assistant_reply="Done.",
        tool_outputs=[],
        status=TurnStatus.QUEUED,
    )


def test_the_models_secret_observation_is_skipped_and_the_others_stored(
    llm_server, alice, alice_agent
):
    llm_server.script_chat(
        ChatReply(
            json.dumps(
                [
                    {"type": "decision", "text": "The team deploys from the main branch"},
                    {"type": "discovery", "text": f"The deploy token is {GITHUB}"},
                    {"type": "preference", "text": "The user wants short answers"},
                ]
            )
        )
    )
    turn = make_turn(alice, alice_agent, f"Deploy from main with {GITHUB}. Keep it short.")

    outcome = capture(turn)

    assert (outcome.method, outcome.failed) == ("llm", False)
    assert [(o.kind, o.status) for o in outcome.observations] == [
        ("decision", "created"),
        ("discovery", "refused"),
        ("preference", "created"),
    ]
    refused = outcome.observations[1]
    assert refused.reason == (
        "This looks like a GitHub token; Mnemo does not store credentials as memories."
    )
    assert refused.text == "The deploy token is [removed: a GitHub token]"
    assert sorted(Memory.objects.filter(user=alice).values_list("value", flat=True)) == [
        "The team deploys from the main branch",
        "The user wants short answers",
    ]
    assert not MemoryProposal.objects.exists()
    assert GITHUB not in json.dumps([o.__dict__ for o in outcome.observations])


def test_a_cue_phrase_with_a_password_is_skipped(no_llm, alice, alice_agent):
    turn = make_turn(
        alice, alice_agent, "Remember that my bank password is Tr0ub4dor&3. I prefer tea."
    )

    outcome = capture(turn)

    assert [(o.status, o.text) for o in outcome.observations] == [
        ("refused", "Remember that my bank password is [removed: a password]."),
        ("created", "I prefer tea."),
    ]
    assert list(Memory.objects.filter(user=alice).values_list("value", flat=True)) == [
        "I prefer tea."
    ]


def test_a_rewrite_adding_a_credential_is_not_written(llm_server, alice):
    version = store(alice, answer(Identity=["Alice"]))
    llm_server.script_chat(ChatReply(answer(Identity=["Alice"], Work=[f"Deploys with {GITHUB}"])))

    outcome = consolidate(make_turn(alice, None, f"I deploy with {GITHUB}"))

    assert outcome.status == ProfileStatus.FAILED
    assert outcome.reason == (
        "This looks like a GitHub token; Mnemo does not store credentials in documents."
    )
    document = profile_document(alice)
    assert document.versions.order_by("-id").first().pk == version
    assert GITHUB not in document.body


def test_a_credential_the_user_put_in_the_profile_stays_in_the_rewrite(llm_server, alice):
    store(alice, answer(Identity=["Alice"], Work=[f"Deploys with {GITHUB}"]))
    rewrite = answer(Identity=["Alice, engineer"], Work=[f"Deploys with {GITHUB}"])
    llm_server.script_chat(ChatReply(rewrite))

    outcome = consolidate(make_turn(alice, None, "I'm an engineer."))

    assert outcome.status == ProfileStatus.REWRITTEN
    assert "- Alice, engineer\n" in profile_document(alice).body
    assert f"- Deploys with {GITHUB}\n" in profile_document(alice).body


def test_the_users_own_profile_may_hold_one(alice):
    store(alice, answer(Identity=["Alice"], Work=["Card 4111 1111 1111 1111"]))

    document = profile_document(alice)
    assert (document.path, document.credential.kind) == (PROFILE_PATH, "card_number")
