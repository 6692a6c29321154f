"""The replica state machine's ISR removal against ZooKeeper's failure modes."""

import attrs

from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kcore.controller.replica_state_machine import ReplicaStateMachine
from kcore.protocol.api_keys import ApiKey
from kcore.states import ReplicaState
from kcore.zk_client import UpdateLeaderAndIsrResult

from .test_request_batch import T0, _batch, _context


class _ZkHolding:
    """ZooKeeper holding one state for every partition asked about."""

    def __init__(self, state):
        self.state = state
        self.writes = 0

    async def get_partition_states(self, tps):
        return dict.fromkeys(tps, self.state)

    async def update_leader_and_isr(self, to_write, controller_epoch, epoch_zk_version):
        raise AssertionError("nothing to write: the replica is out of the ISR already")


class _ZkWhoseWriteAppliedButReplyWasLost(_ZkHolding):
    """The first ISR write lands in ZooKeeper, but its reply is lost: the retry finds the
    znode's version moved (BadVersion), and the re-read shows the replica already out."""

    async def update_leader_and_isr(self, to_write, controller_epoch, epoch_zk_version):
        self.writes += 1
        ((tp, written),) = to_write.items()
        applied = attrs.evolve(
            written, partition_epoch=self.state.leader_and_isr.partition_epoch + 1
        )
        self.state = LeaderIsrAndControllerEpoch(applied, controller_epoch)
        return UpdateLeaderAndIsrResult({}, [tp])


async def test_an_isr_removal_whose_reply_was_lost_still_reaches_the_other_replicas():
    context = _context()
    context.replica_states[T0, 3] = ReplicaState.ONLINE_REPLICA
    zk = _ZkWhoseWriteAppliedButReplyWasLost(
        LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2, 3), partition_epoch=4), 5)
    )
    batch, sent = _batch(context)
    machine = ReplicaStateMachine(context, zk, batch)
    await machine.handle_state_changes([(T0, 3)], ReplicaState.OFFLINE_REPLICA)
    assert zk.writes == 1
    leader_and_isr = {
        broker: request for broker, api_key, request, _ in sent if api_key is ApiKey.LEADER_AND_ISR
    }
    assert sorted(leader_and_isr) == [1, 2]
    (state,) = leader_and_isr[1].partition_states
    assert (state.leader, state.leader_epoch, state.isr) == (1, 4, (1, 2))


def _sent_for_partition(sent):
    return sorted(
        (api_key.name, broker)
        for broker, api_key, request, _ in sent
        if api_key in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA) and request.partition_states
    )


async def test_a_dead_replica_of_a_partition_just_elected_away_from_it_costs_no_second_round():
    """The election of the same event wrote and sent the new state; ZooKeeper still holds
    it, so the replica going offline sends nothing more about it (Kafka sends it all again,
    which the brokers ignore: 10 000 partitions' worth of requests)."""
    context = _context()
    context.replica_states[T0, 3] = ReplicaState.ONLINE_REPLICA
    elected = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 2), partition_epoch=5), 5)
    context.partition_leadership[T0] = elected
    batch, sent = _batch(context)
    machine = ReplicaStateMachine(context, _ZkHolding(elected), batch)
    await machine.handle_state_changes([(T0, 3)], ReplicaState.OFFLINE_REPLICA, announced={T0})
    assert _sent_for_partition(sent) == []
    assert context.replica_state(T0, 3) is ReplicaState.OFFLINE_REPLICA


async def test_a_partition_changed_since_it_was_announced_is_sent_again():
    """The new leader rewrote the ISR after the election (a newer znode version): the
    replicas hear of the state ZooKeeper holds, as in Kafka."""
    context = _context()
    context.replica_states[T0, 3] = ReplicaState.ONLINE_REPLICA
    elected = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 2), partition_epoch=5), 5)
    context.partition_leadership[T0] = elected
    rewritten = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1,), partition_epoch=6), 5)
    batch, sent = _batch(context)
    machine = ReplicaStateMachine(context, _ZkHolding(rewritten), batch)
    await machine.handle_state_changes([(T0, 3)], ReplicaState.OFFLINE_REPLICA, announced={T0})
    assert ("LEADER_AND_ISR", 1) in _sent_for_partition(sent)
    assert context.partition_leadership[T0].leader_and_isr.isr == (1,)
