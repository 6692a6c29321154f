"""How a leader's ISR change reaches ZooKeeper and the controller (Kafka's
ZkAlterPartitionManager and ReplicaManager.maybePropagateIsrChanges).

The leader writes the partition's state znode itself, conditioned on the version it last
saw (the partition epoch): a controller that changed the partition meanwhile wins, and the
leader drops its proposal until the controller's LeaderAndIsr arrives. Then it tells the
controller through a sequential `/isr_change_notification/isr_change_` node; those are
batched: written once no change came for `linger_ms`, or at the latest `max_delay_ms` after
the previous write.
"""

from __future__ import annotations

import logging

import attrs

import zkstub
from kcore import zkdata
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.server.partition import IsrProposal
from kcore.zk_client import RetryUntilConnected

logger = logging.getLogger("kcore.server.isr_updates")


async def write_isr(zk, proposal: IsrProposal) -> int | None:
    """Writes the proposal; the znode's new version (the new partition epoch), or None when
    the znode changed since the leader read it. A lost connection is no answer: the write
    is sent again once connected, as Kafka's are; if the first attempt did apply, the
    second meets BadVersion and the check below finds our own state there. (Reading that
    check once, without waiting to be connected, took a lost reply for a stale epoch: the
    leader then waited for a LeaderAndIsr that never came, its ISR frozen.)"""
    zk = zk if isinstance(zk, RetryUntilConnected) else RetryUntilConnected(zk)
    state = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(
            proposal.leader, proposal.leader_epoch, proposal.isr, proposal.partition_epoch
        ),
        proposal.controller_epoch,
    )
    path = zkdata.partition_state_path(proposal.tp)
    try:
        stat = await zk.set(
            path, zkdata.encode_partition_state(state), version=proposal.partition_epoch
        )
    except zkstub.BadVersionError as error:
        # After a lost connection the write may have applied: if the znode holds exactly
        # what we wrote, it did (Kafka's checker in conditionalUpdatePath).
        version = await _version_if_written(zk, proposal.tp, state)
        if version is not None:
            return version
        logger.info(
            "Failed to update ISR of %s to %s: the partition epoch %d is stale; waiting for "
            "the controller's LeaderAndIsr (%r)",
            proposal.tp,
            list(proposal.isr),
            proposal.partition_epoch,
            error,
        )
        return None
    return stat.version


async def _version_if_written(
    zk, tp: TopicPartition, state: LeaderIsrAndControllerEpoch
) -> int | None:
    """The znode's version if it holds `state` one version after the one we wrote on."""
    try:
        data, stat = await zk.get(zkdata.partition_state_path(tp))
    except zkstub.ZkError:
        return None
    written = zkdata.decode_partition_state(tp, data, stat.version).leader_and_isr
    wanted = state.leader_and_isr
    same = (written.leader, written.leader_epoch, written.isr) == (
        wanted.leader,
        wanted.leader_epoch,
        wanted.isr,
    )
    return stat.version if same and stat.version == wanted.partition_epoch + 1 else None


@attrs.define
class IsrChangePropagation:
    """When to write the batched ISR change notification. Sans-IO: times are passed in."""

    check_interval_ms: int = 2500
    linger_ms: int = 5000
    max_delay_ms: int = 60000
    pending: set[TopicPartition] = attrs.field(factory=set)
    last_change_ms: int = 0
    last_propagation_ms: int = 0

    def record(self, tp: TopicPartition, now_ms: int) -> None:
        self.pending.add(tp)
        self.last_change_ms = now_ms

    def take_due(self, now_ms: int) -> list[TopicPartition]:
        """The partitions to announce now (and forget), or [] when it is not time yet."""
        if not self.pending:
            return []
        quiet = self.last_change_ms + self.linger_ms < now_ms
        overdue = self.last_propagation_ms + self.max_delay_ms < now_ms
        if not (quiet or overdue):
            return []
        due = sorted(self.pending)
        self.pending.clear()
        self.last_propagation_ms = now_ms
        return due
