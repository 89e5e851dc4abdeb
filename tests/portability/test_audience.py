"""Export and import carry each memory's audience (issue 27, item 1): the user's memory, or
an agent's own note by the agent's name. An import puts a note back under the agent of that
name (made if the account has none); an unknown or malformed audience is a checked refusal;
an older archive without the field imports as the user's memory."""

import json

import pytest

from activity.actors import Actor
from memory.models import HistoryAction, Memory, MemoryHistory
from memory.services import memory_update, memory_upsert
from portability import format as fmt
from profiles.models import Agent
from tests.factories import AgentFactory, UserFactory
from tests.portability.test_import import export_bytes, make_archive, memory_line, run_import

pytestmark = pytest.mark.django_db


def _lines(data: bytes, name: str) -> list[dict]:
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [json.loads(line) for line in archive.read(name).splitlines()]


@pytest.fixture
def account_with_a_note(alice):
    coder = AgentFactory(user=alice, name="coder")
    you, agent = Actor.for_user(alice), Actor.for_agent(coder)
    memory_upsert(user=alice, key="fact:arm", value="The user's own", actor=you)
    memory_upsert(user=alice, key="fact:arm", value="Builds on ARM", actor=agent, owner_agent=coder)
    memory_update(
        user=alice, key="fact:arm", value="Builds on ARM64", actor=agent, owner_agent=coder
    )
    return alice


def test_the_export_names_each_memorys_audience(account_with_a_note):
    data = export_bytes(account_with_a_note)

    memories = _lines(data, fmt.MEMORIES)
    history = _lines(data, fmt.MEMORY_HISTORY)

    assert [(m["key"], m["value"], m["audience"]) for m in memories] == [
        ("fact:arm", "The user's own", "user"),
        ("fact:arm", "Builds on ARM64", {"agent": "coder"}),
    ]
    assert [(h["action"], h["audience"]) for h in history] == [
        ("create", "user"),
        ("create", {"agent": "coder"}),
        ("update", {"agent": "coder"}),
    ]


def test_an_import_puts_a_note_back_under_its_agent_made_if_needed(account_with_a_note):
    newcomer = UserFactory(username="newcomer")

    job = run_import(newcomer, export_bytes(account_with_a_note))

    assert job.refused == 0, job.items
    coder = Agent.objects.get(user=newcomer, name="coder")
    note = Memory.objects.get(user=newcomer, owner_agent=coder)
    mine = Memory.objects.get(user=newcomer, owner_agent=None)
    assert (note.key, note.value) == ("fact:arm", "Builds on ARM64")
    assert (mine.key, mine.value) == ("fact:arm", "The user's own")
    # The note's earlier history came along, as the note's.
    replayed = MemoryHistory.objects.filter(user=newcomer, owner_agent=coder)
    assert [row.action for row in replayed.order_by("created_at", "pk")] == [
        HistoryAction.CREATE,
        HistoryAction.UPDATE,
        HistoryAction.CREATE,  # the import's own change, last
    ]
    assert not MemoryHistory.objects.filter(
        user=newcomer, owner_agent=None, after__value="Builds on ARM"
    ).exists()


def test_an_older_archive_without_audience_is_the_users_memory(alice):
    job = run_import(alice, make_archive({fmt.MEMORIES: memory_line("fact:tea", "Likes tea")}))

    assert job.refused == 0, job.items
    assert Memory.objects.get(user=alice).owner_agent is None


@pytest.mark.parametrize(
    "audience",
    ["agent:coder", "users", 7, {"agent": "Not A Name!"}, {"agent": "coder", "x": 1}, {}, []],
)
def test_a_malformed_audience_is_refused_and_writes_nothing(alice, audience):
    record = json.loads(memory_line("fact:tea", "Likes tea"))
    line = json.dumps({**record, "audience": audience}).encode() + b"\n"
    good = memory_line("fact:coffee", "Likes coffee")

    job = run_import(alice, make_archive({fmt.MEMORIES: line + good}))

    refused = [i for i in job.items if i["outcome"] == "refused"]
    assert [i["item"] for i in refused] == ["memories.jsonl line 1"]
    assert "audience" in refused[0]["reason"]
    assert list(Memory.objects.values_list("key", flat=True)) == ["fact:coffee"]
    assert not Agent.objects.filter(user=alice).exclude(name="assistant").exists()


def test_the_same_key_in_two_audiences_is_two_memories_but_twice_in_one_is_refused(alice):
    record = json.loads(memory_line("fact:tea", "Likes tea"))
    note = {**record, "source": "tp_extracted", "confidence": 0.8, "audience": {"agent": "coder"}}
    lines = b"".join(
        json.dumps(line).encode() + b"\n"
        for line in (record, note, {**note, "value": "Likes tea, again"})
    )

    job = run_import(alice, make_archive({fmt.MEMORIES: lines}))

    assert [i["item"] for i in job.items if i["outcome"] == "refused"] == ["memories.jsonl line 3"]
    rows = Memory.objects.filter(user=alice).order_by("pk")
    assert [(row.owner_agent and row.owner_agent.name, row.value) for row in rows] == [
        (None, "Likes tea"),
        ("coder", "Likes tea"),
    ]


def test_replace_deletes_notes_too(account_with_a_note):
    alice = account_with_a_note
    archive = make_archive({fmt.MEMORIES: memory_line("fact:tea", "Likes tea")})

    job = run_import(alice, archive, mode="replace")

    assert job.refused == 0, job.items
    assert list(Memory.objects.filter(user=alice).values_list("key", "owner_agent")) == [
        ("fact:tea", None)
    ]
