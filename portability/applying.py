"""Applying a checked Mnemo export (portability/validation/archive.py `CheckedArchive`) to
one account: replace's deletions, the settings and agents, memories, documents and work.
The job (portability/importing.py) checks the archive first and calls these in turn;
portability/replaying.py keeps the earlier history of what they created.

Every change goes through the layers' write paths, as the user: memories through
memory/services.py, documents through context/services.py, work through work/services.py,
settings and agents through profiles/services.py, so history, versions and activity are
recorded as for any other change. Each item (a memory line, a document, a work file, the
settings, an agent) is applied in its own transaction: an item a write path still refuses
leaves nothing behind, and the items before it stay applied.

Merge (the default) keeps what is there: for a memory key the newer `updated_at` wins; a
document is written when its body differs and its newest version in the archive is newer
than the account's document; a work item matching one by title and creation time (or by
title and body) is updated when the archive's is newer, else created; items the check
refused are skipped. Replace deletes the account's memories, documents and work items
through the same services, then imports into the empty account; it starts only when the
check refused nothing and the archive holds at least one memory, document or work item,
so a refused or empty archive changes nothing.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from activity.actors import Actor
from context.models import Document
from context.services import MAX_BODY_BYTES, document_delete, document_write
from lib.errors import NotFound, ServiceError
from lib.when import when_text
from memory.models import Memory
from memory.services import memory_delete, memory_upsert
from memory.snapshots import same_state
from portability import format as fmt
from portability.models import ImportMode
from portability.validation.archive import CheckedArchive
from portability.validation.files import (
    MAX_WORK_FILE_BYTES,
    DocumentEntry,
    document_body,
    read_work_file,
)
from portability.validation.lines import audience_agent, checked_lines, line_checks
from portability.validation.reading import ArchiveRefused, parse_time, read_member
from profiles.models import Agent, Profile
from profiles.services import (
    agent_get_or_create,
    agent_set_details,
    agent_set_learning,
    profile_set_heartbeat,
    profile_update,
)
from work.models import WorkItem
from work.services import work_create, work_update

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from portability.report import Report


# An archive line without a time is older than anything in the account.
NEVER_NEWER = datetime.max.replace(tzinfo=UTC)


# --- replace ---------------------------------------------------------------------------


def may_replace(checked: CheckedArchive, report: Report) -> None:
    """Replace deletes first, so it starts only on an archive the check accepted whole and
    that brings something in its place; otherwise nothing is changed."""
    refused = report.counts["refused"]
    if refused:
        raise ArchiveRefused(
            f"Replace did not start, and nothing was changed: the check refused {refused:,} "
            f"item{'s' if refused > 1 else ''} of the archive (listed below). Replace deletes "
            "your memories, documents and work items first, so it runs only on an archive "
            "with nothing refused; Merge would import the rest."
        )
    if not checked.items:
        raise ArchiveRefused(
            "Replace did not start, and nothing was changed: the archive holds no memory, "
            "document or work item to import in place of yours."
        )


def replace_count(user: AbstractBaseUser) -> int:
    return (
        Memory.objects.filter(user=user).count()
        + Document.objects.filter(user=user).count()
        + WorkItem.objects.live().filter(user=user).count()
    )


def delete_everything(user: AbstractBaseUser, actor: Actor, report: Report) -> None:
    """Replace mode's first step: the account's memories, documents and work items go,
    each through its service (history, versions and events are written as for any delete;
    deleted memories and documents stay restorable from their history, work items from
    Recently deleted work)."""
    from work.services import work_delete

    memories = Memory.objects.filter(user=user).select_related("owner_agent").order_by("key", "pk")
    for memory in memories.only("key", "owner_agent").iterator():
        with contextlib.suppress(NotFound):
            memory_delete(
                user=user,
                key=memory.key,
                actor=actor,
                reason="Replaced by an import",
                owner_agent=memory.owner_agent,
            )
        report.step()
    documents = Document.objects.filter(user=user).select_related("agent").order_by("pk")
    for document in documents.iterator():
        with contextlib.suppress(NotFound):
            document_delete(user=user, agent=document.agent, path=document.path, actor=actor)
        report.step()
    work = WorkItem.objects.live().filter(user=user).order_by("pk").values_list("pk", flat=True)
    for pk in work:
        with contextlib.suppress(NotFound):
            work_delete(user=user, pk=pk, actor=actor)
        report.step()


def _refuse(report: Report, section: str, item: str, reason: str) -> None:
    report.add(section, item, "refused", reason)


# --- settings and agents ---------------------------------------------------------------


def import_profile(
    user: AbstractBaseUser, checked: CheckedArchive, mode: str, report: Report
) -> None:
    if checked.profile is not None:
        _import_settings(user, checked.profile, report)
    else:
        report.step()
    for agent in checked.agents:
        _import_agent(user, agent, mode, report)


def _import_settings(user: AbstractBaseUser, data: dict[str, Any], report: Report) -> None:
    values = {name: data[name] for name in fmt.PROFILE_FIELDS if name in data}
    profile = Profile.objects.filter(user=user).first()
    before = {name: getattr(profile, name) for name in values} if profile else {}
    if before and before == values:
        report.add("settings", "settings", "skipped", "The same settings are set already.")
        return
    heartbeat = {"heartbeat_enabled", "notify_webhook_url"}
    try:
        with transaction.atomic():  # both calls or neither
            profile_update(user=user, **{k: v for k, v in values.items() if k not in heartbeat})
            if heartbeat & values.keys():
                current = profile or Profile(user=user)
                profile_set_heartbeat(
                    user=user,
                    enabled=values.get("heartbeat_enabled", current.heartbeat_enabled),
                    webhook_url=values.get("notify_webhook_url", current.notify_webhook_url),
                )
    except ServiceError as error:
        _refuse(report, "settings", error.field or "settings", error.message)
        return
    changed = sorted(name for name in values if before.get(name) != values[name])
    report.add("settings", "settings", "updated", "Changed: " + ", ".join(changed))


def _import_agent(user: AbstractBaseUser, data: dict[str, Any], mode: str, report: Report) -> None:
    """Create the agent, or bring an existing one's display name, description and learning
    switch to the archive's: always on replace; on merge only the texts it has none of."""
    name = data["name"]
    texts = {
        field: data[field]
        for field in ("display_name", "description")
        if isinstance(data.get(field), str)
    }
    learns = data.get("learns_from_turns")
    existing = Agent.objects.filter(user=user, name=name).first()
    changed = []
    try:
        with transaction.atomic():
            agent = existing or agent_get_or_create(user=user, name=name, **texts)
            if existing:
                taken = {
                    field: value
                    for field, value in texts.items()
                    if value != getattr(agent, field)
                    and (mode == ImportMode.REPLACE or not getattr(agent, field))
                }
                agent_set_details(agent=agent, **taken)
                changed += [field.replace("_", " ") for field in taken]
            takes_switch = existing is None or mode == ImportMode.REPLACE
            if isinstance(learns, bool) and agent.learns_from_turns != learns and takes_switch:
                agent_set_learning(agent=agent, learns_from_turns=learns)
                changed.append("learning from turns")
    except ServiceError as error:
        _refuse(report, "agents", name, error.message)
        return
    if existing is None:
        report.add("agents", name, "created")
    elif changed:
        report.add("agents", name, "updated", "Changed: " + ", ".join(changed))
    else:
        report.add("agents", name, "skipped", "You have this agent already.")


# --- memories -------------------------------------------------------------------------


def import_memories(
    user: AbstractBaseUser, actor: Actor, checked: CheckedArchive, report: Report
) -> set[tuple[str | None, str]]:
    """The memories the import created, as (the agent whose note it is or None, key);
    lines the check refused are skipped. A note goes back under the agent of its name,
    made as the import makes agents (agent_get_or_create) when the account has none."""
    created: set[tuple[str | None, str]] = set()
    info = checked.info(fmt.MEMORIES)
    if info is None:
        return created
    check = line_checks(user)[fmt.MEMORIES]
    agents: dict[str, Agent] = {}
    for _, record, _ in checked_lines(checked.archive, info, check):
        if record is None:
            continue
        name = audience_agent(record)
        owner = account_agent(user, name, agents) if name is not None else None
        if _import_memory(user, actor, record, report, owner):
            created.add((name, record["key"]))
    return created


def _import_memory(
    user: AbstractBaseUser,
    actor: Actor,
    record: dict[str, Any],
    report: Report,
    owner_agent: Agent | None = None,
) -> bool:
    """Whether the memory was created (`owner_agent`: as that agent's own note)."""
    key = record["key"]
    item = key if owner_agent is None else f"{owner_agent.name}'s note {key}"
    wanted = {
        "value": record["value"],
        "source": record.get("source"),
        "confidence": record.get("confidence"),
        "tags": record.get("tags") or [],
        "pinned": record.get("pinned") or False,
    }
    # An archive from before issue 26 has neither: the memory is said when imported.
    when = {
        name: record[name] for name in ("occurred_at", "session") if record.get(name) is not None
    }
    # The newer change wins; a line without a time never replaces what is there.
    changed_at = parse_time(record.get("updated_at")) or NEVER_NEWER
    try:
        write = memory_upsert(
            user=user,
            key=key,
            actor=actor,
            reason="Imported",
            unless_changed_since=changed_at,
            owner_agent=owner_agent,
            **wanted,
            **when,
        )
    except ServiceError as error:
        _refuse(report, "memories", item, error.message)
        return False
    if write.created:
        report.add("memories", item, "created")
    elif write.changed:
        report.add("memories", item, "updated")
    elif same_state(write.memory.snapshot(), {**write.memory.snapshot(), **wanted, **when}):
        report.add("memories", item, "skipped", "The same memory is there already.")
    else:
        when = write.memory.updated_at
        with timezone.override(UTC):  # the page's one format (lib/when.py), in UTC as it says
            reason = f"Yours is newer (changed {when_text(when)} UTC)."
        report.add("memories", item, "skipped", reason)
    return write.created


# --- documents ------------------------------------------------------------------------


def import_documents(
    user: AbstractBaseUser, actor: Actor, checked: CheckedArchive, mode: str, report: Report
) -> dict[tuple[str | None, str], Document]:
    """The documents the import created, by (agent name, path)."""
    created: dict[tuple[str | None, str], Document] = {}
    latest = checked.latest_versions if mode == ImportMode.MERGE else {}
    agents: dict[str, Agent] = {}
    for entry in checked.documents:
        raw = read_member(checked.archive, checked.members[entry.member], MAX_BODY_BYTES)
        body, problem = document_body(raw)
        if problem:  # the check read the same bytes; never here but for a changed file
            _refuse(report, "documents", entry.item, problem)
            continue
        _import_document(user, actor, entry, body, latest, agents, created, report)
    return created


def _import_document(
    user: AbstractBaseUser,
    actor: Actor,
    entry: DocumentEntry,
    body: str,
    latest: dict[tuple[str | None, str], datetime],
    agents: dict[str, Agent],
    created: dict[tuple[str | None, str], Document],
    report: Report,
) -> None:
    item, path = entry.item, entry.path
    try:
        agent = account_agent(user, entry.agent, agents) if entry.agent else None
        with transaction.atomic():
            current = (
                Document.objects.select_for_update()
                .filter(user=user, agent=agent, shared_scope=None, path=path)
                .first()
            )
            if current is not None:
                if current.body == body:
                    report.add("documents", item, "skipped", "The same text is there already.")
                    return
                changed = latest.get((entry.agent, path))
                if changed is None or changed <= current.updated_at:
                    report.add("documents", item, "skipped", "Yours is newer.")
                    return
            written = document_write(user=user, agent=agent, path=path, content=body, actor=actor)
    except ServiceError as error:
        _refuse(report, "documents", item, error.message)
        return
    if current is None:
        created[(entry.agent, written.path)] = written
    report.add("documents", item, "created" if current is None else "updated")


def account_agent(user: AbstractBaseUser, name: str, known: dict[str, Agent]) -> Agent:
    if name not in known:
        known[name] = agent_get_or_create(user=user, name=name)
    return known[name]


# --- work -----------------------------------------------------------------------------


def import_work(
    user: AbstractBaseUser, actor: Actor, checked: CheckedArchive, report: Report
) -> None:
    agents: dict[str, Agent] = {}
    for name in checked.work:
        raw = read_member(checked.archive, checked.members[name], MAX_WORK_FILE_BYTES)
        values, body, problem = read_work_file(raw)
        if problem:  # the check read the same bytes; never here but for a changed file
            _refuse(report, "work", name, problem)
            continue
        _import_work_item(user, actor, values, body, values["title"], agents, report)


def _import_work_item(
    user: AbstractBaseUser,
    actor: Actor,
    values: dict[str, Any],
    body: str,
    title: str,
    agents: dict[str, Agent],
    report: Report,
) -> None:
    created_at = parse_time(values.get("created_at"))
    updated_at = parse_time(values.get("updated_at"))
    tags = values.get("tags") if isinstance(values.get("tags"), list) else []
    kind, status = values.get("kind"), values.get("status")
    agent_name = values.get("agent")
    try:
        with transaction.atomic():
            mine = (
                WorkItem.objects.live().select_for_update().filter(user=user, title=title.strip())
            )
            current = (mine.filter(created_at=created_at).first() if created_at else None) or (
                mine.filter(body=body).first()
            )
            if current is None:
                agent = (
                    account_agent(user, agent_name, agents) if isinstance(agent_name, str) else None
                )
                metadata = (
                    values.get("metadata") if isinstance(values.get("metadata"), dict) else {}
                )
                work_create(
                    user=user,
                    title=title,
                    body=body,
                    actor=actor,
                    kind=kind,
                    status=status,
                    agent=agent,
                    metadata=metadata,
                    tags=tags,
                )
                report.add("work", title, "created")
                return
            same = (current.body, current.status, current.kind, sorted(current.tags)) == (
                body,
                status,
                kind,
                sorted(tags),
            )
            if same or updated_at is None or updated_at <= current.updated_at:
                reason = "The same item is there already." if same else "Yours is newer."
                report.add("work", title, "skipped", reason)
                return
            work_update(
                user=user,
                pk=current.pk,
                actor=actor,
                body=body,
                kind=kind,
                status=status,
                tags=tags,
            )
    except ServiceError as error:
        _refuse(report, "work", title, error.message)
        return
    except TypeError as error:  # a value of the wrong type for the service
        _refuse(report, "work", title, f"A front matter value has the wrong type ({error}).")
        return
    report.add("work", title, "updated")
