"""What MCP adds to a tool call: /mcp tools/call against the same POST /api/v1/tools/<name>.

Starts the web server as bench/api.py does (gunicorn with the ASGI worker, a throwaway
embedded PostgreSQL and a Valkey beside it), seeds one user with one memory, then sends
get_memory both ways from one keep-alive connection each, alternating so that drift in
the machine hits both alike:

* HTTP: `POST /api/v1/tools/get_memory {"key": …}`;
* MCP: `POST /mcp` with the JSON-RPC `tools/call` for the same tool and arguments
  (stateless streamable HTTP, JSON answers, protocol version header 2025-11-25).

Target: the MCP call's p95 is at most 5 ms above the HTTP call's p95.

Before that, the stdio server's start: `manage.py mcp` is started as a desktop client
starts it, and the seconds until it answers `initialize` are timed (target: at most 3 s;
the client waits for nothing else), then until its first tools/call answers (Django loaded,
the token checked: reported, no target). The MCP path does
more by design: its door looks the token up before the SDK runs (a refused token never
reaches MCP), then the tool call is the HTTP request itself, run through Django.
A benchmark reports, it does not gate: exit code 0 whether the target is met or not,
1 if the server failed to start, 2 if calls failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project (Django settings, apps) and bench.*

from bench.api import (  # noqa: E402 - needs the project root on sys.path
    DEFAULT_SERVER,
    Connection,
    Server,
    ServerConfig,
    ServerFailed,
    Valkey,
    new_agent,
    postgres_version,
    setup_django,
)
from bench.common import percentile, prepare_environment, print_machine, verdict  # noqa: E402

TARGET_OVERHEAD_P95_MS = 5.0
TARGET_STDIO_START_S = 3.0
STDIO_RUNS = 3
TOOL = "get_memory"
ARGUMENTS = {"key": "preference:report-format"}
PROTOCOL_VERSION = "2025-11-25"
EXIT_SERVER_FAILED = 1
EXIT_CALLS_FAILED = 2


def seed() -> str:
    """A user with one memory, and its agent's token."""
    from django.db import connections

    setup_django()
    from activity.actors import Actor
    from memory.services import memory_upsert

    user, agent, token = new_agent("bench-mcp")
    memory_upsert(
        user=user,
        key=ARGUMENTS["key"],
        value="Weekly reports as a short bulleted list, links at the end.",
        actor=Actor.for_agent(agent),
    )
    print(f"database   PostgreSQL {postgres_version()} (embedded, throwaway)")
    connections.close_all()  # the server's processes do the work from here on
    return token


def http_call(connection: Connection) -> float:
    body = json.dumps(ARGUMENTS).encode()
    started = time.perf_counter()
    response = connection.request("POST", f"/api/v1/tools/{TOOL}", body)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.body[:300]!r}")
    return elapsed


def mcp_call(connection: Connection, request_id: int) -> float:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": ARGUMENTS},
        }
    ).encode()
    started = time.perf_counter()
    response = connection.request("POST", "/mcp", body)
    elapsed = (time.perf_counter() - started) * 1000
    answer = json.loads(response.body) if response.status == 200 else {}
    if answer.get("result", {}).get("isError") is not False:
        raise RuntimeError(f"MCP {response.status}: {response.body[:300]!r}")
    return elapsed


def measure(port: int, token: str, calls: int, warmup: int) -> tuple[list[float], list[float]]:
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    http = Connection(port, auth)
    mcp = Connection(
        port,
        auth
        | {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        },
    )
    http_ms, mcp_ms = [], []
    try:
        for n in range(warmup + calls):
            if n % 2:  # alternate which goes first
                mcp_elapsed, http_elapsed = mcp_call(mcp, n), http_call(http)
            else:
                http_elapsed, mcp_elapsed = http_call(http), mcp_call(mcp, n)
            if n >= warmup:
                http_ms.append(http_elapsed)
                mcp_ms.append(mcp_elapsed)
    finally:
        http.close()
        mcp.close()
    return http_ms, mcp_ms


def stdio_start(token: str) -> tuple[float, float]:
    """Seconds from starting `manage.py mcp` to its `initialize` answer, and to its first
    tools/call answer."""
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, str(ROOT / "manage.py"), "mcp"],
        cwd=ROOT,
        env={**os.environ, "MNEMO_MCP_TOKEN": token, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None

    def send(message: dict) -> None:
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        process.stdin.flush()

    def answer() -> dict:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("manage.py mcp exited before answering")
        return json.loads(line)

    started = time.perf_counter()
    try:
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            }
        )
        if "result" not in answer():
            raise RuntimeError("initialize failed")
        initialized = time.perf_counter() - started
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": {"name": TOOL, "arguments": ARGUMENTS}})
        if answer().get("result", {}).get("isError") is not False:
            raise RuntimeError("the first tools/call failed")
        first_call = time.perf_counter() - started
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    return initialized, first_call


def report_stdio_start(starts: list[tuple[float, float]]) -> float:
    """Print the stdio starts as soon as they are measured; the slowest `initialize`."""
    initialize_s = max(start[0] for start in starts)
    print(f"\n=== stdio start (manage.py mcp), {len(starts)} runs")
    for initialized, first_call in starts:
        print(f"  initialize answered {initialized:5.2f} s   first tools/call {first_call:5.2f} s")
    met = verdict(initialize_s <= TARGET_STDIO_START_S)
    target = f"target <= {TARGET_STDIO_START_S:g} s"
    print(f"  initialize at worst {initialize_s:.2f} s ({target}): {met}")
    return initialize_s


def row(label: str, values: list[float]) -> str:
    p50, p95, p99 = (percentile(values, pct) for pct in (50, 95, 99))
    return f"  {label:<6} p50 {p50:6.2f} ms   p95 {p95:6.2f} ms   p99 {p99:6.2f} ms"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000, help="measured calls of each kind")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured calls first")
    parser.add_argument(
        "--server", type=ServerConfig.parse, default=ServerConfig.parse(DEFAULT_SERVER)
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    data_dir = prepare_environment("mnemo-bench-mcp-", MNEMO_API_RATE="1000000/s")
    print_machine("Mnemo MCP overhead benchmark", ["gunicorn", "django", "mcp"])
    try:
        with Valkey(data_dir) as valkey:
            token = seed()
            initialize_s = report_stdio_start([stdio_start(token) for _ in range(STDIO_RUNS)])
            with Server(args.server, data_dir, valkey) as server:
                print(f"server     gunicorn {args.server.label}, one client, keep-alive")
                try:
                    http_ms, mcp_ms = measure(server.port, token, args.calls, args.warmup)
                except (RuntimeError, OSError) as error:
                    print(f"CALLS FAILED: {error}\n{server.log_tail()}")
                    return EXIT_CALLS_FAILED
    except ServerFailed as error:
        print(f"SERVER FAILED: {error}")
        return EXIT_SERVER_FAILED
    overhead = percentile(mcp_ms, 95) - percentile(http_ms, 95)
    median = percentile(mcp_ms, 50) - percentile(http_ms, 50)
    print(f"\n=== {TOOL}, {args.calls} calls each (after {args.warmup} unmeasured)")
    print(row("HTTP", http_ms))
    print(row("MCP", mcp_ms))
    print(f"  overhead  p50 {median:+.2f} ms   p95 {overhead:+.2f} ms")
    met = overhead <= TARGET_OVERHEAD_P95_MS
    print(
        f"\n=== summary\n  MCP tools/call p95 overhead {overhead:+.2f} ms "
        f"(target <= {TARGET_OVERHEAD_P95_MS:g} ms): {verdict(met)}"
    )
    print(
        f"  stdio server answers initialize in {initialize_s:.2f} s at worst "
        f"(target <= {TARGET_STDIO_START_S:g} s): {verdict(initialize_s <= TARGET_STDIO_START_S)}"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
