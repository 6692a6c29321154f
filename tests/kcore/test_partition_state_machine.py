"""The partition state machine's decisions (`partition_election`, pure) and its read, decide,
write round against a ZooKeeper stand-in."""

import pytest

from actors import Counter
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kcore.config import KafkaConfig
from kcore.controller import partition_election as pe
from kcore.controller.partition_state_machine import PartitionStateMachine
from kcore.protocol.api_keys import ApiKey
from kcore.states import PartitionState
from kcore.zk_client import ControllerMovedError, UpdateLeaderAndIsrResult

from .test_request_batch import T0, T1, _batch, _context

# t-0 is assigned (1, 2, 3) and led by 1 with ISR (1, 2); t-1 is assigned (2, 3, 4) and led
# by 2 with ISR (2, 3); the controller's epoch is 5.
T0_NOW = LeaderAndIsr(1, 3, (1, 2), partition_epoch=8)
T1_NOW = LeaderAndIsr(2, 7, (2, 3), partition_epoch=9)


def _with_live(*live):
    context = _context()
    context.remove_live_brokers(sorted(set(context.live_brokers) - set(live)))
    return context


# -- the decisions ------------------------------------------------------------------------


def test_an_offline_election_picks_the_first_live_isr_member():
    context = _with_live(2, 3)
    (election,) = pe.elect_leaders(context, {T0: T0_NOW}, pe.ElectionStrategy.OFFLINE, ()).values()
    assert election.leader_and_isr == LeaderAndIsr(2, 4, (2,), partition_epoch=8)
    assert election.recipients == (2, 3)
    assert not election.unclean


def test_an_offline_election_without_a_live_isr_member_fails_unless_unclean_is_allowed():
    context = _with_live(3)
    current = {T0: T0_NOW}
    strategy = pe.ElectionStrategy.OFFLINE
    assert pe.topics_consulted_for_unclean_election(context, current, strategy) == {"t"}
    (clean,) = pe.elect_leaders(context, current, strategy, ()).values()
    assert isinstance(clean, pe.StateChangeFailedError)
    (unclean,) = pe.elect_leaders(context, current, strategy, {"t"}).values()
    assert unclean.leader_and_isr == LeaderAndIsr(3, 4, (3,), partition_epoch=8)
    assert unclean.unclean


def test_a_clean_election_consults_no_topic_config():
    context = _with_live(2, 3)
    strategy = pe.ElectionStrategy.OFFLINE
    assert pe.topics_consulted_for_unclean_election(context, {T0: T0_NOW}, strategy) == set()
    shutdown = pe.ElectionStrategy.CONTROLLED_SHUTDOWN
    assert pe.topics_consulted_for_unclean_election(_with_live(3), {T0: T0_NOW}, shutdown) == set()


def test_a_controlled_shutdown_moves_leadership_and_takes_the_broker_out_of_the_isr():
    context = _context()
    context.shutting_down_broker_ids.add(1)
    strategy = pe.ElectionStrategy.CONTROLLED_SHUTDOWN
    (election,) = pe.elect_leaders(context, {T0: T0_NOW}, strategy, ()).values()
    assert election.leader_and_isr == LeaderAndIsr(2, 4, (2,), partition_epoch=8)
    # The broker shutting down still hears of it (it becomes a follower).
    assert election.recipients == (1, 2, 3)


def test_no_live_replica_is_an_error_per_partition():
    context = _with_live(1)
    outcomes = pe.elect_leaders(
        context, {T0: T0_NOW, T1: T1_NOW}, pe.ElectionStrategy.OFFLINE, {"t"}
    )
    assert outcomes[T0].leader_and_isr == LeaderAndIsr(1, 4, (1,), partition_epoch=8)
    assert isinstance(outcomes[T1], pe.StateChangeFailedError)


def test_a_new_partition_starts_with_its_live_replicas():
    context = _with_live(2, 3)
    outcomes = pe.initial_leader_and_isrs(context, [T0, T1])
    assert outcomes[T0] == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 3)), 5)
    assert outcomes[T1] == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 3)), 5)
    assert isinstance(
        pe.initial_leader_and_isrs(_with_live(4), [T0])[T0], pe.StateChangeFailedError
    )


def test_an_election_starts_from_the_state_read_and_stops_at_a_newer_controller():
    context = _context()
    starts = pe.current_leader_and_isrs(
        context, {T0: LeaderIsrAndControllerEpoch(T0_NOW, 5), T1: None}
    )
    assert starts[T0] == T0_NOW
    assert isinstance(starts[T1], pe.StateChangeFailedError)
    with pytest.raises(ControllerMovedError):
        pe.current_leader_and_isrs(context, {T0: LeaderIsrAndControllerEpoch(T0_NOW, 6)})


@pytest.mark.parametrize(
    ("overrides", "default", "enabled"),
    [
        ({}, False, False),
        ({}, True, True),
        ({"unclean.leader.election.enable": "true"}, False, True),
        ({"unclean.leader.election.enable": "false"}, True, False),
        ({"unclean.leader.election.enable": "maybe"}, False, False),  # invalid: the default
    ],
)
def test_the_unclean_setting_is_the_topics_override_else_the_brokers(overrides, default, enabled):
    config = KafkaConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "unclean.leader.election.enable": default}
    )
    assert pe.unclean_leader_election_enabled("t", overrides, config) is enabled


# -- read, decide, write ------------------------------------------------------------------


class _Zk:
    """Partition states and topic configs to read; writes apply (new partition epoch)."""

    def __init__(self, states, configs):
        self.states, self.configs = states, configs
        self.config_reads = []

    async def get_partition_states(self, tps):
        return {tp: self.states.get(tp) for tp in tps}

    async def get_topic_configs(self, topics):
        self.config_reads.append(sorted(topics))
        return {topic: self.configs.get(topic, {}) for topic in topics}

    async def update_leader_and_isr(self, to_write, controller_epoch, epoch_zk_version):
        finished = {}
        for tp, written in to_write.items():
            finished[tp] = written.with_partition_epoch(written.partition_epoch + 1)
            self.states[tp] = LeaderIsrAndControllerEpoch(finished[tp], controller_epoch)
        return UpdateLeaderAndIsrResult(finished, [])

    async def create_partition_states(self, states, epoch_zk_version):
        self.states |= states
        return dict.fromkeys(states)


def _machine(context, zk):
    batch, sent = _batch(context)
    counter = Counter("UncleanLeaderElectionsPerSec")
    return PartitionStateMachine(context, zk, batch, counter), sent, counter


async def test_an_unclean_election_reads_the_config_before_deciding_and_is_announced():
    context = _with_live(3)
    context.partition_states[T0] = PartitionState.OFFLINE_PARTITION
    zk = _Zk(
        {T0: LeaderIsrAndControllerEpoch(T0_NOW, 5)},
        {"t": {"unclean.leader.election.enable": "true"}},
    )
    machine, sent, unclean = _machine(context, zk)
    results = await machine.handle_state_changes([T0], PartitionState.ONLINE_PARTITION)
    assert results == {T0: LeaderAndIsr(3, 4, (3,), partition_epoch=9)}
    assert zk.config_reads == [["t"]]
    assert unclean.count == 1
    assert context.partition_state(T0) is PartitionState.ONLINE_PARTITION
    assert context.partition_leadership[T0].leader_and_isr.leader == 3
    leader_and_isr = [b for b, key, _, _ in sent if key is ApiKey.LEADER_AND_ISR]
    assert leader_and_isr == [3]


async def test_a_partition_no_replica_can_lead_stays_offline():
    context = _with_live(3)
    context.partition_states[T0] = PartitionState.OFFLINE_PARTITION
    zk = _Zk({T0: LeaderIsrAndControllerEpoch(T0_NOW, 5)}, {})
    machine, sent, unclean = _machine(context, zk)
    (error,) = (await machine.handle_state_changes([T0], PartitionState.ONLINE_PARTITION)).values()
    assert isinstance(error, pe.StateChangeFailedError)
    assert context.partition_state(T0) is PartitionState.OFFLINE_PARTITION
    assert zk.states[T0].leader_and_isr == T0_NOW
    assert unclean.count == 0
    assert sent == []


async def test_a_new_partition_gets_its_state_created_and_its_replicas_told():
    context = _with_live(2, 3)
    context.partition_states[T0] = PartitionState.NEW_PARTITION
    zk = _Zk({}, {})
    machine, sent, _ = _machine(context, zk)
    results = await machine.handle_state_changes([T0], PartitionState.ONLINE_PARTITION)
    assert results == {T0: LeaderAndIsr(2, 0, (2, 3))}
    assert zk.states[T0] == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 3)), 5)
    assert zk.config_reads == []
    requests = {b: request for b, key, request, _ in sent if key is ApiKey.LEADER_AND_ISR}
    assert sorted(requests) == [2, 3]
    (state,) = requests[2].partition_states
    assert state.is_new
