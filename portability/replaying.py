"""The archive's histories kept for what the import created (portability/applying.py):
memory_history.jsonl for the memories, through memory/services.py `memory_history_replay`,
and document_versions.jsonl for the documents, through context/services.py
`document_versions_replay` (rows with their own times and actors, no events: nothing
current changes). Lines the check refused are skipped. Activity and proposals are checked
but not replayed: the write paths record the import's own history, versions and events."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from activity.actors import Actor, ActorKind
from context.history import PastVersion, document_versions_replay, past_version_problem
from context.models import Document
from context.paths import normalize_path
from memory.replay import PastChange, memory_history_replay, past_change_problem
from portability import format as fmt
from portability.applying import account_agent
from portability.validation.archive import CheckedArchive
from portability.validation.lines import (
    VersionLines,
    audience_agent,
    checked_lines,
    line_checks,
    past_change,
    past_version,
)
from profiles.models import Agent

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from portability.report import Report


REPLAY_BATCH = 1000


class _PastActors:
    """Actors of an archive's history in this account: the user, the system, or the
    account's agent of that name (an agent it does not have stays a nameless agent)."""

    def __init__(self, user: AbstractBaseUser) -> None:
        self.user = user
        self.agents: dict[str, Agent | None] = {}

    def __call__(self, data: dict[str, Any]) -> Actor:
        """`data` passed portability/validation/rules.py actor_problem."""
        kind = data["type"]
        if kind == ActorKind.USER:
            return Actor.for_user(self.user)
        if kind == ActorKind.SYSTEM:
            return Actor.system()
        name = data.get("agent")
        if not isinstance(name, str):
            return Actor(ActorKind.AGENT)
        if name not in self.agents:
            self.agents[name] = Agent.objects.filter(user=self.user, name=name).first()
        return Actor(ActorKind.AGENT, agent=self.agents[name])


def replay_memory_history(
    user: AbstractBaseUser,
    checked: CheckedArchive,
    created: set[tuple[str | None, str]],
    report: Report,
) -> None:
    """Keep the archive's history of each memory the import created (lines the check
    refused are skipped), in its audience."""
    info = checked.info(fmt.MEMORY_HISTORY)
    if info is None or not created:
        return
    actors = _PastActors(user)
    owners: dict[str, Agent] = {}  # the agents of the notes created, made by then
    batch: list[PastChange] = []
    check = line_checks(user)[fmt.MEMORY_HISTORY]
    for _, record, _ in checked_lines(checked.archive, info, check):
        if record is None:
            continue
        name = audience_agent(record)
        if (name, record["key"]) not in created:
            continue  # history of a memory the import did not create
        owner = account_agent(user, name, owners) if name is not None else None
        change = past_change(record, actors(record["actor"]), owner)
        if past_change_problem(change):  # the replay's own rule; the check passed it
            continue
        batch.append(change)
        if len(batch) >= REPLAY_BATCH:
            _keep_history(user, batch, report)
    _keep_history(user, batch, report)


def _keep_history(user: AbstractBaseUser, batch: list[PastChange], report: Report) -> None:
    with transaction.atomic():
        memory_history_replay(user=user, changes=batch)
    report.count("memory history", "created", len(batch))
    batch.clear()


def replay_document_versions(
    user: AbstractBaseUser,
    checked: CheckedArchive,
    created: dict[tuple[str | None, str], Document],
    report: Report,
) -> None:
    """Keep the archive's earlier versions of each document the import created (lines the
    check refused are skipped)."""
    info = checked.info(fmt.DOCUMENT_VERSIONS)
    if info is None or not created:
        return
    actors = _PastActors(user)
    batch: list[tuple[Document, PastVersion]] = []
    check = VersionLines()
    for _, record, _ in checked_lines(checked.archive, info, check):
        if record is None:
            continue
        document = created.get((record["agent"], normalize_path(record["path"])))
        if document is None:
            continue  # a version of a document the import did not create
        version = past_version(record, actors(record["actor"]))
        if past_version_problem(version):  # the replay's own rule; the check passed it
            continue
        batch.append((document, version))
        if len(batch) >= REPLAY_BATCH:
            _keep_versions(batch, report)
    _keep_versions(batch, report)


def _keep_versions(batch: list[tuple[Document, PastVersion]], report: Report) -> None:
    with transaction.atomic():
        document_versions_replay(versions=batch)
    report.count("document versions", "created", len(batch))
    batch.clear()
