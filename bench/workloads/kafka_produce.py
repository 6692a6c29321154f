"""kafka-produce: producing through Kafka's binary protocol with confluent-kafka
(librdkafka) against kcore's own client through kcore's protocol, on the same 3-broker
cluster in the same run, for acks 1 / all and replication factor 1 / 3 (min.insync.replicas
2 at RF 3), 1 KiB records, 4 partitions.

Each case's producer runs in a child process of its own (bench/workloads/_kafka_produce_child.py)
while the cluster runs on this process's Trio thread: both clients then work under the same
conditions (the cluster on one core, the client on the other), and librdkafka's threads
never compete with the brokers for this process's GIL. The child reports per-interval counts
of acknowledged records as JSON lines; this process writes them as `produce_interval` rows.

The ratio: the confluent case's rows name the kcore case of the same acks and RF as their
baseline (`bytes_per_s`), so the report shows confluent-through-Kafka's-protocol as a
fraction of kcore's own client. A child that fails (confluent-kafka missing, a broker that
does not answer Kafka's protocol) becomes one error row whose outcome names the cause and
whose params carry its message; every wait on a child is bounded.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import subprocess
import sys
import time

import attrs
import trio

from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload
from bench.workloads._cluster import create_topic, open_bench_cluster

__all__ = [
    "CLIENTS",
    "ChildFailed",
    "KafkaProduceParams",
    "case_name",
    "run_case",
    "run_child",
    "run_kafka_produce",
]

NAME = "kafka-produce"
CLIENTS = ("kcore", "confluent")  # kcore first: the baseline is measured before its ratio
CHILD_MODULE = "bench.workloads._kafka_produce_child"
_STDERR_TAIL = 4000  # bytes of a child's stderr kept (its last lines name a failure)

log = logging.getLogger("bench.kafka_produce")


@attrs.frozen
class KafkaProduceParams:
    duration: float = 3.0  # measured seconds per case
    warmup: float = 0.5
    interval: float = 0.25  # seconds per throughput row
    acks: tuple[str, ...] = ("1", "all")
    replication: tuple[int, ...] = (1, 3)
    clients: tuple[str, ...] = CLIENTS
    record_bytes: int = 1024
    partitions: int = 4
    # Records produced and not yet acknowledged, for both clients (kcore's sender tasks,
    # confluent's `queue.buffering.max.messages`). Enough to fill batches (512 per
    # partition, 256 per 256 KiB batch): with produce's 512 every batch waited out its
    # linger and both clients were capped near 512 / (linger + round trip) ~ 40 k/s
    # (measured), a ratio of latencies rather than of throughputs.
    in_flight: int = 2048
    linger_ms: int = 10
    batch_bytes: int = 256 * 1024
    min_records: int = 50  # measured at the least (within `overrun` past `duration`)
    overrun: float = 10.0
    # How long the child may take to start and have its first record acknowledged, and to
    # close after measuring, before it counts as failed (and is killed).
    ready_timeout: float = 15.0
    close_timeout: float = 15.0


def params_for(options: WorkloadOptions) -> KafkaProduceParams:
    if options.quick:
        return KafkaProduceParams(
            duration=0.5, warmup=0.2, interval=0.1, acks=("all",), replication=(3,)
        )
    return KafkaProduceParams()


def _size_name(nbytes: int) -> str:
    return f"{nbytes // 1024}KiB" if nbytes % 1024 == 0 else f"{nbytes}B"


def case_name(client: str, acks: str, rf: int, record_bytes: int) -> str:
    return f"{client}-acks-{acks}-rf{rf}-{_size_name(record_bytes)}"


@workload(
    NAME,
    "records/s and MB/s produced by confluent-kafka through Kafka's protocol, as a ratio of "
    "kcore's own client on the same cluster (acks 1/all, RF 1/3, 1 KiB records)",
)
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    return await run_kafka_produce(rows, params_for(options))


async def run_kafka_produce(rows: RowWriter, params: KafkaProduceParams) -> Summary:
    unknown = set(params.clients) - set(CLIENTS)
    if unknown:
        raise ValueError(f"unknown clients {sorted(unknown)}; expected some of {CLIENTS}")
    summary: Summary = []
    async with open_bench_cluster() as cluster:
        topics = itertools.count()
        for rf, acks in itertools.product(params.replication, params.acks):
            rates: dict[str, float] = {}
            for client in params.clients:
                topic = f"kafka-produce-{next(topics)}"
                await create_topic(
                    cluster,
                    topic,
                    params.partitions,
                    replication_factor=rf,
                    config={"min.insync.replicas": str(min(rf, 2))},
                )
                line = await run_case(
                    rows, params, cluster.bootstrap_servers, topic, client, acks, rf
                )
                if "error" not in line:
                    rates[client] = line["records_per_s"]
                if client != "kcore" and rates.get("kcore") and client in rates:
                    line["ratio"] = round(rates[client] / rates["kcore"], 3)
                summary.append(line)
    return summary


def _child_command(params: KafkaProduceParams, bootstrap, topic, client, acks) -> list[str]:
    # The same interpreter as this process (its virtualenv, its confluent-kafka); the
    # environment is inherited.
    options = {
        "client": client,
        "bootstrap": bootstrap,
        "topic": topic,
        "partitions": params.partitions,
        "acks": acks,
        "record-bytes": params.record_bytes,
        "duration": params.duration,
        "warmup": params.warmup,
        "interval": params.interval,
        "in-flight": params.in_flight,
        "linger-ms": params.linger_ms,
        "batch-bytes": params.batch_bytes,
        "min-records": params.min_records,
        "overrun": params.overrun,
        "ready-timeout": params.ready_timeout,
    }
    command = [sys.executable, "-m", CHILD_MODULE]
    for option, value in options.items():
        command += [f"--{option}", str(value)]
    return command


class ChildFailed(Exception):
    """The child ended without reporting `done`, or said why it failed. `name` is the
    row's outcome (the child's own error name when it gave one)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


async def run_case(rows, params, bootstrap, topic, client, acks, rf) -> dict[str, object]:
    """One client's case against `bootstrap` (its topic made already): its rows, and its
    headline figures, or `error` when its child failed (then one error row says why)."""
    case = case_name(client, acks, rf, params.record_bytes)
    case_params: dict[str, object] = {
        "client": client,
        "protocol": "kafka" if client == "confluent" else "kcore",
        "acks": acks,
        "replication_factor": rf,
        "record_bytes": params.record_bytes,
        "partitions": params.partitions,
        "in_flight": params.in_flight,
        "linger_ms": params.linger_ms,
        "batch_bytes": params.batch_bytes,
    }
    if client != "kcore":
        kcore_case = case_name("kcore", acks, rf, params.record_bytes)
        case_params["baseline"] = f"{NAME}/{kcore_case}/produce_interval"
        case_params["baseline_metric"] = "bytes_per_s"
    size = params.record_bytes

    def on_interval(report: dict[str, object]) -> None:
        count = int(report["count"])
        rows.write(
            case=case, op="produce_interval", params=case_params,
            start_time=float(report["start"]), latency_ns=round(float(report["seconds"]) * 1e9),
            nbytes=count * size, count=count,
        )  # fmt: skip

    began_wall, began = time.time(), trio.current_time()
    command = _child_command(params, bootstrap, topic, client, acks)
    try:
        done = await run_child(command, params, on_interval)
    except ChildFailed as failure:
        message = f"{case}: the {client} producer failed: {failure}"
        log.error("%s", message)  # on stderr even unconfigured (logging's last resort)
        # One row for the failure, in the case's own group: the report's errors column
        # shows it next to the case's figures (whatever intervals came before it).
        rows.write(
            case=case, op="produce_interval", params={**case_params, "error": str(failure)},
            start_time=began_wall, latency_ns=round((trio.current_time() - began) * 1e9),
            nbytes=0, count=0, outcome=failure.name,
        )  # fmt: skip
        return {"case": case, "client": client, "error": f"{failure.name}: {failure}"}
    seconds = float(done["seconds"])
    records_per_s = int(done["count"]) / seconds if seconds else 0.0
    line: dict[str, object] = {
        "case": case,
        "client": client,
        "records_per_s": round(records_per_s),
        "MB_per_s": round(records_per_s * size / 1e6, 2),
    }
    # A core's worth (1.0) on either side says which one bounded the rate.
    if seconds and "cpu_s" in done:
        line["client_cpu"] = round(float(done["cpu_s"]) / seconds, 2)
    if "cluster_cpu" in done:
        line["cluster_cpu"] = round(float(done["cluster_cpu"]), 2)
    if done.get("errors"):
        line["send_errors"] = done["errors"]
    return line


async def run_child(command, params: KafkaProduceParams, on_interval) -> dict[str, object]:
    """Runs the child, handing each interval report to `on_interval`; returns its `done`
    report. Raises ChildFailed when it fails, says so, or misses a deadline (it is killed:
    cancelling `run_process` kills the child)."""
    # Deadlines: ready within `ready_timeout` (interpreter start and imports included);
    # measuring ends by warm-up + duration + overrun (the child's own limit, plus slack);
    # then the child closes its client within `close_timeout`.
    measure_limit = params.warmup + params.duration + params.overrun + 5.0
    stderr = bytearray()
    reports: list[dict[str, object]] = []
    cpu_start: list[float] = []
    state = {"phase": "starting", "deadline": trio.current_time() + params.ready_timeout + 5.0}

    async def drain_stderr(stream) -> None:
        # Drained all along: a child blocked on a full stderr pipe would hang the case.
        async for chunk in stream:
            stderr.extend(chunk)
            del stderr[: max(0, len(stderr) - _STDERR_TAIL)]

    def stderr_tail() -> str:
        # Its last few lines: the cause is usually there, and a client retrying a
        # connection repeats one line many times.
        lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line]
        tail = " | ".join(line[:300] for line in lines[-3:])
        return f"; stderr (last lines): {tail}" if tail else ""

    async def read_reports(stream, deadline_scope: trio.CancelScope) -> None:
        buffer = b""
        async for chunk in stream:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                try:
                    report = json.loads(raw)
                except ValueError:  # not ours (a library printing to stdout): keep it
                    stderr.extend(raw + b"\n")
                    continue
                kind = report.get("type") if isinstance(report, dict) else None
                if kind == "ready":
                    state["phase"] = "measuring"
                    deadline_scope.deadline = trio.current_time() + measure_limit
                elif kind == "begin":
                    cpu_start[:] = [time.process_time(), trio.current_time()]
                elif kind == "interval":
                    on_interval(report)
                elif kind == "done":
                    if cpu_start:  # the cluster's share of this process's core meanwhile
                        cpu, wall = time.process_time(), trio.current_time()
                        report["cluster_cpu"] = (cpu - cpu_start[0]) / (wall - cpu_start[1])
                    state["phase"] = "closing"
                    deadline_scope.deadline = trio.current_time() + params.close_timeout
                reports.append(report)

    async with trio.open_nursery() as nursery:
        with trio.CancelScope(deadline=state["deadline"]) as scope:
            process = await nursery.start(
                functools.partial(
                    trio.run_process,
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    check=False,
                )
            )
            nursery.start_soon(drain_stderr, process.stderr)
            await read_reports(process.stdout, scope)
            await process.wait()
        if scope.cancelled_caught:
            nursery.cancel_scope.cancel()  # kills the child (run_process's cancellation)
    by_kind = {report.get("type"): report for report in reports}
    if "error" in by_kind:
        error = by_kind["error"]
        raise ChildFailed(str(error.get("error")), f"{error.get('message')}{stderr_tail()}")
    if "done" not in by_kind:
        if scope.cancelled_caught:
            raise ChildFailed(
                "Timeout", f"the child was killed, still {state['phase']}{stderr_tail()}"
            )
        raise ChildFailed(
            "ChildExited",
            f"the child exited with status {process.returncode} without reporting its "
            f"measurement{stderr_tail()}",
        )
    if scope.cancelled_caught or process.returncode:
        # Measured, but the close failed or hung: the figures stand, the log says so.
        log.warning(
            "%s: the child measured but then %s%s",
            command,
            "hung closing" if scope.cancelled_caught else f"exited {process.returncode}",
            stderr_tail(),
        )
    return by_kind["done"]
