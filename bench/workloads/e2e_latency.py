"""e2e-latency: from `send` to the consumer's `poll` returning the record, acks=all,
replication factor 3, on TCP loopback. A record is readable only once it is below the high
watermark, so this is produce + replication + HW advance + long-poll wake-up.

First the maximum rate: one producer sends as fast as its buffer lets it while the consumer
reads, and the rate the consumer received is the cluster's maximum. Then a sweep of offered
rates, fractions of that maximum up to it (the knee is where p99 leaves the floor), each
case on its own topic with fresh clients.

The producer keeps a fixed schedule (record n is due at start + n / rate) and stamps each
value with its due time, so a producer that falls behind shows as latency instead of
quietly offering less (no coordinated omission). It sends through the fast path (`send`
queues and returns; one task sends every record due). Each case starts with a warm-up
(the clients learn the leaders, then records at the case's rate for `warmup` seconds)
whose records are not measured.

Two clusters, each its own cases (names start with it): `processes` (the default), each
broker an OS process of its own and the producer and consumer in the workload's process;
`single`, brokers and clients all in this process's one Trio thread.

Rows: one `max-rate` row (records/s the consumer received at full speed), and per case one
`e2e` row per measured record (latency from its due time to the poll that returned it).
"""

from __future__ import annotations

import functools
import gc
import math
import struct
from collections.abc import Callable
from typing import Any

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
from kcore.common import TopicPartition

NAME = "e2e-latency"
DUE_STAMP = struct.Struct(">d")  # the due time (Trio clock), at the head of each value


@attrs.frozen
class E2eParams:
    # Offered rates as fractions of the measured maximum rate, up to the knee and past it.
    fractions: tuple[float, ...] = (0.02, 0.1, 0.25, 0.5, 0.75, 1.0)
    duration: float = 5.0  # measured, per rate
    warmup: float = 1.0  # sent at the case's rate before measuring, not recorded
    max_rate_duration: float = 3.0
    record_bytes: int = 1024
    partitions: int = 3
    acks: str = "all"
    # Full collections scan only what the load allocates, not the cluster's start-up.
    freeze_gc: bool = True
    clusters: tuple[str, ...] = CLUSTERS


def params_for(options: WorkloadOptions) -> E2eParams:
    if options.quick:
        return E2eParams(
            fractions=(0.5,),
            duration=0.5,
            warmup=0.3,
            max_rate_duration=0.5,
            clusters=suite_clusters(options),
        )
    return E2eParams(clusters=suite_clusters(options))


@workload(NAME, "latency from send to the consumer's poll against offered load (acks=all, RF 3)")
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    return await run_e2e(rows, params_for(options))


async def run_e2e(rows: RowWriter, params: E2eParams) -> Summary:
    check_clusters(params.clusters)
    summary: Summary = []
    for kind in params.clusters:
        async with open_cluster_of(kind) as cluster:
            if params.freeze_gc:
                # What the cluster (or this process's clients, with broker processes)
                # allocated to start lives as long as it: moved out of the collector's
                # sight, a full collection (tens of ms over every object) scans only what
                # the load allocates. Broker processes freeze their own.
                gc.collect()
                gc.freeze()
            try:
                # The offered rates are fractions of the maximum as the report prints it,
                # so a reader can check them (0.5 x 2937 is 1468, not 1469 from 2937.6).
                max_rate = round(await measure_max_rate(rows, params, cluster, kind))
                summary.append({"case": f"{kind}-max-rate", "records_per_s": max_rate})
                for fraction in params.fractions:
                    rate = max(1, round(max_rate * fraction))
                    summary.append(await _case(rows, params, cluster, kind, rate, fraction))
            finally:
                gc.unfreeze()
    return summary


async def _new_topic(cluster, params: E2eParams, name: str) -> str:
    await create_topic(
        cluster,
        name,
        params.partitions,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    return name


# At full speed the producer's queue is as long as its buffer lets it be: enough for whole
# batches to every leader, not the default 32 MiB that would take seconds to drain.
_MAX_RATE_BUFFER_BYTES = 1 << 20


def open_clients(cluster, params: E2eParams, **producer_settings):
    producer = cluster.producer(acks=params.acks, linger_ms=0, **producer_settings)
    return cluster.consumer(), producer


@attrs.define
class Deliveries:
    """The producer's `on_delivery`: keeps the first failure, raised when the case ends
    (a callback's own exception would only be logged)."""

    error: BaseException | None = None

    def __call__(self, metadata: object, error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = error

    def check(self) -> None:
        if self.error is not None:
            raise self.error


async def measure_max_rate(rows: RowWriter, params: E2eParams, cluster, kind: str) -> float:
    """Records/s the consumer receives while the producer sends as fast as it can (its
    buffer full: `send` waits for room), after a warm-up of the same length."""
    topic = await _new_topic(cluster, params, "e2e-max")
    padding = b"x" * max(0, params.record_bytes - DUE_STAMP.size)
    value = DUE_STAMP.pack(0.0) + padding
    received = 0
    window: list[float] = []  # [start, end, records received in between]
    deliveries = Deliveries()
    consumer, producer = open_clients(cluster, params, buffer_memory=_MAX_RATE_BUFFER_BYTES)
    async with consumer, producer:
        await until_ready(producer, consumer, topic, params)
        start = trio.current_time()
        measure_from = start + params.max_rate_duration
        stop_at = measure_from + params.max_rate_duration

        async def consume() -> None:
            nonlocal received
            while trio.current_time() < stop_at:
                records = await consumer.poll(timeout=0.5)
                now = trio.current_time()
                if now >= measure_from:
                    if not window:
                        window[:] = [now, now, 0]
                    else:
                        window[1] = now
                        window[2] += len(records)
                received += len(records)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            number = 0
            while trio.current_time() < stop_at:
                await producer.send(
                    topic, value, None, number % params.partitions, on_delivery=deliveries
                )
                number += 1
                if number % 64 == 0:
                    await trio.lowlevel.checkpoint()
    deliveries.check()
    elapsed = window[1] - window[0] if window else 0.0
    rate = window[2] / elapsed if elapsed > 0 else 0.0
    rows.write(
        case=f"{kind}-acks-{params.acks}-rf3-{params.record_bytes}B-max",
        op="max-rate",
        params={"cluster": kind, "record_bytes": params.record_bytes, "acks": params.acks},
        start_time=WallStamp.now()(window[0] if window else trio.current_time()),
        latency_ns=round(elapsed * 1e9),
        nbytes=int(window[2]) * params.record_bytes if window else 0,
        count=int(window[2]) if window else 0,
    )
    return rate


async def until_ready(producer, consumer, topic: str, params: E2eParams) -> None:
    """Until both clients know every partition's leader (a fresh topic's leaders reach every
    broker's metadata cache a moment after they lead): one record produced to each
    partition and consumed. Stamped 0, they are never measured."""
    consumer.assign([TopicPartition(topic, p) for p in range(params.partitions)])
    consumer.seek_to_beginning()
    value = DUE_STAMP.pack(0.0)
    for partition in range(params.partitions):
        await producer.send_and_wait(topic, value, None, partition)
    seen = 0
    while seen < params.partitions:
        seen += len(await consumer.poll(timeout=0.5))


async def produce_on_schedule(
    producer: Any,
    topic: str,
    padding: bytes,
    *,
    partitions: int,
    start: float,
    rate: float,
    total: int,
    on_delivery: Callable[[Any, BaseException | None], object],
) -> None:
    """`total` records at `rate` from `start` (record N is due at start + N / rate, to
    partition N % `partitions`), each stamped with its due time: a producer that falls
    behind sends the overdue ones at once, and their lateness shows as latency."""
    number = 0
    while number < total:
        await trio.sleep_until(start + number / rate)
        # Every record due by now goes, each stamped with its due time.
        due_until = min(total, math.floor((trio.current_time() - start) * rate) + 1)
        while number < due_until:
            due = start + number / rate
            await producer.send(
                topic, DUE_STAMP.pack(due) + padding, None, number % partitions,
                on_delivery=on_delivery,
            )  # fmt: skip
            number += 1


async def read_stamped(
    consumer: Any,
    total: int,
    measured_from: float,
    on_latency: Callable[[float, float, int], None],
    on_polled: Callable[[int], None] | None = None,
) -> None:
    """Polls until `total` records came; `on_latency(due, now, nbytes)` for each whose
    due time is `measured_from` or later (the warm-up's are not measured), and
    `on_polled(count)` after each poll."""
    seen = 0
    while seen < total:
        records = await consumer.poll(timeout=0.5)
        now = trio.current_time()
        seen += len(records)
        if on_polled is not None:
            on_polled(len(records))
        for record in records:
            (due,) = DUE_STAMP.unpack_from(record.value)
            if due >= measured_from:
                on_latency(due, now, len(record.value))


def e2e_recorder(
    rows: RowWriter,
    case: str,
    case_params: dict[str, object],
    stamp: WallStamp,
    latencies: list[float],
) -> Callable[[float, float, int], None]:
    """`read_stamped`'s `on_latency` for a case: each measured record's latency kept in
    `latencies` and written as an `e2e` row at its due time."""

    def measured(due: float, now: float, nbytes: int) -> None:
        latencies.append(now - due)
        rows.write(
            case=case, op="e2e", params=case_params, start_time=stamp(due),
            latency_ns=round((now - due) * 1e9), nbytes=nbytes,
        )  # fmt: skip

    return measured


def percentile_ms(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return math.nan
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] * 1000, 2)


async def _case(
    rows, params: E2eParams, cluster, kind: str, rate: int, fraction: float
) -> dict[str, object]:
    case = f"{kind}-acks-{params.acks}-rf3-{params.record_bytes}B-{fraction:g}xmax"
    case_params = {
        "cluster": kind,
        "rate": rate,
        "fraction_of_max": fraction,
        "record_bytes": params.record_bytes,
        "acks": params.acks,
        "partitions": params.partitions,
    }
    topic = await _new_topic(cluster, params, f"e2e-{rate}")
    stamp = WallStamp.now()
    warmup = int(rate * params.warmup)
    total = warmup + int(rate * params.duration)
    padding = b"x" * max(0, params.record_bytes - DUE_STAMP.size)
    latencies: list[float] = []
    deliveries = Deliveries()
    consumer, producer = open_clients(cluster, params)
    async with consumer, producer:
        await until_ready(producer, consumer, topic, params)
        start = trio.current_time() + 0.001
        measured_from = start + warmup / rate  # due times from here on are measured

        measured = e2e_recorder(rows, case, case_params, stamp, latencies)
        with trio.fail_after(params.duration * 10 + 60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_stamped, consumer, total, measured_from, measured)
                nursery.start_soon(
                    functools.partial(
                        produce_on_schedule, producer, topic, padding,
                        partitions=params.partitions, start=start, rate=rate, total=total,
                        on_delivery=deliveries,
                    )
                )  # fmt: skip
    deliveries.check()
    latencies.sort()
    return {
        "case": case,
        "rate": rate,
        "records": len(latencies),
        "p50_ms": percentile_ms(latencies, 0.50),
        "p99_ms": percentile_ms(latencies, 0.99),
        "p999_ms": percentile_ms(latencies, 0.999),
        "max_ms": percentile_ms(latencies, 1.0),
    }


__all__ = [
    "DUE_STAMP",
    "Deliveries",
    "E2eParams",
    "e2e_recorder",
    "measure_max_rate",
    "open_clients",
    "percentile_ms",
    "produce_on_schedule",
    "read_stamped",
    "run_e2e",
    "until_ready",
]
