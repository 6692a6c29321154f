"""The zk-ops workload on tiny parameters against the zkstub server."""

import io
import json
import random

import transport
import zkstub
from bench import RowWriter
from bench.workloads.zk_ops import ZkOpsParams, run_zk_ops


async def test_zk_ops_rows_cover_every_op_and_leave_no_nodes():
    out = io.StringIO()
    rows = RowWriter(out, workload="zk-ops", git_sha="abc", seed=0, run_id="r")
    params = ZkOpsParams(nodes=5, pipelined=20, in_flight=4)
    async with zkstub.open_server(network=transport.TcpNetwork()) as server:
        async with zkstub.connect(f"127.0.0.1:{server.address[1]}", rng=random.Random(0)) as zk:
            summary = await run_zk_ops(rows, params, zk, "zkstub")
            assert await zk.get_children("/") == ["zookeeper"]
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    counts = {}
    for row in written:
        counts[row["case"]] = counts.get(row["case"], 0) + 1
    assert counts == {
        "zkstub-create-sequential": 5,
        "zkstub-get-sequential": 5,
        "zkstub-set-sequential": 5,
        "zkstub-delete-sequential": 5,
        "zkstub-get-pipelined-x4": 20,
    }
    assert all(row["outcome"] == "ok" and row["latency_ns"] > 0 for row in written)
    assert [s["case"] for s in summary][-1] == "zkstub-get-pipelined-x4"
