"""What a broker does with a LeaderAndIsr request (the checks of Kafka's
ReplicaManager.becomeLeaderOrFollower), as a pure decision: no await, no clock, no log.

- A request from an older controller epoch than the last one seen is refused whole
  (STALE_CONTROLLER_EPOCH).
- Per partition: a broker that is not among the replicas answers UNKNOWN_TOPIC_OR_PARTITION;
  a leader epoch that is not newer than the hosted replica's answers STALE_CONTROLLER_EPOCH
  (Kafka's code for it in ZooKeeper mode) and changes nothing; any other is accepted.
- An accepted partition this broker does not host yet is created first; then it becomes
  leader when the request names this broker, else follower.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kcore import errors
from kcore.common import TopicPartition
from kcore.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from kcore.protocol.data import NO_EPOCH


@attrs.frozen
class StaleLeaderEpoch:
    """An ignored partition state: its leader epoch is not newer than the hosted one."""

    tp: TopicPartition
    leader_epoch: int
    current_leader_epoch: int


@attrs.frozen
class LeaderAndIsrDecision:
    stale_controller_epoch: bool
    # Per partition of the request, in (topic, partition) order: 0 when accepted.
    error_codes: dict[TopicPartition, int] = attrs.field(factory=dict)
    # Accepted and not hosted yet, sorted: to create before they lead or follow.
    new_partitions: tuple[TopicPartition, ...] = ()
    leaders: dict[TopicPartition, LeaderAndIsrPartitionState] = attrs.field(factory=dict)
    followers: dict[TopicPartition, LeaderAndIsrPartitionState] = attrs.field(factory=dict)
    stale_leader_epochs: tuple[StaleLeaderEpoch, ...] = ()


def decide_leader_and_isr(
    request: LeaderAndIsrRequest,
    *,
    broker_id: int,
    controller_epoch: int,
    hosted_leader_epochs: Mapping[TopicPartition, int],
) -> LeaderAndIsrDecision:
    """`controller_epoch` is the latest this broker has seen; `hosted_leader_epochs` the
    leader epoch of every partition it hosts."""
    if request.controller_epoch < controller_epoch:
        return LeaderAndIsrDecision(stale_controller_epoch=True)
    error_codes: dict[TopicPartition, int] = {}
    accepted: dict[TopicPartition, LeaderAndIsrPartitionState] = {}
    stale: list[StaleLeaderEpoch] = []
    for state in sorted(request.partition_states, key=lambda s: (s.topic, s.partition)):
        tp = TopicPartition(state.topic, state.partition)
        current_epoch = hosted_leader_epochs.get(tp, NO_EPOCH)
        if broker_id not in state.replicas:
            error_codes[tp] = errors.UnknownTopicOrPartitionError.code
        elif state.leader_epoch > current_epoch:
            accepted[tp] = state
            error_codes[tp] = 0
        else:
            stale.append(StaleLeaderEpoch(tp, state.leader_epoch, current_epoch))
            error_codes[tp] = errors.StaleControllerEpochError.code
    return LeaderAndIsrDecision(
        stale_controller_epoch=False,
        error_codes=error_codes,
        new_partitions=tuple(sorted(tp for tp in accepted if tp not in hosted_leader_epochs)),
        leaders={tp: s for tp, s in accepted.items() if s.leader == broker_id},
        followers={tp: s for tp, s in accepted.items() if s.leader != broker_id},
        stale_leader_epochs=tuple(stale),
    )
