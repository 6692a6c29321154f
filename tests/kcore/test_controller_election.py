"""Controller election, failover and session expiry on a simulated cluster (virtual time)."""

import random

import pytest
import trio

import zkstub
from kcore import errors
from kcore.testing import broker_node, open_cluster
from kcore.zk_client import ControllerMovedError, KafkaZkClient

SESSION_TIMEOUT = 6.0  # open_cluster's zookeeper.session.timeout.ms
TICK = 2.0
# A dead session is noticed by the server within its timeout plus one tick of its expiry
# timer; the controller then needs a few round trips.
FAILOVER_BOUND = SESSION_TIMEOUT + TICK + 1.0


def _assert_one_controller_per_epoch(cluster):
    epochs = [cluster.brokers[b].controller.epoch for b in cluster.active_controllers()]
    assert len(epochs) == len(set(epochs)), f"two active controllers share an epoch: {epochs}"


async def test_three_brokers_elect_one_controller_with_epoch_one(autojump_clock, wait_until):
    async with open_cluster(brokers=3, seed=1) as cluster:
        controller = await cluster.wait_for_controller(timeout=30)
        assert cluster.active_controllers() == [controller]
        assert cluster.controller_epoch() == 1
        data, _ = await cluster.zk.get("/controller_epoch")
        assert data == b"1"
        # Every broker hears from the controller (UpdateMetadata) with all live brokers.
        await wait_until(
            lambda: all(
                b.metadata_cache.controller_id == controller
                and sorted(b.metadata_cache.brokers) == [1, 2, 3]
                for b in cluster.brokers.values()
            ),
            timeout=10,
        )
        assert sorted(await cluster.zk.get_children("/brokers/ids")) == ["1", "2", "3"]


async def test_only_the_active_controller_answers_which_brokers_are_live(
    autojump_clock, wait_until
):
    async with open_cluster(brokers=3, seed=1) as cluster:
        controller_id = await cluster.wait_for_controller(timeout=30)
        controller = cluster.brokers[controller_id].controller
        await wait_until(lambda: len(controller.context.live_brokers) == 3, timeout=30)
        assert await controller.live_broker_ids() == [1, 2, 3]
        other = next(b for b in sorted(cluster.brokers) if b != controller_id)
        with pytest.raises(errors.NotControllerError):
            await cluster.brokers[other].controller.live_broker_ids()


async def test_killing_the_controller_elects_another_with_the_next_epoch(autojump_clock):
    async with open_cluster(brokers=3, seed=2) as cluster:
        first = await cluster.wait_for_controller(timeout=30)
        await cluster.kill_broker(first)
        killed_at = trio.current_time()
        second = await cluster.wait_for_controller(timeout=FAILOVER_BOUND)
        assert second != first
        assert cluster.controller_epoch() == 2
        assert trio.current_time() - killed_at <= FAILOVER_BOUND
        assert sorted(await cluster.zk.get_children("/brokers/ids")) == sorted(
            str(b) for b in cluster.brokers
        )


async def test_session_expiry_makes_the_controller_resign(autojump_clock, wait_until):
    async with open_cluster(brokers=3, seed=3) as cluster:
        first = await cluster.wait_for_controller(timeout=30)
        expired = cluster.brokers[first]
        epoch_before = expired.broker_epoch
        await cluster.expire_session(first)
        await wait_until(lambda: cluster.controller_epoch() == 2, timeout=FAILOVER_BOUND)
        assert len(cluster.active_controllers()) == 1
        # The expired broker registered again with a new session (a new broker epoch).
        await wait_until(lambda: expired.broker_epoch > epoch_before, timeout=10)


async def test_a_controller_cut_off_from_zookeeper_is_fenced(autojump_clock, wait_until):
    async with open_cluster(brokers=3, seed=4) as cluster:
        old = await cluster.wait_for_controller(timeout=30)
        old_epoch_version = cluster.brokers[old].controller.context.epoch_zk_version
        cluster.network.isolate(broker_node(old))
        # The old controller cannot hear that its session expired: it still believes it is
        # active while another is elected.
        await wait_until(
            lambda: any(b != old for b in cluster.active_controllers()), timeout=FAILOVER_BOUND
        )
        new = next(b for b in cluster.active_controllers() if b != old)
        assert cluster.brokers[new].controller.epoch == 2
        _assert_one_controller_per_epoch(cluster)
        # A write conditioned on the old controller's epoch version is refused.
        with pytest.raises(ControllerMovedError):
            await KafkaZkClient(cluster.zk, cluster.clock).fenced(
                zkstub.Op.set("/controller_epoch", b"999"), old_epoch_version
            )
        cluster.network.heal()
        await wait_until(lambda: cluster.active_controllers() == [new], timeout=30)
        data, _ = await cluster.zk.get("/controller_epoch")
        assert data == b"2"


async def test_a_bounced_broker_gets_requests_for_its_new_epoch(autojump_clock, wait_until):
    async with open_cluster(brokers=3, seed=5) as cluster:
        controller_id = await cluster.wait_for_controller(timeout=30)
        other = next(b for b in sorted(cluster.brokers) if b != controller_id)
        bounced = cluster.brokers[other]
        old_epoch = bounced.broker_epoch
        await cluster.expire_session(other)
        await wait_until(lambda: bounced.broker_epoch > old_epoch, timeout=30)
        controller = cluster.brokers[controller_id].controller
        await wait_until(
            lambda: controller.context.live_broker_epochs().get(other) == bounced.broker_epoch,
            timeout=30,
        )


@pytest.mark.parametrize("seed", range(50))
async def test_random_faults_never_give_two_controllers_one_epoch(autojump_clock, seed):
    rng = random.Random(seed)
    async with open_cluster(brokers=3, seed=seed) as cluster:
        await cluster.wait_for_controller(timeout=30)
        for _ in range(8):
            action = rng.choice(["kill", "restart", "expire", "partition", "heal", "wait"])
            running = sorted(cluster.brokers)
            stopped = sorted(set(range(1, 4)) - set(running))
            if action == "kill" and len(running) > 1:
                await cluster.kill_broker(rng.choice(running))
            elif action == "restart" and stopped:
                # A broker cut off from ZooKeeper cannot start (its ZooKeeper connection times
                # out, as Kafka's does): restarts happen on a healed network.
                cluster.network.heal()
                await cluster.start_broker(rng.choice(stopped))
            elif action == "expire" and running:
                await cluster.expire_session(rng.choice(running))
            elif action == "partition" and running:
                cluster.network.isolate(broker_node(rng.choice(running)))
            elif action == "heal":
                cluster.network.heal()
            await trio.sleep(rng.uniform(0.5, 10.0))
            _assert_one_controller_per_epoch(cluster)
        cluster.network.heal()
        for broker_id in sorted(set(range(1, 4)) - set(cluster.brokers)):
            await cluster.start_broker(broker_id)
        await cluster.wait_for_controller(timeout=60)
        with trio.fail_after(60):
            while len(cluster.active_controllers()) != 1:
                _assert_one_controller_per_epoch(cluster)
                await trio.sleep(0.1)
