"""The registry of named workloads `python -m bench run NAME` knows.

A workload is an async function `run(rows, options) -> list[summary dict]`: it writes its
measurements through `rows` (a `bench._rows.RowWriter`) and returns a few headline figures
for the console. Register one with `@workload("name", "what it measures")` in a module
imported at the bottom of this file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from bench._rows import RowWriter

__all__ = [
    "CLUSTERS",
    "SUITES",
    "WORKLOADS",
    "Workload",
    "WorkloadOptions",
    "get_workload",
    "workload",
]

SUITES = ("quick", "full")
# The clusters a cluster workload runs on (bench/workloads/_cluster.py): each broker an OS
# process of its own (the default), or all brokers and clients in one process.
CLUSTERS = ("processes", "single")


@attrs.frozen
class WorkloadOptions:
    suite: str = "full"  # "quick": the same cases, measured briefly (smoke runs, CI)
    seed: int = 0
    # How many seeds a seeded campaign runs (from `seed` on); None: the suite's number.
    seeds: int | None = None
    # The clusters the cluster workloads measure, of CLUSTERS; None: the suite's (the
    # full suite both, the quick one "processes").
    clusters: tuple[str, ...] | None = None

    def __attrs_post_init__(self) -> None:
        if self.suite not in SUITES:
            raise ValueError(f"unknown suite {self.suite!r}; expected one of {SUITES}")
        if self.seeds is not None and self.seeds < 1:
            raise ValueError(f"seeds must be at least 1, not {self.seeds}")
        if self.clusters is not None and (
            not self.clusters or not set(self.clusters) <= set(CLUSTERS)
        ):
            raise ValueError(f"clusters must be some of {CLUSTERS}, not {self.clusters!r}")

    @property
    def quick(self) -> bool:
        return self.suite == "quick"


Summary = list[dict[str, object]]
RunWorkload = Callable[[RowWriter, WorkloadOptions], Awaitable[Summary]]


@attrs.frozen
class Workload:
    name: str
    description: str
    run: RunWorkload


WORKLOADS: dict[str, Workload] = {}


def workload(name: str, description: str) -> Callable[[RunWorkload], RunWorkload]:
    def register(run: RunWorkload) -> RunWorkload:
        if name in WORKLOADS:
            raise ValueError(f"workload {name!r} is registered twice")
        WORKLOADS[name] = Workload(name, description, run)
        return run

    return register


def get_workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        known = ", ".join(sorted(WORKLOADS)) or "none"
        raise KeyError(f"unknown workload {name!r} (known: {known})") from None


# Importing a workload module registers it.
from bench.workloads import (  # noqa: E402, F401
    consume,
    e2e_latency,
    failover,
    kafka_produce,
    mixed,
    produce,
    sim_campaign,
    transport_raw,
    zk_ops,
)
