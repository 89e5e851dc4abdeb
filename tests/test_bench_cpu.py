"""The CPU accounting of bench/api.py (bench/common.py `CpuMeter`, bench/api_cost.py): a
known process's CPU is what /proc says, and the per-request division is right. No timing
is asserted: the child process burns a fixed amount of its own CPU time."""

import math
import os
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from bench.api_cost import CpuCost, print_cost_table
from bench.common import CpuMeter, cpu_ms_per_request, cpu_seconds, process_tree

# Burns 0.05 s of its own CPU for every line it reads, then says "done".
BURNER = """
import sys, time
print("ready", flush=True)
for _ in sys.stdin:
    until = time.process_time() + 0.05
    while time.process_time() < until:
        pass
    print("done", flush=True)
"""


@pytest.fixture
def burner() -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline() == "ready\n"
    yield child
    child.kill()
    child.wait()


def burn(child: subprocess.Popen[str]) -> None:
    child.stdin.write("burn\n")
    child.stdin.flush()
    assert child.stdout.readline() == "done\n"


def proc_stat_cpu_seconds(pid: int) -> float:
    """utime + stime of /proc/<pid>/stat, read by hand."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of proc(5)); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_cpu_seconds_of_a_known_process_is_what_proc_says(burner):
    burn(burner)  # the child now waits on stdin: its CPU time stands still
    [process] = process_tree(burner.pid)
    seconds = cpu_seconds([process])
    assert seconds[burner.pid] == pytest.approx(proc_stat_cpu_seconds(burner.pid), abs=0.011)
    assert seconds[burner.pid] >= 0.05


def test_meter_counts_the_block_and_divides_by_requests(burner):
    before = proc_stat_cpu_seconds(burner.pid)
    with CpuMeter({"child": lambda: [psutil.Process(burner.pid)]}) as meter:
        burn(burner)
        burn(burner)
    used = proc_stat_cpu_seconds(burner.pid) - before
    assert meter.seconds["child"] == pytest.approx(used, abs=0.021)
    assert meter.seconds["child"] >= 0.09  # two burns of 0.05 s, less a clock tick
    per_request = meter.ms_per_request(4)
    assert per_request["child"] == pytest.approx(meter.seconds["child"] * 1000 / 4)
    assert set(per_request) == {"child", "others", "steal"}


def test_cpu_ms_per_request():
    assert cpu_ms_per_request(1.5, 300) == pytest.approx(5.0)
    assert cpu_ms_per_request(0.0, 10) == 0.0
    assert math.isnan(cpu_ms_per_request(1.0, 0))


def test_cost_sums_the_server_groups_that_ran(capsys):
    cost = CpuCost(
        "create_memory C=8 asgi:2x4",
        1000,
        {"client": 0.4, "web": 9.5, "postgres": 5.0, "cache": 0.25, "others": 0.1, "steal": 0},
    )
    assert cost.server_ms == pytest.approx(14.75)  # no worker ran; client and others apart
    assert cost.cell("worker") == "—"
    assert cost.line.startswith(
        "cpu/request (ms): web 9.50, postgres 5.00, worker —, cache 0.25; server 14.75"
    )
    print_cost_table([cost])
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[-8:] == ["1000", "9.50", "5.00", "—", "0.25", "14.75", "0.40", "0.10"]


def test_profile_names_the_costs_by_file_and_function(capsys):
    from bench.api_profile import ROOT, Call, is_project_code, profile_call, short_path

    def spin() -> int:
        return sum(i * i for i in range(20_000)) and 200

    profile_call(Call("spin", spin), repeat=3, warmup=1, clock="cpu")
    out = capsys.readouterr().out
    assert "spin: 1 warm-up + 3 timed + 3 profiled (200 ×7)" in out
    assert "tests/test_bench_cpu.py:" in out
    assert "(<genexpr>)" in out
    assert is_project_code(str(ROOT / "memory" / "services.py"))
    assert not is_project_code(str(ROOT / "bench" / "api.py"))
    assert short_path("/x/lib/python3.12/site-packages/django/db/utils.py") == "django/db/utils.py"
