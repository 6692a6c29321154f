"""A fetch honours its `max_bytes` and each partition's `max_bytes` as Kafka does (KIP-74:
the first batch of the first partition that has one even if larger, then strict limits) and
every response fits the frame limit, so a consumer reads any backlog."""

from __future__ import annotations

import pytest
import trio

from kcore import errors
from kcore.protocol.data import FetchPartition, FetchRequest
from kcore.protocol.sizing import fetch_records_limit
from kcore.server.replica_manager import FetchBudget
from kcore.testing import open_cluster

PARTITIONS = 20
VALUE = b"v" * 100_000  # one record per batch: a 100 kB batch
BATCHES_PER_PARTITION = 9  # 20 x 9 x 100 kB: an 18 MB backlog, over a 16 MiB frame


def _request(max_bytes: int, partitions: int, partition_max_bytes: int) -> FetchRequest:
    return FetchRequest(
        -1,
        -1,
        0,
        1,
        max_bytes,
        tuple(FetchPartition("t", p, 0, partition_max_bytes) for p in range(partitions)),
    )


def test_the_first_batch_goes_even_if_larger_then_the_limits_are_strict() -> None:
    budget = FetchBudget.for_request(_request(100, 3, 50), frame_limit=10_000)
    assert budget.partition_limit(0) == 0  # an empty first partition does not count
    assert budget.take([], 0) == []
    limit = budget.partition_limit(50)
    assert limit == 50
    assert budget.take([b"x" * 80], limit) == [b"x" * 80]  # larger than both limits: kept
    assert budget.request_bytes == 20
    limit = budget.partition_limit(50)
    assert limit == 20
    assert budget.take([b"y" * 30], limit) == []  # not the first any more: left for later
    assert budget.take([b"z" * 20], limit) == [b"z" * 20]
    assert budget.partition_limit(50) is None  # the request's max_bytes is used up


def test_the_frame_limit_is_hard_even_for_the_first_batch() -> None:
    frame_limit = 1000
    budget = FetchBudget.for_request(_request(10**6, 1, 10**6), frame_limit=frame_limit)
    room = fetch_records_limit(frame_limit, ["t"])
    assert budget.partition_limit(10**6) == room
    with pytest.raises(errors.MessageTooLargeError, match="does not fit"):
        budget.take([b"x" * (room + 1)], room)


async def _produce_backlog(cluster) -> None:
    async with cluster.admin() as admin:
        await admin.create_topic("t", partitions=PARTITIONS, replication_factor=1)
    async with cluster.producer() as producer:
        for partition in range(PARTITIONS):
            for _ in range(BATCHES_PER_PARTITION):
                await producer.send_and_wait("t", VALUE, partition=partition)


async def _consume_all(consumer, count: int) -> list:
    consumer.assign([("t", p) for p in range(PARTITIONS)])
    records: list = []
    with trio.fail_after(60):
        while len(records) < count:
            records += await consumer.poll(timeout=1.0)
    return records


@pytest.mark.parametrize(
    "broker_config",
    [
        {},  # the consumer's 50 MB fetch.max.bytes against its own 16 MiB frame limit
        {"socket.request.max.bytes": 4 * 1024 * 1024},  # the broker's frame limit
    ],
)
async def test_the_default_consumer_reads_a_backlog_larger_than_a_frame(
    autojump_clock, tmp_path, broker_config
) -> None:
    async with open_cluster(
        brokers=1, seed=21, data_dir=tmp_path, broker_config=broker_config
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _produce_backlog(cluster)
        async with cluster.consumer() as consumer:
            records = await _consume_all(consumer, PARTITIONS * BATCHES_PER_PARTITION)
    assert sorted((r.partition, r.offset) for r in records) == [
        (p, o) for p in range(PARTITIONS) for o in range(BATCHES_PER_PARTITION)
    ]
    assert all(r.value == VALUE for r in records)


async def test_a_batch_larger_than_max_bytes_is_still_returned(autojump_clock, tmp_path) -> None:
    async with open_cluster(brokers=1, seed=22, data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _produce_backlog(cluster)
        async with cluster.consumer(
            fetch_max_bytes=1000, max_partition_fetch_bytes=1000
        ) as consumer:
            records = await _consume_all(consumer, PARTITIONS * BATCHES_PER_PARTITION)
    assert len({(r.partition, r.offset) for r in records}) == PARTITIONS * BATCHES_PER_PARTITION
