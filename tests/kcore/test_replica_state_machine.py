"""The replica state machine's ISR removal against ZooKeeper's failure modes."""

import attrs

from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kcore.controller.replica_state_machine import ReplicaStateMachine
from kcore.protocol.api_keys import ApiKey
from kcore.states import ReplicaState
from kcore.zk_client import UpdateLeaderAndIsrResult

from .test_request_batch import T0, _batch, _context


class _ZkWhoseWriteAppliedButReplyWasLost:
    """The first ISR write lands in ZooKeeper, but its reply is lost: the retry finds the
    znode's version moved (BadVersion), and the re-read shows the replica already out."""

    def __init__(self, state):
        self.state = state
        self.writes = 0

    async def get_partition_states(self, tps):
        return dict.fromkeys(tps, self.state)

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
