"""zk-ops: create / get / set / delete of small znodes, one at a time and pipelined, against
the zkstub server and a real ZooKeeper, each in a process of its own, both through one
client (zkstub's Trio client speaking ZooKeeper's own protocol, `jute://`) and both
persisting every write with fsync, in one run: the report's ratio (zkstub over ZooKeeper)
compares servers, not clients. zkstub is also measured in memory (no data directory, no
fsync), labelled as such, against the same ZooKeeper baseline."""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

import zkstub
from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload

NAME = "zk-ops"
OPS = ("create", "get", "set", "delete")


@attrs.frozen
class ZkOpsParams:
    nodes: int = 500  # znodes per op kind, one at a time
    pipelined: int = 2000  # gets with `in_flight` outstanding
    in_flight: int = 32
    value: bytes = b"x" * 64
    # The loaded cases: this many client processes, each `load_in_flight` requests at a
    # time, for `load_seconds` (see _zk_load_child).
    load_processes: int = 3
    load_in_flight: int = 64
    load_seconds: float = 3.0


def params_for(options: WorkloadOptions) -> ZkOpsParams:
    if options.quick:
        return ZkOpsParams(nodes=50, pipelined=200, load_processes=2, load_seconds=1.0)
    return ZkOpsParams()


LOAD_CHILD = "bench.workloads._zk_load_child"


@contextlib.asynccontextmanager
async def _zkstub_server_process(*args: str) -> AsyncIterator[str]:
    """`python -m zkstub serve` in a child process, as ZooKeeper runs in its own JVM: the
    server does not share this process's one thread with the client measuring it."""
    command = [sys.executable, "-m", "zkstub", "serve", "--port", "0", *args]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                if not chunk:
                    raise RuntimeError(f"{' '.join(command)} exited before it served")
                line += chunk
        # "zkstub serving on 127.0.0.1:PORT"
        yield f"jute://{line.decode().split()[-1]}"
    finally:
        process.terminate()
        with trio.CancelScope(shield=True):
            await process.wait()


@contextlib.asynccontextmanager
async def _zkstub_target() -> AsyncIterator[str]:
    """zkstub as ZooKeeper runs: every write logged and fsynced before it is answered."""
    with tempfile.TemporaryDirectory(prefix="zk-ops-zkstub-") as data_dir:
        async with _zkstub_server_process("--data-dir", data_dir) as connect_string:
            yield connect_string


@contextlib.asynccontextmanager
async def _zkstub_in_memory_target() -> AsyncIterator[str]:
    async with _zkstub_server_process() as connect_string:
        yield connect_string


@contextlib.asynccontextmanager
async def _real_target() -> AsyncIterator[str | None]:
    """ZooKeeper with its defaults: forceSync=yes, so it fsyncs its log like zkstub above."""
    try:
        import zkstub.testing as testing
    except ImportError:
        yield None
        return
    if not (testing.java_available() and testing.find_zookeeper_classpath()):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="zk-ops-") as data_dir:
        async with testing.run_real_zookeeper(Path(data_dir)) as real:
            yield f"jute://{real.connect_string}"


# (target, how to open it, what its ratio row says); the ZooKeeper baseline comes first.
TARGETS: tuple[tuple[str, Callable[[], Any], str], ...] = (
    ("zookeeper", _real_target, ""),
    ("zkstub", _zkstub_target, "zkstub/zookeeper, both with fsync"),
    ("zkstub-in-memory", _zkstub_in_memory_target,
     "zkstub in memory (no fsync)/zookeeper with fsync"),
)  # fmt: skip


@workload(
    NAME,
    "create/get/set/delete of small znodes, sequential and pipelined, zkstub vs a real "
    "ZooKeeper through one client over ZooKeeper's protocol, both with fsync",
)
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    params = params_for(options)
    summary: Summary = []
    throughput: dict[str, float] = {}
    for target, opener, _ in TARGETS:
        async with opener() as connect_string:
            if connect_string is None:
                summary.append({"target": target, "skipped": "no ZooKeeper/Java on this machine"})
                continue
            async with zkstub.connect(
                connect_string, session_timeout=10.0, rng=random.Random(options.seed)
            ) as zk:
                results = await run_zk_ops(rows, params, zk, target)
                loaded = [
                    await _loaded(rows, params, zk, target, connect_string, op)
                    for op in ("get", "set")
                ]
            summary += results + loaded
            throughput[target] = sum(r["ops_per_s"] for r in results) / len(results)
            throughput[f"{target}-loaded"] = sum(r["ops_per_s"] for r in loaded) / len(loaded)
    for target, _, label in TARGETS:
        if label and target in throughput and "zookeeper" in throughput:
            ratio = throughput[target] / throughput["zookeeper"]
            summary.append({"ratio": f"{label}, one client", "ops_per_s": ratio})
            ratio = throughput[f"{target}-loaded"] / throughput["zookeeper-loaded"]
            summary.append({"ratio": f"{label}, under load", "ops_per_s": ratio})
    return summary


async def run_zk_ops(rows: RowWriter, params: ZkOpsParams, zk: Any, target: str) -> Summary:
    summary = []
    root = f"/bench-{time.time_ns()}"
    await zk.create(root, b"")
    paths = [f"{root}/n{i:06d}" for i in range(params.nodes)]
    calls = {
        "create": lambda p: zk.create(p, params.value),
        "get": lambda p: zk.get(p),
        "set": lambda p: zk.set(p, params.value),
        "delete": lambda p: zk.delete(p),
    }
    for op in OPS:
        case = f"{target}-{op}-sequential"
        start = time.perf_counter_ns()
        for path in paths:
            began = time.perf_counter_ns()
            await calls[op](path)
            rows.write(
                case=case, op=op, params=_params(target, 1, f"{op}-sequential", op),
                start_time=time.time(), latency_ns=time.perf_counter_ns() - began,
                nbytes=len(params.value) if op in ("create", "set") else 0,
            )  # fmt: skip
        elapsed = (time.perf_counter_ns() - start) / 1e9
        summary.append({"case": case, "ops_per_s": len(paths) / elapsed})
    summary.append(await _pipelined_gets(rows, params, zk, target, root))
    await zk.delete(root, recursive=True)
    return summary


async def _pipelined_gets(rows: RowWriter, params: ZkOpsParams, zk: Any, target: str, root: str):
    path = f"{root}/pipelined"
    await zk.create(path, params.value)
    pipelined = f"get-pipelined-x{params.in_flight}"
    case = f"{target}-{pipelined}"
    row_params = _params(target, params.in_flight, pipelined, "get")
    remaining = params.pipelined
    start = time.perf_counter_ns()

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            began = time.perf_counter_ns()
            await zk.get(path)
            rows.write(
                case=case, op="get",
                params=row_params,
                start_time=time.time(), latency_ns=time.perf_counter_ns() - began,
            )  # fmt: skip

    async with trio.open_nursery() as nursery:
        for _ in range(params.in_flight):
            nursery.start_soon(worker)
    elapsed = (time.perf_counter_ns() - start) / 1e9
    await zk.delete(path)
    return {"case": case, "ops_per_s": params.pipelined / max(elapsed, 1e-9)}


async def _loaded(
    rows: RowWriter, params: ZkOpsParams, zk: Any, target: str, connect_string: str, op: str
) -> dict[str, object]:
    """The server under load: `load_processes` client processes (_zk_load_child), each
    with `load_in_flight` requests outstanding on one znode, for `load_seconds`; what the
    server answered per second, all processes together."""
    path = f"/bench-load-{time.time_ns()}"
    await zk.create(path, params.value)
    command = [
        sys.executable, "-m", LOAD_CHILD, "--connect", connect_string, "--op", op,
        "--path", path, "--value-bytes", str(len(params.value)),
        "--in-flight", str(params.load_in_flight), "--duration", str(params.load_seconds),
    ]  # fmt: skip
    results: list[dict[str, Any]] = []
    began = time.time()

    async def one() -> None:
        done = await trio.run_process(command, capture_stdout=True, check=False)
        lines = done.stdout.decode().strip().splitlines()
        answer = json.loads(lines[-1]) if lines else {"error": f"exit status {done.returncode}"}
        if "error" in answer:
            raise RuntimeError(f"a zk-ops load process against {target} failed: {answer}")
        results.append(answer)

    async with trio.open_nursery() as nursery:
        for _ in range(params.load_processes):
            nursery.start_soon(one)
    await zk.delete(path)
    count = sum(int(r["count"]) for r in results)
    seconds = max(float(r["seconds"]) for r in results)
    case_name = f"{op}-loaded-{params.load_processes}x{params.load_in_flight}"
    case = f"{target}-{case_name}"
    rows.write(
        case=case, op=f"{op}_interval", params=_params(target, params.load_in_flight,
                                                       case_name, f"{op}_interval"),
        start_time=began, latency_ns=round(seconds * 1e9), count=count,
        nbytes=count * len(params.value) if op == "set" else 0,
    )  # fmt: skip
    return {"case": case, "ops_per_s": count / seconds if seconds else 0.0}


def _params(target: str, in_flight: int, case: str, op: str) -> dict[str, object]:
    """A zkstub row names the same operation on the real ZooKeeper as its baseline."""
    params: dict[str, object] = {"target": target, "in_flight": in_flight}
    if target != "zookeeper":
        params["baseline"] = f"{NAME}/zookeeper-{case}/{op}"
        params["baseline_metric"] = "ops_per_s"
    return params


__all__ = ["ZkOpsParams", "run_zk_ops"]
