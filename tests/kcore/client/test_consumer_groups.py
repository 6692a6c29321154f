"""kcore's Consumer in a consumer group, against an embedded cluster (simulated network,
virtual time): members share the partitions, commits carry the group's progress across
restarts, crashes and a coordinator's death, static members come back without a
rebalance, and the cooperative protocol moves only what must move."""

from __future__ import annotations

import re

import attrs
import pytest
import trio

from actors.testing import poll_until
from kcore import errors
from kcore.client._group import CommittedOffset
from kcore.common import OFFSETS_TOPIC, TopicPartition
from kcore.coordinator.group import partition_for
from kcore.testing import open_cluster

BROKER = {
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 0,
}
GROUP = {"group_id": "g", "session_timeout_ms": 10000, "heartbeat_interval_ms": 1000}


async def wait_until(condition, timeout=120.0):
    await poll_until(condition, timeout=timeout, every=0.1)


async def produce(cluster, topic, count, partitions, start=0):
    async with cluster.producer(acks="all") as producer:
        sent = [
            await producer.send(topic, f"v{i}".encode(), partition=i % partitions)
            for i in range(start, start + count)
        ]
        for record in sent:
            await record  # acknowledged, or the test fails


@attrs.define(eq=False)
class Member:
    """A consumer polling in its own task: what it read, and a scope to crash it."""

    consumer: object
    seen: list = attrs.field(factory=list)
    revoked: list = attrs.field(factory=list)
    assigned: list = attrs.field(factory=list)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    stop: trio.Event = attrs.field(factory=trio.Event)
    closed: trio.Event = attrs.field(factory=trio.Event)

    def partitions(self):
        return {tp.partition for tp in self.consumer.assignment()}

    async def run(self, topics, commit=True):
        with self.scope:
            try:
                async with self.consumer as consumer:
                    consumer.subscribe(
                        topics, on_assign=self.assigned.append, on_revoke=self.revoked.append
                    )
                    while not self.stop.is_set():
                        for record in await consumer.poll(0.5):
                            self.seen.append((record.partition, record.offset))
                        if commit:
                            try:
                                await consumer.commit()  # after processing: at least once
                            except (errors.RebalanceInProgressError, errors.CommitFailedError):
                                pass
            finally:
                self.closed.set()


def start(nursery, cluster, topics=("t",), commit=True, **settings):
    member = Member(cluster.consumer(**{**GROUP, "enable_auto_commit": False, **settings}))
    nursery.start_soon(member.run, list(topics), commit)
    return member


def covers(members, partitions):
    owned = [m.partitions() for m in members]
    union = set().union(*owned)
    return union == set(range(partitions)) and sum(map(len, owned)) == partitions


async def test_three_members_share_and_a_crashed_ones_partitions_move_on(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=11, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=6, replication_factor=2)
        await produce(cluster, "t", 60, 6)
        async with trio.open_nursery() as nursery:
            members = [start(nursery, cluster) for _ in range(3)]
            await wait_until(lambda: covers(members, 6) and all(m.partitions() for m in members))
            generations = {m.consumer.group_metadata().generation_id for m in members}
            assert len(generations) == 1
            await wait_until(lambda: len({p for m in members for p in m.seen}) >= 60)

            crashed, survivors = members[2], members[:2]
            lost = crashed.partitions()
            crashed.scope.cancel()  # a hard stop: no commit, no LeaveGroup
            await crashed.closed.wait()
            killed_at = trio.current_time()
            await produce(cluster, "t", 60, 6, start=60)
            await wait_until(lambda: covers(survivors, 6))
            # The coordinator notices by the session timeout (10 s), not at once.
            assert trio.current_time() - killed_at >= 8
            assert lost <= survivors[0].partitions() | survivors[1].partitions()
            await wait_until(lambda: len({p for m in members for p in m.seen}) >= 120)
            for member in survivors:
                member.stop.set()
        seen = {p for m in members for p in m.seen}
        # Every record read at least once, none skipped.
        assert seen == {(i % 6, i // 6) for i in range(120)}


async def test_a_restarted_member_continues_from_the_committed_offsets(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=12, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=3)
        await produce(cluster, "t", 20, 2)
        async with cluster.consumer(**GROUP) as first:  # enable_auto_commit: Kafka's default
            first.subscribe(["t"])
            got = []
            while len(got) < 20:
                got += await first.poll(1.0)
            assert sorted((r.partition, r.offset) for r in got) == sorted(
                (i % 2, i // 2) for i in range(20)
            )
        # close() committed the positions and left the group.
        await produce(cluster, "t", 10, 2, start=20)
        async with cluster.consumer(**GROUP) as second:
            assert await second.committed(TopicPartition("t", 0)) == 10
            assert await second.committed([("t", 0), ("t", 1)]) == {
                TopicPartition("t", 0): 10,
                TopicPartition("t", 1): 10,
            }
            second.subscribe(["t"])
            got = []
            with trio.fail_after(60):
                async for record in second:
                    got.append((record.partition, record.offset))
                    if len(got) == 10:
                        break
            assert sorted(got) == sorted((i % 2, i // 2) for i in range(20, 30))
            assert await second.position(("t", 1)) == 15


async def test_a_static_member_comes_back_without_a_rebalance(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=13, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=4, replication_factor=3)
        await produce(cluster, "t", 8, 4)
        async with trio.open_nursery() as nursery:
            a = start(nursery, cluster, group_instance_id="a")
            b = start(nursery, cluster, group_instance_id="b")
            await wait_until(lambda: covers([a, b], 4) and a.partitions() and b.partitions())
            generation = a.consumer.group_metadata().generation_id
            b_partitions = b.partitions()
            a_revocations = len(a.revoked)
            b.stop.set()  # a clean close, but a static member sends no LeaveGroup
            await b.closed.wait()
            await trio.sleep(3)  # (back within the session timeout: 10 s)
            again = start(nursery, cluster, group_instance_id="b")
            await wait_until(lambda: again.partitions() == b_partitions)
            await trio.sleep(5)  # what a rebalance of the others would have shown by now
            assert a.consumer.group_metadata().generation_id == generation
            assert again.consumer.group_metadata().generation_id == generation
            assert len(a.revoked) == a_revocations
            a.stop.set()
            again.stop.set()


async def test_the_group_follows_its_coordinator_to_another_broker(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=14, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=4, replication_factor=3)
            await produce(cluster, "t", 40, 4)
            async with trio.open_nursery() as nursery:
                members = [start(nursery, cluster) for _ in range(2)]
                await wait_until(lambda: covers(members, 4))
                await wait_until(lambda: len({p for m in members for p in m.seen}) >= 40)
                offsets_partition = partition_for("g", 3)
                described = await admin.describe_topic(OFFSETS_TOPIC)
                coordinator = described.partitions[offsets_partition].leader
                async with cluster.consumer(group_id="g") as observer:
                    before = await observer.committed([("t", p) for p in range(4)])
                assert all(offset is not None for offset in before.values())
                await cluster.kill_broker(coordinator)
                await produce(cluster, "t", 40, 4, start=40)
                await wait_until(lambda: len({p for m in members for p in m.seen}) >= 80)
                assert covers(members, 4)
                for member in members:
                    member.stop.set()
            described = await admin.describe_topic(OFFSETS_TOPIC)
            assert described.partitions[offsets_partition].leader not in (coordinator, -1)
        async with cluster.consumer(group_id="g") as observer:
            after = await observer.committed([("t", p) for p in range(4)])
        assert after == {TopicPartition("t", p): 20 for p in range(4)}
        seen = {p for m in members for p in m.seen}
        assert seen == {(i % 4, i // 4) for i in range(80)}


async def test_cooperative_sticky_revokes_only_what_moves(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=15, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=6, replication_factor=2)
        coop = {"partition_assignment_strategy": "cooperative-sticky"}
        async with trio.open_nursery() as nursery:
            first = start(nursery, cluster, **coop)
            await wait_until(lambda: first.partitions() == set(range(6)))
            second = start(nursery, cluster, **coop)
            await wait_until(lambda: covers([first, second], 6) and len(second.partitions()) == 3)
            # One revocation, of just the three partitions that moved, and nothing lost.
            assert first.revoked == [[TopicPartition("t", p) for p in sorted(second.partitions())]]
            assert first.partitions() == set(range(6)) - second.partitions()
            assert sorted(tp.partition for call in second.assigned for tp in call) == sorted(
                second.partitions()
            )
            first.stop.set()
            second.stop.set()


async def test_end_offsets_of_unassigned_partitions_answer_at_once(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=16, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=2)
            await admin.create_topic("other", partitions=2, replication_factor=2)
        await produce(cluster, "other", 3, 2)
        async with cluster.consumer(**GROUP) as consumer:
            consumer.subscribe(["t"])
            await wait_until_assigned(consumer, 2)
            tps = [TopicPartition("other", 0), TopicPartition("other", 1)]
            with trio.fail_after(1):
                assert await consumer.end_offsets(tps) == {tps[0]: 2, tps[1]: 1}
                assert await consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}


async def wait_until_assigned(consumer, count, timeout=60.0):
    with trio.fail_after(timeout):
        while len(consumer.assignment()) < count:
            await consumer.poll(0.5)


async def test_pattern_subscription_picks_up_new_topics(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=17, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("orders-eu", partitions=1, replication_factor=2)
            await admin.create_topic("payments", partitions=1, replication_factor=2)
            async with cluster.consumer(**GROUP, metadata_max_age_ms=2000) as consumer:
                consumer.subscribe(re.compile(r"orders-.*"))
                await wait_until_assigned(consumer, 1)
                assert consumer.assignment() == {TopicPartition("orders-eu", 0)}
                await admin.create_topic("orders-us", partitions=2, replication_factor=2)
                await wait_until_assigned(consumer, 3)
                assert consumer.subscription() == {"orders-eu", "orders-us"}


async def test_no_committed_offset_and_reset_none_names_the_partition(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=18, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=2)
        async with cluster.consumer(**GROUP, auto_offset_reset="none") as consumer:
            consumer.subscribe(["t"])
            with trio.fail_after(60), pytest.raises(errors.NoOffsetForPartitionError, match="t-0"):
                while True:
                    await consumer.poll(0.5)
            # Manually assigned partitions commit with generation -1, as Kafka allows.
            await consumer.unsubscribe()
            consumer.assign([("t", 0)])
            await consumer.commit({("t", 0): 0})
            assert await consumer.committed(("t", 0)) == 0
            assert await consumer.poll(0.5) == []
            assert await consumer.position(("t", 0)) == 0


async def test_a_member_that_stops_polling_leaves_and_its_commit_fails(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, seed=19, data_dir=tmp_path, broker_config=BROKER) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=2)
        await produce(cluster, "t", 4, 2)
        async with trio.open_nursery() as nursery:
            other = start(nursery, cluster)
            async with cluster.consumer(
                **GROUP, enable_auto_commit=False, max_poll_interval_ms=6000
            ) as slow:
                slow.subscribe(["t"])
                await wait_until_assigned(slow, 1)
                await wait_until(lambda: covers([other], 2))  # slow's poll timeout
                with pytest.raises(errors.CommitFailedError):
                    await slow.commit({("t", 0): 1})
            other.stop.set()


async def test_commits_carry_the_leader_epoch_of_the_records_read(autojump_clock, tmp_path):
    """KIP-320: a record says the leader epoch it was written in, and a commit of a
    position the consumer reached carries the epoch of the record before it, so that the
    next owner of the partition knows how new its metadata must be."""
    # The group's offsets live on the two brokers left once the leader is killed.
    config = {**BROKER, "offsets.topic.replication.factor": 2}
    async with open_cluster(brokers=3, seed=21, data_dir=tmp_path, broker_config=config) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=3)
            await produce(cluster, "t", 3, 1)
            leader = (await admin.describe_topic("t")).partitions[0].leader
            await cluster.kill_broker(leader)
            await produce(cluster, "t", 3, 1, start=3)
        tp = TopicPartition("t", 0)
        async with cluster.consumer(**GROUP, enable_auto_commit=False) as consumer:
            consumer.assign([tp])
            got = []
            while len(got) < 6:
                got += await consumer.poll(1.0)
            assert [r.leader_epoch for r in got[:3]] == [0, 0, 0]
            new_epoch = got[-1].leader_epoch
            assert new_epoch >= 1 and {r.leader_epoch for r in got[3:]} == {new_epoch}
            await consumer.commit()
            assert await consumer._group.fetch_committed([tp]) == {
                tp: CommittedOffset(6, new_epoch)
            }
            await consumer.commit({tp: 2})  # not the position: no epoch known
            assert await consumer._group.fetch_committed([tp]) == {tp: CommittedOffset(2, None)}


async def test_a_lone_member_joins_once(autojump_clock, tmp_path):
    """A poll while the first JoinGroup is out must not take the subscription sent in it
    for a change: one join, one generation, one assignment."""
    # Kafka's default initial rebalance delay, 3 s: polls while the JoinGroup is out.
    config = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1}
    async with open_cluster(brokers=1, seed=22, data_dir=tmp_path, broker_config=config) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=1)
        assigned = []
        async with cluster.consumer(**GROUP) as consumer:
            consumer.subscribe(["t"], on_assign=assigned.append)
            with trio.move_on_after(20):
                while True:
                    await consumer.poll(0.2)
            assert consumer.group_metadata().generation_id == 1
            assert assigned == [[TopicPartition("t", 0), TopicPartition("t", 1)]]
