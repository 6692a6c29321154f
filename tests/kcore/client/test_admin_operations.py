"""The admin client's partition, config and record operations against an embedded cluster
(simulated network, virtual time): each does what Kafka's AdminClient does, refuses what
Kafka refuses with the same error, and has the effect a producer or consumer then sees."""

from __future__ import annotations

import pytest
import trio

from kcore import errors
from kcore.common import TopicPartition
from kcore.config import ConfigSourceCode
from kcore.testing import open_cluster


async def test_create_partitions_adds_led_partitions_and_refuses_fewer(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=3, data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=2)
            await admin.create_partitions({"t": 3})
            # Returns once the new partitions have leaders: a producer can use them at once.
            described = await admin.describe_topic("t")
            assert [p.partition for p in described.partitions] == [0, 1, 2]
            for partition in described.partitions:
                assert len(partition.replicas) == 2 and partition.leader in partition.replicas
            await admin.create_partitions({"t": 4}, assignments={"t": [[3, 1]]})
            assert (await admin.describe_topic("t")).partitions[3].replicas == (3, 1)

            with pytest.raises(errors.InvalidPartitionsError, match="higher than the requested 2"):
                await admin.create_partitions({"t": 2})
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await admin.create_partitions({"absent": 2})
        async with cluster.producer(acks="all") as producer:
            assert (await producer.send_and_wait("t", b"v", partition=3)).offset == 0


async def test_describe_configs_of_a_topic_and_of_a_broker(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=4, data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", 1, 3, config={"retention.ms": "3600000"})
            topic = await admin.describe_configs("t")
            assert topic["retention.ms"].value == "3600000"
            assert topic["retention.ms"].source is ConfigSourceCode.DYNAMIC_TOPIC_CONFIG
            assert topic["min.insync.replicas"].value == "1"
            assert topic["min.insync.replicas"].source is ConfigSourceCode.DEFAULT_CONFIG
            broker = await admin.describe_configs(broker=2)
            assert broker["broker.id"].value == "2" and broker["broker.id"].read_only
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await admin.describe_configs("absent")
            with pytest.raises(errors.BrokerNotAvailableError, match="broker 7 is not in"):
                await admin.describe_configs(broker=7)
            with pytest.raises(TypeError, match="a topic or broker"):
                await admin.describe_configs("t", broker=2)


async def test_altered_min_insync_replicas_is_enforced_then_deleted(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=5, data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin, cluster.producer(acks="all", retries=0) as producer:
            await admin.create_topic("t", partitions=1, replication_factor=3)
            await producer.send_and_wait("t", b"before")

            # More in-sync replicas than the topic has: acks=all is refused once the
            # leader reloaded the topic's config from its /config/changes notification.
            await admin.alter_configs("t", set={"min.insync.replicas": "4"})
            assert (await admin.describe_configs("t"))["min.insync.replicas"].value == "4"
            await _send_until(producer, refused=True)

            await admin.alter_configs("t", delete=["min.insync.replicas"])
            described = await admin.describe_configs("t")
            assert described["min.insync.replicas"].source is ConfigSourceCode.DEFAULT_CONFIG
            await _send_until(producer, refused=False)

            with pytest.raises(errors.InvalidConfigurationError, match=r"no\.such\.config"):
                await admin.alter_configs("t", set={"no.such.config": "1"})
            with pytest.raises(errors.InvalidConfigurationError, match=r"min\.insync\.replicas"):
                await admin.alter_configs("t", set={"min.insync.replicas": "zero"})


async def _send_until(producer, *, refused: bool, timeout: float = 30.0) -> None:
    """Brokers reload a topic's config asynchronously: send until an acks=all send is
    refused for want of in-sync replicas (or, `refused=False`, until one is not)."""
    with trio.fail_after(timeout):
        while True:
            try:
                await producer.send_and_wait("t", b"probe")
            except errors.NotEnoughReplicasError:
                if refused:
                    return
            else:
                if not refused:
                    return
            await trio.sleep(0.1)


async def test_delete_records_moves_every_replicas_log_start(autojump_clock, tmp_path):
    tp = TopicPartition("t", 0)
    async with open_cluster(brokers=3, seed=6, data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=3)
            async with cluster.producer(acks="all") as producer:
                for i in range(10):
                    await producer.send_and_wait("t", b"r%d" % i, partition=0)

            assert await admin.delete_records({("t", 0): 4}) == {("t", 0): 4}
            # Answered once every live replica deleted as far.
            starts = [b.replica_manager.partition(tp).log_start_offset for b in _brokers(cluster)]
            assert starts == [4, 4, 4]
            async with cluster.consumer() as consumer:
                assert await consumer.beginning_offsets([tp]) == {tp: 4}
                consumer.assign([tp])
                records = await consumer.poll(timeout=5)
                assert [r.offset for r in records] == [4, 5, 6, 7, 8, 9]

            # -1: up to the high watermark; TopicPartition keys come back as given.
            assert await admin.delete_records({tp: -1}) == {tp: 10}
            with pytest.raises(errors.OffsetOutOfRangeError, match="t-0"):
                await admin.delete_records({("t", 0): 11})
            with pytest.raises(errors.UnknownTopicOrPartitionError, match="no partition 5"):
                await admin.delete_records({("t", 5): 0})


def _brokers(cluster):
    return [cluster.brokers[b] for b in sorted(cluster.brokers)]
