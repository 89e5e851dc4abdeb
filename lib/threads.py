"""Background threads that survive a fork: each process makes its own pool on first use.

gunicorn's master loads the app before forking (`--preload`, lib/web_worker.py); a pool
made in the master would be copied into every worker without its threads, and the first
task submitted there would wait forever. A `ProcessPool` notices the process changed and
starts a new pool in the child.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


class ProcessPool:
    """A ThreadPoolExecutor of at most `workers` threads, one per process."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._lock = threading.Lock()
        self._pid = 0
        self._executor: ThreadPoolExecutor | None = None
        self._local = threading.local()  # .inside: this thread is one of the pool's

    def submit(self, function: Callable[..., Any], *args: Any) -> Future:
        with self._lock:
            if self._executor is None or self._pid != os.getpid():
                self._executor = ThreadPoolExecutor(
                    max_workers=self._workers,
                    thread_name_prefix=self._name,
                    initializer=self._mark_inside,
                )
                self._pid = os.getpid()
            executor = self._executor
        return executor.submit(function, *args)

    def run(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run `function(*args)` on the pool and wait for its result; called from one of
        the pool's own threads, right there (waiting on itself, a one-thread pool would
        wait forever)."""
        if getattr(self._local, "inside", False):
            return function(*args)
        return self.submit(function, *args).result()

    def _mark_inside(self) -> None:
        self._local.inside = True
