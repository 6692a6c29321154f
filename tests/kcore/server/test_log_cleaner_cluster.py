"""Log compaction in a running cluster (simulated network, virtual time): a compacted
topic read from the beginning gives the last value of every key, a record without a key is
refused, a topic becomes compacted when its config changes, and `__consumer_offsets` is
compacted while a group's committed offsets survive the cleaning and a coordinator move."""

import pytest

from kcore import errors
from kcore.common import OFFSETS_TOPIC, TopicPartition
from kcore.log import iter_batch_records
from kcore.testing import open_cluster, poll_until

CLEANER = {"log.cleaner.backoff.ms": 1000, "log.retention.check.interval.ms": 1000}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
    "retention.bytes": "1",  # no matter: retention is for cleanup.policy=delete
}


def replica_logs(cluster, tp):
    return [
        broker.replica_manager.log_manager.logs[tp]
        for broker in cluster.brokers.values()
        if broker.replica_manager is not None and tp in broker.replica_manager.log_manager.logs
    ]


def compacted(log):
    """Whether each key appears once below the log's active segment: cleaned up to it."""
    active = log.segment_base_offsets()[-1]
    keys = [
        r.key
        for r in iter_batch_records(log.read(log.log_start_offset, 1 << 24))
        if r.offset < active
    ]
    return active > 0 and len(keys) == len(set(keys))


async def read_all(cluster, topic, end):
    """Every record of partition 0 from the beginning up to offset `end` (exclusive)."""
    got = []
    async with cluster.consumer() as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        while await consumer.position((topic, 0)) < end:
            got += await consumer.poll(1.0)
    return got


async def produce_keyed(cluster, topic, count, keys):
    latest = {}
    async with cluster.producer(acks="all") as producer:
        for i in range(count):
            key, value = f"k{i % keys}".encode(), f"v{i}".encode()
            await producer.send_and_wait(topic, value, key=key)
            latest[key] = value
    return latest


async def test_a_compacted_topic_read_from_the_beginning_gives_the_last_value_of_each_key(
    autojump_clock, tmp_path
):
    async with open_cluster(
        brokers=3, seed=31, data_dir=tmp_path, broker_config=CLEANER
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("c", partitions=1, replication_factor=3, config=COMPACTED)
        async with cluster.producer(acks="all") as producer:
            # (retention.bytes would delete this one's segment under cleanup.policy=delete)
            await producer.send_and_wait("c", b"once", key=b"old")
        latest = {b"old": b"once"} | await produce_keyed(cluster, "c", 150, keys=10)
        async with cluster.producer(acks="all") as producer:
            with pytest.raises(errors.InvalidRecordError, match="Compacted topic cannot accept"):
                await producer.send_and_wait("c", b"no key")
        tp = TopicPartition("c", 0)
        # Every replica cleans its own copy of the log.
        await poll_until(lambda: all(map(compacted, replica_logs(cluster, tp))), timeout=60)
        records = await read_all(cluster, "c", 151)
    last = {}
    for record in records:
        last[record.key] = record.value
    assert last == latest
    assert len(records) < 151  # the superseded values are gone ...
    offsets = [record.offset for record in records]
    assert offsets == sorted(offsets) and offsets[-1] == 150  # ... the offsets are kept


async def test_a_topic_becomes_compacted_when_its_cleanup_policy_changes(autojump_clock, tmp_path):
    async with open_cluster(
        brokers=1, seed=32, data_dir=tmp_path, broker_config=CLEANER
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("d", 1, 1, config={"segment.bytes": "1024"})
            await produce_keyed(cluster, "d", 100, keys=5)
            tp = TopicPartition("d", 0)
            assert not any(map(compacted, replica_logs(cluster, tp)))
            await admin.alter_configs("d", set={"cleanup.policy": "compact"})
            await poll_until(lambda: all(map(compacted, replica_logs(cluster, tp))), timeout=60)


async def test_committed_offsets_survive_the_compaction_of_the_offsets_topic_and_a_new_coordinator(
    autojump_clock, tmp_path
):
    broker_config = {
        **CLEANER,
        "offsets.topic.num.partitions": 1,
        "offsets.topic.replication.factor": 3,
        "offsets.topic.segment.bytes": 1024,
        "log.cleaner.min.cleanable.ratio": 0.01,
        "group.initial.rebalance.delay.ms": 0,
    }
    async with open_cluster(
        brokers=3, seed=33, data_dir=tmp_path, broker_config=broker_config
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=3)
        partitions = [TopicPartition("t", 0), TopicPartition("t", 1)]
        async with cluster.consumer(group_id="g") as consumer:
            consumer.assign(partitions)
            for offset in range(1, 61):
                await consumer.commit({partitions[0]: offset, partitions[1]: 2 * offset})
        async with cluster.admin() as admin:
            configs = await admin.describe_configs(OFFSETS_TOPIC)
            assert configs["cleanup.policy"].value == "compact"
            assert configs["segment.bytes"].value == "1024"
            described = await admin.describe_topic(OFFSETS_TOPIC)
        offsets_tp = TopicPartition(OFFSETS_TOPIC, 0)
        await poll_until(lambda: all(map(compacted, replica_logs(cluster, offsets_tp))), timeout=60)
        coordinator = described.partitions[0].leader
        await cluster.kill_broker(coordinator)
        async with cluster.consumer(group_id="g") as consumer:
            committed = await consumer.committed(partitions)
        async with cluster.admin() as admin:
            moved_to = (await admin.describe_topic(OFFSETS_TOPIC)).partitions[0].leader
    assert moved_to not in (coordinator, -1)
    assert committed == {partitions[0]: 60, partitions[1]: 120}
