import threading
from itertools import pairwise

import pytest
from django.db import connection

from activity.actors import Actor
from activity.models import ActivityEvent
from memory.models import Memory, MemoryHistory
from memory.services import memory_upsert

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
