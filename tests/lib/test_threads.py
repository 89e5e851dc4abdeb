"""lib/threads.py: a pool per process that a task on it may call into."""

import os
import threading
import time

import pytest

from lib.threads import ProcessPool


def test_a_task_on_a_one_thread_pool_may_run_more_on_it_without_waiting_on_itself():
    pool = ProcessPool(1, "solo")

    def outer():
        return pool.run(lambda: threading.current_thread().name)

    # Submitting the inner call would wait forever on the pool's only (busy) thread.
    name = pool.submit(outer).result(timeout=10)

    assert name.startswith("solo")
    assert pool.run(lambda: 6 * 7) == 42  # from outside, as before


# The warning is the point: gunicorn forks a process whose pools have threads.
@pytest.mark.filterwarnings("ignore:This process.*is multi-threaded:DeprecationWarning")
def test_a_forked_child_gets_threads_of_its_own():
    pool = ProcessPool(1, "forked")
    assert pool.run(os.getpid) == os.getpid()  # the parent's thread exists

    child = os.fork()
    if child == 0:  # the child: the parent's thread was not copied
        try:
            code = 0 if pool.submit(os.getpid).result(timeout=10) == os.getpid() else 1
        except BaseException:
            code = 2
        os._exit(code)

    deadline = time.monotonic() + 30
    while (done := os.waitpid(child, os.WNOHANG))[0] == 0:
        assert time.monotonic() < deadline, "the child waited on its parent's thread"
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(done[1]) == 0
