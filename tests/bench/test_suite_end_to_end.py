"""The quick suite end to end, as a user runs it: `python -m bench run --suite quick`
writes rows for every workload, then the PySpark aggregation summarises them; the
summary's figures are checked against the raw rows."""

import json
import math
import os
import subprocess
import sys
from collections import defaultdict

import pytest

from bench.__main__ import SUITE_ORDER
from bench.aggregate import ACCURACY, PERCENTILES, aggregate

CLUSTER_WORKLOADS = (
    "produce",
    "consume",
    "mixed",
    "e2e-latency",
    "failover",
    "controller-failover",
    "election-scaling",
)


def test_the_quick_suite_end_to_end(tmp_path, spark):
    """One test, not three sharing a module fixture: under xdist each worker that got one
    of them ran the whole quick suite (minutes) again."""
    out = tmp_path / "bench"
    store = tmp_path / "store"
    command = [sys.executable, "-m", "bench", "run", "--suite", "quick", "--out", str(out),
               "--store", str(store)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, env={**os.environ})
    assert done.returncode == 0, done.stdout + done.stderr
    _check_every_workload_wrote_rows_and_a_headline(out, done.stdout)
    # Every workload's rows went to the results store too, a Parquet file per run.
    stored = {path.parent.parent.name for path in store.glob("workload=*/date=*/*.parquet")}
    assert stored == {f"workload={name}" for name in SUITE_ORDER}
    groups = {(g["workload"], g["case"], g["op"]): g for g in aggregate(out, spark=spark)}
    _check_the_summary_agrees_with_the_raw_rows(out, groups)
    _check_produce_is_reported_as_a_ratio_of_the_raw_transport(out, groups)


def _rows(out):
    rows = []
    for path in sorted(out.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def _check_every_workload_wrote_rows_and_a_headline(out, stdout):
    headlines = {json.loads(line)["workload"] for line in stdout.splitlines()}
    assert headlines == set(SUITE_ORDER)
    written = {row["workload"] for row in _rows(out)}
    # zk-ops measures a real ZooKeeper too; every other workload measures kcore alone.
    assert written == set(SUITE_ORDER)
    # The quick suite measures the default cluster: a broker per process.
    on_clusters = [row for row in _rows(out) if row["workload"] in CLUSTER_WORKLOADS]
    assert {row["workload"] for row in on_clusters} == set(CLUSTER_WORKLOADS)
    assert all(row["case"].startswith("processes-") for row in on_clusters)
    assert all(row["params"]["cluster"] == "processes" for row in on_clusters)


def _check_the_summary_agrees_with_the_raw_rows(out, groups):
    rows = _rows(out)
    by_key = defaultdict(list)
    for row in rows:
        by_key[row["workload"], row["case"], row["op"]].append(row)
    assert set(groups) == set(by_key)
    for key, members in by_key.items():
        group = groups[key]
        assert group["rows"] == len(members)
        assert group["count"] == sum(r["count"] for r in members)
        assert group["errors"] == sum(r["outcome"] != "ok" for r in members)
        ok = sorted(r["latency_ns"] / 1e6 for r in members if r["outcome"] == "ok")
        if ok and group["kind"] == "op":  # an interval's latency is its length: not shown
            for name, fraction, at_least in PERCENTILES:
                if len(ok) < at_least:  # it would only be the maximum again
                    assert group[name] is None, (key, name)
                    continue
                # Spark's percentile_approx: the first value with at least `fraction` of
                # the values at or below it, within len/ACCURACY ranks.
                rank = math.ceil(fraction * len(ok)) - 1
                slack = math.ceil(len(ok) / ACCURACY)
                low, high = ok[max(0, rank - slack)], ok[min(len(ok) - 1, rank + slack)]
                assert low - 1e-6 <= group[name] <= high + 1e-6, (key, name)
            assert group["max_ms"] == pytest.approx(max(ok))
        start = min(r["start_time"] for r in members)
        end = max(r["start_time"] + r["latency_ns"] / 1e9 for r in members)
        assert group["span_s"] == pytest.approx(end - start)


def _check_produce_is_reported_as_a_ratio_of_the_raw_transport(out, groups):
    produce = [g for k, g in groups.items() if k[0] == "produce" and k[2] == "produce_interval"]
    assert produce
    for group in produce:
        baseline = groups[tuple(group["baseline"].split("/"))]
        assert group["ratio"] == pytest.approx(group["bytes_per_s"] / baseline["bytes_per_s"])
        assert 0 < group["ratio"]
    assert (out / "summary.md").read_text().count("| ") > 10
    for plot in ("throughput_vs_baseline", "election_scaling", "failover_timeline"):
        assert (out / "plots" / f"{plot}.png").stat().st_size > 0
