"""Partition reassignment (KIP-455) as the controller decides it, without I/O: Kafka 3.5's
KafkaController onPartitionReassignment and its helpers, and ControllerContext's
ReplicaAssignment.reassignTo.

Words (Kafka's): ORS the original replicas, TRS the target replicas, RS the replicas while
the reassignment runs. A reassignment is written to the topic znode as RS = TRS + ORS (target
first, in its order), adding = TRS - ORS, removing = ORS - TRS; it is complete once every
target replica is in the ISR, and is then written as RS = TRS, nothing adding or removing.
The ORS lives only in that znode while the reassignment runs, which is why it is rewritten
last.

The controller reads its context and the partition's state, asks these functions what to do,
then does it (ZooKeeper writes, the state machines, requests to brokers).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import attrs

from kcore import election, errors
from kcore.common import LeaderAndIsr, ReplicaAssignment, TopicPartition
from kcore.controller.context import ControllerContext
from kcore.controller.decisions import ElectionResult


@attrs.frozen
class ReassignmentResult:
    """One partition's answer to AlterPartitionReassignments (Kafka's ApiError): 0 when
    the reassignment (or its cancellation) was started."""

    error_code: int = 0
    message: str | None = None

    @classmethod
    def of(cls, error: errors.KafkaError) -> ReassignmentResult:
        return cls(error.code, str(error))


SUBMITTED = ReassignmentResult()


# -- the assignment while a reassignment runs ------------------------------------------------


def origin_replicas(assignment: ReplicaAssignment) -> tuple[int, ...]:
    """ORS: the replicas the partition had before its reassignment began."""
    return tuple(r for r in assignment.replicas if r not in assignment.adding_replicas)


def reassign_to(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """Kafka's ReplicaAssignment.reassignTo: RS = TRS + ORS (target first), adding =
    RS - ORS, removing = RS - TRS. The ORS is the current assignment's, so a new target for
    a partition already being reassigned replaces the old target, and a target equal to
    the ORS is a cancellation (nothing adding, nothing removing)."""
    origin = origin_replicas(current)
    replicas = tuple(dict.fromkeys((*target, *origin)))
    return ReplicaAssignment(
        replicas,
        tuple(r for r in replicas if r not in origin),
        tuple(r for r in replicas if r not in target),
    )


def build_reassignment(
    current: ReplicaAssignment, target: Sequence[int] | None
) -> ReplicaAssignment | None:
    """Kafka's maybeBuildReassignment: the assignment a request asks for (`target` None:
    cancel, i.e. back to the ORS), or None when it asks to cancel a reassignment that is
    not running (NO_REASSIGNMENT_IN_PROGRESS)."""
    if current.is_being_reassigned:
        return reassign_to(current, origin_replicas(current) if target is None else target)
    if target is None:
        return None
    return reassign_to(current, target)


def completed(assignment: ReplicaAssignment) -> ReplicaAssignment:
    """The assignment once the reassignment is done: RS = TRS."""
    return ReplicaAssignment(assignment.target_replicas)


def replicas_no_longer_needed(
    current: ReplicaAssignment, new: ReplicaAssignment
) -> tuple[int, ...]:
    """Replicas of `current` that `new` drops at once: the adding replicas of a replaced or
    cancelled reassignment that the new target does not keep (they are stopped and deleted
    straight away)."""
    return tuple(r for r in current.replicas if r not in new.replicas)


def is_reassignment_complete(assignment: ReplicaAssignment, isr: Collection[int] | None) -> bool:
    """Kafka's isReassignmentComplete: nothing to reassign, or every target replica in the
    ISR (`isr` None: the partition has no state, so it cannot be complete)."""
    if not assignment.is_being_reassigned:
        return True
    return isr is not None and set(assignment.target_replicas) <= set(isr)


# -- requests --------------------------------------------------------------------------------


def invalid_target(
    context: ControllerContext, tp: TopicPartition, replicas: Sequence[int]
) -> errors.InvalidReplicaAssignmentError | None:
    """Kafka's validateReplicas (for AlterPartitionReassignments; a reassignment written to
    /admin/reassign_partitions is not checked): no empty list, no duplicates, no negative
    ids, and every replica it would add on a live broker."""
    if not replicas:
        return errors.InvalidReplicaAssignmentError(
            "Empty replica list specified in partition reassignment."
        )
    if len(set(replicas)) != len(replicas):
        return errors.InvalidReplicaAssignmentError(
            f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}"
        )
    if any(r < 0 for r in replicas):
        return errors.InvalidReplicaAssignmentError(
            f"Invalid broker id in replica list: {list(replicas)}"
        )
    adding = reassign_to(context.assignment(tp), replicas).adding_replicas
    live = context.live_broker_ids
    if not set(adding) <= live:
        return errors.InvalidReplicaAssignmentError(
            "Replica assignment has brokers that are not alive. Replica list: "
            f"{list(adding)}, live broker list: {sorted(live)}"
        )
    return None


def plan_reassignments(
    context: ControllerContext,
    requested: Mapping[TopicPartition, Sequence[int] | None],
    *,
    validate: bool,
) -> tuple[dict[TopicPartition, ReplicaAssignment], dict[TopicPartition, errors.KafkaError]]:
    """What a request asks (Kafka's processApiPartitionReassignment with `validate`, its
    processZkPartitionReassignment without): the new assignment of each partition to
    reassign, and the error of each refused one. `None` targets cancel."""
    to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
    refused: dict[TopicPartition, errors.KafkaError] = {}
    for tp, target in sorted(requested.items()):
        if validate and target is not None:
            invalid = invalid_target(context, tp, target)
            if invalid is not None:
                refused[tp] = invalid
                continue
        reassignment = build_reassignment(context.assignment(tp), target)
        if reassignment is None:
            refused[tp] = errors.NoReassignmentInProgressError(
                f"No reassignment is in progress for partition {tp}"
            )
        else:
            to_reassign[tp] = reassignment
    return to_reassign, refused


def refusal_to_start(context: ControllerContext, tp: TopicPartition) -> errors.KafkaError | None:
    """Kafka's maybeTriggerPartitionReassignment checks: a partition of a topic being
    deleted, or one that does not exist, is not reassigned."""
    if context.is_topic_queued_for_deletion(tp.topic) or not context.replicas(tp):
        return errors.UnknownTopicOrPartitionError("The partition does not exist.")
    return None


def listed_reassignments(
    context: ControllerContext, partitions: Iterable[TopicPartition] | None
) -> dict[TopicPartition, ReplicaAssignment]:
    """Kafka's processListPartitionReassignments: the asked partitions (None: all) that are
    being reassigned, with RS, adding and removing; the others are left out."""
    asked = context.partitions_being_reassigned if partitions is None else partitions
    listed = {}
    for tp in sorted(set(asked)):
        assignment = context.assignment(tp)
        if assignment.is_being_reassigned:
            listed[tp] = assignment
    return listed


def without_partitions(
    reassignments: Mapping[TopicPartition, Sequence[int]],
    remove: Callable[[TopicPartition, tuple[int, ...]], bool],
) -> dict[TopicPartition, tuple[int, ...]]:
    """What /admin/reassign_partitions holds once the partitions `remove` picks are taken
    out (Kafka's maybeRemoveFromZkReassignment); empty: delete the znode."""
    return {
        tp: tuple(replicas)
        for tp, replicas in sorted(reassignments.items())
        if not remove(tp, tuple(replicas))
    }


# -- the leader at completion ----------------------------------------------------------------


class LeaderMove(enum.Enum):
    """What step B3 does with the leader (Kafka's moveReassignedPartitionLeaderIfRequired)."""

    ELECT = "elect a leader among the target replicas"
    BUMP_EPOCH = "keep the leader, bump its epoch so every replica learns RS = TRS"


def leader_move(target: Sequence[int], leader: int, leader_online: bool) -> LeaderMove:
    """A leader outside the target, or a dead one, is replaced; a live one in the target
    stays."""
    if leader in target and leader_online:
        return LeaderMove.BUMP_EPOCH
    return LeaderMove.ELECT


def leader_for_reassign(
    target: Sequence[int], current: LeaderAndIsr, live: Collection[int]
) -> ElectionResult:
    """Kafka's leaderForReassign: the first target replica that is live and in the ISR,
    ISR unchanged; every target replica hears of it."""
    leader = election.reassign_partition_leader_election(
        target, current.isr, [r for r in target if r in live]
    )
    if leader is None:
        return ElectionResult(None, tuple(target))
    return ElectionResult(current.new_leader(leader), tuple(target))
