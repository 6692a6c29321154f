"""Topic deletion and controlled shutdown as a user sees them: a deleted topic is gone from
metadata, brokers, disks and ZooKeeper and can be created afresh; a broker stopped cleanly
hands its leaderships over before it goes, so producers see no errors."""

import logging

import trio

from kcore import errors
from kcore.common import TopicPartition
from kcore.testing import open_cluster

from ._replication_checks import partition_state, wait_for

BROKER_CONFIG = {"replica.lag.time.max.ms": 10_000}


async def test_a_deleted_topic_is_gone_everywhere_and_can_be_created_again(
    autojump_clock, tmp_path
):
    async with open_cluster(
        brokers=3, seed=31, broker_config=BROKER_CONFIG, data_dir=tmp_path
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=3)
            async with cluster.producer(acks="all") as producer:
                for i in range(5):
                    await producer.send_and_wait("t", b"old-%d" % i, partition=0)
            assert (tmp_path / "broker-1" / "t-0").is_dir()

            await admin.delete_topic("t")

            # As in Kafka, the answer comes once the topic left the metadata; the
            # controller finishes the deletion (replicas, znodes) right after.
            assert "t" not in await admin.list_topics()
            await wait_for(_deleted_in_zookeeper(cluster, "t"), timeout=30)
            for broker in cluster.brokers.values():
                assert broker.replica_manager.partition(TopicPartition("t", 0)) is None
            await wait_for(lambda: not list(tmp_path.glob("broker-*/t-*")), timeout=30)
            try:
                await admin.describe_topic("t")
            except errors.UnknownTopicOrPartitionError:
                pass
            else:
                raise AssertionError("a deleted topic is still described")

            await admin.create_topic("t", partitions=1, replication_factor=3)
            async with cluster.producer(acks="all") as producer:
                meta = await producer.send_and_wait("t", b"new", partition=0)
        # The new topic starts from an empty log.
        assert meta.offset == 0


def _deleted_in_zookeeper(cluster, topic):
    async def deleted():
        return (
            await cluster.zk.exists(f"/brokers/topics/{topic}") is None
            and await cluster.zk.exists(f"/config/topics/{topic}") is None
            and await cluster.zk.get_children("/admin/delete_topics") == []
        )

    return deleted


async def test_deleting_an_unknown_topic_names_it():
    async with open_cluster(brokers=1, seed=32, network="tcp") as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            try:
                await admin.delete_topic("nope")
            except errors.UnknownTopicOrPartitionError as error:
                assert "nope" in str(error)
            else:
                raise AssertionError("deleting an unknown topic succeeded")


async def test_controlled_shutdown_moves_leadership_before_the_broker_goes(autojump_clock, caplog):
    caplog.set_level(logging.INFO, logger="kcore.server.broker")
    async with open_cluster(brokers=3, seed=33, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic(
                "t", config={"min.insync.replicas": "2"},
                assignments={0: [1, 2, 3], 1: [1, 3, 2], 2: [2, 1, 3]},
            )  # fmt: skip
        partitions = [TopicPartition("t", p) for p in range(3)]
        acked = 0
        stopped = trio.Event()

        async def produce():
            nonlocal acked
            async with cluster.producer(acks="all") as producer:
                while not stopped.is_set():
                    for tp in partitions:
                        await producer.send_and_wait("t", b"x", partition=tp.partition)
                        acked += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            await wait_for(lambda: acked >= 30, timeout=30)
            await cluster.stop_broker(1)
            # Controlled shutdown finished before the broker stopped: the state znodes
            # already show leaders elsewhere and broker 1 out of every ISR.
            for tp in partitions:
                state = await partition_state(cluster, tp)
                assert state["leader"] in (2, 3)
                assert 1 not in state["isr"]
            before = acked
            await wait_for(lambda: acked >= before + 30, timeout=30)
            stopped.set()
        assert any("controlled shutdown succeeded" in r.getMessage() for r in caplog.records)


async def test_a_broker_leading_unreplicated_partitions_shuts_down_at_the_first_attempt(
    autojump_clock, caplog
):
    # A partition with one replica has nowhere to move: it must not make the broker retry
    # its controlled shutdown until it gives up and stops uncleanly.
    caplog.set_level(logging.INFO, logger="kcore.server.broker")
    async with open_cluster(brokers=2, seed=35, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("solo", assignments={0: [2]})
        await cluster.stop_broker(2)
    messages = [r.getMessage() for r in caplog.records]
    assert any("Broker 2: controlled shutdown succeeded" in m for m in messages)
    assert not any("Broker 2: controlled shutdown incomplete" in m for m in messages)
    assert not any("Broker 2: proceeding to an unclean shutdown" in m for m in messages)


async def test_a_whole_cluster_stopped_at_once_shuts_down_without_exhausting_retries(
    autojump_clock, caplog
):
    # The last broker to lead a partition has nowhere to move it once the others are gone:
    # it must see that and proceed, not retry until controlled.shutdown.max.retries.
    caplog.set_level(logging.INFO, logger="kcore.server.broker")
    async with open_cluster(brokers=3, seed=37, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=3, replication_factor=3)
        async with trio.open_nursery() as nursery:
            for broker_id in (1, 2, 3):
                nursery.start_soon(cluster.stop_broker, broker_id)
        assert await cluster.zk.get_children("/brokers/ids") == []
    messages = [r.getMessage() for r in caplog.records]
    assert not any("proceeding to an unclean shutdown" in m for m in messages), messages
    assert any("no other replica is alive; proceeding" in m for m in messages)
