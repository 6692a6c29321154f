"""e2e-latency: from `send` to the consumer's `poll` returning the record, at a fixed
offered rate, acks=all, replication factor 3, on TCP loopback. A record is readable only
once it is below the high watermark, so this is produce + replication + HW advance +
long-poll wake-up.

Rows: one `e2e` row per record (latency from the send to the poll that returned it).
"""

from __future__ import annotations

import struct

import attrs
import trio

from bench._clock import WallStamp
from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload
from bench.workloads._cluster import create_topic, open_bench_cluster
from kcore.common import TopicPartition

NAME = "e2e-latency"
_STAMP = struct.Struct(">d")  # the send time (Trio clock), at the head of each value


@attrs.frozen
class E2eParams:
    rates: tuple[int, ...] = (200, 1000)  # records per second offered
    duration: float = 5.0
    record_bytes: int = 1024
    partitions: int = 3
    acks: str = "all"


def params_for(options: WorkloadOptions) -> E2eParams:
    return E2eParams(rates=(200,), duration=0.5) if options.quick else E2eParams()


@workload(NAME, "latency from send to the consumer's poll at fixed rates (acks=all, RF 3)")
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    return await run_e2e(rows, params_for(options))


async def run_e2e(rows: RowWriter, params: E2eParams) -> Summary:
    summary = []
    async with open_bench_cluster() as cluster:
        for rate in params.rates:
            topic = f"e2e-{rate}"
            await create_topic(
                cluster,
                topic,
                params.partitions,
                replication_factor=3,
                config={"min.insync.replicas": "2"},
            )
            summary.append(await _case(rows, params, cluster, topic, rate))
    return summary


async def _case(rows, params, cluster, topic, rate) -> dict[str, object]:
    case = f"acks-{params.acks}-rf3-{params.record_bytes}B-{rate}per_s"
    case_params = {
        "rate": rate,
        "record_bytes": params.record_bytes,
        "acks": params.acks,
        "partitions": params.partitions,
    }
    stamp = WallStamp.now()
    total = int(rate * params.duration)
    padding = b"x" * max(0, params.record_bytes - _STAMP.size)
    latencies: list[float] = []
    async with (
        cluster.consumer() as consumer,
        cluster.producer(acks=params.acks, linger_ms=0) as producer,
    ):
        consumer.assign([TopicPartition(topic, p) for p in range(params.partitions)])
        consumer.seek_to_beginning()

        async def consume() -> None:
            while len(latencies) < total:
                for record in await consumer.poll(timeout=0.5):
                    now = trio.current_time()
                    (sent,) = _STAMP.unpack_from(record.value)
                    latencies.append(now - sent)
                    rows.write(
                        case=case, op="e2e", params=case_params, start_time=stamp(sent),
                        latency_ns=round((now - sent) * 1e9), nbytes=len(record.value),
                    )  # fmt: skip

        async def produce() -> None:
            start = trio.current_time()
            async with trio.open_nursery() as sends:
                for number in range(total):
                    await trio.sleep_until(start + number / rate)
                    value = _STAMP.pack(trio.current_time()) + padding
                    sends.start_soon(
                        producer.send_and_wait, topic, value, None, number % params.partitions
                    )

        with trio.fail_after(params.duration * 10 + 60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                nursery.start_soon(produce)
    latencies.sort()
    return {
        "case": case,
        "records": len(latencies),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
    }


__all__ = ["E2eParams", "run_e2e"]
