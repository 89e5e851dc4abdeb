"""Pages say where an imported memory came from (portability/origins.py): "imported from
ChatGPT" on the Entries tab, "an import from ChatGPT" in its history and on the Activity
page, never "noted by an agent" or "system"."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from activity.actors import Actor
from memory.models import Memory, MemoryHistory
from memory.services import memory_update, memory_upsert
from portability.importing import import_job_create, import_job_run
from portability.origins import changes_imported_from, memories_imported_from

FIXTURES = Path(__file__).parent / "fixtures"


def run(user, kind: str, name: str) -> None:
    upload = SimpleUploadedFile(name, (FIXTURES / name).read_bytes())
    job = import_job_create(user=user, kind=kind, mode="merge", upload=upload)
    import_job_run(job.pk)


@pytest.mark.parametrize(
    ("kind", "fixture", "tool"),
    [
        ("chatgpt", "chatgpt_memories.txt", "ChatGPT"),
        ("claude", "claude_memory.md", "Claude"),
        ("mem0", "mem0_export.json", "mem0"),
    ],
)
def test_each_imported_memory_names_its_tool(alice, kind, fixture, tool):
    run(alice, kind, fixture)
    memories = list(Memory.objects.filter(user=alice))
    assert memories

    found = memories_imported_from(user=alice, memory_ids=[m.pk for m in memories])

    assert found == {m.pk: tool for m in memories}
    created = MemoryHistory.objects.filter(user=alice).values_list("pk", flat=True)
    assert set(changes_imported_from(user=alice, history_ids=created).values()) == {tool}


def test_memories_written_otherwise_name_no_tool(alice, alice_agent):
    # The user's own memory, and an agent's note tagged like an import: neither is one.
    memory_upsert(user=alice, key="fact:a", value="Mine", actor=Actor.for_user(alice))
    memory_upsert(
        user=alice,
        key="fact:b",
        value="Noted",
        actor=Actor.for_agent(alice_agent),
        tags=["imported", "chatgpt"],
    )
    ids = list(Memory.objects.filter(user=alice).values_list("pk", flat=True))
    assert memories_imported_from(user=alice, memory_ids=ids) == {}


def test_the_pages_say_from_chatgpt(client, alice):
    run(alice, "chatgpt", "chatgpt_memories.txt")
    memory = Memory.objects.get(user=alice, key__startswith="preference:")
    client.force_login(alice)

    entries = client.get("/?tab=entries").content.decode()
    assert entries.count("imported from ChatGPT") == 4
    assert "noted by an agent" not in entries

    history = client.get(f"/memories/{memory.pk}/history/").content.decode()
    assert "an import from ChatGPT</span>" in history

    activity = client.get("/activity/").content.decode()
    assert activity.count('<span class="badge">import from ChatGPT</span>') == 4
    assert '<span class="badge">system</span>' not in activity

    # Once the user changes it, it is theirs: what they stated.
    memory_update(user=alice, key=memory.key, value="Prefers Python", actor=Actor.for_user(alice))
    entries = client.get("/?tab=entries").content.decode()
    assert entries.count("imported from ChatGPT") == 3
