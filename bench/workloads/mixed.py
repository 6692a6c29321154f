"""mixed: producing and consuming at once. One producer offers a fixed rate (acks=all,
replication factor 3, `min.insync.replicas` 2, 1 KiB records, 4 partitions) while one
consumer follows it; per interval, the records the cluster acknowledged and the records
the consumer received, and for every record its end-to-end latency, from its due time to
the poll that returned it.

It is e2e-latency's case at one load, with throughput rows and repeats, and it reuses that
workload's pieces (bench/workloads/e2e_latency.py): the producer keeps a fixed schedule and
stamps each value with its due time (a producer that falls behind shows as latency, no
coordinated omission), both clients learn the leaders first (one record per partition
produced and consumed), then `warmup` seconds at the rate are not measured. The offered
rate is fixed (`rate`, the same in every run, so runs compare); `rate=None` offers half of
the maximum measured first on the same cluster (e2e-latency's `max-rate`, written as its
row). The producer and the consumer run in this process, as e2e-latency's: in the process
cluster they have it to themselves, in the single-process one they share the cluster's
thread (so the two workloads' latencies compare).

Rows, each repeat a case of its own (`...-rep1`, ...: the report's rate is a group's bytes
over its span, which gaps between repeats would dilute): `produce_interval` (records
acknowledged in the interval, their bytes), `consume_interval` (records the consumer
received), both over the measured window only, and one `e2e` row per measured record. The
console line per cluster gives, over the repeats, the median and the min and max of the
produced and consumed MB/s and of p99, the median p50 and p999, and the largest latency.
"""

from __future__ import annotations

import statistics

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
from bench.workloads.consume import spread
from bench.workloads.e2e_latency import (
    DUE_STAMP,
    Deliveries,
    e2e_recorder,
    measure_max_rate,
    open_clients,
    percentile_ms,
    produce_on_schedule,
    read_stamped,
    until_ready,
)

__all__ = ["MixedParams", "run_mixed"]

NAME = "mixed"


@attrs.frozen
class MixedParams:
    # Offered records/s; None: half of the maximum measured first on the cluster.
    rate: int | None = 2000
    duration: float = 5.0  # measured seconds per repeat
    warmup: float = 1.0  # at the rate, before measuring: not measured
    interval: float = 0.25  # seconds per throughput row
    repeats: int = 3
    record_bytes: int = 1024
    partitions: int = 4
    acks: str = "all"
    max_rate_duration: float = 2.0  # with rate=None: warm-up and measurement of the maximum
    clusters: tuple[str, ...] = CLUSTERS
    # How long the consumer may trail the schedule's end before the case fails.
    drain_timeout: float = 60.0


def params_for(options: WorkloadOptions) -> MixedParams:
    if options.quick:
        return MixedParams(
            rate=1000,
            duration=0.5,
            warmup=0.2,
            interval=0.1,
            repeats=1,
            clusters=suite_clusters(options),
        )
    return MixedParams(clusters=suite_clusters(options))


@workload(
    NAME,
    "produced and consumed MB/s and end-to-end latency while one producer offers a fixed "
    "rate and one consumer follows (acks=all, RF 3, 1 KiB)",
)
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    return await run_mixed(rows, params_for(options))


def _line_name(params: MixedParams, kind: str, rate: int) -> str:
    return f"{kind}-acks-{params.acks}-rf3-{params.record_bytes}B-{rate}rps"


async def run_mixed(rows: RowWriter, params: MixedParams) -> Summary:
    check_clusters(params.clusters)
    summary: Summary = []
    for kind in params.clusters:
        async with open_cluster_of(kind) as cluster:
            rate, max_rate = params.rate, None
            if rate is None:
                # Halved as the console prints the maximum, so a reader can check it.
                max_rate = round(await measure_max_rate(rows, params, cluster, kind))
                rate = max(1, round(max_rate / 2))
            results = [
                await _case(rows, params, cluster, kind, rate, repeat)
                for repeat in range(1, params.repeats + 1)
            ]
            line = _summary_line(params, kind, rate, results)
            if max_rate is not None:
                line["max_rate_per_s"] = max_rate
            summary.append(line)
    return summary


@attrs.define
class _Counts:
    acked: int = 0
    consumed: int = 0


async def _case(
    rows: RowWriter, params: MixedParams, cluster, kind: str, rate: int, repeat: int
) -> dict[str, object]:
    case = f"{_line_name(params, kind, rate)}-rep{repeat}"
    case_params = {
        "cluster": kind,
        "rate": rate,
        "repeat": repeat,
        "record_bytes": params.record_bytes,
        "acks": params.acks,
        "replication_factor": 3,
        "partitions": params.partitions,
    }
    topic = f"mixed-{repeat}"
    await create_topic(
        cluster,
        topic,
        params.partitions,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    stamp = WallStamp.now()
    size = params.record_bytes
    warmup = int(rate * params.warmup)
    total = warmup + int(rate * params.duration)
    padding = b"x" * max(0, size - DUE_STAMP.size)
    latencies: list[float] = []
    counts = _Counts()
    deliveries = Deliveries()

    def delivered(metadata: object, error: BaseException | None) -> None:
        if error is None:
            counts.acked += 1
        deliveries(metadata, error)

    consumer, producer = open_clients(cluster, params)
    async with consumer, producer:
        await until_ready(producer, consumer, topic, params)
        start = trio.current_time() + 0.001
        measured_from = start + warmup / rate  # due times from here on are measured
        measured_until = start + total / rate  # the schedule's end
        window: list[float] = []  # [acked, consumed] over the measured window

        measured = e2e_recorder(rows, case, case_params, stamp, latencies)

        def polled(count: int) -> None:
            counts.consumed += count

        async def consume() -> None:
            await read_stamped(consumer, total, measured_from, measured, polled)

        async def produce() -> None:
            await produce_on_schedule(
                producer, topic, padding, partitions=params.partitions, start=start,
                rate=rate, total=total, on_delivery=delivered,
            )  # fmt: skip

        async def meter() -> None:
            """An interval row each for the produced and the consumed records, over the
            measured window (the warm-up's end to the schedule's)."""
            await trio.sleep_until(measured_from)
            began, last = measured_from, (counts.acked, counts.consumed)
            first = last
            while began < measured_until - 1e-9:
                end = min(measured_until, began + params.interval)
                await trio.sleep_until(end)
                now = (counts.acked, counts.consumed)
                for op, before, after in (
                    ("produce_interval", last[0], now[0]),
                    ("consume_interval", last[1], now[1]),
                ):
                    rows.write(
                        case=case, op=op, params=case_params, start_time=stamp(began),
                        latency_ns=round((end - began) * 1e9), nbytes=(after - before) * size,
                        count=after - before,
                    )  # fmt: skip
                began, last = end, now
            window[:] = [last[0] - first[0], last[1] - first[1]]

        drain_limit = params.warmup + params.duration + params.drain_timeout
        with trio.fail_after(drain_limit):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                nursery.start_soon(produce)
                nursery.start_soon(meter)
    deliveries.check()
    latencies.sort()
    seconds = measured_until - measured_from
    return {
        "produced_MB_per_s": window[0] * size / seconds / 1e6,
        "consumed_MB_per_s": window[1] * size / seconds / 1e6,
        "records": len(latencies),
        "p50_ms": percentile_ms(latencies, 0.50),
        "p99_ms": percentile_ms(latencies, 0.99),
        "p999_ms": percentile_ms(latencies, 0.999),
        "max_ms": percentile_ms(latencies, 1.0),
    }


def _summary_line(
    params: MixedParams, kind: str, rate: int, results: list[dict[str, object]]
) -> dict[str, object]:
    line: dict[str, object] = {
        "case": _line_name(params, kind, rate),
        "repeats": len(results),
        "offered_per_s": rate,
        "offered_MB_per_s": round(rate * params.record_bytes / 1e6, 2),
    }
    for name in ("produced_MB_per_s", "consumed_MB_per_s", "p99_ms"):
        low, median, high = spread(float(r[name]) for r in results)
        line.update({name: median, f"{name}_min": low, f"{name}_max": high})
    line["p50_ms"] = round(statistics.median(float(r["p50_ms"]) for r in results), 2)
    line["p999_ms"] = round(statistics.median(float(r["p999_ms"]) for r in results), 2)
    line["max_ms"] = max(float(r["max_ms"]) for r in results)
    line["records"] = min(int(r["records"]) for r in results)
    return line
