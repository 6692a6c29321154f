"""A leader's ISR write across a lost connection: sent again once connected, and a first
attempt that did apply is recognised as ours (Kafka's conditionalUpdatePath checker)."""

import zkstub
from kcore import zkdata
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.server.isr_updates import write_isr
from kcore.server.partition import IsrProposal

TP = TopicPartition("t", 0)
PROPOSAL = IsrProposal(
    TP, leader=1, leader_epoch=0, isr=(1,), partition_epoch=1, controller_epoch=1
)


def _stat(version):
    return zkstub.Stat(0, 0, 0, 0, version, 0, 0, 0, 0, 0, 0)


class _Znode:
    """One state znode whose next `set` replies with a lost connection, the write having
    applied (`applied=True`) or not."""

    def __init__(self, *, applied):
        before = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 1), 1)
        self.data, self.version = zkdata.encode_partition_state(before), 1
        self.applied = applied
        self.lose_next_reply = True
        self.lose_next_read = applied  # still disconnected when the check reads

    async def set(self, path, data, version):
        if version != self.version:
            raise zkstub.BadVersionError(path)
        if self.lose_next_reply:
            self.lose_next_reply = False
            if self.applied:
                self.data, self.version = data, self.version + 1
            raise zkstub.ConnectionLossError("reply lost")
        self.data, self.version = data, self.version + 1
        return _stat(self.version)

    async def get(self, path):
        if self.lose_next_read:
            self.lose_next_read = False
            raise zkstub.ConnectionLossError("still disconnected")
        return self.data, _stat(self.version)


async def test_a_write_whose_reply_was_lost_is_found_applied(autojump_clock):
    znode = _Znode(applied=True)
    assert await write_isr(znode, PROPOSAL) == 2
    assert znode.version == 2


async def test_a_write_lost_with_the_connection_is_sent_again(autojump_clock):
    znode = _Znode(applied=False)
    assert await write_isr(znode, PROPOSAL) == 2
    assert znode.version == 2


async def test_a_write_on_a_stale_partition_epoch_is_refused(autojump_clock):
    znode = _Znode(applied=False)
    znode.lose_next_reply = False
    znode.version = 5  # the controller changed the partition meanwhile
    assert await write_isr(znode, PROPOSAL) is None
