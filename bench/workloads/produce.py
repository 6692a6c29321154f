"""produce: producer throughput and send latency against a 3-broker cluster on TCP
loopback, for acks 0 / 1 / all, replication factor 1 and 3, 100 B and 1 KiB records, and 1
and 4 producers, each keeping many sends in flight.

Each producer takes the producer's fast path (`send_in_window`): `send` queues a record and
a delivery callback counts its outcome, with at most `in_flight` records unacknowledged.

Rows: one `produce_interval` row per interval (records acknowledged in it, their bytes),
and one `send` row for every `sample_every`-th record (its send-to-ack latency). Each case
names its baseline, the raw transport streaming frames of the same size, so the report
shows produce throughput as a fraction of what the bare transport moves.

Two clusters, each a case of its own (the case name starts with it): `processes` (the
default), each broker an OS process of its own and the producers in the workload's
process (the load generator's own), as users deploy; and `single`, brokers, producers and
their fetchers all in this process's one Trio thread, the whole cluster on one core. The
processes cases' console lines add the CPU each broker process and the load generator used
while measuring, as a share of one core (1.0: that process was the limit), and
`broker_MB_per_cpu_s`, the MB the brokers stored (as leader or follower) per CPU second
they used: what one broker process carries per core.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable

import attrs
import trio

from bench._clock import WallStamp
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
from kcore.client import FutureRecordMetadata, Producer, RecordMetadata

NAME = "produce"


@attrs.frozen
class ProduceParams:
    duration: float = 3.0  # measured seconds per case
    warmup: float = 0.5
    interval: float = 0.25  # seconds per throughput row
    acks: tuple[str, ...] = ("0", "1", "all")
    replication: tuple[int, ...] = (1, 3)
    record_bytes: tuple[int, ...] = (100, 1024)
    producers: tuple[int, ...] = (1, 4)
    partitions: int = 4
    # Records unacknowledged per producer. On the fast path one costs a deque entry (a
    # task each did once, and 512 was the most that paid); the window must cover a
    # linger's worth of records, or the producer idles waiting for it.
    in_flight: int = 2048
    # Batching is what makes a Python producer fast: each request costs ~0.5 ms of CPU
    # across client and broker whatever it carries (profiled), so records share requests.
    linger_ms: int = 10
    batch_bytes: int = 256 * 1024
    sample_every: int = 20  # one latency row per this many records
    min_records: int = 50  # measured at the least, however long that takes
    clusters: tuple[str, ...] = CLUSTERS


def params_for(options: WorkloadOptions) -> ProduceParams:
    if options.quick:
        return ProduceParams(
            duration=0.5,
            warmup=0.1,
            interval=0.1,
            acks=("1", "all"),
            replication=(1, 3),
            record_bytes=(1024,),
            producers=(1,),
            clusters=suite_clusters(options),
        )
    return ProduceParams(clusters=suite_clusters(options))


def _size_name(nbytes: int) -> str:
    return f"{nbytes // 1024}KiB" if nbytes % 1024 == 0 else f"{nbytes}B"


@workload(
    NAME,
    "records/s and MB/s produced with acks 0/1/all, RF 1/3, 100 B and 1 KiB records, 1 and "
    "4 producers (as a ratio of transport-raw streaming the same frame size)",
)
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    return await run_produce(rows, params_for(options))


async def run_produce(rows: RowWriter, params: ProduceParams) -> Summary:
    check_clusters(params.clusters)
    summary = []
    for kind in params.clusters:
        cases = itertools.product(
            params.replication, params.acks, params.record_bytes, params.producers
        )
        async with open_cluster_of(kind) as cluster:
            for number, (rf, acks, size, producers) in enumerate(cases):
                topic = f"produce-{number}"
                await create_topic(
                    cluster,
                    topic,
                    params.partitions,
                    replication_factor=rf,
                    config={"min.insync.replicas": str(min(rf, 2))},
                )
                summary.append(
                    await _case(rows, params, cluster, kind, topic, rf, acks, size, producers)
                )
    return summary


@attrs.define
class _Tally:
    records: int = 0
    sent: int = 0


async def _case(rows, params, cluster, kind, topic, rf, acks, size, producers) -> dict[str, object]:
    case = f"{kind}-acks-{acks}-rf{rf}-{_size_name(size)}-x{producers}"
    case_params = {
        "cluster": kind,
        "acks": acks,
        "replication_factor": rf,
        "record_bytes": size,
        "producers": producers,
        "partitions": params.partitions,
        "in_flight": params.in_flight,
        "linger_ms": params.linger_ms,
    }
    # Only the throughput rows compare with the raw transport's: the `send` rows are a
    # sample, their rate means nothing.
    interval_params = {
        **case_params,
        "baseline": f"transport-raw/stream-{_size_name(size)}-x64/stream_interval",
        "baseline_metric": "bytes_per_s",
    }
    stamp = WallStamp.now()
    tally = _Tally()
    value = b"x" * size
    end = trio.current_time() + params.warmup + params.duration
    measured_enough = trio.Event()  # past `end`, with at least `min_records` measured

    def settle(
        sequence: int, began: float, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        """A record's delivery callback: counted, and a row for a sample or a failure."""
        if error is None:
            tally.records += 1
        if sequence % params.sample_every == 0 or error is not None:
            rows.write(
                case=case, op="send", params=case_params, start_time=stamp(began),
                latency_ns=round((trio.current_time() - began) * 1e9), nbytes=size,
                outcome="ok" if error is None else type(error).__name__,
            )  # fmt: skip

    def on_delivery(sequence: int) -> Callable[..., None]:
        return functools.partial(settle, sequence, trio.current_time())

    async def produce(index: int) -> None:
        async with cluster.producer(
            acks=acks, linger_ms=params.linger_ms, batch_size=params.batch_bytes
        ) as producer:
            await send_in_window(
                producer, topic, value, partitions=params.partitions,
                numbers=itertools.count(index, producers), in_flight=params.in_flight,
                stop=measured_enough, on_delivery=on_delivery,
            )  # fmt: skip

    cpu: dict[str, float] = {}  # each process's share of a core while measuring

    async def measure() -> tuple[int, float]:
        await trio.sleep(params.warmup)
        measured, seconds = 0, 0.0
        start, last = trio.current_time(), tally.records
        cpu_start = _cpu_seconds(cluster)
        # Past `end` only on a machine too loaded to ack `min_records` in time: a run
        # always measures something.
        while trio.current_time() < end or measured < params.min_records:
            await trio.sleep(params.interval)
            now, count = trio.current_time(), tally.records
            rows.write(
                case=case, op="produce_interval", params=interval_params,
                start_time=stamp(start), latency_ns=round((now - start) * 1e9),
                nbytes=(count - last) * size, count=count - last,
            )  # fmt: skip
            measured, seconds = measured + count - last, seconds + now - start
            start, last = now, count
        cpu.update(
            (name, (used - cpu_start[name]) / seconds)
            for name, used in _cpu_seconds(cluster).items()
            if name in cpu_start and seconds > 0
        )
        measured_enough.set()
        return measured, seconds

    result: list[tuple[int, float]] = []
    async with trio.open_nursery() as nursery:
        for index in range(producers):
            nursery.start_soon(produce, index)

        async def keep(measurement) -> None:
            result.append(await measurement())

        nursery.start_soon(keep, measure)
    measured, seconds = result[0]
    records_per_s = measured / seconds if seconds else 0.0
    line: dict[str, object] = {
        "case": case,
        "records_per_s": round(records_per_s),
        "MB_per_s": round(records_per_s * size / 1e6, 2),
    }
    if kind == "processes":
        line.update({f"{name}_cpu": round(share, 2) for name, share in sorted(cpu.items())})
        # What a broker process carries per core: the MB its replicas stored (as leader
        # or follower; records go round-robin, so a partition gets its share) per CPU
        # second the broker processes used.
        replicas = await _replicas(cluster, topic)
        stored = sum(len(r) for r in replicas.values()) / max(1, len(replicas))
        broker_cpu = sum(share for name, share in cpu.items() if name.startswith("broker-"))
        if broker_cpu > 0:
            line["broker_MB_per_cpu_s"] = round(records_per_s * size * stored / 1e6 / broker_cpu)
    return line


async def _replicas(cluster: ProcessCluster, topic: str) -> dict[int, tuple[int, ...]]:
    """Partition -> its replicas, as a broker's Metadata answers."""
    for broker_id in cluster.broker_ids:
        view = await cluster.metadata(broker_id, [topic])
        described = None if view is None else view.topic(topic)
        if described is not None:
            return {p.partition: p.replicas for p in described.partitions}
    return {}


def _cpu_seconds(cluster) -> dict[str, float]:
    """CPU seconds used so far by this process ("client": the load generator) and, in a
    process cluster, by each broker."""
    used = {"client": time.process_time()}
    if isinstance(cluster, ProcessCluster):
        used.update(
            (name, seconds) for name, seconds in cluster.cpu_seconds().items() if name != "zkstub"
        )
    return used


async def send_in_window(
    producer: Producer,
    topic: str,
    value: bytes,
    *,
    partitions: int,
    numbers: Iterable[int],
    in_flight: int,
    stop: trio.Event,
    on_delivery: Callable[[int], Callable[..., object]],
) -> None:
    """Sends `value` to `topic` once per number (to partition number % `partitions`) until
    `stop` is set, with at most `in_flight` records unacknowledged: the producer's fast
    path. `send` only queues the record; `on_delivery(number)` is the record's delivery
    callback, which counts it. Only a full window waits, for its oldest record."""
    window: deque[FutureRecordMetadata] = deque()
    for number in numbers:
        if stop.is_set():
            return
        if len(window) >= in_flight:
            oldest = window.popleft()
            if not oldest.done():
                with contextlib.suppress(Exception):  # its callback counted the failure
                    await oldest
        window.append(
            await producer.send(
                topic, value, partition=number % partitions, on_delivery=on_delivery(number)
            )
        )


__all__ = ["ProduceParams", "run_produce", "send_in_window"]
