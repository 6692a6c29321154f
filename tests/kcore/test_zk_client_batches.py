"""The controller's partition-state writes and reads in bulk: many partitions to a fenced
multi (writes) or a multiRead (reads), with the outcome per partition that one fenced write
or one read each would give: a partition whose version moved is to be retried, one without
a state fails alone, and a replaced controller writes nothing."""

import random

import pytest

import zkstub
from kcore import zk_client as zk_client_module
from kcore import zkdata
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.zk_client import ControllerMovedError, KafkaZkClient

TOPIC = "t"


class _Recording:
    """A zkstub client that records the multis and multiReads it is asked for (and can be
    one without multiRead, as kazoo's adapter is)."""

    def __init__(self, zk, *, multi_read=True):
        self.zk = zk
        self.multis: list[int] = []
        self.multi_gets: list[int] = []
        self.multi_read = multi_read

    def __getattr__(self, name):
        return getattr(self.zk, name)

    async def multi(self, ops):
        ops = list(ops)
        self.multis.append(len(ops))
        return await self.zk.multi(ops)

    async def multi_get(self, paths):
        if not self.multi_read:
            raise zkstub.UnimplementedError("no multiRead here")
        paths = list(paths)
        self.multi_gets.append(len(paths))
        return await self.zk.multi_get(paths)


@pytest.fixture
async def zk():
    async with zkstub.open_server() as server, server.connect_local() as zk:
        yield zk


async def _controller(zk, partitions):
    """A controller's client with `partitions` partitions of TOPIC created (led by 1, ISR
    1, 2), and its epoch's znode version."""
    recording = _Recording(zk)
    client = KafkaZkClient(recording, clock=lambda: 0.0)
    await client.create_top_level_paths()
    await client.create_topic(TOPIC, "id-1", {p: [1, 2] for p in range(partitions)}, {})
    epoch, epoch_zk_version = await client.register_controller_and_increment_controller_epoch(1)
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), epoch)
    created = await client.create_partition_states(
        {TopicPartition(TOPIC, p): state for p in range(partitions)}, epoch_zk_version
    )
    assert set(created.values()) == {None}
    recording.multis.clear()
    return client, recording, epoch, epoch_zk_version


async def test_an_election_over_many_partitions_writes_them_in_a_few_fenced_multis(zk):
    client, recording, epoch, epoch_zk_version = await _controller(zk, 450)
    tps = [TopicPartition(TOPIC, p) for p in range(450)]
    elected = {tp: LeaderAndIsr(2, 1, (2,), 0) for tp in tps}
    written = await client.update_leader_and_isr(elected, epoch, epoch_zk_version)
    assert written.to_retry == []
    assert written.finished == {tp: LeaderAndIsr(2, 1, (2,), 1) for tp in tps}
    # Three multis of at most 200 partitions, each behind the controller epoch's check.
    assert recording.multis == [201, 201, 51]
    states = await client.get_partition_states(tps)
    assert states == {tp: LeaderIsrAndControllerEpoch(written.finished[tp], epoch) for tp in tps}


async def test_each_partition_of_a_batch_gets_the_outcome_of_its_own_fenced_write(zk, monkeypatch):
    """Partitions whose state moved since it was read (a leader's ISR change) are to be
    retried, a partition without a state fails alone, and every other one is written,
    wherever they fall in the multis."""
    monkeypatch.setattr(zk_client_module, "FENCED_BATCH_OPS", 7)
    rng = random.Random(5)
    client, _, epoch, epoch_zk_version = await _controller(zk, 60)
    tps = [TopicPartition(TOPIC, p) for p in range(60)]
    moved = set(rng.sample(tps, 17))
    gone = rng.choice(sorted(set(tps) - moved))
    for tp in sorted(moved):
        shrunk = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), epoch)
        assert await client.conditional_update_partition_state(tp, shrunk, 0) == 1
    await zk.delete(zkdata.partition_state_path(gone))

    written = await client.update_leader_and_isr(
        {tp: LeaderAndIsr(2, 1, (2,), 0) for tp in tps}, epoch, epoch_zk_version
    )
    assert set(written.to_retry) == moved
    assert isinstance(written.finished.pop(gone), zkstub.NoNodeError)
    assert written.finished == {
        tp: LeaderAndIsr(2, 1, (2,), 1) for tp in tps if tp not in moved and tp != gone
    }
    states = await client.get_partition_states(tps)
    assert states[gone] is None
    for tp in moved:  # the leader's write stands
        assert states[tp].leader_and_isr.isr == (1,)


async def test_a_replaced_controller_writes_no_partition(zk):
    client, _, epoch, epoch_zk_version = await _controller(zk, 250)
    tps = [TopicPartition(TOPIC, p) for p in range(250)]
    await zk.delete(zkdata.CONTROLLER)
    await client.register_controller_and_increment_controller_epoch(2)
    with pytest.raises(ControllerMovedError):
        await client.update_leader_and_isr(
            {tp: LeaderAndIsr(2, 1, (2,), 0) for tp in tps}, epoch, epoch_zk_version
        )
    states = await client.get_partition_states(tps)
    assert {state.leader_and_isr.leader for state in states.values()} == {1}


async def test_new_partitions_are_created_many_to_a_multi_and_an_existing_state_fails_alone(
    zk,
):
    client, recording, epoch, epoch_zk_version = await _controller(zk, 3)
    added = [TopicPartition(TOPIC, p) for p in range(3, 300)]
    # One new partition's znode is there already (a create that was cut short): fine.
    await zk.create(zkdata.partition_path(added[0]))
    existing = TopicPartition(TOPIC, 0)
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 1), 0), epoch)
    created = await client.create_partition_states(
        {tp: state for tp in [existing, *added]}, epoch_zk_version
    )
    assert isinstance(created.pop(existing), zkstub.NodeExistsError)
    assert created == dict.fromkeys(added)
    states = await client.get_partition_states([existing, *added])
    assert states[existing].leader_and_isr.leader == 1
    assert {states[tp] for tp in added} == {
        LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 1), 0), epoch)
    }
    # The partitions' znodes, then their states, a multi each for many: the two that were
    # there cost a few more multis, not one per partition.
    assert len(recording.multis) < 20


async def test_states_read_many_to_a_request_are_the_states_read_one_by_one(zk):
    client, recording, _, _ = await _controller(zk, 450)
    tps = [TopicPartition(TOPIC, p) for p in range(450)] + [TopicPartition("none", 0)]
    together = await client.get_partition_states(tps)
    assert recording.multi_gets == [200, 200, 51]
    one_by_one = {tp: await client.get_partition_state(tp) for tp in tps}
    assert together == one_by_one
    assert together[TopicPartition("none", 0)] is None
    # A client without multiRead (kazoo's adapter) reads each state on its own.
    without = KafkaZkClient(_Recording(zk, multi_read=False), clock=lambda: 0.0)
    assert await without.get_partition_states(tps) == one_by_one
