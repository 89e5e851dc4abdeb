"""The identity files at the root of a user's documents are the user's: an agent's change
waits in the review inbox (context/services.py, decided in context/review.py); the
consolidated profile is never an agent's to write; an agent's own folder is its own."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from activity.actors import Actor
from activity.models import ActivityEvent, EventType
from context.models import Document, DocumentProposal, DocumentVersion
from context.review import (
    document_proposal_accept,
    document_proposal_reject,
    document_proposals_expire,
)
from context.services import (
    IDENTITY_FILES,
    PROFILE_PATH,
    DocumentReviewRequired,
    ProfileReadOnly,
    document_append,
    document_delete,
    document_write,
)
from lib.errors import Conflict, Forbidden, NotFound
from memory.models import ProposalStatus
from profiles.services import profile_update

pytestmark = pytest.mark.django_db

ROOT_IDENTITY = sorted(IDENTITY_FILES)


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


def write(user, path, content):
    return document_write(user=user, path=path, content=content, actor=Actor.for_user(user))


def body_of(user, path, agent=None):
    document = Document.objects.filter(user=user, agent=agent, path=path).first()
    return None if document is None else document.body


def versions(user):
    return DocumentVersion.objects.filter(user=user).count()


def test_the_protected_files_are_the_identity_files():
    assert {
        "IDENTITY.md",
        "SOUL.md",
        "AGENTS.md",
        "USER.md",
        "TOOLS.md",
        "BOOTSTRAP.md",
        "HEARTBEAT.md",
    } == IDENTITY_FILES


# --- an agent's change waits for the user -----------------------------------------------------


@pytest.mark.parametrize("path", ROOT_IDENTITY)
def test_an_agents_write_of_a_root_identity_file_waits_and_changes_nothing(
    call_tool, alice, alice_agent, alice_token, path
):
    write(alice, path, "The user's own words.")
    before = versions(alice)

    response = call_tool(alice_token, "memory_write", {"path": path, "content": "## Forged"})

    assert response.status_code == 202, response.content
    body = response.json()
    proposal = DocumentProposal.objects.get()
    assert body == {
        "status": "pending_review",
        "path": path,
        "message": f"'{path}' is an identity file all of the user's agents read: your change "
        f"waits for the user's review (proposal {proposal.pk}).",
        "proposal": {
            "id": proposal.pk,
            "path": path,
            "action": "write",
            "status": "pending_review",
            "created_at": body["proposal"]["created_at"],
            "expires_at": body["proposal"]["expires_at"],
        },
    }
    assert (proposal.user, proposal.path, proposal.action) == (alice, path, "write")
    assert (proposal.content, proposal.before) == ("## Forged", "The user's own words.")
    assert proposal.base_version == DocumentVersion.objects.get(user=alice, path=path).pk
    assert (proposal.actor_type, proposal.actor_agent) == ("agent", alice_agent)
    assert proposal.after == "## Forged"
    assert body_of(alice, path) == "The user's own words."
    assert versions(alice) == before
    event = ActivityEvent.objects.get(event_type=EventType.PROPOSAL_CREATED)
    assert (event.user, event.actor_agent) == (alice, alice_agent)
    assert event.payload == {
        "document_proposal_id": proposal.pk,
        "path": path,
        "action": "write",
        "trigger": "identity_file",
    }


@pytest.mark.parametrize("path", ["SOUL.md", "HEARTBEAT.md", "BOOTSTRAP.md"])
def test_an_agents_append_and_delete_wait_too(call_tool, alice, alice_token, path):
    write(alice, path, "- first")

    appended = call_tool(alice_token, "memory_append", {"path": path, "content": "## Forged"})
    deleted = call_tool(alice_token, "memory_delete", {"path": path})

    assert (appended.status_code, deleted.status_code) == (202, 202)
    append, delete = DocumentProposal.objects.order_by("pk")
    assert (append.action, append.content, append.after) == (
        "append",
        "## Forged",
        "- first\n## Forged",
    )
    assert (delete.action, delete.content, delete.after) == ("delete", "", None)
    # The delete replaced the agent's earlier proposal for the same file.
    append.refresh_from_db()
    assert append.status == ProposalStatus.SUPERSEDED
    assert body_of(alice, path) == "- first"


def test_a_new_identity_file_waits_as_well(call_tool, alice, alice_token):
    response = call_tool(alice_token, "memory_write", {"path": "AGENTS.md", "content": "obey me"})

    assert response.status_code == 202
    proposal = DocumentProposal.objects.get()
    assert (proposal.before, proposal.base_version) == (None, None)
    assert not Document.objects.filter(user=alice).exists()


def test_the_same_proposal_again_is_the_same_one(call_tool, alice, alice_token):
    first = call_tool(alice_token, "memory_write", {"path": "SOUL.md", "content": "be terse"})
    again = call_tool(alice_token, "memory_write", {"path": "SOUL.md", "content": "be terse"})
    other = call_tool(alice_token, "memory_write", {"path": "SOUL.md", "content": "be warm"})

    assert first.json()["proposal"]["id"] == again.json()["proposal"]["id"]
    assert other.json()["proposal"]["id"] != first.json()["proposal"]["id"]
    statuses = list(DocumentProposal.objects.order_by("pk").values_list("content", "status"))
    assert statuses == [("be terse", "superseded"), ("be warm", "pending_review")]
    assert ActivityEvent.objects.filter(event_type=EventType.PROPOSAL_CREATED).count() == 2


def test_a_change_the_agent_could_not_make_is_refused_before_any_proposal(
    call_tool, alice, alice_token
):
    write(alice, "SOUL.md", "v1")
    stale = DocumentVersion.objects.get(user=alice).pk
    write(alice, "SOUL.md", "v2")

    conflict = call_tool(
        alice_token, "memory_write", {"path": "SOUL.md", "content": "x", "base_version": stale}
    )
    missing = call_tool(alice_token, "memory_delete", {"path": "TOOLS.md"})
    profile_update(user=alice, memory_paused=True)
    paused = call_tool(alice_token, "memory_write", {"path": "SOUL.md", "content": "x"})

    assert (conflict.status_code, error(conflict)["code"]) == (409, "version_conflict")
    assert (missing.status_code, paused.status_code) == (404, 409)
    assert error(paused)["code"] == "memory_paused"
    assert not DocumentProposal.objects.exists()
    assert body_of(alice, "SOUL.md") == "v2"


def test_the_user_and_the_system_write_identity_files_directly(alice):
    write(alice, "SOUL.md", "mine")
    document_write(user=alice, path="USER.md", content="imported", actor=Actor.system())

    assert (body_of(alice, "SOUL.md"), body_of(alice, "USER.md")) == ("mine", "imported")
    assert not DocumentProposal.objects.exists()


def test_an_agent_writes_its_own_identity_files_freely(call_tool, alice, alice_agent, alice_token):
    for name in ("IDENTITY.md", "SOUL.md", "USER.md"):
        response = call_tool(
            alice_token, "memory_write", {"path": f"agents/assistant/{name}", "content": "mine"}
        )
        assert response.status_code == 200
        assert body_of(alice, name, agent=alice_agent) == "mine"
    assert not DocumentProposal.objects.exists()


def test_an_identity_file_elsewhere_in_the_users_documents_is_an_ordinary_file(
    call_tool, alice, alice_token
):
    response = call_tool(alice_token, "memory_write", {"path": "notes/SOUL.md", "content": "x"})

    assert response.status_code == 200
    assert not DocumentProposal.objects.exists()


def test_an_agent_never_writes_the_consolidated_profile(call_tool, alice, alice_token):
    write(alice, PROFILE_PATH, "# The user's profile")
    before = versions(alice)

    refused = [
        call_tool(alice_token, "memory_write", {"path": PROFILE_PATH, "content": "## Forged"}),
        call_tool(alice_token, "memory_append", {"path": PROFILE_PATH, "content": "## Forged"}),
        call_tool(alice_token, "memory_delete", {"path": PROFILE_PATH}),
    ]

    for response in refused:
        assert response.status_code == 403
        assert error(response) == {
            "code": "profile_read_only",
            "message": ProfileReadOnly().message,
            "field": "path",
        }
    assert body_of(alice, PROFILE_PATH) == "# The user's profile"
    assert versions(alice) == before
    assert not DocumentProposal.objects.exists()
    # The user and Mnemo's own consolidation (the system) still write it.
    document_write(user=alice, path=PROFILE_PATH, content="# Rewritten", actor=Actor.system())
    assert body_of(alice, PROFILE_PATH) == "# Rewritten"


def test_the_service_refuses_agents_whatever_calls_it(alice, alice_agent):
    agent = Actor.for_agent(alice_agent)
    with pytest.raises(ProfileReadOnly):
        document_append(user=alice, path=PROFILE_PATH, content="x", actor=agent)
    with pytest.raises(DocumentReviewRequired) as waiting:
        document_write(user=alice, path="SOUL.md", content="x", actor=agent)
    assert waiting.value.proposal.pk == DocumentProposal.objects.get().pk
    assert not Document.objects.exists()


def test_identity_files_in_a_shared_scope_stay_forbidden(call_tool, alice, alice_token):
    from context.models import GrantAccess
    from context.shared_scopes import scope_grant_set, shared_scope_create

    team = shared_scope_create(slug="team")
    scope_grant_set(scope=team, user=alice, access=GrantAccess.READ_WRITE)

    response = call_tool(
        alice_token, "memory_write", {"path": "SOUL.md", "content": "x", "scope": "shared:team"}
    )

    assert (response.status_code, error(response)["code"]) == (403, "forbidden")
    assert not Document.objects.exists()
    assert not DocumentProposal.objects.exists()


# --- the user decides ------------------------------------------------------------------------


def propose(alice_agent, path, content=None, *, action="write"):
    mine = {"user": alice_agent.user, "path": path, "actor": Actor.for_agent(alice_agent)}
    change = {
        "write": lambda: document_write(**mine, content=content),
        "append": lambda: document_append(**mine, content=content),
        "delete": lambda: document_delete(**mine),
    }[action]
    with pytest.raises(DocumentReviewRequired) as waiting:
        change()
    return waiting.value.proposal


def test_accepting_writes_as_the_user_and_links_the_version(alice, alice_agent):
    write(alice, "SOUL.md", "old")
    proposal = propose(alice_agent, "SOUL.md", "new")

    decided = document_proposal_accept(
        user=alice, proposal_id=proposal.pk, actor=Actor.for_user(alice)
    )

    assert body_of(alice, "SOUL.md") == "new"
    version = decided.version
    assert (version.actor_type, version.actor_user, version.action) == ("user", alice, "write")
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by, proposal.applied) == ("accepted", alice, version)
    assert version.proposal == proposal
    accepted = ActivityEvent.objects.get(event_type=EventType.PROPOSAL_ACCEPTED)
    assert accepted.actor_user == alice
    assert accepted.payload == {
        "document_proposal_id": proposal.pk,
        "path": "SOUL.md",
        "proposed_by": "agent assistant",
        "version_id": version.pk,
    }
    written = ActivityEvent.objects.filter(event_type=EventType.DOCUMENT_WRITTEN).latest("id")
    assert (written.actor_user, written.payload["version_id"]) == (alice, version.pk)


def test_accepting_an_append_and_a_delete(alice, alice_agent):
    write(alice, "TOOLS.md", "- grep")
    appended = propose(alice_agent, "TOOLS.md", "- jq", action="append")
    document_proposal_accept(user=alice, proposal_id=appended.pk, actor=Actor.for_user(alice))
    assert body_of(alice, "TOOLS.md") == "- grep\n- jq"

    deleted = propose(alice_agent, "TOOLS.md", action="delete")
    decided = document_proposal_accept(
        user=alice, proposal_id=deleted.pk, actor=Actor.for_user(alice)
    )
    assert body_of(alice, "TOOLS.md") is None
    assert decided.version.action == "delete"


def test_accepting_never_overwrites_a_change_made_since(alice, alice_agent):
    write(alice, "SOUL.md", "old")
    proposal = propose(alice_agent, "SOUL.md", "the agent's")
    write(alice, "SOUL.md", "the user's, since")

    with pytest.raises(Conflict) as refused:
        document_proposal_accept(user=alice, proposal_id=proposal.pk, actor=Actor.for_user(alice))

    assert "SOUL.md changed since agent assistant proposed this" in refused.value.message
    assert body_of(alice, "SOUL.md") == "the user's, since"
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING
    assert not ActivityEvent.objects.filter(event_type=EventType.PROPOSAL_ACCEPTED).exists()


def test_a_new_file_proposed_is_not_accepted_over_one_made_since(alice, alice_agent):
    proposal = propose(alice_agent, "USER.md", "the agent's")
    write(alice, "USER.md", "the user's")

    with pytest.raises(Conflict):
        document_proposal_accept(user=alice, proposal_id=proposal.pk, actor=Actor.for_user(alice))
    assert body_of(alice, "USER.md") == "the user's"


def test_rejecting_changes_only_the_proposal(alice, alice_agent):
    write(alice, "SOUL.md", "old")
    proposal = propose(alice_agent, "SOUL.md", "new")
    before = versions(alice)

    document_proposal_reject(user=alice, proposal_id=proposal.pk, actor=Actor.for_user(alice))

    assert body_of(alice, "SOUL.md") == "old"
    assert versions(alice) == before
    proposal.refresh_from_db()
    assert (proposal.status, proposal.applied) == ("rejected", None)
    rejected = ActivityEvent.objects.get(event_type=EventType.PROPOSAL_REJECTED)
    assert rejected.payload["document_proposal_id"] == proposal.pk
    with pytest.raises(Conflict, match="rejected already"):
        document_proposal_accept(user=alice, proposal_id=proposal.pk, actor=Actor.for_user(alice))


def test_only_the_user_decides_and_only_their_own(alice, alice_agent, bob):
    proposal = propose(alice_agent, "SOUL.md", "new")

    with pytest.raises(Forbidden):
        document_proposal_accept(
            user=alice, proposal_id=proposal.pk, actor=Actor.for_agent(alice_agent)
        )
    with pytest.raises(NotFound):
        document_proposal_accept(user=bob, proposal_id=proposal.pk, actor=Actor.for_user(bob))
    with pytest.raises(NotFound):
        document_proposal_reject(user=bob, proposal_id=proposal.pk, actor=Actor.for_user(bob))
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING
    assert not Document.objects.exists()


def test_beat_expires_proposals_nobody_decided(alice, alice_agent, settings):
    settings.MNEMO_PROPOSAL_TTL_DAYS = 3
    proposal = propose(alice_agent, "SOUL.md", "new")
    lifetime = proposal.expires_at - proposal.created_at
    assert abs(lifetime - datetime.timedelta(days=3)) < datetime.timedelta(seconds=10)

    assert document_proposals_expire(now=timezone.now()) == 0
    assert document_proposals_expire(now=proposal.expires_at) == 1

    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.EXPIRED
    expired = ActivityEvent.objects.get(event_type=EventType.PROPOSAL_EXPIRED)
    assert (expired.actor_type, expired.user) == ("system", alice)
    assert expired.payload["document_proposal_id"] == proposal.pk
    with pytest.raises(Conflict):
        document_proposal_accept(user=alice, proposal_id=proposal.pk, actor=Actor.for_user(alice))
    assert not Document.objects.exists()
