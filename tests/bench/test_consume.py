"""The consume workload on the single-process cluster (the quickest to start; the quick
suite end to end runs it on the process cluster): one consumer and a group of three, kcore's
and confluent-kafka's, each reading the filled topic from a child process. What a user
reads: every record read once per case, an interval row per interval, the confluent rows
naming the kcore case as their baseline, and a child that cannot consume as one error row
per case, in bounded time."""

from __future__ import annotations

import importlib.util
import io
import json
import time

import pytest
import trio

from bench import RowWriter
from bench.workloads import WORKLOADS, WorkloadOptions
from bench.workloads._kafka_consume_child import OffsetTracker
from bench.workloads.consume import (
    NAME,
    ConsumeParams,
    case_name,
    params_for,
    run_client,
    run_consume,
)

pytestmark = pytest.mark.timeout(120)

HAS_CONFLUENT = importlib.util.find_spec("confluent_kafka") is not None


def _writer() -> tuple[io.StringIO, RowWriter]:
    out = io.StringIO()
    return out, RowWriter(out, workload=NAME, git_sha="abc", seed=0, run_id="r1")


def _written(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _failures(rows) -> str:
    return "; ".join(
        f"{r['case']} {r['outcome']}: {r['params'].get('error')}"
        for r in rows
        if r["outcome"] != "ok"
    )


def test_the_suites():
    assert NAME in WORKLOADS
    quick = params_for(WorkloadOptions(suite="quick"))
    full = params_for(WorkloadOptions(suite="full"))
    assert (quick.repeats, quick.clusters, quick.consumers) == (1, ("processes",), (1,))
    assert (full.repeats, full.clusters, full.consumers) == (3, ("processes", "single"), (1, 3))
    assert full.clients == quick.clients == ("kcore", "confluent")


def test_each_case_reads_every_record_once_and_confluent_is_a_ratio_of_kcore(require_external):
    """One test, not several sharing a module fixture (a cluster, a fill and two
    children): under xdist each worker that got one of them would run it again. Without
    confluent-kafka the kcore half is checked, then the test skips (fails under CI)."""
    clients = ("kcore", "confluent") if HAS_CONFLUENT else ("kcore",)
    params = ConsumeParams(
        records=2000,
        repeats=1,
        interval=0.05,
        clusters=("single",),
        clients=clients,
        rebalance_delay_ms=100,  # the group's three members start together
    )
    out, rows = _writer()
    summary = trio.run(run_consume, rows, params)
    written = _written(out)
    assert all(row["outcome"] == "ok" for row in written), _failures(written)

    for client in clients:
        for consumers in (1, 3):
            case = case_name("single", client, consumers, 1024, 1)
            mine = [row for row in written if row["case"] == case]
            assert mine, f"no rows for {case}: {sorted({r['case'] for r in written})}"
            for row in mine:
                assert row["op"] == "consume_interval" and row["latency_ns"] > 0
                assert row["bytes"] == row["count"] * 1024  # each value is 1 KiB
                assert row["params"]["consumers"] == consumers
                assert row["params"]["group"] is (consumers > 1)
            # The warm-up's first records are read, not measured: fewer than the topic.
            assert 0 < sum(row["count"] for row in mine) < params.records
            if client == "confluent":
                baseline = (
                    f"{NAME}/{case_name('single', 'kcore', consumers, 1024, 1)}/consume_interval"
                )
                assert {row["params"]["baseline"] for row in mine} == {baseline}
                # It names a group of this run: the kcore case's rows.
                assert any(f"{NAME}/{row['case']}/{row['op']}" == baseline for row in written)
            else:
                assert all("baseline" not in row["params"] for row in mine)

    lines = {line["case"]: line for line in summary}
    assert set(lines) == {f"single-{client}-1KiB-x{n}" for client in clients for n in (1, 3)}
    for line in lines.values():
        # Every record of the topic read once by the case (by the group, in all).
        assert (line["records"], line["duplicates"], line["skipped"], line["unread"]) == (
            params.records,
            0,
            0,
            0,
        ), line
        assert line["repeats"] == 1 and "error" not in line
        assert line["MB_per_s_min"] <= line["MB_per_s"] <= line["MB_per_s_max"]
        assert line["records_per_s"] > 0 and line["client_cpu"] >= 0
    require_external("confluent-kafka", HAS_CONFLUENT, "pip install confluent-kafka")
    assert lines["single-confluent-1KiB-x1"]["ratio"] > 0
    assert lines["single-confluent-1KiB-x3"]["ratio"] > 0


async def test_a_client_that_cannot_start_is_one_error_row_per_case(tmp_path, monkeypatch):
    # A confluent_kafka that fails to import, found first on the inherited PYTHONPATH.
    (tmp_path / "confluent_kafka.py").write_text("raise ImportError('simulated: not built')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out, rows = _writer()
    params = ConsumeParams(consumers=(1, 3))
    began = time.monotonic()
    lines = await run_client(rows, params, "127.0.0.1:1", "single", "confluent", {0: 10}, 2)
    assert time.monotonic() - began < 30
    assert set(lines) == {1, 3}
    assert all("ClientMissing" in line["error"] for line in lines.values()), lines
    written = _written(out)
    assert [(row["case"], row["outcome"], row["count"]) for row in written] == [
        (case_name("single", "confluent", n, 1024, 2), "ClientMissing", 0) for n in (1, 3)
    ]
    assert all("pip install confluent-kafka" in row["params"]["error"] for row in written)


async def test_a_cluster_that_does_not_answer_fails_in_bounded_time():
    # Nothing listens on port 1: the kcore child never learns the topic's offsets.
    out, rows = _writer()
    params = ConsumeParams(consumers=(1,), ready_timeout=1.0)
    began = time.monotonic()
    lines = await run_client(rows, params, "127.0.0.1:1", "single", "kcore", {0: 10}, 1)
    assert time.monotonic() - began < 20
    assert lines[1]["error"].startswith("NoRecords"), lines
    (row,) = _written(out)
    assert (row["outcome"], row["count"]) == ("NoRecords", 0)


def test_the_offset_tracker_counts_duplicates_and_skipped_offsets():
    tracker = OffsetTracker({0: 3, 1: 2})
    tracker.add([(0, 0, 10), (0, 1, 10)])  # the first records: the warm-up, not measured
    assert (tracker.records, tracker.count, tracker.finished) == (2, 0, False)
    tracker.add([(1, 1, 10), (0, 1, 10), (0, 2, 10)])  # 1-0 skipped, 0-1 again
    assert (tracker.records, tracker.count, tracker.bytes) == (5, 3, 30)
    assert (tracker.duplicates, tracker.skipped, tracker.unread) == (1, 1, 0)
    assert tracker.finished
    assert OffsetTracker({0: 0}).finished  # nothing to read
