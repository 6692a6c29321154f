"""What the controller decides for a leader election asked of it (Kafka's
processReplicaLeaderElection) and for the auto leader rebalance (its
checkAndTriggerAutoLeaderRebalance), without I/O: which requested partitions to elect and what
the others are answered, and which partitions have drifted far enough from their preferred
replica to move back. The controller reads its context, calls these, then elects through the
partition state machine.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable

import attrs

from kcore import errors
from kcore.common import NO_LEADER, ElectionType, TopicPartition
from kcore.controller.context import ControllerContext


class ElectionTrigger(enum.Enum):
    ADMIN_CLIENT = "AdminClientTriggered"  # an ElectLeaders request
    ZK = "ZkTriggered"  # /admin/preferred_replica_election
    AUTO = "AutoTriggered"  # the auto leader rebalance


@attrs.frozen
class ElectionOutcome:
    """One partition's answer to an election asked for: error code 0 when elected (with
    the leader epoch it was elected at), else why not."""

    error_code: int
    message: str | None = None
    leader_epoch: int = -1


def classify_election_request(
    context: ControllerContext,
    partitions: Iterable[TopicPartition],
    election_type: ElectionType,
) -> tuple[list[TopicPartition], dict[TopicPartition, errors.KafkaError]]:
    """The partitions to elect, and the answer for each of the others: an unknown
    partition, one whose topic is being deleted, one that needs no election (its preferred
    replica leads already; for UNCLEAN, it has a live leader)."""
    valid: list[TopicPartition] = []
    refused: dict[TopicPartition, errors.KafkaError] = {}
    known = set(context.all_partitions())
    for tp in sorted(set(partitions)):
        if tp not in known:
            refused[tp] = errors.UnknownTopicOrPartitionError(f"The partition {tp} does not exist.")
        elif context.is_topic_queued_for_deletion(tp.topic):
            refused[tp] = errors.InvalidTopicError(f"Deletion of topic {tp.topic} is in progress")
        elif _election_not_needed(context, tp, election_type):
            refused[tp] = errors.ElectionNotNeededError(
                f"Leader election not needed for topic partition {tp}"
            )
        else:
            valid.append(tp)
    return valid, refused


def _election_not_needed(
    context: ControllerContext, tp: TopicPartition, election_type: ElectionType
) -> bool:
    leadership = context.partition_leadership.get(tp)
    leader = leadership.leader_and_isr.leader if leadership is not None else NO_LEADER
    if election_type is ElectionType.PREFERRED:
        replicas = context.replicas(tp)
        return bool(replicas) and leader == replicas[0]
    return leader != NO_LEADER and context.is_replica_online(leader)


def can_preferred_replica_be_leader(context: ControllerContext, tp: TopicPartition) -> bool:
    """The preferred replica is live (not shutting down) and in the ISR."""
    replicas = context.replicas(tp)
    leadership = context.partition_leadership.get(tp)
    if not replicas or leadership is None:
        return False
    preferred = replicas[0]
    return preferred in context.live_broker_ids and preferred in leadership.leader_and_isr.isr


def partitions_to_rebalance(
    context: ControllerContext, imbalance_percentage: int
) -> list[TopicPartition]:
    """Kafka's checkAndTriggerAutoLeaderRebalance: for each broker, the partitions it is the
    preferred replica of but does not lead; when more than `imbalance_percentage` percent of
    them are so, those whose preferred replica can lead are moved back. Nothing moves while
    a reassignment is in progress."""
    if any(a.is_being_reassigned for a in _assignments(context)):
        return []
    by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in sorted(context.all_partitions()):
        replicas = context.replicas(tp)
        if replicas and not context.is_topic_queued_for_deletion(tp.topic):
            by_preferred[replicas[0]].append(tp)
    chosen: list[TopicPartition] = []
    for broker, partitions in sorted(by_preferred.items()):
        not_led = [
            tp
            for tp in partitions
            if (leadership := context.partition_leadership.get(tp)) is not None
            and leadership.leader_and_isr.leader != broker
        ]
        if len(not_led) / len(partitions) > imbalance_percentage / 100:
            chosen += [tp for tp in not_led if can_preferred_replica_be_leader(context, tp)]
    return chosen


def _assignments(context: ControllerContext) -> Iterable:
    for assignment in context.partition_assignments.values():
        yield from assignment.values()
