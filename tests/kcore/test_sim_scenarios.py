"""Named fault scenarios on the whole-cluster simulation, each with its documented outcome.

Every scenario runs the simulation's producers (acks=all unless said otherwise) while the
scenario drives the faults; the run then heals, settles, reads every partition back and
checks the history (`kcore.testing.history`) and the invariants, which were also checked
every 0.1 s of virtual time. A scenario asserts what is particular to it on top.

Covered at the replica level elsewhere, not repeated here: KIP-101 scenarios 1 and 2,
KIP-279's fast double failover and KIP-320's fencing of a stale leader epoch
(`test_replication.py`, `server/test_truncation.py`, `server/test_replica_managers.py`).
"""

from __future__ import annotations

import attrs
import pytest
import trio

from kcore.common import TopicPartition
from kcore.testing import broker_node
from kcore.testing.history import Outcome
from kcore.testing.sim import SimConfig, SimResult, Simulation, simulate

SESSION_S = 6.0  # SimConfig's zookeeper.session.timeout.ms, in seconds
LAG_S = 5.0  # SimConfig's replica.lag.time.max.ms, in seconds
TP = TopicPartition("sim", 0)


def _run(scenario, seed: int = 1, **config) -> SimResult:
    config.setdefault("partitions", 1)
    config.setdefault("faults", ())
    result = simulate(SimConfig(seed=seed, scenario=scenario, **config))
    assert result.violation is None, result.report() + "\n" + "\n".join(result.trace[-40:])
    assert result.check is not None
    return result


def _assert_nothing_lost(result: SimResult) -> None:
    assert result.ok, result.report()
    assert result.check.durable > 0, "the scenario acknowledged nothing"
    assert result.check.lost_non_durable == ()


async def _more_acks(sim: Simulation, count: int = 5, timeout: float = 60.0) -> None:
    target = sim.acked() + count
    await sim.wait_until(lambda: sim.acked() >= target, timeout)


async def _leader(sim: Simulation) -> int:
    await sim.wait_until(lambda: sim.leader_of(0) is not None)
    return sim.leader_of(0)


async def _new_leader(sim: Simulation, old: int) -> int:
    """Waits until the partition state in ZooKeeper names a live leader other than `old`."""
    while True:
        state = await sim.partition_state(0)
        if state is not None and state.leader not in (-1, old) and state.leader not in sim.down:
            return state.leader
        await trio.sleep(0.05)


async def _full_isr(sim: Simulation) -> None:
    await sim.wait_until(lambda: len(sim.isr_of(0)) == 3)


@attrs.define
class Seen:
    """What a scenario observed on the way, for the test to assert afterwards."""

    leaders: list[int] = attrs.Factory(list)
    isrs: list[tuple[int, ...]] = attrs.Factory(list)
    epochs: list[int] = attrs.Factory(list)
    log_ends: list[int] = attrs.Factory(list)
    marks: dict[str, float] = attrs.Factory(dict)


def test_leader_killed_after_an_ack_loses_nothing():
    seen = Seen()

    async def scenario(sim: Simulation) -> None:
        await _full_isr(sim)
        await _more_acks(sim)
        leader = await _leader(sim)
        await sim.kill(leader)
        with trio.fail_after(SESSION_S * 3):
            seen.leaders += [leader, await _new_leader(sim, leader)]
        await _more_acks(sim)
        await sim.start(leader)
        await _full_isr(sim)

    result = _run(scenario)
    _assert_nothing_lost(result)
    assert seen.leaders[0] != seen.leaders[1]


@pytest.mark.parametrize("hard", [False, True], ids=["controlled-shutdown", "kill"])
def test_leader_bounced_five_times_loses_nothing(hard):
    seen = Seen()

    async def scenario(sim: Simulation) -> None:
        for _ in range(5):
            await _full_isr(sim)
            await _more_acks(sim, 3)
            leader = await _leader(sim)
            await (sim.kill(leader) if hard else sim.stop(leader))
            seen.leaders.append(await _new_leader(sim, leader))
            await _more_acks(sim, 3)
            await sim.start(leader)
        await _full_isr(sim)

    result = _run(scenario, seed=2)
    _assert_nothing_lost(result)
    assert len(seen.leaders) == 5


@pytest.mark.parametrize("hard", [False, True], ids=["controlled-shutdown", "kill"])
def test_controller_bounced_five_times_loses_nothing(hard):
    seen = Seen()

    async def scenario(sim: Simulation) -> None:
        for _ in range(5):
            controller = await sim.cluster.wait_for_controller(timeout=60)
            seen.epochs.append(sim.cluster.controller_epoch())
            await _more_acks(sim, 3)
            await (sim.kill(controller) if hard else sim.stop(controller))
            await sim.wait_until(lambda c=controller: sim.cluster.controller_id() not in (None, c))
            await _more_acks(sim, 3)
            await sim.start(controller)
        await sim.cluster.wait_for_controller(timeout=60)
        seen.epochs.append(sim.cluster.controller_epoch())
        await _full_isr(sim)

    result = _run(scenario, seed=3)
    _assert_nothing_lost(result)
    # Every bounce moved the controller to another broker, with a higher epoch each time.
    assert seen.epochs == sorted(set(seen.epochs))
    assert seen.epochs[-1] >= seen.epochs[0] + 5


def test_a_partitioned_follower_leaves_the_isr_and_rejoins_when_healed():
    seen = Seen()

    async def scenario(sim: Simulation) -> None:
        await _full_isr(sim)
        leader = await _leader(sim)
        follower = max(b for b in sim.isr_of(0) if b != leader)
        sim.cluster.network.partition(broker_node(leader), broker_node(follower))
        await sim.wait_until(lambda: follower not in sim.isr_of(0), timeout=LAG_S * 4)
        seen.isrs.append(sim.isr_of(0))
        await _more_acks(sim)  # min.insync=2 still holds with two replicas
        sim.heal_network()
        await _full_isr(sim)
        seen.isrs.append(sim.isr_of(0))

    result = _run(scenario, seed=4)
    _assert_nothing_lost(result)
    assert len(seen.isrs[0]) == 2
    assert seen.isrs[1] == (1, 2, 3)


def _log_end(sim: Simulation, broker_id: int) -> int:
    return sim.cluster.brokers[broker_id].replica_manager.partition(TP).log_end_offset


def _jepsen_2013(seen: Seen):
    """Kyle Kingsbury's 2013 Kafka sequence: the followers are cut off from the leader so
    the ISR shrinks to the leader alone, writes go on, then the leader is cut off from
    everything and its ZooKeeper session expires; later the network heals."""

    async def scenario(sim: Simulation) -> None:
        await _full_isr(sim)
        await _more_acks(sim)
        leader = await _leader(sim)
        followers = [b for b in sim.isr_of(0) if b != leader]
        for follower in followers:
            sim.cluster.network.partition(broker_node(leader), broker_node(follower))
        await sim.wait_until(lambda: sim.isr_of(0) == (leader,), timeout=LAG_S * 4)
        seen.marks["isr_is_the_leader"] = trio.current_time()
        seen.log_ends.append(_log_end(sim, leader))
        # Writes the leader alone holds (when min.insync.replicas lets it acknowledge).
        with trio.move_on_after(10):
            await _more_acks(sim)
        seen.log_ends.append(_log_end(sim, leader))
        seen.marks["leader_isolated"] = trio.current_time()
        sim.cluster.network.isolate(broker_node(leader))
        with trio.fail_after(SESSION_S * 4):
            while True:  # the controller has noticed the leader's session is gone
                state = await sim.partition_state(0)
                if state is not None and state.leader != leader:
                    break
                await trio.sleep(0.05)
        seen.leaders.append(state.leader)
        seen.marks["leader_gone"] = trio.current_time()
        with trio.move_on_after(20):
            await _more_acks(sim)  # at the new leader, if there is one
        seen.leaders.append((await sim.partition_state(0)).leader)
        seen.marks["healed"] = trio.current_time()
        sim.heal_network()

    return scenario


def test_jepsen_2013_with_unclean_election_loses_acked_writes_and_reports_it():
    seen = Seen()
    result = _run(_jepsen_2013(seen), seed=5, min_insync_replicas=1, unclean_leader_election=True)
    # A follower was elected uncleanly, and the writes only the old leader had are gone;
    # the checker reports them as losses outside the durability contract.
    assert seen.leaders[0] != -1
    assert result.check.anomalies == ()
    assert result.check.lost_non_durable, result.report()
    assert all(a.kind == "lost" for a in result.check.lost_non_durable)


def test_jepsen_2013_without_unclean_election_stays_offline_and_loses_nothing():
    seen = Seen()
    result = _run(_jepsen_2013(seen), seed=5, min_insync_replicas=1)
    assert seen.leaders == [-1, -1]  # offline until the old leader comes back
    assert result.check.anomalies == ()
    assert result.check.lost_non_durable == ()
    # While offline, sends were attempted and none was acknowledged.
    gone, healed = seen.marks["leader_gone"], seen.marks["healed"]
    assert any(gone < op.start < healed for op in result.ops)
    assert not [op for op in result.ops if op.outcome is Outcome.OK and gone < op.end < healed]


def test_jepsen_2013_with_min_insync_two_acknowledges_nothing_once_the_isr_is_the_leader():
    seen = Seen()
    result = _run(_jepsen_2013(seen), seed=5, min_insync_replicas=2)
    _assert_nothing_lost(result)
    # Once the ISR was the leader alone, nothing was acknowledged until the heal, and the
    # leader refused to append at all (NOT_ENOUGH_REPLICAS is checked before the append).
    alone, healed = seen.marks["isr_is_the_leader"], seen.marks["healed"]
    assert not [op for op in result.ops if op.outcome is Outcome.OK and alone < op.end < healed]
    assert any(op.start < healed and op.end > alone for op in result.ops)
    assert seen.log_ends[0] == seen.log_ends[1]


def test_acks_1_loses_unreplicated_writes_when_the_leader_dies():
    """The documented trade-off: acks=1 is acknowledged by the leader alone, so writes the
    followers have not fetched yet die with it."""
    seen = Seen()

    async def scenario(sim: Simulation) -> None:
        await _full_isr(sim)
        await _more_acks(sim)
        leader = await _leader(sim)
        for follower in (b for b in sim.isr_of(0) if b != leader):
            sim.cluster.network.partition(broker_node(leader), broker_node(follower))
        await _more_acks(sim, 3, timeout=LAG_S / 2)  # well before the ISR would shrink
        await sim.kill(leader)
        sim.heal_network()
        seen.leaders.append(await _new_leader(sim, leader))
        await _more_acks(sim)
        await sim.start(leader)
        await _full_isr(sim)

    result = _run(scenario, seed=6, acks="1")
    assert result.check.anomalies == ()
    assert len(result.check.lost_non_durable) >= 3, result.report()


def test_a_zombie_controller_is_fenced_by_the_controller_epoch():
    """The controller stalls (a long GC pause) past its session timeout; another broker
    takes over with a higher epoch, and when the old one resumes its writes are refused
    and it resigns. At no point are two controllers active with one epoch (an invariant
    checked every step)."""
    seen = Seen()

    async def scenario(sim: Simulation) -> None:
        zombie = await sim.cluster.wait_for_controller(timeout=60)
        seen.epochs.append(sim.cluster.controller_epoch())
        await _more_acks(sim)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sim.pause, zombie, SESSION_S * 3)
            await sim.wait_until(lambda: sim.cluster.controller_id() not in (None, zombie))
            seen.leaders.append(sim.cluster.controller_id())
            seen.epochs.append(sim.cluster.controller_epoch())
        # Resumed: it learns it was replaced and stops acting as controller.
        await sim.wait_until(lambda: zombie not in sim.cluster.active_controllers())
        await _more_acks(sim)
        seen.leaders.append(await sim.cluster.wait_for_controller(timeout=60))

    result = _run(scenario, seed=7)
    _assert_nothing_lost(result)
    assert seen.epochs[1] > seen.epochs[0]
    assert seen.leaders[0] == seen.leaders[1]


def test_a_fast_broker_bounce_is_caught_by_its_broker_epoch():
    """A broker stops and comes straight back, before the controller has handled its
    departure: the controller sees one registration replaced by another with a new broker
    epoch and treats it as a failure plus a start-up, so the broker is brought back into
    its partitions' ISRs."""

    async def scenario(sim: Simulation) -> None:
        await _full_isr(sim)
        await _more_acks(sim)
        for _ in range(3):
            controller = await sim.cluster.wait_for_controller(timeout=60)
            victim = next(b for b in sorted(sim.cluster.brokers) if b != controller)
            old_epoch = sim.cluster.brokers[victim].broker_epoch
            await sim.stop(victim)
            await sim.start(victim)
            assert sim.cluster.brokers[victim].broker_epoch > old_epoch
            await _more_acks(sim, 3)
            await _full_isr(sim)

    _assert_nothing_lost(_run(scenario, seed=8))


def _power_loss_everywhere(sim_seen: Seen):
    async def scenario(sim: Simulation) -> None:
        await _full_isr(sim)
        await _more_acks(sim, 10)
        everyone = sorted(sim.cluster.brokers)
        for broker_id in everyone:
            await sim.kill(broker_id, power_loss=True)
        for broker_id in everyone:
            await sim.start(broker_id)
        await _full_isr(sim)
        sim_seen.marks["restarted"] = trio.current_time()

    return scenario


def test_power_loss_on_every_replica_loses_unflushed_acked_writes_without_fsync():
    """Kafka acknowledges before fsync (flush.messages unset): durability rests on
    replicas not all failing at once. When they do, acknowledged writes can go; the
    checker reports them outside the contract rather than hiding them."""
    seen = Seen()
    result = _run(_power_loss_everywhere(seen), seed=9, flush_messages=None, faults=("power_loss",))
    assert not result.config.durable
    assert result.check.anomalies == ()
    assert result.check.lost_non_durable, result.report()


def test_power_loss_on_every_replica_loses_nothing_with_flush_messages_1():
    seen = Seen()
    result = _run(_power_loss_everywhere(seen), seed=9, flush_messages=1, faults=("power_loss",))
    assert result.config.durable
    _assert_nothing_lost(result)


def test_a_zookeeper_restart_loses_nothing():
    """The ZooKeeper server dies and comes back with its data dir: sessions reconnect
    within their timeout and the cluster carries on."""

    async def scenario(sim: Simulation) -> None:
        await _full_isr(sim)
        await _more_acks(sim)
        await sim.kill_zookeeper()
        await trio.sleep(SESSION_S / 3)
        await sim.start_zookeeper()
        await _more_acks(sim)
        leader = await _leader(sim)
        await sim.kill(leader)
        await _new_leader(sim, leader)
        await sim.start(leader)
        await _full_isr(sim)

    _assert_nothing_lost(_run(scenario, seed=10, faults=("restart_zookeeper",)))


def test_a_group_survives_a_crashed_member_and_its_coordinators_death():
    """Three members of a consumer group, committing after processing: one crashes (no
    commit, no LeaveGroup), then the broker coordinating the group dies; the group moves to
    the new coordinator, the crashed member's partition moves to a survivor by the session
    timeout, and in the end every acknowledged record was consumed, no commit went
    backwards and none skipped a record."""
    seen = Seen()
    crashed = {}

    async def scenario(sim: Simulation) -> None:
        await _more_acks(sim)
        owner = next(s for s in sim.members if s.consumer.assignment())
        crashed.update(name=owner.name, partitions=owner.consumer.assignment())
        sim.crash_member(owner)
        await _more_acks(sim)
        coordinator = sim.coordinator()
        seen.leaders.append(coordinator)
        await sim.kill(coordinator)
        await sim.wait_until(lambda: sim.coordinator() not in (None, coordinator))
        seen.leaders.append(sim.coordinator())
        await sim.wait_until(sim.group_covers_topic)
        await _more_acks(sim, 10)
        await sim.start(coordinator)
        sim.start_member(owner)

    result = _run(scenario, seed=4, partitions=2, group_consumers=3)
    _assert_nothing_lost(result)
    assert seen.leaders[0] != seen.leaders[1]
    group = result.group_check
    assert group is not None and group.valid, group.summary()
    assert group.acknowledged == result.check.durable and group.distinct >= group.acknowledged
    assert group.commits["ok"] > 0
    # Another member took the crashed one's partitions over, and committed them.
    for tp in crashed["partitions"]:
        assert any(c.tp == tp and c.member != crashed["name"] for c in result.group.consumed)
        assert any(
            c.outcome is Outcome.OK and c.member != crashed["name"] and tp in dict(c.offsets)
            for c in result.group.commits
        )
