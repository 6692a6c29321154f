"""The consumer against a fake cluster: positions, seeks, leader changes, resets."""

from __future__ import annotations

import pytest
import trio

from kcore import errors
from kcore.client import Consumer, TopicPartition
from kcore.log import build_batch
from kcore.protocol.api_keys import ApiKey


def produce(cluster, topic, partition, values, timestamp=1000):
    """Appends one batch holding `values` (keys k0, k1, ...)."""
    records = [(timestamp + i, f"k{i}".encode(), v) for i, v in enumerate(values)]
    return cluster.append(topic, partition, build_batch(records))


async def poll_until(consumer, count, timeout=10.0):
    """Polls until `count` records came (a poll returns as soon as one leader's fetch
    brought records, so records of several leaders may take several polls)."""
    records = []
    with trio.fail_after(timeout):
        while len(records) < count:
            records += await consumer.poll(timeout=1.0)
    return records


async def test_poll_returns_records_from_the_position(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    produce(fake_cluster, "t", 0, [b"a", b"b", b"c"])
    produce(fake_cluster, "t", 0, [b"d", b"e"])
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 1)  # inside the first batch: a is skipped
        records = await consumer.poll(timeout=1.0)
        assert [(r.offset, r.value) for r in records] == [
            (1, b"b"),
            (2, b"c"),
            (3, b"d"),
            (4, b"e"),
        ]
        assert records[0].key == b"k1" and records[0].timestamp == 1001
        assert await consumer.position(TopicPartition("t", 0)) == 5
        start = trio.current_time()
        assert await consumer.poll(timeout=2.0) == []  # nothing new: returns at the timeout
        assert trio.current_time() - start == pytest.approx(2.0)
    (_, fetch), *_ = fake_cluster.requests_of(ApiKey.FETCH)
    assert fetch.replica_id == -1 and fetch.replica_epoch == -1
    assert fetch.partitions[0].current_leader_epoch == 0


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
async def test_compressed_batches_and_headers_are_read(
    fake_cluster, client_args, autojump_clock, compression
):
    fake_cluster.add_topic("t", 1)
    records = [
        (1000 + i, None if i % 2 else b"k%d" % i, b"v%d" % i, [("n", b"%d" % i), ("none", None)])
        for i in range(5)
    ]
    fake_cluster.append("t", 0, build_batch(records, compression=compression))
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 2)  # inside the compressed batch: the first two are skipped
        got = await poll_until(consumer, 3)
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (i, None if i % 2 else b"k%d" % i, b"v%d" % i, (("n", b"%d" % i), ("none", None)))
        for i in range(2, 5)
    ]


async def test_poll_sees_records_produced_later(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0)])
        assert await consumer.poll(timeout=0.5) == []
        produce(fake_cluster, "t", 0, [b"x"])
        records = await consumer.poll(timeout=1.0)
    assert [(r.offset, r.value) for r in records] == [(0, b"x")]


async def test_seek_to_beginning_and_end(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 2)
    produce(fake_cluster, "t", 0, [b"a", b"b"])
    produce(fake_cluster, "t", 1, [b"c"])
    fake_cluster.partition("t", 0).log_start = 0
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0), ("t", 1)])
        consumer.seek_to_end()
        assert await consumer.position(("t", 0)) == 2
        assert await consumer.poll(timeout=0.2) == []
        consumer.seek_to_beginning([("t", 1)])
        records = await consumer.poll(timeout=1.0)
        assert [(r.partition, r.value) for r in records] == [(1, b"c")]
        consumer.seek_to_beginning()
        records = await poll_until(consumer, 3)
        assert sorted((r.partition, r.offset) for r in records) == [(0, 0), (0, 1), (1, 0)]
        tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
        assert await consumer.end_offsets(tps) == {tps[0]: 2, tps[1]: 1}
        assert await consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}


async def test_offsets_of_partitions_not_assigned(fake_cluster, client_args, autojump_clock):
    # Kafka's endOffsets / beginningOffsets answer for any partition, assigned or not (the
    # demo's live view asks a consumer that reads nothing).
    fake_cluster.add_topic("t", 2)
    produce(fake_cluster, "t", 0, [b"a", b"b"])
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
        with trio.fail_after(5):
            assert await consumer.end_offsets(tps) == {tps[0]: 2, tps[1]: 0}
            assert await consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}


async def test_leader_change_refreshes_metadata_and_fetches_from_new_leader(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1, leaders=[1])
    produce(fake_cluster, "t", 0, [b"a"])
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0)])
        assert [r.value for r in await consumer.poll()] == [b"a"]
        fake_cluster.move_leader("t", 0, 3)
        produce(fake_cluster, "t", 0, [b"b"])
        assert [r.value for r in await consumer.poll()] == [b"b"]
    fetches = [
        (broker, m.partitions[0].current_leader_epoch)
        for broker, m in fake_cluster.requests_of(ApiKey.FETCH)
    ]
    assert fetches == [(1, 0), (1, 0), (3, 1)]  # the second went to the old leader


async def test_fenced_leader_epoch_refreshes_metadata(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1, leaders=[1])
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0)])
        assert await consumer.poll(timeout=0.1) == []
        fake_cluster.partition("t", 0).leader_epoch = 5  # same leader, newer epoch
        produce(fake_cluster, "t", 0, [b"a"])
        assert [r.value for r in await consumer.poll()] == [b"a"]
    epochs = [
        m.partitions[0].current_leader_epoch for _, m in fake_cluster.requests_of(ApiKey.FETCH)
    ]
    assert epochs[-2:] == [0, 5]


async def test_offset_out_of_range_resets(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    produce(fake_cluster, "t", 0, [b"a", b"b"])
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 10)
        records = await consumer.poll()
    assert [r.offset for r in records] == [0, 1]  # auto_offset_reset="earliest"


async def test_offset_out_of_range_raises_with_reset_none(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1)
    async with Consumer(fake_cluster.bootstrap, auto_offset_reset="none", **client_args) as c:
        c.assign([("t", 0)])
        with pytest.raises(errors.OffsetOutOfRangeError, match="seek first"):
            await c.poll()
        c.seek(("t", 0), 10)
        with pytest.raises(errors.OffsetOutOfRangeError, match="out of range"):
            await c.poll()


async def test_max_poll_records_keeps_the_rest_for_the_next_poll(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1)
    produce(fake_cluster, "t", 0, [bytes([i]) for i in range(5)])
    async with Consumer(fake_cluster.bootstrap, max_poll_records=2, **client_args) as consumer:
        consumer.assign([("t", 0)])
        polls = [[r.offset for r in await consumer.poll()] for _ in range(3)]
        assert polls == [[0, 1], [2, 3], [4]]
        assert await consumer.position(("t", 0)) == 5
    assert len(fake_cluster.requests_of(ApiKey.FETCH)) == 1


async def test_subscribe_needs_a_group(fake_cluster, client_args, autojump_clock):
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        with pytest.raises(errors.InvalidGroupIdError, match="assign"):
            consumer.subscribe(["t"])


def test_bad_consumer_settings():
    import random

    import transport
    from kcore.client import ClientConfigError

    net = transport.SimNetwork(0)
    with pytest.raises(ClientConfigError, match="auto_offset_reset"):
        Consumer("h:1", network=net, rng=random.Random(0), auto_offset_reset="smallest")
    with pytest.raises(ClientConfigError, match="fetch_max_wait_ms"):
        Consumer("h:1", network=net, rng=random.Random(0), fetch_max_wait_ms=-5)
