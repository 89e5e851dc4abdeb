import threading
import time
from itertools import pairwise

import pytest
from django.db import connection

from activity.actors import Actor
from activity.models import ActivityEvent
from memory import review_gate
from memory.entries import memory_store
from memory.models import Memory, MemoryHistory, MemoryProposal
from memory.outcomes import DuplicateMemory
from memory.services import memory_upsert
from tests.factories import AgentFactory

WRITERS = 50


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_upserts_of_one_key(alice):
    barrier = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            barrier.wait()
            memory_upsert(
                user=alice, key="fact:counter", value=f"value {n}", actor=Actor.for_user(alice)
            )
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert Memory.objects.filter(user=alice).count() == 1
    history = MemoryHistory.objects.filter(user=alice)
    assert history.count() == WRITERS
    assert history.filter(action="create").count() == 1
    assert history.filter(action="update").count() == WRITERS - 1
    assert ActivityEvent.objects.filter(user=alice, event_type="memory_written").count() == WRITERS
    # Last write wins: the row holds the value of the last history entry.
    last = MemoryHistory.objects.filter(user=alice).order_by("-id").first()
    assert Memory.objects.get(user=alice).value == last.after["value"]
    # Every update saw the value the previous writer left: the chain is unbroken.
    chain = list(history.order_by("id").values_list("before", "after"))
    for (_, previous_after), (before, _) in pairwise(chain):
        assert before["value"] == previous_after["value"]


def _write_at_once(writes):
    """Run each write in its own thread and connection, all released together; each
    answers what became of it. Errors other than a duplicate are returned."""
    barrier = threading.Barrier(len(writes))
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def run(write) -> None:
        try:
            barrier.wait()
            outcomes.append(write())
        except DuplicateMemory:
            outcomes.append("duplicate")
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(write,)) for write in writes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes), errors


@pytest.fixture
def slow_check(monkeypatch):
    """The near-duplicate check takes a while: where a second writer would slip in between
    the check and the insert, if nothing kept them apart. Yields when each check ran."""
    real = review_gate.find_near_duplicate
    ran: list[tuple[float, float]] = []

    def slow(**kwargs):
        started = time.monotonic()
        found = real(**kwargs)
        time.sleep(0.3)
        ran.append((started, time.monotonic()))
        return found

    monkeypatch.setattr(review_gate, "find_near_duplicate", slow)
    return ran


@pytest.mark.django_db(transaction=True)
def test_two_agents_adding_the_same_note_at_once_add_it_once(alice, alice_agent, slow_check):
    agents = [Actor.for_agent(alice_agent), Actor.for_agent(AgentFactory(user=alice, name="b"))]

    def add(n: int):
        key = f"fact:tea-{n}"
        return lambda: (
            memory_upsert(user=alice, key=key, value="Likes green tea", actor=agents[n]).status
        )

    outcomes, errors = _write_at_once([add(0), add(1)])

    assert errors == []
    assert outcomes == ["created", "duplicate"]
    [memory] = Memory.objects.filter(user=alice)
    merge = MemoryHistory.objects.get(user=alice, action="merge")
    assert (merge.memory_id, merge.after["merged"]) == (memory.pk, {"value": "Likes green tea"})
    assert not MemoryProposal.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_agents_storing_near_notes_at_once_store_one(alice, alice_agent, slow_check):
    agent = Actor.for_agent(alice_agent)
    texts = ["Likes green tea in the afternoon", "Likes green tea in afternoon"]

    def store(text: str):
        return lambda: memory_store(user=alice, actor=agent, kind="preference", text=text).status

    outcomes, errors = _write_at_once([store(text) for text in texts])

    assert errors == []
    assert outcomes == ["created", "duplicate"]
    assert Memory.objects.filter(user=alice).count() == 1
    assert MemoryHistory.objects.filter(user=alice, action="merge").count() == 1


@pytest.mark.django_db(transaction=True)
def test_notes_of_other_kinds_are_not_kept_waiting(alice, alice_agent, slow_check):
    agent = Actor.for_agent(alice_agent)

    def add(kind: str):
        return lambda: (
            memory_upsert(
                user=alice, key=f"{kind}:tea", value="Likes green tea", actor=agent
            ).status
        )

    outcomes, errors = _write_at_once([add("fact"), add("preference")])

    assert (errors, outcomes) == ([], ["created", "created"])
    (_, first_end), (second_start, _) = sorted(slow_check)
    assert second_start < first_end  # side by side, not one after the other


@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_of_one_key_in_two_audiences_keep_one_row_each(alice, alice_agent):
    """An agent's own note and the user's memory under one key (issue 27): writers of each
    race to insert and then serialize on their own row; neither audience's row takes the
    other's writes."""
    agent = Actor.for_agent(alice_agent)
    you = Actor.for_user(alice)
    per_side = 10

    def note(n):
        return lambda: (
            memory_upsert(
                user=alice, key="fact:race", value=f"note {n}", actor=agent, owner_agent=alice_agent
            ).status
        )

    def mine(n):
        return lambda: (
            memory_upsert(user=alice, key="fact:race", value=f"mine {n}", actor=you).status
        )

    outcomes, errors = _write_at_once(
        [note(n) for n in range(per_side)] + [mine(n) for n in range(per_side)]
    )

    assert errors == []
    assert sorted(outcomes).count("created") == 2
    rows = {row.owner_agent_id: row.value for row in Memory.objects.filter(user=alice)}
    assert set(rows) == {None, alice_agent.pk}
    assert rows[None].startswith("mine ")
    assert rows[alice_agent.pk].startswith("note ")
    history = MemoryHistory.objects.filter(user=alice)
    assert history.filter(owner_agent=alice_agent).count() == per_side
    assert history.filter(owner_agent=None).count() == per_side
