"""`make run`'s stack end to end (lib/stack.py): supervisord with PostgreSQL, Valkey, web,
worker and beat on a throwaway data dir; real requests, real tasks, processes killed with
SIGKILL and brought back, Ctrl-C, and data that survives a restart.

One stack serves the whole module (starting it takes ~20 s); the tests run in file
order, the gentle ones first and the ones that kill processes after them.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from lib.stack import Layout, connect, program_info, read_stack, stack_environment

ROOT = Path(__file__).resolve().parent.parent
API_RATE_PER_MINUTE = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def processes_using(data_dir: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if str(data_dir) in " ".join(process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            continue
    return found


class Stack:
    """`python -m lib.stack` in its own session, as `make run` starts it."""

    def __init__(self, data_dir: Path, log_path: Path) -> None:
        self.data_dir = data_dir
        self.layout = Layout(data_dir)
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = stack_environment(
            data_dir,
            self.port,
            WEB_CONCURRENCY="2",
            MNEMO_EMBEDDING_PROVIDER="local",
            MNEMO_API_RATE=f"{API_RATE_PER_MINUTE}/min",
        )
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "lib.stack"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(self.serves, timeout=240, what=f"the web server (log: {self.log_path})")
        wait_for(lambda: self.state("worker") == "RUNNING", timeout=30, what="the worker")

    def serves(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            pytest.fail(f"the stack exited early:\n{self.log()[-3000:]}")
        return http_get(self.base + "/login/")[0] == 200

    def stop(self) -> float:
        """Ctrl-C, as a terminal sends it; the seconds until everything exited."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)
        wait_for(lambda: not processes_using(self.data_dir), timeout=30, what="no process left")
        return time.monotonic() - started

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def info(self, name: str) -> dict:
        return program_info(self.layout, name)

    def state(self, name: str) -> str:
        try:
            return self.info(name)["statename"]
        except OSError:
            return "UNKNOWN"

    def pid(self, name: str) -> int:
        return self.info(name)["pid"]

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        with connect(self.data_dir) as conn:
            return conn.execute(query, params).fetchall()

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return result.stdout


def http_get(url: str, opener=None) -> tuple[int, str]:
    try:
        with (opener or urllib.request.build_opener()).open(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError:
        return 0, ""


def call_tool(base: str, token: str, name: str, body: dict):
    """(status, headers (case-insensitive), JSON body) of one tool call."""
    request = urllib.request.Request(
        f"{base}/api/v1/tools/{name}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, json.loads(response.read())
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = {"raw": raw.decode(errors="replace")[:300]}
        return error.code, error.headers, payload
    except OSError as error:
        return 0, {}, {"raw": repr(error)}


def sign_in(base: str):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    _, page = http_get(base + "/login/", opener)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token, "username": "demo", "password": "mnemo-demo"}
    ).encode()
    request = urllib.request.Request(base + "/login/", data=data, headers={"Referer": base})
    opener.open(request, timeout=5).close()
    return opener


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stack")
    running = Stack(folder / "data", folder / "stack.log")
    running.start()
    yield running
    if running.process is not None and running.process.poll() is None:
        running.process.send_signal(signal.SIGINT)
        try:
            running.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(running.process.pid, signal.SIGKILL)
    for process in processes_using(running.data_dir):
        process.kill()


@pytest.fixture(scope="module")
def token(stack) -> str:
    return stack.manage("create_agent_token", "demo", "stack-test").strip().splitlines()[-1]


def missing_vectors(stack: Stack) -> int:
    return stack.sql("SELECT count(*) FROM user_context WHERE embedding IS NULL")[0][0]


def test_the_banner_comes_once_the_page_answers(stack):
    """lib/stack.py says Mnemo is starting, then prints the address and the demo login only
    after a GET of the sign-in page answered."""
    wait_for(lambda: "Demo login: demo / mnemo-demo" in stack.log(), timeout=30, what="banner")
    log = stack.log()
    starting = log.index(f"Mnemo is starting at {stack.base}/ …")
    ready = log.index(f"Mnemo is ready at {stack.base}/")
    assert starting < log.index("Set up; the web server is loading") < ready
    assert ready < log.index("Demo login: demo / mnemo-demo")
    # The web program was serving before the banner: its start is logged above it.
    assert log.index("Listening at") < ready


def test_the_stack_serves_pages_and_the_api_and_embeds_writes(stack, token):
    status, home = http_get(stack.base + "/", sign_in(stack.base))
    assert status == 200
    assert "Runs the growth review every Monday" in home

    status, _, body = call_tool(
        stack.base, token, "create_memory", {"key": "fact:tea", "value": "green tea"}
    )
    assert status == 201, body
    wait_for(lambda: missing_vectors(stack) == 0, timeout=30, what="the write's vector")
    # One supervised PostgreSQL: no process attached itself through pgserver's pid list.
    assert not (stack.data_dir / "postgres" / ".handle_pids.json").exists()


def test_twenty_slow_clients_do_not_delay_a_normal_request(stack):
    trickles = []
    try:
        for _ in range(20):
            connection = socket.create_connection(("127.0.0.1", stack.port))
            connection.sendall(
                b"POST /api/v1/tools/get_memory HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            trickles.append(connection)
        for _ in range(3):
            started = time.monotonic()
            status, _ = http_get(stack.base + "/login/")
            assert status == 200
            assert time.monotonic() - started < 1.0
    finally:
        for connection in trickles:
            connection.close()


def test_a_chunked_body_is_read_like_any_other(stack, token):
    body = json.dumps({"key": "fact:chunked", "value": "sent in chunks"}).encode()
    head = (
        "POST /api/v1/tools/create_memory HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:]))
    with socket.create_connection(("127.0.0.1", stack.port), timeout=10) as connection:
        connection.sendall(head + chunks + b"0\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201"), answer[:300]
    assert stack.sql("SELECT value FROM user_context WHERE key = 'fact:chunked'") == [
        ("sent in chunks",)
    ]


def raw_request(port: int, head: str, body: bytes, *, hang_up_after: int | None = None) -> bytes:
    """Send one request over a raw socket: whole (then read the answer), or only its first
    `hang_up_after` body bytes, then a pause, as a client that stalls, then hang up."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        if hang_up_after is None:
            connection.sendall(head.encode() + body)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
            return answer
        connection.sendall(head.encode() + body[:hang_up_after])
        # The client stalls for a moment (the server reads what came meanwhile), then is
        # gone. Not a wait for the server: what the test checks holds however long it is.
        time.sleep(0.5)
    return b""


def wait_for_access_line(stack: Stack, marker: str) -> str:
    """The access log line of the request whose query string is `marker`: written once
    the server is done with it (whatever it did)."""
    return wait_for(
        lambda: next((line for line in stack.log().splitlines() if marker in line), None),
        timeout=30,
        what=f"the access log line of {marker}",
    )


def session_cookies(base: str) -> dict[str, str]:
    """The cookies of a signed-in browser (the session and the CSRF cookie), by name."""
    handlers = sign_in(base).handlers
    jar = next(h.cookiejar for h in handlers if isinstance(h, urllib.request.HTTPCookieProcessor))
    return {cookie.name: cookie.value for cookie in jar}


def body_requests(stack: Stack, token: str, marker: str, values: dict[str, str]) -> dict:
    """(head, body) of one write each way: the agent API, the Context page's form, an MCP
    tool call, writing values[kind]. Each body is padded after what matters, so a prefix
    that stops before the padding still parses as the whole write."""
    cookies = session_cookies(stack.base)
    cookie = "; ".join(f"{name}={value}" for name, value in cookies.items())
    api = json.dumps({"key": f"fact:api-{marker}", "value": values["api"]}).encode()
    form = urllib.parse.urlencode({"entry-kind": "fact", "entry-value": values["page"]})
    mcp = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "create_memory",
                "arguments": {"key": f"fact:mcp-{marker}", "value": values["mcp"]},
            },
        }
    )
    common = "Host: 127.0.0.1\r\nConnection: close\r\n"
    bodies = {
        "api": api + b" " * 64,
        "page": form.encode() + b"&" + b"x" * 63,  # an empty field, ignored
        "mcp": mcp.encode() + b" " * 64,
    }
    heads = {
        "api": f"POST /api/v1/tools/create_memory?{marker}-api HTTP/1.1\r\n{common}"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n",
        "page": f"POST /entries/add/?{marker}-page HTTP/1.1\r\n{common}Cookie: {cookie}\r\n"
        f"X-CSRFToken: {cookies['csrftoken']}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n",
        "mcp": f"POST /mcp?{marker}-mcp HTTP/1.1\r\n{common}Authorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n",
    }
    return {
        kind: (f"{heads[kind]}Content-Length: {len(bodies[kind])}\r\n\r\n", bodies[kind])
        for kind in heads
    }


def written(stack: Stack) -> tuple[int, int, int]:
    """Rows of memory, of its history and of the activity log."""
    return stack.sql(
        "SELECT (SELECT count(*) FROM user_context), (SELECT count(*) FROM"
        " user_context_history), (SELECT count(*) FROM activity_log)"
    )[0]


def test_a_body_cut_short_is_not_written_by_the_api_a_page_or_mcp(stack, token):
    # Sent whole, each request writes its row: the check below would see a write.
    values = {
        "api": "Drinks green tea every morning",
        "page": "Plays the cello on Sundays",
        "mcp": "Commutes by bicycle in summer",
    }
    for kind, (head, body) in body_requests(stack, token, "whole", values).items():
        answer = raw_request(stack.port, head, body)
        status = answer.split(b" ", 2)[1]
        assert status == {"api": b"201", "page": b"302", "mcp": b"200"}[kind], answer[:500]
    assert dict(
        stack.sql(
            "SELECT value, key FROM user_context WHERE value = ANY(%s)", (list(values.values()),)
        )
    ) == {
        values["api"]: "fact:api-whole",
        values["page"]: "fact:plays-the-cello-on-sundays",
        values["mcp"]: "fact:mcp-whole",
    }

    # Cut short where the padding starts: what arrived parses as a whole write, then the
    # client hangs up. Nothing may be written: no memory, no history, no activity.
    values = {
        "api": "Collects old maps of Lisbon",
        "page": "Bakes sourdough bread on Fridays",
        "mcp": "Runs a chess club at work",
    }
    requests = body_requests(stack, token, "half", values)  # signs in first
    before = written(stack)
    for kind, (head, body) in requests.items():
        raw_request(stack.port, head, body, hang_up_after=len(body) - 64)
        line = wait_for_access_line(stack, f"?half-{kind} ")
        # Nobody was left to answer: not the server's failure (gunicorn's own "500 0").
        assert ' 499 0 "' in line, line
        assert line.rstrip().endswith("client closed"), line
    assert written(stack) == before


def test_a_request_its_client_abandons_is_logged_as_client_closed(stack, token):
    """A client that gives up waiting (a browser tab closed on a slow page) leaves a 499
    "client closed" line in the access log (lib/web_worker.py AccessLog), not "500 0"."""
    body = json.dumps({"key": "fact:abandoned", "value": "Nobody waited for this"}).encode()
    head = (
        "POST /api/v1/tools/create_memory?abandoned HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE relation = 'user_context'::regclass AND NOT granted"
    )
    # The memory table is locked, so Django is still at work when the client hangs up.
    with connect(stack.data_dir) as locker, connect(stack.data_dir) as watcher:
        watcher.autocommit = True
        locker.execute("LOCK TABLE user_context IN ACCESS EXCLUSIVE MODE")
        with socket.create_connection(("127.0.0.1", stack.port), timeout=10) as connection:
            connection.sendall(head + body)
            wait_for(
                lambda: watcher.execute(waiting).fetchone()[0],
                timeout=30,
                what="the request to wait for the locked table",
            )
        line = wait_for_access_line(stack, "?abandoned ")
    assert ' 499 0 "' in line, line
    assert line.rstrip().endswith("client closed"), line


def test_two_cookie_headers_reach_django_as_both_cookies(stack):
    cookies = session_cookies(stack.base)
    session = next(f"{name}={value}" for name, value in cookies.items() if "session" in name)
    head = (
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Cookie: theme=dark\r\nCookie: {session}\r\n\r\n"
    )

    answer = raw_request(stack.port, head, b"")

    # Joined with "," Django would read one cookie, theme="dark,sessionid=...", and send
    # the visitor to sign in.
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b"Runs the growth review every Monday" in answer


def test_an_over_long_url_is_a_414_in_the_error_shape(stack, token):
    request = urllib.request.Request(
        f"{stack.base}/api/v1/working-memory?x={'a' * 100_000}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 414
    assert json.loads(raised.value.read())["error"]["code"] == "url_too_long"


def test_the_rate_limit_holds_across_the_web_processes(stack):
    """Two web processes share one counter (the supervised Valkey), not one each."""
    token = stack.manage("create_agent_token", "demo", "rate-test").strip().splitlines()[-1]
    sent = API_RATE_PER_MINUTE + 100
    statuses: list[int] = []

    def client(count: int) -> None:
        for _ in range(count):
            statuses.append(call_tool(stack.base, token, "list_memories", {})[0])

    threads = [threading.Thread(target=client, args=(sent // 4,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(set(statuses)) == [200, 429]
    assert statuses.count(200) == API_RATE_PER_MINUTE


def test_a_killed_worker_comes_back_and_its_work_is_done(stack, token):
    worker = stack.pid("worker")
    os.kill(worker, signal.SIGKILL)
    topics = ["tea", "trains", "jazz", "sailing", "chess", "ramen", "hiking", "poetry", "maps"]
    # Texts that share no words, so none is merged into another as a near-duplicate.
    values = [f"{topics[n % 9]}{n}" for n in range(20)]
    statuses = [
        call_tool(stack.base, token, "create_memory", {"key": f"fact:w{n}", "value": value})[0]
        for n, value in enumerate(values)
    ]
    assert statuses == [201] * 20  # the web server never noticed
    wait_for(
        lambda: stack.state("worker") == "RUNNING" and stack.pid("worker") != worker,
        timeout=30,
        what="supervisord to restart the worker",
    )
    wait_for(lambda: missing_vectors(stack) == 0, timeout=60, what="every write's vector")


def test_killed_beat_comes_back(stack):
    before = stack.pid("beat")
    os.kill(before, signal.SIGKILL)
    wait_for(
        lambda: stack.state("beat") == "RUNNING" and stack.pid("beat") != before,
        timeout=30,
        what="supervisord to restart beat",
    )


def test_a_killed_web_master_is_replaced_while_its_workers_keep_serving(stack):
    """The killed master's workers serve until a worker of the new master does
    (lib/web_worker.py), then leave: every request meanwhile is answered. (How long a
    client waits at most: bench/restart.py.)"""
    master = stack.pid("web")
    old_workers = psutil.Process(master).children()
    statuses: list[int] = []
    done = threading.Event()

    def client() -> None:
        while not done.is_set():
            status = http_get(stack.base + "/login/")[0]
            if status == 0:  # a connection queued on a socket as it closed: sent again
                status = http_get(stack.base + "/login/")[0]
            statuses.append(status)
            time.sleep(0.05)

    polling = threading.Thread(target=client)
    polling.start()
    try:
        wait_for(lambda: statuses, timeout=10, what="a first answer")
        os.kill(master, signal.SIGKILL)
        wait_for(
            lambda: stack.state("web") == "RUNNING" and stack.pid("web") != master,
            timeout=30,
            what="supervisord to restart web",
        )
        # The new master loads the app, then its worker serves; the old ones leave after.
        psutil.wait_procs(old_workers, timeout=120)
        assert not [worker for worker in old_workers if worker.is_running()]
        serving = stack.layout.run_dir / "web-serving"
        assert int(serving.read_text().split()[0]) == stack.pid("web")
        answered = len(statuses)
        wait_for(lambda: len(statuses) > answered, timeout=10, what="an answer after")
    finally:
        done.set()
        polling.join()
    assert set(statuses) == {200}, statuses


def test_a_killed_postgres_answers_503_then_recovers_with_nothing_lost(stack, token):
    status, _, _ = call_tool(
        stack.base, token, "create_memory", {"key": "fact:before-crash", "value": "kept"}
    )
    assert status == 201
    postgres = stack.pid("postgres")
    os.kill(postgres, signal.SIGKILL)
    # Until the server's death is noticed, its backends may still answer a request.
    wait_for(lambda: stack.pid("postgres") != postgres, timeout=30, what="a new PostgreSQL")

    answers = []

    def back() -> bool:
        status, headers, body = call_tool(stack.base, token, "get_memory", {"key": "fact:tea"})
        answers.append((status, headers, body))
        return status == 200

    wait_for(back, timeout=60, what="the API to answer again after PostgreSQL was killed")
    for status, headers, body in answers[:-1]:
        assert status == 503, (status, body)
        assert body["error"]["code"] == "unavailable"
        assert int(headers.get("Retry-After")) > 0
    assert stack.pid("postgres") != postgres
    assert stack.sql("SELECT value FROM user_context WHERE key = 'fact:before-crash'") == [
        ("kept",)
    ]
    assert not (stack.data_dir / "postgres" / ".handle_pids.json").exists()


def test_ctrl_c_stops_everything_within_ten_seconds_and_the_data_survives(stack, token):
    count = stack.sql("SELECT count(*) FROM user_context")[0][0]
    assert stack.stop() < 10
    assert not (stack.data_dir / "postgres" / "postmaster.pid").exists()
    assert read_stack(stack.data_dir) is None

    stack.start()
    assert stack.sql("SELECT count(*) FROM user_context")[0][0] == count
    status, _, body = call_tool(stack.base, token, "get_memory", {"key": "fact:before-crash"})
    assert (status, body["memory"]["value"]) == (200, "kept")
