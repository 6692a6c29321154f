"""Dynamic broker configs in a running cluster (simulated network, virtual time): a change
made with AlterConfigs is written to ZooKeeper as Kafka writes it, applies on every broker
without a restart (min.insync.replicas, retention, segment size, the fetcher pool, the log
cleaner), a broker's own setting wins over the cluster default, a restarted broker starts
with the values in ZooKeeper, and a setting that cannot change at run time is refused."""

from __future__ import annotations

import json

import pytest

from kcore import errors
from kcore.common import TopicPartition
from kcore.config import ConfigSourceCode
from kcore.testing import open_cluster, poll_until

from ._replication_checks import partition_state

TP = TopicPartition("t", 0)


def applied(cluster, name, value, brokers=None):
    """Whether every running broker (or those listed) has `name` at `value`."""
    ids = brokers if brokers is not None else list(cluster.brokers)
    return all(
        b in cluster.brokers and cluster.brokers[b].dynamic_config.get(name) == value for b in ids
    )


async def test_cluster_default_and_per_broker_min_insync_replicas_apply_at_once(autojump_clock):
    broker_config = {"replica.lag.time.max.ms": 10_000}
    async with open_cluster(brokers=3, seed=41, broker_config=broker_config) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=3)
            leader = (await partition_state(cluster, TP))["leader"]
            follower, other = sorted({1, 2, 3} - {leader})

            await admin.alter_configs(broker="", set={"min.insync.replicas": "3"})
            # As Kafka's AdminZkClient writes it: the config, then a notification naming it.
            data, _ = await cluster.zk.get("/config/brokers/<default>")
            assert json.loads(data) == {"version": 1, "config": {"min.insync.replicas": "3"}}
            notices = [
                json.loads((await cluster.zk.get(f"/config/changes/{name}"))[0])
                for name in sorted(await cluster.zk.get_children("/config/changes"))
            ]
            assert notices[-1] == {"version": 2, "entity_path": "brokers/<default>"}
            await poll_until(lambda: applied(cluster, "min.insync.replicas", 3), timeout=30)
            described = await admin.describe_configs(broker=follower)
            entry = described["min.insync.replicas"]
            assert (entry.value, entry.source, entry.read_only) == (
                "3",
                ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG,
                False,
            )
            defaults = await admin.describe_configs(broker="")
            assert [(e.name, e.value) for e in defaults.values()] == [("min.insync.replicas", "3")]

            async with cluster.producer(
                acks="all", delivery_timeout_ms=20_000, request_timeout_ms=10_000
            ) as producer:
                await producer.send_and_wait("t", b"all three in sync", partition=0)
                await cluster.kill_broker(other)
                partition = cluster.brokers[leader].replica_manager.partition(TP)
                await poll_until(lambda: len(partition.isr) == 2, timeout=60)
                with pytest.raises(errors.NotEnoughReplicasError):
                    await producer.send_and_wait("t", b"two in sync, three wanted", partition=0)

                # The leader's own setting wins over the cluster default.
                await admin.alter_configs(broker=leader, set={"min.insync.replicas": "2"})
                await poll_until(
                    lambda: applied(cluster, "min.insync.replicas", 2, [leader]), timeout=30
                )
                assert applied(cluster, "min.insync.replicas", 3, [follower])
                entry = (await admin.describe_configs(broker=leader))["min.insync.replicas"]
                assert (entry.value, entry.source) == ("2", ConfigSourceCode.DYNAMIC_BROKER_CONFIG)
                await producer.send_and_wait("t", b"two in sync, two wanted", partition=0)

            # Settings that cannot change at run time are refused, as Kafka refuses them.
            with pytest.raises(
                errors.InvalidRequestError,
                match=r"Cannot update these configs dynamically: Set\(log\.dirs\)",
            ):
                await admin.alter_configs(broker="", set={"log.dirs": "/elsewhere"})
            with pytest.raises(errors.InvalidRequestError, match=r"num\.io\.threads cannot be"):
                await admin.alter_configs(broker=leader, set={"num.io.threads": "4"})

            # The fetcher pool is resized on every broker, and replication goes on.
            await admin.alter_configs(broker="", set={"num.replica.fetchers": "2"})
            await poll_until(
                lambda: all(
                    b.replica_manager.fetcher_manager.num_fetchers == 2
                    for b in cluster.brokers.values()
                ),
                timeout=30,
            )
        async with cluster.producer(acks="all") as producer:
            await producer.send_and_wait("t", b"after the resize", partition=0)

        # A restarted broker reads the dynamic configs from ZooKeeper before it serves, the
        # notifications long gone (Kafka purges them after 15 minutes).
        for name in await cluster.zk.get_children("/config/changes"):
            await cluster.zk.delete(f"/config/changes/{name}")
        await cluster.stop_broker(follower)
        restarted = await cluster.start_broker(follower)
        assert restarted.dynamic_config.min_insync_replicas == 3
        assert restarted.replica_manager.fetcher_manager.num_fetchers == 2


async def test_log_defaults_reach_topics_without_their_own_setting(autojump_clock):
    settings = {"log.retention.check.interval.ms": 1000, "log.cleaner.backoff.ms": 1000}
    async with open_cluster(brokers=1, seed=42, broker_config=settings) as cluster:
        await cluster.wait_for_controller(timeout=30)
        broker = cluster.brokers[1]
        async with cluster.admin() as admin:
            await admin.create_topic("t", 1, 1)
            await admin.create_topic("kept", 1, 1, config={"retention.ms": "-1"})
            # Existing logs take a new segment size at once.
            await admin.alter_configs(broker="", set={"log.segment.bytes": "1024"})
            await poll_until(lambda: applied(cluster, "log.segment.bytes", 1024), timeout=30)

            def an_hour_ago() -> float:  # stamps older than the retention set below
                return cluster.clock() - 3600

            async with cluster.producer(acks="all", clock=an_hour_ago) as producer:
                for _ in range(40):
                    await producer.send_and_wait("t", b"x" * 100, partition=0)
                    await producer.send_and_wait("kept", b"x" * 100, partition=0)
            logs = broker.replica_manager.log_manager.logs
            log, kept = logs[TP], logs[TopicPartition("kept", 0)]
            assert len(log.segment_base_offsets()) > 2
            # Older than the new default: the next retention pass deletes them, but not
            # those of the topic with its own retention.
            await admin.alter_configs(broker="", set={"log.retention.ms": "60000"})
            await poll_until(lambda: log.log_start_offset > 0, timeout=10)
            assert log.segment_base_offsets() == [log.log_start_offset]
            assert kept.log_start_offset == 0 and len(kept.segment_base_offsets()) > 2
            described = await admin.describe_configs("t")
            assert (described["retention.ms"].value, described["retention.ms"].source) == (
                "60000",
                ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG,
            )

            # The log cleaner restarts with its new settings.
            await admin.alter_configs(broker="1", set={"log.cleaner.threads": "2"})
            await poll_until(lambda: broker.replica_manager.log_cleaner.settings.threads == 2)
            with pytest.raises(errors.InvalidRequestError, match="more than double"):
                await admin.alter_configs(broker=1, set={"log.cleaner.threads": "5"})
