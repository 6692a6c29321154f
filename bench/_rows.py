"""Benchmark result rows: one JSON line per measured operation or interval.

Every row has the same fields (so the PySpark aggregation reads one schema):

- `run_id`      one id per `python -m bench run` invocation
- `workload`    the workload's registered name, e.g. "transport-raw"
- `case`        which measurement within the workload, e.g. "stream-100B-x64"
- `op`          what one row measures, e.g. "stream_interval", "round_trip"
- `params`      the case's parameters (a flat dict)
- `git_sha`     the commit measured ("unknown" outside a git checkout)
- `seed`        the run's seed
- `start_time`  wall-clock start of the operation / interval, seconds since the epoch
- `latency_ns`  its duration in nanoseconds
- `bytes`       bytes moved by it
- `count`       operations it covers (1 for a single operation, N frames for an interval)
- `outcome`     "ok", or the error's name

An `op` ending in "_interval" (or "rate", as e2e-latency's "max-rate") marks a row that
measures a rate over an interval: its latency is the interval's length, not an operation's,
so the report shows its rate and the spread over the intervals instead of percentiles.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import attrs

__all__ = ["ROW_FIELDS", "RowWriter", "git_sha", "new_run_id", "open_rows", "read_rows"]

ROW_FIELDS = (
    "run_id",
    "workload",
    "case",
    "op",
    "params",
    "git_sha",
    "seed",
    "start_time",
    "latency_ns",
    "bytes",
    "count",
    "outcome",
)


def git_sha(cwd: str | Path | None = None) -> str:
    """The checked-out commit, with "-dirty" when the tree has changes; "unknown" when
    there is no git or no commit."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@attrs.define
class RowWriter:
    """Writes rows for one workload of one run. `clock` gives the wall-clock stamps."""

    stream: TextIO
    workload: str
    git_sha: str
    seed: int
    run_id: str
    clock: Callable[[], float] = time.time
    rows_written: int = 0

    def write(
        self,
        *,
        case: str,
        op: str,
        params: dict[str, object],
        start_time: float,
        latency_ns: int,
        nbytes: int = 0,
        count: int = 1,
        outcome: str = "ok",
    ) -> dict[str, object]:
        row = {
            "run_id": self.run_id,
            "workload": self.workload,
            "case": case,
            "op": op,
            "params": params,
            "git_sha": self.git_sha,
            "seed": self.seed,
            "start_time": start_time,
            "latency_ns": int(latency_ns),
            "bytes": int(nbytes),
            "count": int(count),
            "outcome": outcome,
        }
        self.stream.write(json.dumps(row, separators=(",", ":")) + "\n")
        self.rows_written += 1
        return row


@contextmanager
def open_rows(
    path: str | Path,
    *,
    workload: str,
    seed: int,
    run_id: str,
    sha: str | None = None,
    clock: Callable[[], float] = time.time,
    append: bool = False,
) -> Iterator[RowWriter]:
    """A RowWriter on `path` (its folder is created), which it replaces unless `append`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as stream:
        yield RowWriter(
            stream,
            workload=workload,
            git_sha=git_sha() if sha is None else sha,
            seed=seed,
            run_id=run_id,
            clock=clock,
        )


def read_rows(path: str | Path) -> list[dict[str, object]]:
    with Path(path).open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]
