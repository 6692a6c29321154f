"""consume: consumer throughput on the fetch path. A topic (4 partitions, replication
factor 3, `min.insync.replicas` 2, 1 KiB records) is filled once per cluster with acks=all
(not measured), then every case reads all of it from the beginning: 1 consumer that
assigns itself every partition, and 3 consumers in a group that share them (each reads its
share; the case ends when the group has read every record). Two clients: kcore's own
`kcore.Consumer` through kcore's protocol, and confluent-kafka's (librdkafka) through
Kafka's binary protocol, the peer figure, on the same cluster in the same run, each with
its default fetch settings. Both clusters (bench/workloads/_cluster.py), each its own cases,
3 repeats of each, the clients alternating; the quick suite reads 8 000 records with 1
consumer per client, once, on the process cluster.

The consumers run in a child process, one per client and repeat, which runs the cases one
after the other (bench/workloads/_kafka_consume_child.py, started, its lines read and its
deadlines kept by kafka-produce's `run_child`). A child, not this process: in the
single-process cluster the consumers would otherwise share the cluster's Trio thread, and
librdkafka's threads its GIL; so in both clusters the load generator has a process (a
core) of its own, the same for both clients. A case's warm-up is what comes before its
first records (the child's start, connecting, the group's join, the offsets' look-ups, the
first fetch): not measured. Groups join with `group.initial.rebalance.delay.ms` of
`rebalance_delay_ms` (Kafka's 3000 would add 3 s per group case): the members, started
together, join its first generation.

Rows: one `consume_interval` row per interval of a case (records and value bytes the
consumers returned in it). Each repeat is a case of its own (`...-rep1`, `-rep2`, ...):
the report's rate is a group's bytes over its span, which the gaps between repeats would
dilute. The confluent rows name the kcore case of the same cluster, consumer count and
repeat (measured just before) as their baseline (`bytes_per_s`). The console line per
case gives the median over the repeats with the min and max, records read and the
duplicates and skipped offsets seen (0 and 0 when every record was read once), the
child's CPU (`client_cpu`, a share of one core) and, in the process cluster, each broker's
(`broker-N_cpu`); in the single one the cluster's (`cluster_cpu`, this process). A child
that fails (confluent-kafka missing, say) leaves one error row per case it did not
measure, whose outcome names the cause.
"""

from __future__ import annotations

import functools
import logging
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs
import trio

from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload
from bench.workloads._cluster import (
    CLUSTERS,
    check_clusters,
    create_topic,
    open_cluster_of,
    suite_clusters,
)
from bench.workloads._process_cluster import ProcessCluster
from bench.workloads.kafka_produce import ChildFailed, run_child
from bench.workloads.produce import send_in_window
from kcore.common import TopicPartition

__all__ = [
    "CLIENTS",
    "ConsumeParams",
    "case_name",
    "fill_topic",
    "run_client",
    "run_consume",
    "spread",
]

NAME = "consume"
CLIENTS = ("kcore", "confluent")  # kcore first: the baseline is measured before its ratio
# Run as a script (it imports nothing of bench: see its doc), `-P`: nothing beside it either.
CHILD_SCRIPT = Path(__file__).with_name("_kafka_consume_child.py")
TOPIC = "consume"

log = logging.getLogger("bench.consume")


@attrs.frozen
class ConsumeParams:
    # Records in the topic, read whole by every case: ~3 s for kcore's consumer (about
    # 100 000 records/s of 1 KiB in one process, measured), about 1 s for librdkafka.
    records: int = 300_000
    record_bytes: int = 1024
    partitions: int = 4
    replication: int = 3
    consumers: tuple[int, ...] = (1, 3)  # the cases: 1 without a group, N > 1 a group
    clients: tuple[str, ...] = CLIENTS
    repeats: int = 3
    interval: float = 0.25  # seconds per throughput row
    clusters: tuple[str, ...] = CLUSTERS
    rebalance_delay_ms: int = 300
    # The fill: the produce workload's fast path, its window and batching.
    fill_in_flight: int = 2048
    fill_linger_ms: int = 10
    fill_batch_bytes: int = 256 * 1024
    fill_timeout: float = 600.0
    # The child: its start (interpreter, imports, the topic's offsets); per case, until its
    # first records (a group's join, the offsets topic's creation) and to read them all;
    # closing after its last case.
    ready_timeout: float = 30.0
    first_records_timeout: float = 60.0
    read_timeout: float = 120.0
    close_timeout: float = 30.0


def params_for(options: WorkloadOptions) -> ConsumeParams:
    if options.quick:
        # One consumer each: a group's join (and in a fresh cluster the offsets topic's
        # creation) would add 1 to 3 s to a workload the quick suite keeps near 5 s.
        return ConsumeParams(
            records=8000,
            consumers=(1,),
            repeats=1,
            interval=0.05,
            clusters=suite_clusters(options),
        )
    return ConsumeParams(clusters=suite_clusters(options))


def _size_name(nbytes: int) -> str:
    return f"{nbytes // 1024}KiB" if nbytes % 1024 == 0 else f"{nbytes}B"


def case_name(kind: str, client: str, consumers: int, record_bytes: int, repeat: int) -> str:
    """The rows' case: one per repeat (`-repN`); the console line drops the repeat."""
    return f"{_line_name(kind, client, consumers, record_bytes)}-rep{repeat}"


def _line_name(kind: str, client: str, consumers: int, record_bytes: int) -> str:
    return f"{kind}-{client}-{_size_name(record_bytes)}-x{consumers}"


@workload(
    NAME,
    "records/s and MB/s read from a filled topic (RF 3, 1 KiB) by 1 consumer and a group "
    "of 3, kcore's Consumer and confluent-kafka's as its peer",
)
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    return await run_consume(rows, params_for(options))


async def run_consume(rows: RowWriter, params: ConsumeParams) -> Summary:
    check_clusters(params.clusters)
    unknown = set(params.clients) - set(CLIENTS)
    if unknown:
        raise ValueError(f"unknown clients {sorted(unknown)}; expected some of {CLIENTS}")
    summary: Summary = []
    settings = {"group.initial.rebalance.delay.ms": params.rebalance_delay_ms}
    for kind in params.clusters:
        async with open_cluster_of(kind, broker_config=settings) as cluster:
            await create_topic(
                cluster,
                TOPIC,
                params.partitions,
                replication_factor=params.replication,
                config={"min.insync.replicas": str(min(params.replication, 2))},
            )
            ends = await fill_topic(cluster, TOPIC, params)
            # Per (client, consumers): each repeat's figures. Clients alternate within a
            # repeat, so both meet the machine's moments alike.
            measured: dict[tuple[str, int], list[dict[str, object]]] = {}
            for repeat in range(1, params.repeats + 1):
                for client in params.clients:
                    results = await run_client(
                        rows, params, cluster.bootstrap_servers, kind, client, ends, repeat,
                        cpu_seconds=functools.partial(_cluster_cpu_seconds, cluster),
                    )  # fmt: skip
                    for consumers, result in results.items():
                        measured.setdefault((client, consumers), []).append(result)
            summary += _summary_lines(params, kind, measured)
    return summary


async def fill_topic(cluster, topic: str, params: ConsumeParams) -> dict[int, int]:
    """Produces `params.records` records round-robin over the partitions with acks=all
    (the produce workload's fast path); returns each partition's end offset. Not
    measured. Raises the first delivery error."""
    failures: list[BaseException] = []

    def delivered(metadata: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    value = b"x" * params.record_bytes
    with trio.fail_after(params.fill_timeout):
        async with cluster.producer(
            acks="all", linger_ms=params.fill_linger_ms, batch_size=params.fill_batch_bytes
        ) as producer:
            await send_in_window(
                producer, topic, value, partitions=params.partitions,
                numbers=range(params.records), in_flight=params.fill_in_flight,
                stop=trio.Event(), on_delivery=lambda _number: delivered,
            )  # fmt: skip
            await producer.flush()
        if failures:
            raise failures[0]
        async with cluster.consumer() as consumer:
            ends = await consumer.end_offsets(
                [TopicPartition(topic, p) for p in range(params.partitions)]
            )
    return {tp.partition: offset for tp, offset in sorted(ends.items())}


@attrs.frozen
class _ChildLimits:
    """The deadlines kafka-produce's `run_child` keeps (it reads these names): ready
    within `ready_timeout` (+5 s), then `warmup + duration + overrun` (+5 s) until `done`,
    then `close_timeout`."""

    ready_timeout: float
    duration: float
    close_timeout: float
    warmup: float = 0.0
    overrun: float = 0.0


def _child_command(params: ConsumeParams, bootstrap: str, client: str, ends, group_prefix):
    options = {
        "client": client,
        "bootstrap": bootstrap,
        "topic": TOPIC,
        "ends": ",".join(f"{partition}:{end}" for partition, end in sorted(ends.items())),
        "consumers": ",".join(str(n) for n in params.consumers),
        "group-prefix": group_prefix,
        "interval": params.interval,
        "ready-timeout": params.ready_timeout,
        "first-records-timeout": params.first_records_timeout,
        "read-timeout": params.read_timeout,
        "close-timeout": params.close_timeout,
    }
    command = [sys.executable, "-P", str(CHILD_SCRIPT)]
    for option, value in options.items():
        command += [f"--{option}", str(value)]
    return command


async def run_client(
    rows: RowWriter,
    params: ConsumeParams,
    bootstrap: str,
    kind: str,
    client: str,
    ends: dict[int, int],
    repeat: int,
    *,
    cpu_seconds: Callable[[], dict[str, float]] = dict,
) -> dict[int, dict[str, object]]:
    """One client's child for one repeat, reading from `bootstrap`: its cases' rows, and
    per consumer count the case's figures, or `error` (then one error row for each case
    it did not measure). `cpu_seconds()`: CPU seconds used so far by the cluster's
    processes, by name (read at each interval report)."""
    names = {n: case_name(kind, client, n, params.record_bytes, repeat) for n in params.consumers}
    case_params: dict[int, dict[str, object]] = {}
    for consumers in params.consumers:
        case_params[consumers] = {
            "cluster": kind,
            "client": client,
            "protocol": "kafka" if client == "confluent" else "kcore",
            "consumers": consumers,
            "group": consumers > 1,
            "repeat": repeat,
            "records": sum(ends.values()),
            "record_bytes": params.record_bytes,
            "partitions": params.partitions,
            "replication_factor": params.replication,
        }
        if client != "kcore":
            baseline = case_name(kind, "kcore", consumers, params.record_bytes, repeat)
            case_params[consumers]["baseline"] = f"{NAME}/{baseline}/consume_interval"
            case_params[consumers]["baseline_metric"] = "bytes_per_s"
    # Per case: the (monotonic time, cpu_seconds()) of its first and latest interval.
    cpu_readings: dict[int, list[tuple[float, dict[str, float]]]] = {}

    def on_interval(report: dict[str, object]) -> None:
        consumers = int(report["consumers"])
        rows.write(
            case=names[consumers], op="consume_interval", params=case_params[consumers],
            start_time=float(report["start"]),
            latency_ns=round(float(report["seconds"]) * 1e9),
            nbytes=int(report["bytes"]), count=int(report["count"]),
        )  # fmt: skip
        reading = (time.monotonic(), cpu_seconds())
        first = cpu_readings.get(consumers, [reading])[0]
        cpu_readings[consumers] = [first, reading]

    began_wall, began = time.time(), trio.current_time()
    cases_per_child = len(params.consumers)
    limits = _ChildLimits(
        ready_timeout=params.ready_timeout,
        duration=cases_per_child
        * (params.first_records_timeout + params.read_timeout + params.close_timeout),
        close_timeout=params.close_timeout,
    )
    group_prefix = f"{NAME}-{kind}-{client}-rep{repeat}"
    command = _child_command(params, bootstrap, client, ends, group_prefix)
    try:
        done = await run_child(command, limits, on_interval)
        results = {int(case["consumers"]): case for case in done.get("cases", [])}
        failure = None
    except ChildFailed as error:
        results, failure = {}, error
    lines: dict[int, dict[str, object]] = {}
    for consumers in params.consumers:
        result = results.get(consumers)
        if result is None:
            failure = failure or ChildFailed("NotMeasured", "the child did not report this case")
            message = f"{names[consumers]}: the {client} consumer failed: {failure}"
            log.error("%s", message)  # on stderr even unconfigured (logging's last resort)
            rows.write(
                case=names[consumers], op="consume_interval",
                params={**case_params[consumers], "error": str(failure)},
                start_time=began_wall, latency_ns=round((trio.current_time() - began) * 1e9),
                nbytes=0, count=0, outcome=failure.name,
            )  # fmt: skip
            lines[consumers] = {"error": f"{failure.name}: {failure}"}
            continue
        lines[consumers] = _case_figures(result, cpu_readings.get(consumers, []))
    return lines


def _cluster_cpu_seconds(cluster) -> dict[str, float]:
    """CPU seconds so far: each broker's in a process cluster, else this process's (which
    runs the single-process cluster)."""
    if isinstance(cluster, ProcessCluster):
        return {
            name: seconds for name, seconds in cluster.cpu_seconds().items() if name != "zkstub"
        }
    return {"cluster": time.process_time()}


def _case_figures(result: dict[str, object], readings) -> dict[str, object]:
    seconds = float(result["seconds"])
    count, nbytes = int(result["count"]), int(result["bytes"])
    figures: dict[str, object] = {
        "records_per_s": count / seconds if seconds else 0.0,
        "MB_per_s": nbytes / seconds / 1e6 if seconds else 0.0,
        "records": int(result["records"]),
        "duplicates": int(result["duplicates"]),
        "skipped": int(result["skipped"]),
        "unread": int(result["unread"]),
    }
    if seconds:
        figures["client_cpu"] = float(result["cpu_s"]) / seconds
    # From the case's first interval report to its last: the cluster's share of a core.
    if len(readings) == 2 and readings[1][0] > readings[0][0]:
        (start, first), (end, last) = readings
        figures.update(
            (f"{name}_cpu", (last[name] - first[name]) / (end - start))
            for name in sorted(last)
            if name in first
        )
    if result.get("errors"):
        figures["client_errors"] = result["errors"]
    return figures


def spread(values: Iterable[float], digits: int = 2) -> tuple[float, float, float]:
    """(min, median, max), rounded."""
    ordered = sorted(values)
    return (
        round(ordered[0], digits),
        round(statistics.median(ordered), digits),
        round(ordered[-1], digits),
    )


def _summary_lines(
    params: ConsumeParams, kind: str, measured: dict[tuple[str, int], list[dict[str, object]]]
) -> Summary:
    """A console line per (client, consumers): the median over the repeats, its min and
    max, what was read and checked, the confluent case's ratio to kcore's."""
    lines: Summary = []
    for consumers in params.consumers:
        for client in params.clients:
            repeats = measured.get((client, consumers), [])
            line: dict[str, object] = {
                "case": _line_name(kind, client, consumers, params.record_bytes),
                "repeats": len(repeats),
            }
            good = [r for r in repeats if "error" not in r]
            errors = [str(r["error"]) for r in repeats if "error" in r]
            if good:
                line.update(_spread_figures(good))
                kcore = measured.get(("kcore", consumers), [])
                ratios = [
                    float(mine["MB_per_s"]) / float(theirs["MB_per_s"])
                    for mine, theirs in zip(repeats, kcore, strict=False)
                    if "error" not in mine and "error" not in theirs and theirs["MB_per_s"]
                ]
                if client != "kcore" and ratios:
                    line["ratio"] = round(statistics.median(ratios), 3)
            if errors:
                line["error"] = errors[0]
                line["failed_repeats"] = len(errors)
            lines.append(line)
    return lines


def _spread_figures(good: list[dict[str, object]]) -> dict[str, object]:
    line: dict[str, object] = {}
    rates = spread(float(r["MB_per_s"]) for r in good)
    line["MB_per_s"] = rates[1]
    line["MB_per_s_min"], line["MB_per_s_max"] = rates[0], rates[2]
    line["records_per_s"] = round(statistics.median(float(r["records_per_s"]) for r in good))
    # Every repeat reads the whole topic: the fewest it read, and every repeat's defects.
    line["records"] = min(int(r["records"]) for r in good)
    for name in ("duplicates", "skipped", "unread"):
        line[name] = sum(int(r[name]) for r in good)
    shares = sorted({name for r in good for name in r if name.endswith("_cpu")})
    for name in shares:
        values = [float(r[name]) for r in good if name in r]
        line[name] = round(statistics.median(values), 2)
    client_errors: dict[str, int] = {}
    for r in good:
        for name, n in dict(r.get("client_errors") or {}).items():
            client_errors[name] = client_errors.get(name, 0) + int(n)
    if client_errors:
        line["client_errors"] = client_errors
    return line
