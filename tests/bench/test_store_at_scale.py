"""The report on a store of millions of rows (generated with numpy, written as the store's
Parquet partitions), checked against a direct computation (pyarrow and numpy, no Spark) on
a sample of its groups."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from bench.aggregate import ACCURACY, CDF_GRID, PERCENTILES, build_report
from bench.store import STORE_COLUMNS, HostFacts, RunFacts

ROWS = 2_000_000
RUNS = 10
CASES = 8  # cases 0..3 are operations ("rpc"), 4..7 intervals ("stream")
BASE = 1_700_000_000.0
SAMPLE = (("run-3", "case-1"), ("run-9", "case-2"), ("run-6", "case-5"), ("run-9", "case-7"))


def _generate(store):
    """ROWS rows over RUNS runs of CASES cases, one Parquet file per run and workload in the
    store's layout, generated with numpy (vectorised: a few seconds, no JVM)."""
    rng = np.random.default_rng(7)
    per_group = ROWS // (RUNS * CASES)
    index = np.arange(per_group)
    for run in range(RUNS):
        started = BASE + run * 86_400.0
        facts = RunFacts(f"run-{run}", f"sha{run}", started, HostFacts("2-core", "h", 2, 1.0))
        for workload, cases in (("rpc", range(4)), ("stream", range(4, CASES))):
            columns = {name: [] for name, _ in STORE_COLUMNS}
            for case in cases:
                if workload == "stream":
                    # 100 ms intervals moving 50 to 149 operations each.
                    latency = 100_000_000 + index % 7
                    count = 50 + rng.integers(0, 100, per_group)
                else:
                    # Log-uniform between 0.1 ms and 2 ms, times the case number.
                    latency = (1e5 * (case + 1) * np.exp(3 * rng.random(per_group))).astype(int)
                    count = np.ones(per_group, dtype=int)
                failed = rng.random(per_group) < 0.001
                columns["case"].append(np.full(per_group, f"case-{case}"))
                columns["op"].append(
                    np.full(per_group, "send_interval" if workload == "stream" else "call")
                )
                columns["start_time"].append(started + 0.2 * index)
                columns["latency_ns"].append(latency)
                columns["count"].append(count)
                columns["bytes"].append(count * 1000)
                columns["outcome"].append(np.where(failed, "Timeout", "ok"))
            n = per_group * len(cases)
            table = {name: np.concatenate(parts) for name, parts in columns.items() if parts}
            table.update(
                run_id=np.full(n, facts.run_id),
                params=np.full(n, '{"size":1000}'),
                git_sha=np.full(n, facts.git_sha),
                seed=np.zeros(n, dtype=int),
                run_started=np.full(n, started),
                host_class=np.full(n, "2-core"),
                host_id=np.full(n, "h"),
                cores=np.full(n, 2, dtype=np.int32),
                load_1m=np.full(n, 1.0),
            )
            folder = store / f"workload={workload}" / f"date={facts.date}"
            folder.mkdir(parents=True)
            schema = pa.schema(
                [pa.field(name, getattr(pa, kind)()) for name, kind in STORE_COLUMNS]
            )
            pq.write_table(pa.table(table, schema=schema), folder / f"run-{facts.run_id}.parquet")


def _sample(dataset, run_id, case):
    found = (ds.field("run_id") == run_id) & (ds.field("case") == case)
    return dataset.to_table(filter=found).to_pandas()


def _within_rank(value_ns, ordered, p):
    """Whether `value_ns` sits within percentile_approx's rank error of the p-th
    nearest-rank percentile of `ordered`."""
    n = len(ordered)
    slack = n / ACCURACY + 1
    low = np.searchsorted(ordered, value_ns - 0.5, "left") + 1  # its ranks, 1-based
    high = np.searchsorted(ordered, value_ns + 0.5, "right")
    target = math.ceil(p * n)
    return low <= high and low - slack <= target <= high + slack


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_a_store_of_millions_of_rows_against_a_direct_computation(spark, tmp_path):
    """One test (the store is built and reported on once, not once per xdist worker)."""
    store = tmp_path / "store"
    _generate(store)
    report = build_report(spark, store)
    dataset = ds.dataset(store, format="parquet", partitioning="hive")

    # Every row counted once.
    assert len(report.groups) == RUNS * CASES
    assert sum(g["rows"] for g in report.groups) == ROWS == dataset.count_rows()
    failed = dataset.count_rows(filter=ds.field("outcome") != "ok")
    assert sum(g["errors"] for g in report.groups) == failed > 0
    assert len(report.trend) == RUNS * CASES
    assert {g["run_id"] for g in report.latest} == {"run-9"}

    for run_id, case in SAMPLE:
        group = next(g for g in report.groups if (g["run_id"], g["case"]) == (run_id, case))
        _check_group(group, _sample(dataset, run_id, case))

    # The CDF's quantile grid, of a group of the latest run.
    rows = _sample(dataset, "run-9", "case-2")
    ordered = np.sort(rows.loc[rows["outcome"] == "ok", "latency_ns"].to_numpy())
    grid = report.cdf[report.cdf["case"] == "case-2"].sort_values("quantile")
    assert list(grid["quantile"]) == list(CDF_GRID)
    for quantile, latency_ms in zip(grid["quantile"], grid["latency_ms"], strict=True):
        assert _within_rank(round(latency_ms * 1e6), ordered, quantile), quantile


def _check_group(group, rows):
    ok = rows[rows["outcome"] == "ok"]
    key = (group["run_id"], group["case"])
    assert group["rows"] == len(rows), key
    assert (group["count"], group["bytes"]) == (rows["count"].sum(), rows["bytes"].sum()), key
    assert group["errors"] == (rows["outcome"] != "ok").sum(), key
    span = (rows["start_time"] + rows["latency_ns"] / 1e9).max() - rows["start_time"].min()
    assert group["span_s"] == pytest.approx(span, rel=1e-12), key
    if group["kind"] == "op":
        ordered = np.sort(ok["latency_ns"].to_numpy())
        assert group["latency_n"] == len(ordered), key
        assert group["max_ms"] == pytest.approx(ordered[-1] / 1e6, rel=1e-12), key
        for name, p, _ in PERCENTILES:
            assert _within_rank(round(group[name] * 1e6), ordered, p), (key, name, group[name])
    else:
        rates = ok["count"] / (ok["latency_ns"] / 1e9)
        assert group["intervals"] == len(rates), key
        assert (group["rate_min"], group["rate_max"]) == pytest.approx(
            (rates.min(), rates.max()), rel=1e-12
        ), key
        assert group["rate_cv"] == pytest.approx(rates.std(ddof=1) / rates.mean(), rel=1e-9), key
