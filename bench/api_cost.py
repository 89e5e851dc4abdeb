"""CPU per request by process group for bench/api.py: each measured phase's CPU seconds
(bench/common.py `CpuMeter`) divided by the requests it answered, one line per phase and
one table for the run. Imported as `bench.api_cost` with the project root on sys.path."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.common import CpuMeter

# The server side, summed as "server": gunicorn (master and workers), every PostgreSQL
# process of the bench's server, the Celery worker (only with --worker) and Valkey.
SERVER_GROUPS = ("web", "postgres", "worker", "cache")
ABSENT = "—"  # a group that was not running (the worker without --worker)


@dataclass(frozen=True)
class CpuCost:
    """Milliseconds of CPU per request of one measured phase, by process group."""

    scenario: str
    requests: int
    ms: dict[str, float]  # group -> ms per request; a group not running is left out

    @classmethod
    def of(cls, scenario: str, meter: CpuMeter, requests: int) -> CpuCost:
        return cls(scenario, requests, meter.ms_per_request(requests))

    @property
    def server_ms(self) -> float:
        """The server's CPU per request: the SERVER_GROUPS that ran, summed."""
        return sum(self.ms[group] for group in SERVER_GROUPS if group in self.ms)

    def cell(self, group: str) -> str:
        value = self.ms.get(group)
        return ABSENT if value is None or math.isnan(value) else f"{value:.2f}"

    @property
    def line(self) -> str:
        groups = ", ".join(f"{group} {self.cell(group)}" for group in SERVER_GROUPS)
        return (
            f"cpu/request (ms): {groups}; server {self.server_ms:.2f}"
            f"  (client {self.cell('client')}, others {self.cell('others')};"
            f" over {self.requests} requests)"
        )


def print_cost_table(costs: list[CpuCost]) -> None:
    """The run's phases side by side; `others` is CPU of processes outside the bench."""
    if not costs:
        return
    columns = [*SERVER_GROUPS, "server", "client", "others"]
    width = max(len(cost.scenario) for cost in costs)
    print("\n=== CPU per request (ms), by process")
    print(f"  {'scenario':{width}}  {'requests':>8}" + "".join(f"  {c:>8}" for c in columns))
    for cost in costs:
        cells = [cost.cell(group) for group in SERVER_GROUPS]
        cells += [f"{cost.server_ms:.2f}", cost.cell("client"), cost.cell("others")]
        print(
            f"  {cost.scenario:{width}}  {cost.requests:>8}"
            + "".join(f"  {cell:>8}" for cell in cells)
        )
