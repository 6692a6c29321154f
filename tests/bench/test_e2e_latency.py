"""The e2e-latency workload with tiny parameters: a measured maximum rate, then one row per
measured record for each offered rate, warm-up left out."""

import io
import json

from bench import ROW_FIELDS, RowWriter
from bench.workloads.e2e_latency import E2eParams, run_e2e

# The single-process cluster: the quick suite (test_suite_end_to_end) runs the processes one.
TINY = E2eParams(
    fractions=(0.25, 0.5), duration=0.3, warmup=0.2, max_rate_duration=0.3, clusters=("single",)
)


async def test_rows_and_summary_report_latency_against_the_offered_rate():
    out = io.StringIO()
    rows = RowWriter(out, workload="e2e-latency", git_sha="abc", seed=1, run_id="r1")
    summary = await run_e2e(rows, TINY)
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(tuple(row) == ROW_FIELDS for row in written)
    (max_row,) = [row for row in written if row["op"] == "max-rate"]
    max_rate = summary[0]["records_per_s"]
    assert summary[0]["case"] == "single-max-rate" and max_rate > 0
    assert max_row["count"] > 0 and max_row["latency_ns"] > 0
    cases = summary[1:]
    assert [case["rate"] for case in cases] == [round(max_rate * f) for f in TINY.fractions]
    for case in cases:
        e2e = [row for row in written if row["case"] == case["case"]]
        # Only the records due after the warm-up, each once.
        assert case["records"] == len(e2e) == int(case["rate"] * TINY.duration)
        assert all(row["op"] == "e2e" and row["outcome"] == "ok" for row in e2e)
        assert all(row["params"]["rate"] == case["rate"] for row in e2e)
        assert all(row["params"]["cluster"] == "single" for row in e2e)
        assert case["case"].startswith("single-")
        assert all(row["bytes"] == TINY.record_bytes for row in e2e)
        latencies = sorted(row["latency_ns"] / 1e6 for row in e2e)
        assert 0 < case["p50_ms"] <= case["p99_ms"] <= case["p999_ms"] <= case["max_ms"]
        assert case["max_ms"] == round(latencies[-1], 2)
