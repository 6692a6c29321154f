"""A controlled shutdown ends: only partitions another live broker could lead are worth
waiting for, and one cut short still stops the broker cleanly (its session closed)."""

import trio

from kcore.common import TopicPartition
from kcore.server.controlled_shutdown import movable_partitions
from kcore.testing import open_cluster

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def test_only_partitions_with_another_live_replica_can_move():
    led = {T0: (1, 2, 3), T1: (1,), T2: (1, 3)}
    assert movable_partitions(1, led, live_brokers={1, 2}) == [T0]
    assert movable_partitions(1, led, live_brokers={1, 3}) == [T0, T2]
    # A single replica never moves (Kafka's replicatedPartitionsBrokerLeads).
    assert movable_partitions(1, led, live_brokers={1}) == []


async def test_a_controlled_shutdown_cut_short_still_closes_the_session(autojump_clock):
    async with open_cluster(brokers=2, seed=11) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=2)
        broker = cluster.brokers[1]
        with trio.fail_after(5):
            await broker.shutdown(controlled_shutdown_timeout=0)
        assert "1" not in await cluster.zk.get_children("/brokers/ids")
