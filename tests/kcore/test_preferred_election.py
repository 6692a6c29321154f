"""Preferred-replica election, as an operator triggers it (the znode, an ElectLeaders request)
and as the auto leader rebalance does: after a broker bounce its leaderships come back, under
virtual time on the simulated network."""

from __future__ import annotations

import json

import pytest
import trio

from kcore import errors
from kcore.common import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.controller import events as ev
from kcore.controller.context import ControllerContext
from kcore.controller.preferred_election import (
    ElectionOutcome,
    ElectionTrigger,
    ElectionType,
    classify_election_request,
    partitions_to_rebalance,
)
from kcore.testing import open_cluster

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def _context(leaders: dict[int, int], live=(1, 2, 3)) -> ControllerContext:
    """Topic t, partition p assigned [1, 2, 3] rotated by p (so p % 3 + 1 is preferred), led
    by leaders[p], every replica in the ISR."""
    from kcore.common import Broker, EndPoint

    context = ControllerContext()
    context.add_live_brokers(Broker(b, (EndPoint("h", 9000 + b),)) for b in live)
    replicas = [1, 2, 3]
    assignment = {
        p: ReplicaAssignment(tuple(replicas[p % 3 :] + replicas[: p % 3])) for p in leaders
    }
    context.set_topic_assignment("t", None, assignment)
    for p, leader in leaders.items():
        context.partition_leadership[TopicPartition("t", p)] = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(leader, 1, (1, 2, 3), 1), 1
        )
    return context


def test_a_request_elects_only_what_needs_an_election():
    context = _context({0: 2, 1: 2})  # partition 0 prefers 1 (led by 2); 1 prefers 2
    valid, refused = classify_election_request(
        context, [T0, T1, TopicPartition("u", 0)], ElectionType.PREFERRED
    )
    assert valid == [T0]
    assert isinstance(refused[T1], errors.ElectionNotNeededError)
    assert isinstance(refused[TopicPartition("u", 0)], errors.UnknownTopicOrPartitionError)
    # UNCLEAN is needed only where the leader is gone.
    valid, refused = classify_election_request(context, [T0], ElectionType.UNCLEAN)
    assert valid == [] and isinstance(refused[T0], errors.ElectionNotNeededError)


def test_the_rebalance_moves_a_broker_back_past_the_imbalance_ratio():
    # Broker 1 prefers partitions 0 and 3 (of 0..5) and leads neither: 100% imbalanced.
    context = _context({0: 2, 1: 2, 2: 3, 3: 2, 4: 2, 5: 3})
    assert partitions_to_rebalance(context, 10) == [TopicPartition("t", 0), TopicPartition("t", 3)]
    # ...unless the preferred replica cannot lead: not live.
    context.remove_live_brokers([1])
    assert partitions_to_rebalance(context, 10) == []


def test_a_preempted_election_answers_not_controller():
    answers = []
    event = ev.ReplicaLeaderElection(
        frozenset([T0]), ElectionType.PREFERRED, ElectionTrigger.ADMIN_CLIENT, answers.append
    )
    event.preempt()
    assert answers == [
        {T0: ElectionOutcome(errors.NotControllerError.code, "the controller moved")}
    ]


async def _wait(condition, timeout: float = 60.0) -> None:
    """Until the async `condition()` holds (virtual time: a long wait costs nothing)."""
    with trio.fail_after(timeout):
        while not await condition():
            await trio.sleep(0.05)


async def _leader(cluster, tp: TopicPartition) -> int:
    state = await cluster.zk.get(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state")
    return json.loads(state[0])["leader"]


async def _isr(cluster, tp: TopicPartition) -> list[int]:
    state = await cluster.zk.get(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state")
    return json.loads(state[0])["isr"]


async def _bounce_preferred_leader(cluster) -> None:
    """Topic t, partition 0 on [1, 2, 3]: broker 1 bounces, leadership moves away, and 1
    is back in the ISR."""
    async with cluster.admin() as admin:
        await admin.create_topic("t", assignments={0: [1, 2, 3]})
    assert await _leader(cluster, T0) == 1
    await cluster.kill_broker(1)
    await _wait(lambda: _leader_is_not(cluster, 1))
    await cluster.restart_broker(1)

    async def back_in_sync() -> bool:
        return 1 in await _isr(cluster, T0)

    await _wait(back_in_sync)


async def _leader_is_not(cluster, broker: int) -> bool:
    return await _leader(cluster, T0) not in (broker, -1)


@pytest.mark.parametrize("how", ["znode", "request"])
async def test_an_operator_moves_leadership_back_to_the_preferred_replica(autojump_clock, how):
    config = {"auto.leader.rebalance.enable": "false"}
    async with open_cluster(brokers=3, seed=3, broker_config=config) as cluster:
        await cluster.wait_for_controller()
        await _bounce_preferred_leader(cluster)
        assert await _leader(cluster, T0) != 1
        if how == "znode":
            await cluster.zk.create(
                "/admin/preferred_replica_election",
                json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0}]}).encode(),
                make_parents=True,
            )

            async def done() -> bool:
                return await cluster.zk.exists("/admin/preferred_replica_election") is None

            await _wait(done)
        else:
            controller = cluster.brokers[await cluster.wait_for_controller()].controller
            answers = await controller.elect_leaders([T0, T1], ElectionType.PREFERRED)
            assert answers[T0].error_code == 0 and answers[T0].leader_epoch > 0
            assert answers[T1].error_code == errors.UnknownTopicOrPartitionError.code
            again = await controller.elect_leaders([T0], ElectionType.PREFERRED)
            assert again[T0].error_code == errors.ElectionNotNeededError.code
        assert await _leader(cluster, T0) == 1


async def test_the_auto_rebalance_moves_leadership_back_after_a_bounce(autojump_clock):
    config = {
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "30",
    }
    async with open_cluster(brokers=3, seed=5, broker_config=config) as cluster:
        await cluster.wait_for_controller()
        await _bounce_preferred_leader(cluster)
        started = trio.current_time()

        async def preferred_leads() -> bool:
            return await _leader(cluster, T0) == 1

        await _wait(preferred_leads, timeout=120)
        # No operator did anything: the timer did, within one interval (and a bit).
        assert trio.current_time() - started <= 30 + 10


async def test_kcores_admin_asks_for_a_preferred_election(autojump_clock):
    config = {"auto.leader.rebalance.enable": "false"}
    async with open_cluster(brokers=3, seed=8, broker_config=config) as cluster:
        await cluster.wait_for_controller()
        await _bounce_preferred_leader(cluster)
        async with cluster.admin() as admin:
            outcomes = await admin.elect_leaders([("t", 0), ("t", 7)])
            assert outcomes[T0] is None
            assert isinstance(outcomes[TopicPartition("t", 7)], errors.UnknownTopicOrPartitionError)
            # The Admin returns once the controller's broker shows the new leader.
            assert (await admin.describe_topic("t")).partitions[0].leader == 1
            again = await admin.elect_leaders([("t", 0)])
            assert isinstance(again[T0], errors.ElectionNotNeededError)
            with pytest.raises(ValueError, match="election_type"):
                await admin.elect_leaders(election_type="clean")
