"""The mixed workload with tiny parameters on the single-process cluster (the quick suite
end to end runs it on the process cluster): per repeat, the produced and consumed records
per interval over the measured window and one latency row per measured record; the
console line's spread over the repeats; half the measured maximum as the offered rate."""

from __future__ import annotations

import io
import json

import pytest

from bench import ROW_FIELDS, RowWriter
from bench.workloads import WORKLOADS, WorkloadOptions
from bench.workloads.mixed import NAME, MixedParams, params_for, run_mixed

pytestmark = pytest.mark.timeout(120)

TINY = MixedParams(
    rate=None,  # half the maximum, measured first
    duration=0.4,
    warmup=0.2,
    interval=0.1,
    repeats=2,
    max_rate_duration=0.3,
    clusters=("single",),
)


def test_the_suites():
    assert NAME in WORKLOADS
    quick = params_for(WorkloadOptions(suite="quick"))
    full = params_for(WorkloadOptions(suite="full"))
    assert (quick.rate, quick.repeats, quick.clusters) == (1000, 1, ("processes",))
    assert (full.rate, full.repeats, full.clusters) == (2000, 3, ("processes", "single"))


async def test_rows_report_produced_and_consumed_records_and_each_records_latency():
    out = io.StringIO()
    rows = RowWriter(out, workload=NAME, git_sha="abc", seed=1, run_id="r1")
    (line,) = await run_mixed(rows, TINY)
    written = [json.loads(text) for text in out.getvalue().splitlines()]
    assert all(tuple(row) == ROW_FIELDS and row["outcome"] == "ok" for row in written)

    (max_row,) = [row for row in written if row["op"] == "max-rate"]
    assert max_row["count"] > 0 and line["max_rate_per_s"] > 0
    rate = line["offered_per_s"]
    assert rate == max(1, round(line["max_rate_per_s"] / 2))
    measured = int(rate * TINY.duration)  # the records due after the warm-up
    for repeat in (1, 2):
        case = f"single-acks-all-rf3-1024B-{rate}rps-rep{repeat}"
        mine = [row for row in written if row["case"] == case]
        assert {row["params"]["repeat"] for row in mine} == {repeat}
        e2e = [row for row in mine if row["op"] == "e2e"]
        # Every measured record read once: one row each, at its own due time.
        assert len(e2e) == len({row["start_time"] for row in e2e}) == measured
        assert all(row["bytes"] == 1024 and row["latency_ns"] > 0 for row in e2e)
        for op in ("produce_interval", "consume_interval"):
            intervals = [row for row in mine if row["op"] == op]
            # Back to back over the measured window (the measured records' due times).
            assert sum(row["latency_ns"] for row in intervals) == pytest.approx(
                measured / rate * 1e9, abs=len(intervals)
            )
            assert all(row["bytes"] == row["count"] * 1024 >= 0 for row in intervals)
            assert sum(row["count"] for row in intervals) > 0

    assert line["case"] == f"single-acks-all-rf3-1024B-{rate}rps"
    assert line["repeats"] == 2 and line["records"] == measured
    for name in ("produced_MB_per_s", "consumed_MB_per_s", "p99_ms"):
        assert 0 < line[f"{name}_min"] <= line[name] <= line[f"{name}_max"]
    assert 0 < line["p50_ms"] <= line["p999_ms"] <= line["max_ms"]
