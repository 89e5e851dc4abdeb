"""`make run`'s stack end to end: setup, web + worker + beat on one embedded
PostgreSQL, a real request and a real task, Ctrl-C, and data that survives."""

import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest
from celery import Celery

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(check, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def _processes_using(data_dir: Path) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(data_dir) in " ".join(p.info["cmdline"] or [])
    ]


def _get(opener, url: str) -> tuple[int, str]:
    try:
        with opener.open(url, timeout=5) as response:
            return response.status, response.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture
def stack_env(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "MNEMO_EMBEDDED_THROWAWAY")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        MNEMO_DATA_DIR=str(tmp_path / "data"),
        MNEMO_HOST="127.0.0.1",
        MNEMO_PORT=str(_free_port()),
        WEB_CONCURRENCY="2",
        CELERY_CONCURRENCY="1",
        PATH=f"{BIN}{os.pathsep}{env['PATH']}",
    )
    return env


def _setup(env) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", "embedded_setup", "--url", "http://x/"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


def _login(base: str):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    _, page = _get(opener, base + "/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token, "username": "demo", "password": "mnemo-demo"}
    ).encode()
    request = urllib.request.Request(base + "/login/", data=data, headers={"Referer": base})
    opener.open(request, timeout=5).close()
    return opener


def test_embedded_stack_serves_runs_tasks_stops_and_keeps_data(stack_env, tmp_path):
    data_dir = Path(stack_env["MNEMO_DATA_DIR"])
    base = f"http://127.0.0.1:{stack_env['MNEMO_PORT']}"

    first_setup = _setup(stack_env)
    assert "Demo account 'demo' ready (10 memories added)." in first_setup
    assert "Demo login: demo / mnemo-demo" in first_setup

    log_path = tmp_path / "stack.log"
    with log_path.open("w") as log:
        stack = subprocess.Popen(
            [str(BIN / "honcho"), "start", "-f", "Procfile"],
            cwd=ROOT,
            env=stack_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        opener = urllib.request.build_opener()
        _wait_for(
            lambda: _get(opener, base + "/login/")[0] == 200, timeout=90, what="the web server"
        )
        status, home = _get(_login(base), base + "/")
        assert status == 200
        assert "Head of Growth" in home
        assert "Runs the growth review every Monday" in home

        # The worker consumes from the filesystem broker in the data dir.
        broker = Celery(broker="filesystem://")
        queue = str(data_dir / "broker" / "queue")
        broker.conf.broker_transport_options = {
            "data_folder_in": queue,
            "data_folder_out": queue,
            "control_folder": str(data_dir / "broker" / "control"),
        }
        task_id = broker.send_task("celery.backend_cleanup").id
        _wait_for(
            lambda: f"celery.backend_cleanup[{task_id}] succeeded" in log_path.read_text(),
            timeout=60,
            what="the worker to run the task",
        )

        # Every process attached to one server: gunicorn workers, the Celery worker, beat.
        handles = json.loads((data_dir / "postgres" / ".handle_pids.json").read_text())
        assert len([pid for pid in handles if psutil.pid_exists(pid)]) >= 4
    finally:
        os.killpg(stack.pid, signal.SIGINT)
        stack.wait(timeout=60)

    # Ctrl-C stopped everything, and the last process out stopped PostgreSQL.
    _wait_for(
        lambda: not (data_dir / "postgres" / "postmaster.pid").exists(),
        timeout=30,
        what="PostgreSQL to stop",
    )
    _wait_for(lambda: not _processes_using(data_dir), timeout=10, what="no process left")

    assert not (ROOT / "control").exists()  # broker files stay in the data dir
    second_setup = _setup(stack_env)
    assert "Demo account 'demo' ready (0 memories added)." in second_setup


def test_a_killed_last_process_still_leaves_no_server_behind(stack_env):
    """SIGKILL runs no atexit handler, so the reaper started with the server stops it."""
    data_dir = Path(stack_env["MNEMO_DATA_DIR"])
    holder = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-v",
            "0",
            "-c",
            "print('attached', flush=True); input()",
        ],
        cwd=ROOT,
        env=stack_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "attached\n"
        postmaster_pid = data_dir / "postgres" / "postmaster.pid"
        assert postmaster_pid.exists()
        handles = json.loads((data_dir / "postgres" / ".handle_pids.json").read_text())
        assert handles == [holder.pid]
    finally:
        holder.kill()
        holder.wait(timeout=10)

    _wait_for(lambda: not postmaster_pid.exists(), timeout=30, what="PostgreSQL to stop")
    _wait_for(lambda: not _processes_using(data_dir), timeout=10, what="no process left")
    # The next start finds a cleanly stopped server and comes up as usual.
    assert "Demo account 'demo' ready" in _setup(stack_env)
