"""Partition reassignment as an operator sees it, on simulated clusters under virtual time: a
partition moves to new brokers under an acks=all load (asked for by AlterPartitionReassignments
or by /admin/reassign_partitions) and every acknowledged record is still there; a reassignment
in progress is listed, replaced, cancelled; a new controller finishes what the old one
started; a topic being reassigned is deleted only once its reassignment is done."""

from __future__ import annotations

import json

import pytest
import trio

from kcore import errors
from kcore.client.admin import PartitionReassignment
from kcore.common import TopicPartition
from kcore.testing import broker_node, open_cluster

from ._replication_checks import partition_state, wait_for, wait_for_identical_replicas

T0 = TopicPartition("t", 0)
BROKER_CONFIG = {"replica.lag.time.max.ms": 10_000, "auto.leader.rebalance.enable": "false"}


async def _topic_znode(cluster, topic: str = "t") -> dict:
    data, _ = await cluster.zk.get(f"/brokers/topics/{topic}")
    return json.loads(data)


def _hosts(cluster, broker_id: int, tp: TopicPartition = T0) -> bool:
    broker = cluster.brokers.get(broker_id)
    return broker is not None and broker.replica_manager.partition(tp) is not None


async def _read_all(cluster, tp: TopicPartition, count: int) -> list[tuple[int, bytes]]:
    async with cluster.consumer() as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        found: list[tuple[int, bytes]] = []
        with trio.fail_after(60):
            while len(found) < count:
                found += [(r.offset, r.value) for r in await consumer.poll(timeout=1.0)]
        return found


@pytest.mark.parametrize("how", ["request", "znode"])
async def test_a_partition_moves_to_new_brokers_under_an_acks_all_load(
    autojump_clock, tmp_path, how
):
    async with open_cluster(
        brokers=4, seed=41, broker_config=BROKER_CONFIG, data_dir=tmp_path
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic(
                "t", assignments={0: [1, 2, 3]}, config={"min.insync.replicas": "2"}
            )
            acked: list[tuple[int, bytes]] = []
            stop = trio.Event()

            async def produce() -> None:
                async with cluster.producer(acks="all") as producer:
                    while not stop.is_set():
                        value = b"v%d" % len(acked)
                        acked.append(
                            ((await producer.send_and_wait("t", value, partition=0)).offset, value)
                        )

            async def moved() -> bool:
                described = (await admin.describe_topic("t")).partitions[0]
                return (
                    not await admin.list_partition_reassignments()
                    and described.replicas == (2, 3, 4)
                    and await cluster.zk.exists("/admin/reassign_partitions") is None
                )

            assert (await partition_state(cluster, T0))["leader"] == 1  # to be removed
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce)
                await wait_for(lambda: len(acked) >= 20, timeout=30)
                if how == "request":
                    assert await admin.alter_partition_reassignments({("t", 0): [2, 3, 4]}) == {
                        T0: None
                    }
                else:
                    plan = {"version": 1, "partitions": [
                        {"topic": "t", "partition": 0, "replicas": [2, 3, 4]}
                    ]}  # fmt: skip
                    await cluster.zk.create(
                        "/admin/reassign_partitions", json.dumps(plan).encode(), make_parents=True
                    )
                await wait_for(moved, timeout=60)
                moved_at = len(acked)
                await wait_for(lambda: len(acked) >= moved_at + 20, timeout=30)  # writes go on
                stop.set()

        # ZooKeeper holds the target alone; the old leader (broker 1) was replaced.
        znode = await _topic_znode(cluster)
        assert znode["partitions"] == {"0": [2, 3, 4]}
        assert znode["adding_replicas"] == {} and znode["removing_replicas"] == {}
        state = await partition_state(cluster, T0)
        assert state["leader"] in (2, 3, 4) and sorted(state["isr"]) == [2, 3, 4]
        # Broker 1's replica, and its directory, are gone.
        await wait_for(lambda: not _hosts(cluster, 1), timeout=30)
        await wait_for(lambda: not (tmp_path / "broker-1" / "t-0").exists(), timeout=30)
        # Every acknowledged record is on every new replica, and a consumer reads them.
        on_replicas = await wait_for_identical_replicas(cluster, T0, [2, 3, 4])
        assert set(acked) <= set(on_replicas)
        assert set(acked) <= set(await _read_all(cluster, T0, len(on_replicas)))


async def _partition_that_cannot_catch_up(cluster, admin) -> tuple[int, int, int, int]:
    """Topic t on [a, b] (neither the controller c) is being reassigned to [b, d], and d
    cannot reach the leader a, so the reassignment stays in progress. Returns a, b, c, d."""
    c = await cluster.wait_for_controller(timeout=30)
    a, b, d = sorted(set(cluster.brokers) - {c})
    await admin.create_topic("t", assignments={0: [a, b]})
    cluster.network.partition(broker_node(d), broker_node(a))
    assert await admin.alter_partition_reassignments({T0: [b, d]}) == {T0: None}
    await wait_for(lambda: _hosts(cluster, d), timeout=30)  # started on d
    return a, b, c, d


async def test_a_reassignment_in_progress_is_listed_replaced_and_cancelled(autojump_clock):
    async with open_cluster(brokers=4, seed=42, broker_config=BROKER_CONFIG) as cluster:
        async with cluster.admin() as admin:
            a, b, _, d = await _partition_that_cannot_catch_up(cluster, admin)
            in_progress = PartitionReassignment((b, d, a), (d,), (a,))
            assert await admin.list_partition_reassignments() == {T0: in_progress}
            assert await admin.list_partition_reassignments([T0, ("t", 1)]) == {T0: in_progress}
            # Clients see every replica while it runs, as Kafka's metadata shows them.
            assert (await admin.describe_topic("t")).partitions[0].replicas == (b, d, a)
            znode = await _topic_znode(cluster)
            assert znode["adding_replicas"] == {"0": [d]}
            assert znode["removing_replicas"] == {"0": [a]}

            # Refused as Kafka refuses them.
            refused = await admin.alter_partition_reassignments(
                {T0: [b, b], ("t", 1): [a, b], ("u", 0): [a, b], ("t", 2): [a, 9]}
            )
            assert isinstance(refused[T0], errors.InvalidReplicaAssignmentError)
            assert isinstance(refused[TopicPartition("t", 1)], errors.UnknownTopicOrPartitionError)
            assert isinstance(refused[TopicPartition("u", 0)], errors.UnknownTopicOrPartitionError)
            assert "not alive" in str(refused[TopicPartition("t", 2)])
            assert await admin.list_partition_reassignments() == {T0: in_progress}

            # A new target replaces the one in progress (same original replicas).
            assert await admin.alter_partition_reassignments({T0: [d, b]}) == {T0: None}
            assert await admin.list_partition_reassignments() == {
                T0: PartitionReassignment((d, b, a), (d,), (a,))
            }

            # Cancelled: back to the original replicas; d's replica is deleted.
            assert await admin.alter_partition_reassignments({T0: None}) == {T0: None}
            assert await admin.list_partition_reassignments() == {}
            assert sorted((await admin.describe_topic("t")).partitions[0].replicas) == [a, b]
            assert (await _topic_znode(cluster))["adding_replicas"] == {}
            await wait_for(lambda: not _hosts(cluster, d), timeout=30)
            again = await admin.alter_partition_reassignments({T0: None})
            assert isinstance(again[T0], errors.NoReassignmentInProgressError)
            state = await partition_state(cluster, T0)
            assert state["leader"] == a and sorted(state["isr"]) == [a, b]


async def test_a_new_controller_finishes_a_reassignment_the_old_one_started(autojump_clock):
    async with open_cluster(brokers=4, seed=43, broker_config=BROKER_CONFIG) as cluster:
        async with cluster.admin() as admin:
            a, b, c, d = await _partition_that_cannot_catch_up(cluster, admin)
            await cluster.kill_broker(c)

            async def replaced() -> bool:
                new = cluster.controller_id()
                return new is not None and new != c

            await wait_for(replaced, timeout=60)
            # The new controller read the reassignment from the topic znode.
            new_controller = cluster.brokers[cluster.controller_id()].controller
            await wait_for(lambda: T0 in new_controller.context.partitions_being_reassigned, 30)
            assert await admin.list_partition_reassignments() == {
                T0: PartitionReassignment((b, d, a), (d,), (a,))
            }
            cluster.network.heal()  # d catches up: the new controller completes the move

            async def done() -> bool:
                return not await admin.list_partition_reassignments() and (
                    await _topic_znode(cluster)
                )["partitions"] == {"0": [b, d]}

            await wait_for(done, timeout=60)
            await wait_for(lambda: not _hosts(cluster, a), timeout=30)
            state = await partition_state(cluster, T0)
            assert state["leader"] in (b, d) and sorted(state["isr"]) == sorted([b, d])


async def test_a_topic_being_reassigned_is_deleted_once_the_reassignment_completes(
    autojump_clock,
):
    async with open_cluster(brokers=4, seed=44, broker_config=BROKER_CONFIG) as cluster:
        async with cluster.admin() as admin:
            a, b, c, d = await _partition_that_cannot_catch_up(cluster, admin)
            await cluster.zk.create("/admin/delete_topics/t", b"", make_parents=True)
            controller = cluster.brokers[c].controller
            # Queued, but held back while its reassignment runs (Kafka's intent).
            await wait_for(lambda: "t" in controller.context.topics_ineligible_for_deletion, 30)
            assert await cluster.zk.exists("/brokers/topics/t") is not None
            assert _hosts(cluster, a) and _hosts(cluster, b)
            # No new reassignment of a topic being deleted (nor a cancellation).
            refused = await admin.alter_partition_reassignments({T0: None})
            assert isinstance(refused[T0], errors.UnknownTopicOrPartitionError)

            cluster.network.heal()
            await wait_for(_gone(cluster), timeout=60)
            for broker_id in (a, b, d):
                await wait_for(lambda broker_id=broker_id: not _hosts(cluster, broker_id), 30)


def _gone(cluster):
    async def gone() -> bool:
        return (
            await cluster.zk.exists("/brokers/topics/t") is None
            and await cluster.zk.get_children("/admin/delete_topics") == []
        )

    return gone


async def test_a_replica_reassigned_away_while_its_broker_was_cut_off_is_deleted_once_it_hears(
    autojump_clock,
):
    """The StopReplica for a removed replica cannot reach a broker that is cut off (its
    session expires, the controller drops what it had queued for it); when the broker is
    back it still hosts the partition and believes it leads it. The controller's metadata no
    longer lists it there, at a newer leader epoch: it deletes the replica (beyond Kafka's
    ZooKeeper mode, as KRaft brokers do)."""
    async with open_cluster(brokers=4, seed=43, broker_config=BROKER_CONFIG) as cluster:
        controller = await cluster.wait_for_controller(timeout=30)
        others = [b for b in (1, 2, 3, 4) if b != controller]
        cut_off, stays = others[0], others[1:]
        async with cluster.admin() as admin:
            await admin.create_topic("t", assignments={0: [cut_off, *stays[:1], controller]})
            cluster.network.isolate(broker_node(cut_off))
            # Its session expires and another replica leads.
            await wait_for(lambda: _led_by_other_than(cluster, cut_off), timeout=60)
            target = [stays[1], stays[0], controller]
            await admin.alter_partition_reassignments({T0: target})
            await wait_for(lambda: _assigned(cluster, target), timeout=60)
        assert cluster.brokers[cut_off].replica_manager.partition(T0) is not None  # a stray
        cluster.network.heal()
        await wait_for(lambda: not _hosts(cluster, cut_off), timeout=60)


async def _led_by_other_than(cluster, broker_id: int) -> bool:
    state = await partition_state(cluster, T0)
    return state["leader"] not in (-1, broker_id)


async def _assigned(cluster, replicas: list[int]) -> bool:
    znode = await _topic_znode(cluster)
    return znode["partitions"]["0"] == replicas and not znode.get("adding_replicas")
