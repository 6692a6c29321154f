"""Replication as a user sees it: acknowledged records survive broker failures, ISRs
shrink and expand, min.insync.replicas refuses writes, unclean election trades data for
availability, and replicas end with identical logs (simulated network, virtual time)."""

import pathlib

import pytest
import trio

from kcore import errors
from kcore.common import TopicPartition
from kcore.testing import broker_node, open_cluster

from ._replication_checks import (
    partition_state,
    replica_records,
    wait_for,
    wait_for_identical_replicas,
)

LAG_MS = 10_000
BROKER_CONFIG = {"replica.lag.time.max.ms": LAG_MS}
TP = TopicPartition("t", 0)


async def _create(cluster, name="t", *, partitions=1, rf=3, config=None, assignments=None):
    async with cluster.admin() as admin:
        if assignments:
            await admin.create_topic(name, config=config or {}, assignments=assignments)
        else:
            await admin.create_topic(
                name, partitions=partitions, replication_factor=rf, config=config or {}
            )
        return await admin.describe_topic(name)


async def _read_all(cluster, tp, count, timeout=60.0):
    async with cluster.consumer() as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        found = []
        with trio.fail_after(timeout):
            while len(found) < count:
                found += [(r.offset, r.value) for r in await consumer.poll(timeout=1.0)]
        return found


async def _produce(producer, values, partition=0):
    acked = {}
    for value in values:
        meta = await producer.send_and_wait("t", value, partition=partition)
        acked[meta.offset] = value
    return acked


async def _leader(cluster, tp=TP):
    return (await partition_state(cluster, tp))["leader"]


async def test_acked_records_survive_the_leader_being_killed(autojump_clock):
    async with open_cluster(brokers=3, seed=11, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        desc = await _create(cluster, config={"min.insync.replicas": "2"})
        first_leader = desc.partitions[0].leader
        assert sorted(desc.partitions[0].isr) == [1, 2, 3]
        async with cluster.producer(acks="all") as producer:
            acked = await _produce(producer, [b"before-%d" % i for i in range(20)])
            await cluster.kill_broker(first_leader)
            acked |= await _produce(producer, [b"after-%d" % i for i in range(20)])
        state = await partition_state(cluster, TP)
        assert state["leader"] not in (first_leader, -1)
        assert state["leader_epoch"] > desc.partitions[0].leader_epoch
        assert first_leader not in state["isr"]
        assert dict(await _read_all(cluster, TP, 40)) == acked
        await cluster.start_broker(first_leader)
        records = await wait_for_identical_replicas(cluster, TP, [1, 2, 3])
        assert dict(records) == acked


async def test_acked_records_survive_a_rolling_bounce(autojump_clock):
    async with open_cluster(brokers=3, seed=12, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, config={"min.insync.replicas": "2"})
        acked = {}
        async with cluster.producer(acks="all") as producer:
            for broker_id in (1, 2, 3):
                acked |= await _produce(producer, [b"%d-%d" % (broker_id, i) for i in range(5)])
                await cluster.stop_broker(broker_id)
                acked |= await _produce(
                    producer, [b"%d-down-%d" % (broker_id, i) for i in range(5)]
                )
                await cluster.start_broker(broker_id)
                # Back in sync before the next one goes.
                await wait_for(lambda: _isr_is_full(cluster), timeout=60)
        assert dict(await _read_all(cluster, TP, len(acked))) == acked
        assert dict(await wait_for_identical_replicas(cluster, TP, [1, 2, 3])) == acked


async def _isr_is_full(cluster):
    return len((await partition_state(cluster, TP))["isr"]) == 3


async def test_acked_records_survive_the_controller_being_killed_mid_way(autojump_clock):
    async with open_cluster(brokers=3, seed=13, broker_config=BROKER_CONFIG) as cluster:
        controller = await cluster.wait_for_controller(timeout=30)
        await _create(cluster, partitions=3, config={"min.insync.replicas": "2"})
        acked: dict[tuple[int, int], bytes] = {}

        async def produce(partition):
            async with cluster.producer(acks="all") as producer:
                for i in range(30):
                    value = b"p%d-%d" % (partition, i)
                    meta = await producer.send_and_wait("t", value, partition=partition)
                    acked[meta.partition, meta.offset] = value

        async with trio.open_nursery() as nursery:
            for partition in range(3):
                nursery.start_soon(produce, partition)
            await trio.sleep(0.5)
            await cluster.kill_broker(controller)
        assert await cluster.wait_for_controller(timeout=30) != controller
        assert cluster.controller_epoch() == 2
        for partition in range(3):
            tp = TopicPartition("t", partition)
            expected = {o: v for (p, o), v in acked.items() if p == partition}
            assert dict(await _read_all(cluster, tp, len(expected))) == expected


async def test_isr_shrinks_when_a_follower_is_cut_off_and_expands_when_healed(autojump_clock):
    async with open_cluster(brokers=3, seed=14, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, config={"min.insync.replicas": "2"})
        leader = await _leader(cluster)
        follower = next(b for b in (1, 2, 3) if b != leader)
        async with cluster.producer(acks="all") as producer:
            await _produce(producer, [b"a"])
            cluster.network.partition(broker_node(leader), broker_node(follower))
            # The follower falls behind new writes (an idle partition shrinks nothing).
            async with cluster.producer(acks="1") as quick:
                await _produce(quick, [b"b"])
            state = await wait_for(
                lambda: _state_without(cluster, follower), timeout=LAG_MS / 1000 * 3
            )
            assert state["leader"] == leader
            assert sorted(state["isr"]) == sorted(b for b in (1, 2, 3) if b != follower)
            # Two replicas in sync still satisfy min.insync.replicas=2.
            acked = await _produce(producer, [b"c"])
            cluster.network.heal()
            state = await wait_for(lambda: _state_with(cluster, follower), timeout=60)
            assert sorted(state["isr"]) == [1, 2, 3]
        records = await wait_for_identical_replicas(cluster, TP, [1, 2, 3])
        assert [v for _, v in records] == [b"a", b"b", b"c"]
        assert set(acked) <= {o for o, _ in records}


async def _state_without(cluster, broker_id):
    state = await partition_state(cluster, TP)
    return state if broker_id not in state["isr"] else None


async def _state_with(cluster, broker_id):
    state = await partition_state(cluster, TP)
    return state if broker_id in state["isr"] else None


async def test_min_insync_replicas_refuses_acks_all_with_two_replicas_dead(autojump_clock):
    async with open_cluster(brokers=3, seed=15, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, config={"min.insync.replicas": "2"})
        leader = await _leader(cluster)
        async with cluster.producer(
            acks="all", delivery_timeout_ms=20_000, request_timeout_ms=10_000
        ) as producer:
            acked = await _produce(producer, [b"kept"])
            for broker_id in (1, 2, 3):
                if broker_id != leader:
                    await cluster.kill_broker(broker_id)
            await wait_for(lambda: _isr_is(cluster, [leader]), timeout=60)
            # ...and the leader has applied the shrink it wrote: until then it still checks
            # min.insync.replicas against the ISR it had (as Kafka's leader does).
            partition = cluster.brokers[leader].replica_manager.partition(TP)
            await wait_for(lambda: _async_true(partition.isr == (leader,)), timeout=60)
            with pytest.raises(errors.NotEnoughReplicasError):
                await producer.send_and_wait("t", b"refused", partition=0)
        assert replica_records(cluster.brokers[leader], TP) == list(acked.items())
        assert await _read_all(cluster, TP, 1) == list(acked.items())


async def _async_true(value: bool) -> bool:
    return value


async def _isr_is(cluster, isr):
    return (await partition_state(cluster, TP))["isr"] == isr


async def _kill_the_only_in_sync_replica(cluster) -> tuple[int, list[int]]:
    """The leader of t-0 alone in its ISR, holding a record its followers lack, killed (the
    network healed after): returns the dead leader and the out-of-sync followers."""
    leader = await _leader(cluster)
    followers = [b for b in (1, 2, 3) if b != leader]
    async with cluster.producer(acks="1") as producer:
        await _produce(producer, [b"replicated"])
        await wait_for_identical_replicas(cluster, TP, [1, 2, 3])
        for follower in followers:
            cluster.network.partition(broker_node(leader), broker_node(follower))
        await _produce(producer, [b"only-on-the-leader"])
        await wait_for(lambda: _isr_is(cluster, [leader]), timeout=LAG_MS / 1000 * 3)
    await cluster.kill_broker(leader)
    cluster.network.heal()
    return leader, followers


@pytest.mark.parametrize("unclean", [False, True])
async def test_unclean_election_only_when_enabled(autojump_clock, unclean):
    async with open_cluster(brokers=3, seed=16, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(
            cluster,
            config={
                "min.insync.replicas": "1",
                "unclean.leader.election.enable": str(unclean).lower(),
            },
        )
        leader, followers = await _kill_the_only_in_sync_replica(cluster)
        controller = await cluster.wait_for_controller(timeout=30)
        if unclean:
            state = await wait_for(lambda: _led_by_one_of(cluster, followers), timeout=60)
            assert leader not in state["isr"]
            metric = cluster.brokers[controller].controller.metrics.get(
                "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"
            )
            assert metric is not None and metric.count == 1
            # The unreplicated record is gone: the documented price of unclean election.
            records = replica_records(cluster.brokers[state["leader"]], TP)
            assert [v for _, v in records] == [b"replicated"]
        else:
            # Wait until the controller has handled the death, then the partition stays
            # offline: no leader, the ISR keeps the dead leader (never emptied).
            state = await wait_for(lambda: _leaderless(cluster), timeout=60)
            assert state["isr"] == [leader]
            async with cluster.admin() as admin:
                desc = await admin.describe_topic("t")
            assert desc.partitions[0].leader == -1


@pytest.mark.parametrize("where", ["topic", "cluster default"])
async def test_enabling_unclean_election_elects_a_partition_left_offline(autojump_clock, where):
    """Kafka's (Topic)UncleanLeaderElectionEnable: a partition offline because its only
    in-sync replica died gets a leader as soon as unclean election is enabled, by the topic's
    config or the brokers' dynamic default, without waiting for another broker change."""
    async with open_cluster(brokers=3, seed=16, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, config={"min.insync.replicas": "1"})
        leader, followers = await _kill_the_only_in_sync_replica(cluster)
        await cluster.wait_for_controller(timeout=30)
        await wait_for(lambda: _leaderless(cluster), timeout=60)
        async with cluster.admin() as admin:
            if where == "topic":
                await admin.alter_configs("t", set={"unclean.leader.election.enable": "true"})
            else:
                await admin.alter_configs(broker="", set={"unclean.leader.election.enable": "true"})
        state = await wait_for(lambda: _led_by_one_of(cluster, followers), timeout=30)
        assert leader not in state["isr"]


async def _led_by_one_of(cluster, brokers):
    state = await partition_state(cluster, TP)
    return state if state["leader"] in brokers else None


async def _leaderless(cluster):
    state = await partition_state(cluster, TP)
    return state if state["leader"] == -1 else None


async def test_kip101_divergent_follower_truncates_to_the_new_leaders_log(autojump_clock):
    """Scenario 2 of KIP-101: an old leader holds a record written with acks=1 that never
    replicated; after it returns as a follower its log matches the new leader's."""
    async with open_cluster(brokers=3, seed=17, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, assignments={0: (1, 2)}, config={"min.insync.replicas": "1"})
        async with cluster.producer(acks="all") as producer:
            await _produce(producer, [b"m0"])
        await wait_for_identical_replicas(cluster, TP, [1, 2])
        cluster.network.partition(broker_node(1), broker_node(2))
        async with cluster.producer(acks="1") as producer:
            lost = await _produce(producer, [b"m1-unreplicated"])
        assert lost == {1: b"m1-unreplicated"}
        await cluster.kill_broker(1)
        cluster.network.heal()
        await wait_for(lambda: _leader_is(cluster, 2), timeout=60)
        async with cluster.producer(acks="1") as producer:
            assert await _produce(producer, [b"m2"]) == {1: b"m2"}
        await cluster.start_broker(1)
        records = await wait_for_identical_replicas(cluster, TP, [1, 2])
        assert records == [(0, b"m0"), (1, b"m2")]


async def _leader_is(cluster, broker_id):
    return (await partition_state(cluster, TP))["leader"] == broker_id


async def test_kip279_fast_double_failover_ends_with_identical_logs(autojump_clock):
    """KIP-279: leadership goes 1 -> 2 -> 1 fast enough that each wrote records the other
    never saw, in different epochs; the follower walks back epoch by epoch."""
    config = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    async with open_cluster(brokers=3, seed=18, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, assignments={0: (1, 2)}, config=config)
        async with cluster.producer(acks="all") as producer:
            await _produce(producer, [b"m0"])
        await wait_for_identical_replicas(cluster, TP, [1, 2])
        cluster.network.partition(broker_node(1), broker_node(2))
        async with cluster.producer(acks="1") as producer:
            await _produce(producer, [b"m1-by-1"])
        await cluster.kill_broker(1)
        await wait_for(lambda: _leader_is(cluster, 2), timeout=60)
        async with cluster.producer(acks="1") as producer:
            await _produce(producer, [b"m2-by-2"])
        await cluster.kill_broker(2)
        cluster.network.heal()
        await cluster.start_broker(1)  # unclean: the only live replica leads again
        await wait_for(lambda: _leader_is(cluster, 1), timeout=60)
        async with cluster.producer(acks="1") as producer:
            await _produce(producer, [b"m3-by-1"])
        await cluster.start_broker(2)
        records = await wait_for_identical_replicas(cluster, TP, [1, 2])
        assert [v for _, v in records] == [b"m0", b"m1-by-1", b"m3-by-1"]


def _tear_tail(segment: pathlib.Path, size: int) -> None:
    """A crash in the middle of writing the last batch: its last bytes never hit the disk."""
    data = segment.read_bytes()
    segment.write_bytes(data[:-size])


async def test_a_torn_segment_tail_is_truncated_on_restart(autojump_clock, tmp_path):
    async with open_cluster(
        brokers=3, seed=19, broker_config=BROKER_CONFIG, data_dir=tmp_path
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, config={"min.insync.replicas": "2"})
        leader = await _leader(cluster)
        follower = next(b for b in (1, 2, 3) if b != leader)
        async with cluster.producer(acks="all") as producer:
            acked = await _produce(producer, [b"x" * 100 for _ in range(10)])
            await wait_for_identical_replicas(cluster, TP, [1, 2, 3])
            await cluster.kill_broker(follower)
            _tear_tail(tmp_path / f"broker-{follower}" / "t-0" / f"{0:020d}.log", 40)
            acked |= await _produce(producer, [b"y"])
        await cluster.start_broker(follower)
        records = await wait_for_identical_replicas(cluster, TP, [1, 2, 3])
        assert dict(records) == acked


async def test_produce_and_consume_over_tcp():
    async with open_cluster(brokers=3, seed=20, network="tcp") as cluster:
        await cluster.wait_for_controller(timeout=30)
        await _create(cluster, config={"min.insync.replicas": "2"})
        async with cluster.producer(acks="all") as producer:
            acked = await _produce(producer, [b"tcp-%d" % i for i in range(10)])
        assert sorted(acked) == list(range(10))
        assert dict(await _read_all(cluster, TP, 10, timeout=30)) == acked
