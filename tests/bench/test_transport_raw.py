"""The transport-raw workload with tiny parameters, and the CLI that runs it."""

import io
import json

import pytest

import transport
from bench import ROW_FIELDS, RowWriter, read_rows
from bench.__main__ import main
from bench.workloads import WORKLOADS, WorkloadOptions
from bench.workloads.transport_raw import RawParams, payload_for_frame, run_transport_raw

TINY = RawParams(
    duration=0.05,
    warmup=0.01,
    interval=0.01,
    stream_cases=((100, 4), (65536, 1)),
    in_flight=(1, 4),
)


@pytest.mark.parametrize("frame_bytes", [100, 1024, 65536, 300, 70000])
def test_payload_makes_frames_of_exactly_the_asked_size(frame_bytes):
    assert len(transport.encode_frame(payload_for_frame(frame_bytes))) == frame_bytes


async def test_rows_describe_every_case():
    out = io.StringIO()
    rows = RowWriter(
        out, workload="transport-raw", git_sha="abc", seed=3, run_id="r1", clock=lambda: 1000.0
    )
    summary = await run_transport_raw(rows, TINY)
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows.rows_written == len(written) > 0
    assert all(tuple(row) == ROW_FIELDS for row in written)
    assert {row["case"] for row in written} == {
        "stream-100B-x4",
        "stream-64KiB-x1",
        "round-trip-x1",
        "round-trip-x4",
    }
    for row in written:
        assert (row["workload"], row["git_sha"], row["seed"], row["run_id"]) == (
            "transport-raw",
            "abc",
            3,
            "r1",
        )
        assert row["latency_ns"] > 0 and row["count"] > 0 and row["outcome"] == "ok"
        assert 1000.0 <= row["start_time"] < 1000.0 + 60  # stamped from the injected clock
        if row["op"] == "stream_interval":
            assert row["bytes"] == row["count"] * row["params"]["frame_bytes"]
        else:
            assert row["op"] == "round_trip" and row["count"] == 1 and row["bytes"] > 200
    assert [line["case"] for line in summary] == [
        "stream-100B-x4",
        "stream-64KiB-x1",
        "round-trip-x1",
        "round-trip-x4",
    ]
    assert all(line.get("frames_per_s", line.get("round_trips_per_s")) > 0 for line in summary)


def test_cli_runs_the_workload_from_one_command(tmp_path, capsys):
    assert main(["run", "transport-raw", "--quick", "--out", str(tmp_path)]) == 0
    rows = read_rows(tmp_path / "transport-raw.jsonl")
    assert {row["op"] for row in rows} == {"stream_interval", "round_trip"}
    assert len({row["run_id"] for row in rows}) == 1
    headline = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["case"] for line in headline} >= {
        "stream-100B-x1",
        "stream-64KiB-x1",
        "round-trip-x64",
    }


def test_cli_lists_workloads_and_rejects_unknown_ones(capsys):
    assert main(["list"]) == 0
    assert "transport-raw" in capsys.readouterr().out
    assert main(["run", "no-such-workload"]) == 2
    assert "unknown workload 'no-such-workload'" in capsys.readouterr().err


def test_registry_and_suites():
    assert "transport-raw" in WORKLOADS
    assert WorkloadOptions(suite="quick").quick
    with pytest.raises(ValueError, match="unknown suite"):
        WorkloadOptions(suite="medium")
