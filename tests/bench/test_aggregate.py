"""`python -m bench aggregate`: the Spark report of a results store (and of a run's folder
of JSON lines), checked against the same figures computed here in plain Python, plus the
CSV, Markdown and plots it writes, and the same report on Spark's local-cluster mode.

The Spark tests share the session-scoped SparkSession (tests/bench/conftest.py)."""

import csv
import json
import math
import os
import random
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from bench import open_rows
from bench import plots as bench_plots
from bench.__main__ import main as bench_main
from bench.aggregate import PERCENTILES, SUMMARY_COLUMNS, aggregate
from bench.store import import_jsonl

BASE = 1_700_000_000.0  # wall-clock seconds of the first synthetic row
RUN = "run-a"
SHA = "abc123"
STREAM = "transport-raw/stream-1KiB-x64/stream_interval"
ROUND_TRIP = "transport-raw/round-trip-x1/round_trip"
MISSING = "transport-raw/no-such-case/round_trip"


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
    for i in range(140):
        rows.write(
            case="round-trip-x1",
            op="round_trip",
            params=params,
            start_time=BASE + 1 + 0.001 * i,
            latency_ns=rng.randrange(100_000, 500_000),
            nbytes=230,
            outcome="Timeout" if i == 7 else "ok",
        )
    rows.write(
        case="connect",
        op="connect",
        params={},
        start_time=BASE + 1.5,
        latency_ns=2_500_000,
    )


def _kcore_produce(rows, rng):
    params = {"acks": "all", "baseline": STREAM, "baseline_metric": "bytes_per_s"}
    for i in range(4):
        frames = 700 + 5 * i
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


def nearest_rank(values, p):
    """percentile_approx's answer when it is exact (groups below its accuracy): the
    smallest value with at least a fraction p of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def expected_groups(rows):
    grouped = defaultdict(list)
    for row in rows:
        grouped[(row["workload"], row["case"], row["op"])].append(row)
    expected = {}
    for key, members in grouped.items():
        span = max(r["start_time"] + r["latency_ns"] / 1e9 for r in members) - min(
            r["start_time"] for r in members
        )
        interval = key[2].endswith("_interval")
        ok = [r["latency_ns"] for r in members if r["outcome"] == "ok"]
        rates = [r["count"] / (r["latency_ns"] / 1e9) for r in members if interval]
        count = sum(r["count"] for r in members)
        nbytes = sum(r["bytes"] for r in members)
        want = {
            "kind": "interval" if interval else "op",
            "rows": len(members),
            "count": count,
            "bytes": nbytes,
            "errors": sum(r["outcome"] != "ok" for r in members),
            "span_s": span,
            "ops_per_s": count / span,
            "bytes_per_s": nbytes / span,
            "params": min(members, key=lambda r: r["start_time"])["params"],
            "latency_n": None if interval else len(ok),
            "max_ms": None if interval else max(ok) / 1e6,
            "rate_min": min(rates) if rates else None,
            "rate_max": max(rates) if rates else None,
            "rate_cv": np.std(rates, ddof=1) / np.mean(rates) if len(rates) > 1 else None,
        }
        for name, p, at_least in PERCENTILES:
            shown = not interval and len(ok) >= at_least
            want[name] = nearest_rank(ok, p) / 1e6 if shown else None
        expected["/".join(key)] = want
    return expected


def _close(value, want, rel):
    return value is None if want is None else value == pytest.approx(want, rel=rel)


def _key(group):
    return f"{group['workload']}/{group['case']}/{group['op']}"


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(rows written, their folder, a store they were imported into)."""
    folder = tmp_path_factory.mktemp("results")
    rows = write_results(folder)
    store = tmp_path_factory.mktemp("bench") / "store"
    import_jsonl(store, [folder], host_class="2-core")
    return rows, folder, store


@pytest.fixture(scope="module")
def run(spark, results, tmp_path_factory):
    """(rows written, groups returned, output folder) of one report on the store."""
    rows, _, store = results
    out = tmp_path_factory.mktemp("summary")
    groups = aggregate(store, out, spark=spark)
    return rows, groups, out


# --- Spark tests -------------------------------------------------------------------------


@pytest.mark.spark
def test_every_group_matches_the_raw_rows(run):
    rows, groups, _ = run
    expected = expected_groups(rows)
    assert [_key(g) for g in groups] == sorted(expected)  # sorted by workload, case, op
    for group in groups:
        want = expected[_key(group)]
        for name in ("kind", "rows", "count", "bytes", "errors", "latency_n"):
            assert group[name] == want[name], (_key(group), name)
        for name in ("span_s", "ops_per_s", "bytes_per_s", "rate_min", "rate_max", "rate_cv"):
            assert _close(group[name], want[name], 1e-9), (_key(group), name)
        for name in ("p50_ms", "p95_ms", "p99_ms", "max_ms"):
            assert _close(group[name], want[name], 1e-12), (_key(group), name)
        assert json.loads(group["params"]) == want["params"]
        assert group["host_class"] == "2-core"
        assert list(group)[: len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS)


@pytest.mark.spark
def test_only_meaningful_latencies_are_shown(run):
    _, groups, _ = run
    by_key = {_key(g): g for g in groups}
    # An interval's length is no operation's latency: its rate and spread instead.
    stream = by_key[STREAM]
    assert [stream[n] for n in ("p50_ms", "p95_ms", "p99_ms", "max_ms")] == [None] * 4
    assert stream["intervals"] == 5 and stream["rate_min"] < stream["rate_max"]
    # One operation: its latency, as the max, and no percentiles.
    connect = by_key["transport-raw/connect/connect"]
    assert connect["max_ms"] == pytest.approx(2.5)
    assert (connect["p50_ms"], connect["p95_ms"], connect["p99_ms"]) == (None, None, None)
    # 30 operations: p50 and p95 mean something, p99 would be the max.
    fetch = by_key["kcore-produce/fetch-x1/fetch"]
    assert fetch["p95_ms"] is not None and fetch["p99_ms"] is None
    assert by_key[ROUND_TRIP]["p99_ms"] is not None  # 139 ok operations


@pytest.mark.spark
def test_errors_are_counted_but_left_out_of_the_latencies(run):
    _, groups, _ = run
    by_key = {_key(g): g for g in groups}
    assert by_key[ROUND_TRIP]["errors"] == 1
    failover = by_key["failover/kill-leader/produce"]
    assert (failover["rows"], failover["errors"]) == (50, 5)  # the cut-short line is skipped
    assert failover["max_ms"] < 5  # the 10x slower failed requests are not in the latencies


@pytest.mark.spark
def test_ratios_divide_by_the_baseline_of_the_same_run_with_their_spread(run):
    _, groups, _ = run
    by_key = {_key(g): g for g in groups}
    produce = by_key["kcore-produce/produce-1KiB/produce_interval"]
    stream = by_key[STREAM]
    assert (produce["baseline"], produce["baseline_metric"]) == (STREAM, "bytes_per_s")
    assert produce["baseline_value"] == stream["bytes_per_s"]
    assert produce["ratio"] == pytest.approx(produce["bytes_per_s"] / stream["bytes_per_s"])
    # One standard deviation, from both sides' per-interval byte rates.
    cv = math.hypot(produce["byte_rate_cv"], stream["byte_rate_cv"])
    assert produce["ratio_spread"] == pytest.approx(produce["ratio"] * cv)
    assert 0 < produce["ratio_spread"] < produce["ratio"]
    fetch = by_key["kcore-produce/fetch-x1/fetch"]
    assert fetch["ratio"] == pytest.approx(fetch["ops_per_s"] / by_key[ROUND_TRIP]["ops_per_s"])
    assert fetch["ratio_spread"] is None  # single operations: no repeats to spread over


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
        assert line["ops_per_s"] == repr(group["ops_per_s"])
        assert line["ratio"] == ("" if group["ratio"] is None else repr(group["ratio"]))
        assert json.loads(line["params"]) == json.loads(group["params"])

    markdown = (out / "summary.md").read_text()
    assert "run-a" in markdown and "run-b" in markdown and SHA in markdown
    for workload in WRITERS:
        assert f"## {workload}" in markdown
    for group in groups:
        assert f"| {group['case']} | {group['op']} |" in markdown
    produce = {_key(g): g for g in groups}["kcore-produce/produce-1KiB/produce_interval"]
    produce_line = next(line for line in markdown.splitlines() if "| produce-1KiB |" in line)
    assert f"| {produce['ratio']:.3g} ± {produce['ratio_spread']:.3g} |" in produce_line
    connect_line = next(line for line in markdown.splitlines() if "| connect |" in line)
    assert connect_line.endswith("|  |  |  | 2.5 |  |  |")  # the max alone
    assert "## Regressions in the latest runs" in markdown and "None." in markdown
    for plot in (out / "plots").glob("*.png"):
        assert f"(plots/{plot.name})" in markdown


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
def test_cli_reports_on_a_run_folder_as_on_the_store(spark, run, results, capsys):
    _, _, store_out = run
    _, folder, _ = results
    out = folder / "out"
    assert bench_main(["aggregate", str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / 'summary.csv'}" in printed
    assert f"wrote {out / 'plots' / 'election_scaling.png'}" in printed
    assert not spark.sparkContext._jsc.sc().isStopped()  # it reused the running session
    from_folder = pd.read_csv(out / "summary.csv").drop(columns=["host_class"])
    from_store = pd.read_csv(store_out / "summary.csv").drop(columns=["host_class"])
    pd.testing.assert_frame_equal(from_folder, from_store, check_exact=False)


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_the_report_on_a_local_cluster_matches_the_raw_rows(spark_installed, results, tmp_path):
    """`--spark-master local-cluster[2,1,1024]`: two executor JVMs besides the driver's, so
    tasks and shuffles cross processes. (One workload: each Spark job costs seconds on
    cold executors; and no in-process session, which would be a JVM more.)"""
    rows, folder, _ = results
    store = tmp_path / "store"
    import_jsonl(store, [folder / "transport-raw.jsonl"], host_class="2-core")
    out = tmp_path / "report"
    command = [sys.executable, "-m", "bench", "aggregate", str(store), "--out", str(out)]
    command += ["--spark-master", "local-cluster[2,1,1024]"]
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=500, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "on local-cluster[2,1,1024] with 2 executor(s)" in done.stdout
    expected = expected_groups([row for row in rows if row["workload"] == "transport-raw"])
    with (out / "summary.csv").open(newline="") as stream:
        lines = list(csv.DictReader(stream))
    assert sorted(_key(line) for line in lines) == sorted(expected)
    for line in lines:
        want = expected[_key(line)]
        assert int(line["rows"]) == want["rows"] and int(line["errors"]) == want["errors"]
        for name in ("ops_per_s", "rate_cv", "p50_ms", "p95_ms", "p99_ms", "max_ms"):
            value = float(line[name]) if line[name] else None
            assert _close(value, want[name], 1e-9), (_key(line), name)


# --- without Spark -----------------------------------------------------------------------


def test_cli_rejects_a_folder_without_results(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("no rows here")
    assert bench_main(["aggregate", str(tmp_path)]) == 2
    assert "holds no results store and no *.jsonl result files" in capsys.readouterr().err


def test_cli_rejects_a_missing_folder(tmp_path, capsys):
    assert bench_main(["aggregate", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_ratios_of_0_02_and_14_are_both_readable(tmp_path):
    """A log axis: a bar of 0.02 is as visible as one of 14."""
    groups = [
        {
            "workload": "w",
            "case": case,
            "ratio": ratio,
            "ratio_spread": spread,
            "baseline": "w/base/op",
            "baseline_metric": "ops_per_s",
        }
        for case, ratio, spread in (("slow", 0.02, 0.005), ("fast", 14.0, None))
    ]
    path = bench_plots.throughput_vs_baseline(groups, tmp_path)
    assert path is not None and path.read_bytes()[:4] == b"\x89PNG"


def test_an_election_fit_needs_three_partition_counts():
    two = np.array([100.0, 1000.0])
    assert bench_plots._least_squares(two, two / 1000) is None
    three = np.array([100.0, 1000.0, 3000.0])
    slope, intercept = bench_plots._least_squares(three, 0.5 + three / 1000)
    assert slope == pytest.approx(1e-3) and intercept == pytest.approx(0.5)


def test_plots_without_data_are_skipped(tmp_path):
    empty = pd.DataFrame()
    assert bench_plots.throughput_vs_baseline([], tmp_path) is None
    assert bench_plots.failover_timeline(empty, tmp_path) is None
    assert bench_plots.election_scaling(empty, tmp_path) is None
    assert bench_plots.trend([], "w", tmp_path) is None
    assert bench_plots.campaign_convergence([], tmp_path) is None
    assert not list(tmp_path.iterdir())


def test_a_trend_whose_runs_have_no_band_yet_is_drawn(tmp_path):
    # Two runs of a case: the second has no band (too few runs before it), so the band
    # columns hold only None, which matplotlib cannot shade (the aggregate crashed).
    rows = [
        {"workload": "w", "case": "c", "op": "o", "host_class": "2-core", "metric": metric,
         "metric_name": "ops_per_s", "band_low": None, "band_high": None, "flag": None,
         "git_sha": sha}
        for metric, sha in ((10.0, "a" * 40), (11.0, "b" * 40))
    ]  # fmt: skip
    assert bench_plots.trend(rows, "w", tmp_path).exists()
