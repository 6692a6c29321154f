"""The regression flag across runs (bench/trends.py): a run outside the band of the previous
runs of its case on its host class is flagged; noise within the band is not."""

import pytest

from bench.aggregate import Report, case_stats, load_rows
from bench.store import HostFacts, RunFacts, append_run
from bench.trends import trend_rows

BASE = 1_700_000_000.0
# Six runs of noise around 100 (within a few %), then the run under test: the previous five
# (103, 98, 101, 99, 102) have median 101 and MAD 2, so the band is 101 ± 3 · 1.4826 · 2,
# 92.1 to 109.9.
HISTORY = (100, 103, 98, 101, 99, 102)
LATEST = {"steady": 107, "slowed": 50, "faster": 120}
LATEST_RUN = f"r{len(HISTORY)}"


def _interval_rows(case, rate, started):
    """Three one-second intervals at `rate` operations per second."""
    return [
        {
            "workload": "stream",
            "case": case,
            "op": "send_interval",
            "params": {"frame_bytes": 100},
            "seed": 0,
            "start_time": started + i,
            "latency_ns": 1_000_000_000,
            "bytes": rate * 100,
            "count": rate,
            "outcome": "ok",
        }
        for i in range(3)
    ]


def _operation_rows(case, latency_ms, started):
    """Ten operations of `latency_ms` each (their p50)."""
    return [
        {
            "workload": "rpc",
            "case": case,
            "op": "round_trip",
            "params": {},
            "seed": 0,
            "start_time": started + 0.01 * i,
            "latency_ns": round(latency_ms * 1e6),
            "bytes": 0,
            "count": 1,
            "outcome": "ok",
        }
        for i in range(10)
    ]


def _run(store, index, rows, host="2-core"):
    started = BASE + 3600 * index
    facts = RunFacts(f"r{index}", f"sha{index}", started, HostFacts(host, "h", 2, 0.5))
    append_run(store, rows(started), facts)


@pytest.fixture(scope="module")
def trend(spark, tmp_path_factory):
    store = tmp_path_factory.mktemp("trends") / "store"
    for index, value in enumerate(HISTORY):

        def rows(started, value=value, index=index):
            found = [r for case in LATEST for r in _interval_rows(case, value, started)]
            found += _operation_rows("rt-steady", value / 100, started)
            found += _operation_rows("rt-slowed", value / 100, started)
            # A case too young for a band: its second run is wild, and not flagged.
            if index < 2:
                found += _interval_rows("young", (100, 300)[index], started)
            return found

        _run(store, index, rows)

    def latest(started):
        found = [r for case, value in LATEST.items() for r in _interval_rows(case, value, started)]
        found += _operation_rows("rt-steady", 1.05, started)
        found += _operation_rows("rt-slowed", 2.0, started)
        return found

    _run(store, len(HISTORY), latest)
    # Another host class: five times faster, and compared only with its own class's runs.
    _run(store, len(HISTORY) + 1, lambda started: _interval_rows("steady", 500, started), "8-core")
    rows = trend_rows(case_stats(load_rows(spark, store)), window=5)
    return {(t["case"], t["host_class"], t["run_id"]): t for t in rows}


def _latest(trend, case):
    return trend[case, "2-core", LATEST_RUN]


@pytest.mark.spark
def test_a_slowdown_is_flagged(trend):
    slowed = _latest(trend, "slowed")
    assert (slowed["metric_name"], slowed["metric"]) == ("ops_per_s", pytest.approx(50))
    assert slowed["band_low"] == pytest.approx(101 - 3 * 1.4826 * 2)
    assert slowed["flag"] == "regression"
    rt = _latest(trend, "rt-slowed")
    assert (rt["metric_name"], rt["metric"], rt["flag"]) == ("p50_ms", 2.0, "regression")


@pytest.mark.spark
def test_noise_within_the_band_is_not_flagged(trend):
    steady = _latest(trend, "steady")
    assert steady["band_low"] < steady["metric"] < steady["band_high"]
    assert steady["flag"] == ""
    assert _latest(trend, "rt-steady")["flag"] == ""
    for index in range(len(HISTORY)):
        assert trend["steady", "2-core", f"r{index}"]["flag"] == ""


@pytest.mark.spark
def test_a_speedup_is_an_improvement(trend):
    assert _latest(trend, "faster")["flag"] == "improvement"


@pytest.mark.spark
def test_too_few_previous_runs_flag_nothing(trend):
    young = trend["young", "2-core", "r1"]
    assert (young["metric"], young["history"], young["flag"]) == (300, 1, "")
    assert young["band_low"] is None


@pytest.mark.spark
def test_runs_compare_only_with_their_host_class(trend):
    other = trend["steady", "8-core", f"r{len(HISTORY) + 1}"]
    assert (other["metric"], other["history"], other["flag"]) == (500, 0, "")


def test_the_report_lists_the_regressions_of_the_latest_runs():
    latest = [{"run_id": "r2", "workload": "w", "case": c, "op": "o"} for c in ("a", "b")]
    trend = [
        {"run_id": "r1", "workload": "w", "case": "a", "op": "o", "flag": "regression"},
        {"run_id": "r2", "workload": "w", "case": "a", "op": "o", "flag": ""},
        {"run_id": "r2", "workload": "w", "case": "b", "op": "o", "flag": "regression"},
        {"run_id": "r2", "workload": "w", "case": "c", "op": "o", "flag": "improvement"},
    ]
    report = Report("s", latest, latest, trend, 5, None, None, None, None, [])
    assert [(t["case"], t["run_id"]) for t in report.regressions] == [("b", "r2")]
