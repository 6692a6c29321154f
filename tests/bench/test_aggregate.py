"""`python -m bench aggregate`: the PySpark summary of synthetic result rows, checked against
the same figures computed here in plain Python, plus the CSV, Markdown and plots it writes.

The Spark tests share one module-scoped SparkSession (one JVM start for the file)."""

import csv
import json
import random
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from bench import open_rows
from bench import plots as bench_plots
from bench.__main__ import main as bench_main
from bench.aggregate import SUMMARY_COLUMNS, aggregate

BASE = 1_700_000_000.0  # wall-clock seconds of the first synthetic row
RUN = "run-a"
SHA = "abc123"
STREAM = "transport-raw/stream-1KiB-x64/stream_interval"
ROUND_TRIP = "transport-raw/round-trip-x1/round_trip"
MISSING = "transport-raw/no-such-case/round_trip"
PER_ROW_COLUMNS = [
    "workload",
    "case",
    "op",
    "start_time",
    "latency_ns",
    "count",
    "outcome",
    "partitions",
]


# --- synthetic rows ----------------------------------------------------------------------


def _transport_raw(rows, rng):
    params = {"frame_bytes": 1024, "frames_per_send": 64, "network": "tcp-loopback"}
    for i in range(5):
        frames = 1000 + 10 * i
        rows.write(
            case="stream-1KiB-x64",
            op="stream_interval",
            params=params,
            start_time=BASE + 0.1 * i,
            latency_ns=100_000_000,
            nbytes=frames * 1024,
            count=frames,
        )
    params = {"in_flight": 1, "body_bytes": 100, "network": "tcp-loopback"}
    for i in range(40):
        rows.write(
            case="round-trip-x1",
            op="round_trip",
            params=params,
            start_time=BASE + 1 + 0.001 * i,
            latency_ns=rng.randrange(100_000, 500_000),
            nbytes=230,
            outcome="Timeout" if i == 7 else "ok",
        )


def _kcore_produce(rows, rng):
    params = {"acks": "all", "baseline": STREAM, "baseline_metric": "bytes_per_s"}
    for i in range(4):
        frames = 700 + i
        rows.write(
            case="produce-1KiB",
            op="produce_interval",
            params=params,
            start_time=BASE + 2 + 0.2 * i,
            latency_ns=200_000_000,
            nbytes=frames * 1024,
            count=frames,
        )
    for case, baseline, n in (("fetch-x1", ROUND_TRIP, 30), ("orphan", MISSING, 3)):
        params = {"in_flight": 1, "baseline": baseline, "baseline_metric": "ops_per_s"}
        for i in range(n):
            rows.write(
                case=case,
                op="fetch",
                params=params,
                start_time=BASE + 3 + 0.002 * i,
                latency_ns=rng.randrange(200_000, 2_000_000),
                nbytes=100,
            )


def _election_scaling(rows, rng):
    for case, per_partition_s in (("zk-mode", 1e-4), ("kraft-ish", 2e-5)):
        for j, partitions in enumerate((10, 100, 1000)):
            for k in range(3):
                seconds = 0.01 + per_partition_s * partitions + rng.uniform(0, 1e-3)
                rows.write(
                    case=case,
                    op="election",
                    params={"partitions": partitions, "brokers": 3},
                    start_time=BASE + 10 + j + 0.1 * k,
                    latency_ns=round(seconds * 1e9),
                )


def _failover(rows, rng):
    for i in range(50):
        failed = 20 <= i < 25
        rows.write(
            case="kill-leader",
            op="produce",
            params={"brokers": 3},
            start_time=BASE + 20 + 0.05 * i,
            latency_ns=rng.randrange(1_000_000, 5_000_000) * (10 if failed else 1),
            outcome="NotLeaderForPartition" if failed else "ok",
        )


WRITERS = {
    "transport-raw": (_transport_raw, RUN),
    "kcore-produce": (_kcore_produce, RUN),
    "election-scaling": (_election_scaling, "run-b"),
    "failover": (_failover, RUN),
}


def write_results(folder):
    """Writes one .jsonl per workload into `folder`; returns every row written."""
    rng = random.Random(7)
    written = []
    for workload, (write, run_id) in WRITERS.items():
        with open_rows(
            folder / f"{workload}.jsonl", workload=workload, seed=7, run_id=run_id, sha=SHA
        ) as rows:
            write(rows, rng)
    for path in sorted(folder.glob("*.jsonl")):
        written += [json.loads(line) for line in path.read_text().splitlines()]
    # A blank line and a line cut short (an interrupted run) are skipped, not fatal.
    with (folder / "failover.jsonl").open("a") as stream:
        stream.write('\n{"run_id":"run-a","workload":"failover","case":"kill-le\n')
    return written


# --- the same figures in plain Python ----------------------------------------------------


def expected_groups(rows):
    grouped = defaultdict(list)
    for row in rows:
        grouped[(row["workload"], row["case"], row["op"])].append(row)
    expected = {}
    for key, members in grouped.items():
        span = max(r["start_time"] + r["latency_ns"] / 1e9 for r in members) - min(
            r["start_time"] for r in members
        )
        ok = [r["latency_ns"] for r in members if r["outcome"] == "ok"]
        p50, p95, p99 = np.percentile(ok, [50, 95, 99]) / 1e6
        count = sum(r["count"] for r in members)
        nbytes = sum(r["bytes"] for r in members)
        expected["/".join(key)] = {
            "rows": len(members),
            "count": count,
            "bytes": nbytes,
            "errors": sum(r["outcome"] != "ok" for r in members),
            "span_s": span,
            "ops_per_s": count / span,
            "bytes_per_s": nbytes / span,
            "p50_ms": p50,
            "p95_ms": p95,
            "p99_ms": p99,
            "max_ms": max(ok) / 1e6,
            "params": min(members, key=lambda r: r["start_time"])["params"],
        }
    return expected


def _key(group):
    return f"{group['workload']}/{group['case']}/{group['op']}"


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    """(rows written, groups returned, output folder) of one aggregation."""
    results = tmp_path_factory.mktemp("results")
    out = tmp_path_factory.mktemp("summary")
    rows = write_results(results)
    groups = aggregate(results, out, spark=spark)
    return rows, groups, out


# --- Spark tests -------------------------------------------------------------------------


@pytest.mark.spark
def test_every_group_matches_the_raw_rows(run):
    rows, groups, _ = run
    expected = expected_groups(rows)
    assert [_key(g) for g in groups] == sorted(expected)  # sorted by workload, case, op
    for group in groups:
        want = expected[_key(group)]
        for name in ("rows", "count", "bytes", "errors"):
            assert group[name] == want[name], (_key(group), name)
        for name in ("span_s", "ops_per_s", "bytes_per_s", "p50_ms", "p95_ms", "p99_ms"):
            assert group[name] == pytest.approx(want[name], rel=1e-9), (_key(group), name)
        assert group["max_ms"] == pytest.approx(want["max_ms"], rel=1e-12)
        assert json.loads(group["params"]) == want["params"]
        assert list(group) == list(SUMMARY_COLUMNS)


@pytest.mark.spark
def test_errors_are_counted_but_left_out_of_the_latencies(run):
    _, groups, _ = run
    by_key = {_key(g): g for g in groups}
    assert by_key[ROUND_TRIP]["errors"] == 1
    failover = by_key["failover/kill-leader/produce"]
    assert (failover["rows"], failover["errors"]) == (50, 5)  # the cut-short line is skipped
    assert failover["max_ms"] < 5  # the 10x slower failed requests are not in the latencies


@pytest.mark.spark
def test_ratios_divide_by_the_baseline_measured_in_the_same_run(run):
    _, groups, _ = run
    by_key = {_key(g): g for g in groups}
    produce = by_key["kcore-produce/produce-1KiB/produce_interval"]
    assert produce["baseline"] == STREAM
    assert produce["baseline_metric"] == "bytes_per_s"
    assert produce["baseline_value"] == by_key[STREAM]["bytes_per_s"]
    assert produce["ratio"] == pytest.approx(
        produce["bytes_per_s"] / by_key[STREAM]["bytes_per_s"], rel=1e-12
    )
    fetch = by_key["kcore-produce/fetch-x1/fetch"]
    assert fetch["ratio"] == pytest.approx(
        fetch["ops_per_s"] / by_key[ROUND_TRIP]["ops_per_s"], rel=1e-12
    )


@pytest.mark.spark
def test_a_missing_baseline_leaves_the_ratio_empty(run):
    _, groups, _ = run
    orphan = {_key(g): g for g in groups}["kcore-produce/orphan/fetch"]
    assert orphan["baseline"] == MISSING
    assert orphan["baseline_value"] is None and orphan["ratio"] is None
    without = [g for g in groups if g["workload"] != "kcore-produce"]
    assert all(g["baseline"] is None and g["ratio"] is None for g in without)


@pytest.mark.spark
def test_csv_and_markdown_hold_every_group(run):
    _, groups, out = run
    with (out / "summary.csv").open(newline="") as stream:
        reader = csv.DictReader(stream)
        assert tuple(reader.fieldnames) == SUMMARY_COLUMNS
        lines = list(reader)
    assert [_key(line) for line in lines] == [_key(g) for g in groups]
    for line, group in zip(lines, groups, strict=True):
        assert float(line["ops_per_s"]) == group["ops_per_s"]
        assert line["ratio"] == ("" if group["ratio"] is None else repr(group["ratio"]))
        assert json.loads(line["params"]) == json.loads(group["params"])

    markdown = (out / "summary.md").read_text()
    assert "run-a" in markdown and "run-b" in markdown and SHA in markdown
    for workload in WRITERS:
        assert f"## {workload}" in markdown
    for group in groups:
        assert f"| {group['case']} | {group['op']} |" in markdown
    produce_line = next(line for line in markdown.splitlines() if "| produce-1KiB |" in line)
    ratio = {_key(g): g for g in groups}["kcore-produce/produce-1KiB/produce_interval"]["ratio"]
    assert f"| {ratio:.3g} |" in produce_line


@pytest.mark.spark
def test_plots_are_written(run):
    _, _, out = run
    written = sorted(path.name for path in (out / "plots").glob("*.png"))
    assert written == [
        "election_scaling.png",
        "failover_timeline.png",
        "latency_cdf_election-scaling.png",
        "latency_cdf_failover.png",
        "latency_cdf_kcore-produce.png",
        "latency_cdf_transport-raw.png",
        "throughput_vs_baseline.png",
    ]
    for name in written:
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.spark
def test_a_session_passed_in_is_left_running(run, spark):
    assert not spark.sparkContext._jsc.sc().isStopped()


@pytest.mark.spark
def test_cli_summarises_a_folder(spark, tmp_path, capsys):
    write_results(tmp_path)
    out = tmp_path / "out"
    assert bench_main(["aggregate", str(tmp_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / 'summary.csv'}" in printed
    assert f"wrote {out / 'plots' / 'election_scaling.png'}" in printed
    assert (out / "summary.md").exists()
    assert not spark.sparkContext._jsc.sc().isStopped()  # it reused the running session


# --- without Spark -----------------------------------------------------------------------


def test_cli_rejects_a_folder_without_results(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("no rows here")
    assert bench_main(["aggregate", str(tmp_path)]) == 2
    assert "holds no *.jsonl result files" in capsys.readouterr().err


def test_cli_rejects_a_missing_folder(tmp_path, capsys):
    assert bench_main(["aggregate", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_plots_without_data_are_skipped(tmp_path):
    groups = pd.DataFrame(columns=SUMMARY_COLUMNS)
    per_row = pd.DataFrame(columns=PER_ROW_COLUMNS)
    assert bench_plots.write_plots(groups, per_row, tmp_path / "plots") == []
    assert bench_plots.throughput_vs_baseline(groups, tmp_path) is None
    assert bench_plots.failover_timeline(per_row, tmp_path) is None
    assert bench_plots.election_scaling(per_row, tmp_path) is None
    assert not (tmp_path / "plots").exists()


def test_election_rows_without_numeric_partitions_are_skipped(tmp_path):
    per_row = pd.DataFrame(
        {
            "workload": ["election-scaling"] * 2,
            "case": ["zk-mode"] * 2,
            "op": ["election"] * 2,
            "start_time": [BASE, BASE + 1],
            "latency_ns": [10**7, 2 * 10**7],
            "count": [1, 1],
            "outcome": ["ok", "ok"],
            "partitions": [None, "many"],
        }
    )
    assert bench_plots.election_scaling(per_row, tmp_path) is None
