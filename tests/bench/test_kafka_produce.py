"""The kafka-produce workload with the quick suite's parameters on a real 3-broker cluster on
TCP loopback: both clients produce from child processes, every interval becomes a row, and
confluent-kafka's rows are reported as a ratio of kcore's own client. And a child that
cannot produce becomes an error row naming why, not a hung run."""

from __future__ import annotations

import importlib.util
import io
import json
import time

import attrs
import pytest
import trio

from bench import RowWriter
from bench.workloads import WORKLOADS, WorkloadOptions
from bench.workloads.kafka_produce import (
    NAME,
    case_name,
    params_for,
    run_case,
    run_kafka_produce,
)

pytestmark = pytest.mark.timeout(180)

HAS_CONFLUENT = importlib.util.find_spec("confluent_kafka") is not None
QUICK = params_for(WorkloadOptions(suite="quick"))
KCORE_CASE = case_name("kcore", "all", 3, 1024)
CONFLUENT_CASE = case_name("confluent", "all", 3, 1024)


def _writer() -> tuple[io.StringIO, RowWriter]:
    out = io.StringIO()
    return out, RowWriter(out, workload=NAME, git_sha="abc", seed=0, run_id="r1")


@pytest.fixture(scope="module")
def quick_run():
    """One run for the module's tests (a cluster and two children take a few seconds).
    Without confluent-kafka only the kcore half runs: its test still runs, the confluent
    one skips (or fails under CI)."""
    clients = ("kcore", "confluent") if HAS_CONFLUENT else ("kcore",)
    out, rows = _writer()
    params = attrs.evolve(QUICK, clients=clients)
    summary = trio.run(run_kafka_produce, rows, params)
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    return written, summary


def _case_rows(rows, case):
    return [row for row in rows if row["case"] == case]


def _failure(rows) -> str:
    return "; ".join(
        f"{r['outcome']}: {r['params'].get('error')}" for r in rows if r["outcome"] != "ok"
    )


def test_the_quick_suite_is_acks_all_rf3():
    assert NAME in WORKLOADS
    assert (QUICK.acks, QUICK.replication, QUICK.duration) == (("all",), (3,), 0.5)


def test_kcore_client_produces_from_its_own_process(quick_run):
    rows, summary = quick_run
    kcore = _case_rows(rows, KCORE_CASE)
    assert kcore, f"no rows for {KCORE_CASE}: {[r['case'] for r in rows]}"
    assert all(row["outcome"] == "ok" for row in kcore), _failure(kcore)
    for row in kcore:
        assert row["op"] == "produce_interval" and row["count"] >= 0
        assert row["bytes"] == row["count"] * 1024 and row["latency_ns"] > 0
        assert {k: row["params"][k] for k in ("client", "acks", "replication_factor")} == {
            "client": "kcore",
            "acks": "all",
            "replication_factor": 3,
        }
        assert row["params"]["record_bytes"] == 1024 and "baseline" not in row["params"]
    assert sum(row["count"] for row in kcore) > 0  # records acknowledged, not just sent
    (line,) = [line for line in summary if line["case"] == KCORE_CASE]
    assert line["records_per_s"] > 0 and line["MB_per_s"] > 0


def test_confluent_client_is_reported_as_a_ratio_of_kcore(quick_run, require_external):
    require_external("confluent-kafka", HAS_CONFLUENT, "pip install confluent-kafka")
    rows, summary = quick_run
    confluent = _case_rows(rows, CONFLUENT_CASE)
    assert confluent, f"no rows for {CONFLUENT_CASE}: {[r['case'] for r in rows]}"
    assert all(row["outcome"] == "ok" for row in confluent), _failure(confluent)
    baseline = f"{NAME}/{KCORE_CASE}/produce_interval"
    for row in confluent:
        assert row["op"] == "produce_interval" and row["count"] >= 0
        assert row["params"]["client"] == "confluent" and row["params"]["protocol"] == "kafka"
        assert row["params"]["baseline"] == baseline
        assert row["params"]["baseline_metric"] == "bytes_per_s"
    # The baseline it names is a group of this run: workload/case/op of the kcore rows.
    assert {f"{NAME}/{r['case']}/{r['op']}" for r in _case_rows(rows, KCORE_CASE)} == {baseline}
    assert sum(row["count"] for row in confluent) > 0
    (line,) = [line for line in summary if line["case"] == CONFLUENT_CASE]
    assert line["records_per_s"] > 0 and line["ratio"] > 0


async def test_a_client_that_cannot_start_is_an_error_row(tmp_path, monkeypatch):
    # A confluent_kafka that fails to import, found first on the inherited PYTHONPATH.
    (tmp_path / "confluent_kafka.py").write_text("raise ImportError('simulated: not built')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out, rows = _writer()
    began = time.monotonic()
    line = await run_case(rows, QUICK, "127.0.0.1:1", "t", "confluent", "all", 3)
    assert time.monotonic() - began < 30
    assert "ClientMissing" in line["error"] and "simulated: not built" in line["error"]
    (row,) = [json.loads(text) for text in out.getvalue().splitlines()]
    assert (row["case"], row["outcome"], row["count"]) == (CONFLUENT_CASE, "ClientMissing", 0)
    assert "pip install confluent-kafka" in row["params"]["error"]


async def test_a_client_that_gets_no_acknowledgement_fails_in_bounded_time():
    # Nothing listens on port 1: the kcore child never has its first record acknowledged.
    out, rows = _writer()
    params = attrs.evolve(QUICK, ready_timeout=1.0)
    began = time.monotonic()
    line = await run_case(rows, params, "127.0.0.1:1", "t", "kcore", "all", 3)
    assert time.monotonic() - began < 20
    assert line["error"].startswith("NoAcknowledgement"), line
    (row,) = [json.loads(text) for text in out.getvalue().splitlines()]
    assert row["outcome"] == "NoAcknowledgement" and row["count"] == 0
