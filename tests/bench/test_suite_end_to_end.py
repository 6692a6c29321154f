"""The quick suite end to end, as a user runs it: `python -m bench run --suite quick`
writes rows for every workload, then the PySpark aggregation summarises them; the
summary's figures are checked against the raw rows."""

import json
import os
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from bench.__main__ import SUITE_ORDER
from bench.aggregate import aggregate


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    command = [sys.executable, "-m", "bench", "run", "--suite", "quick", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, env={**os.environ})
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def _rows(out):
    rows = []
    for path in sorted(out.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def test_every_workload_wrote_rows_and_a_headline(results):
    out, stdout = results
    headlines = {json.loads(line)["workload"] for line in stdout.splitlines()}
    assert headlines == set(SUITE_ORDER)
    written = {row["workload"] for row in _rows(out)}
    # zk-ops measures a real ZooKeeper too; every other workload measures kcore alone.
    assert written == set(SUITE_ORDER)


def test_the_summary_agrees_with_the_raw_rows(results, spark):
    out, _ = results
    rows = _rows(out)
    groups = {(g["workload"], g["case"], g["op"]): g for g in aggregate(out, spark=spark)}
    by_key = defaultdict(list)
    for row in rows:
        by_key[row["workload"], row["case"], row["op"]].append(row)
    assert set(groups) == set(by_key)
    for key, members in by_key.items():
        group = groups[key]
        assert group["rows"] == len(members)
        assert group["count"] == sum(r["count"] for r in members)
        assert group["errors"] == sum(r["outcome"] != "ok" for r in members)
        ok = [r["latency_ns"] / 1e6 for r in members if r["outcome"] == "ok"]
        if ok:
            assert group["p50_ms"] == pytest.approx(np.percentile(ok, 50))
            assert group["p99_ms"] == pytest.approx(np.percentile(ok, 99))
            assert group["max_ms"] == pytest.approx(max(ok))
        start = min(r["start_time"] for r in members)
        end = max(r["start_time"] + r["latency_ns"] / 1e9 for r in members)
        assert group["span_s"] == pytest.approx(end - start)


def test_produce_is_reported_as_a_ratio_of_the_raw_transport(results, spark):
    out, _ = results
    groups = {(g["workload"], g["case"], g["op"]): g for g in aggregate(out, spark=spark)}
    produce = [g for k, g in groups.items() if k[0] == "produce" and k[2] == "produce_interval"]
    assert produce
    for group in produce:
        baseline = groups[tuple(group["baseline"].split("/"))]
        assert group["ratio"] == pytest.approx(group["bytes_per_s"] / baseline["bytes_per_s"])
        assert 0 < group["ratio"]
    assert (out / "summary.md").read_text().count("| ") > 10
    for plot in ("throughput_vs_baseline", "election_scaling", "failover_timeline"):
        assert (out / "plots" / f"{plot}.png").stat().st_size > 0
