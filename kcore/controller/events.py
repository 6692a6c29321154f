"""The controller's events (Kafka's `ControllerEvent`s), each with the ControllerState it
runs in. Watch handlers only `put` these; all work happens on the controller's event task.
An event that carries a callback answers it from `preempt` when it will never run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from kcore.controller.controller_state import ControllerState
from kcore.controller.preferred_election import ElectionOutcome
from kcore.errors import NotControllerError


@attrs.frozen
class ControllerEvent:
    state: ClassVar[ControllerState]

    def preempt(self) -> None:
        """Called instead of processing when the event is dropped by `clear_and_put`."""


@attrs.frozen
class Startup(ControllerEvent):
    state = ControllerState.CONTROLLER_CHANGE


@attrs.frozen
class ControllerChange(ControllerEvent):
    """/controller was created or changed."""

    state = ControllerState.CONTROLLER_CHANGE


@attrs.frozen
class Reelect(ControllerEvent):
    """/controller was deleted."""

    state = ControllerState.CONTROLLER_CHANGE


@attrs.frozen
class Expire(ControllerEvent):
    """The ZooKeeper session expired: resign before the new session exists."""

    state = ControllerState.CONTROLLER_CHANGE


@attrs.frozen
class RegisterBrokerAndReelect(ControllerEvent):
    """A new session exists: register this broker again, then try to become controller."""

    state = ControllerState.CONTROLLER_CHANGE


@attrs.frozen
class BrokerChange(ControllerEvent):
    state = ControllerState.BROKER_CHANGE


@attrs.frozen
class TopicChange(ControllerEvent):
    state = ControllerState.TOPIC_CHANGE


@attrs.frozen
class UncleanLeaderElectionEnable(ControllerEvent):
    """The cluster-wide unclean.leader.election.enable became true: the offline partitions
    of topics without their own setting may now elect an out-of-sync replica."""

    state = ControllerState.UNCLEAN_LEADER_ELECTION_ENABLE


@attrs.frozen
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    """A topic's own unclean.leader.election.enable became true."""

    topic: str
    state = ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE


@attrs.frozen
class PartitionModifications(ControllerEvent):
    topic: str
    state = ControllerState.TOPIC_CHANGE


@attrs.frozen
class TopicDeletion(ControllerEvent):
    state = ControllerState.TOPIC_DELETION


@attrs.frozen
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    """A broker answered StopReplica(delete) for replicas of topics being deleted."""

    broker_id: int
    error_code: int
    failed_partitions: tuple[Any, ...]
    state = ControllerState.TOPIC_DELETION


@attrs.frozen
class IsrChangeNotification(ControllerEvent):
    state = ControllerState.ISR_CHANGE


@attrs.frozen
class LeaderAndIsrResponseReceived(ControllerEvent):
    broker_id: int
    error_code: int
    response: Any
    state = ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED


@attrs.frozen
class ControlledShutdown(ControllerEvent):
    """A broker asks to shut down; `callback(error_code, remaining_partitions)` answers it."""

    broker_id: int
    broker_epoch: int
    callback: Callable[[int, Any], None] = attrs.field(eq=False)
    state = ControllerState.CONTROLLED_SHUTDOWN

    def preempt(self) -> None:
        self.callback(NotControllerError.code, ())


@attrs.frozen
class LiveBrokerIds(ControllerEvent):
    """A request handler asks which brokers are live (and not shutting down);
    `callback(ids)` answers, `callback(None)` when this broker is not the controller."""

    callback: Callable[[list[int] | None], None] = attrs.field(eq=False)
    # A read of the context, no work to time: reported as idle.
    state = ControllerState.IDLE

    def preempt(self) -> None:
        self.callback(None)


@attrs.frozen
class ReplicaLeaderElection(ControllerEvent):
    """Elect leaders (Kafka's ReplicaLeaderElection): `partitions` from an ElectLeaders
    request, or None for those /admin/preferred_replica_election names; `callback` gets
    {partition: error code} (0: elected) for an admin request. Preempted (the controller
    moved), every waiting partition is answered NOT_CONTROLLER."""

    partitions: frozenset[Any] | None
    election_type: Any  # preferred_election.ElectionType
    trigger: Any  # preferred_election.ElectionTrigger
    callback: Callable[[dict[Any, Any]], None] | None = attrs.field(default=None, eq=False)
    state = ControllerState.MANUAL_LEADER_BALANCE

    def preempt(self) -> None:
        if self.callback is not None:
            moved = ElectionOutcome(NotControllerError.code, "the controller moved")
            self.callback(dict.fromkeys(self.partitions or (), moved))


@attrs.frozen
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """The auto leader rebalance's timer fired (leader.imbalance.check.interval.seconds)."""

    state = ControllerState.AUTO_LEADER_BALANCE


@attrs.frozen
class ZkPartitionReassignment(ControllerEvent):
    """/admin/reassign_partitions was created (or the controller emptied it and looks
    again): start what it asks for."""

    state = ControllerState.ALTER_PARTITION_REASSIGNMENT


@attrs.frozen
class ApiPartitionReassignment(ControllerEvent):
    """An AlterPartitionReassignments request: `reassignments` maps each partition to its
    target replicas, None to cancel its reassignment; `callback` gets {partition:
    ReassignmentResult}, or None when this broker is not (or stops being) the controller."""

    reassignments: Any  # Mapping[TopicPartition, tuple[int, ...] | None]
    callback: Callable[[dict[Any, Any] | None], None] = attrs.field(eq=False)
    state = ControllerState.ALTER_PARTITION_REASSIGNMENT

    def preempt(self) -> None:
        self.callback(None)


@attrs.frozen
class ListPartitionReassignments(ControllerEvent):
    """A ListPartitionReassignments request: `partitions` (None: every one); `callback`
    gets {partition: ReplicaAssignment} of those being reassigned, or None when this broker
    is not the controller."""

    partitions: frozenset[Any] | None
    callback: Callable[[dict[Any, Any] | None], None] = attrs.field(eq=False)
    state = ControllerState.LIST_PARTITION_REASSIGNMENTS

    def preempt(self) -> None:
        self.callback(None)


@attrs.frozen
class PartitionReassignmentIsrChange(ControllerEvent):
    """The state znode of a partition being reassigned changed: its new replicas may have
    joined the ISR, completing the reassignment."""

    partition: Any  # TopicPartition
    state = ControllerState.ALTER_PARTITION_REASSIGNMENT
