"""gunicorn's ASGI worker, made to hand over to the next master when its own one dies.

Under `make run`, supervisord restarts gunicorn's master when it dies (lib/stack.py).
Its workers outlive it; stock gunicorn has them stop within a second, while the new
master's worker first loads Django and the models (seconds; over ten on a busy machine),
and meanwhile the port refuses or holds every connection: about 5-6 s without an answer
per kill on two cores (bench/restart.py, bench/README.md).

With `reuse_port` on (lib/stack.py turns it on, with `preload_app`), a worker whose master
is gone keeps serving instead, on its own socket, and leaves once a worker of the new
master serves: the new master binds its socket beside the old one (SO_REUSEPORT) only
after it has loaded the app (preload), and the workers it forks are serving moments later.
Each worker says so in `$MNEMO_DATA_DIR/run/web-serving` (its master's pid), which the
orphans read once a second. An orphan also leaves when supervisord has gone (Ctrl-C
while the new master was still loading) and after ORPHAN_SECONDS at most. It leaves as
any worker stops: no new connections, the requests in flight finished.

Without `reuse_port` (compose, the benchmarks) this is gunicorn's own ASGI worker.

AccessLog, gunicorn's access log (config/gunicorn.conf.py `logger_class`), writes a request
whose client went away before the answer as 499 "client closed" (nginx's number for it),
where gunicorn writes "500 0", which reads as a server error.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from gunicorn.glogging import Logger
from gunicorn.workers.gasgi import ASGIWorker

from lib.asgi import disconnect_seen
from lib.stack import Layout, data_dir_from_environment

ORPHAN_SECONDS = 120.0
CLIENT_CLOSED = 499


def serving_file() -> Path:
    return Layout(data_dir_from_environment()).run_dir / "web-serving"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _parent_of(pid: int) -> int | None:
    """The parent of a live process (Linux: /proc/<pid>/stat, after the command's ')')."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


class Worker(ASGIWorker):
    """gunicorn's ASGI worker; an orphan keeps serving until the next master's worker does."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.master_pid = self.ppid
        self.supervisor_pid: int | None = None
        self.orphaned_at: float | None = None
        self.announced = False

    def notify(self) -> None:
        """Called by the serving loop once a second, just before it checks that its master
        is alive (it stops when `self.ppid` is not its parent any more)."""
        super().notify()
        if not self.cfg.reuse_port:
            return
        if not self.announced:  # the loop runs: this worker's sockets are serving
            self.announced = True
            self.supervisor_pid = _parent_of(self.master_pid)
            self._announce()
        if os.getppid() == self.master_pid:
            return
        now = time.monotonic()
        if self.orphaned_at is None:
            self.orphaned_at = now
            self.log.info("Master %s is gone; serving until its successor does", self.master_pid)
        self.ppid = os.getppid()  # the loop's check passes: keep serving
        if self._successor_serving():
            self.log.info("A new master serves; this orphaned worker stops")
        elif self.supervisor_pid is not None and not _alive(self.supervisor_pid):
            self.log.info("The supervisor is gone; this orphaned worker stops")
        elif now - self.orphaned_at > ORPHAN_SECONDS:
            self.log.info("No new master for %.0f s; this orphaned worker stops", ORPHAN_SECONDS)
        else:
            return
        self.alive = False  # the loop ends; in-flight requests finish (graceful_timeout)

    def _announce(self) -> None:
        path = serving_file()
        with contextlib.suppress(OSError):
            partial = path.with_name(f"{path.name}.{os.getpid()}")
            partial.write_text(f"{self.master_pid} {os.getpid()}\n")
            partial.replace(path)

    def _successor_serving(self) -> bool:
        try:
            master = int(serving_file().read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return False
        return master != self.master_pid and _alive(master)


class AccessLog(Logger):
    """gunicorn's logger; an abandoned request's access line is `… 499 0 … client closed`."""

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        # gunicorn drops what the app sends to a closed connection and logs its own default,
        # 500 with 0 bytes sent; the door (lib/asgi.py) saw the disconnect. A 500 the app
        # did send, or an answer that went out (a 400 to a client that stopped sending and
        # still listens), is logged as it is.
        if not (disconnect_seen() and resp.status == 500 and not resp.sent):
            super().access(resp, req, environ, request_time)
            return
        if not self.access_log_enabled:
            return
        resp.status = CLIENT_CLOSED
        atoms = self.atoms_wrapper_class(self.atoms(resp, req, environ, request_time))
        try:
            self.access_log.info(f"{self.cfg.access_log_format} client closed", atoms)
        except Exception:  # as gunicorn's own: a log line must not fail the request
            self.exception("Could not write the access log line")
