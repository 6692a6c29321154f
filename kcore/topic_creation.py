"""What a CreateTopics request asks for, validated the way Kafka's AdminZkClient validates it,
and the replica assignment it gets. Sans-IO: the caller reads the live brokers and the
existing topics, and writes the result (`KafkaZkClient.create_topic`)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import attrs

from kcore import errors
from kcore.assignment import assign_replicas_to_brokers
from kcore.config import InvalidTopicConfigError, TopicConfig
from kcore.topics import has_collision, validate_topic_name


@attrs.frozen
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: num.partitions (or the assignment's size)
    replication_factor: int = -1  # -1: default.replication.factor
    assignments: Mapping[int, tuple[int, ...]] = attrs.field(factory=dict)
    configs: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class PartitionAddition:
    """A CreatePartitions entry: grow `topic` to `count` partitions, the new ones on
    `assignments` (one replica list per new partition, in order) or Kafka's choice."""

    topic: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


def plan_topic(
    topic: NewTopic,
    *,
    live_brokers: Iterable[int],
    existing_topics: Iterable[str],
    default_partitions: int,
    default_replication_factor: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    """Validates a creation request the way Kafka does and returns the assignment. Raises
    the Kafka error a CreateTopics response carries (InvalidTopicError,
    TopicAlreadyExistsError, InvalidPartitionsError, InvalidReplicationFactorError,
    InvalidRequestError, InvalidConfigurationError)."""
    validate_topic_name(topic.name)
    existing = sorted(existing_topics)
    if topic.name in existing:
        raise errors.TopicAlreadyExistsError(f"Topic '{topic.name}' already exists.")
    clash = next((t for t in existing if has_collision(t, topic.name)), None)
    if clash is not None:
        raise errors.InvalidTopicError(
            f"Topic '{topic.name}' collides with existing topic: {clash}"
        )
    try:
        TopicConfig.from_dict(dict(topic.configs))
    except InvalidTopicConfigError as error:
        raise errors.InvalidConfigurationError(str(error)) from None
    brokers = sorted(live_brokers)
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise errors.InvalidRequestError(
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time."
            )
        return _checked_assignment(topic.assignments, brokers)
    partitions = default_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = (
        default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
    )
    assignment = assign_replicas_to_brokers(brokers, partitions, factor, rng=rng)
    return {p: tuple(replicas) for p, replicas in assignment.items()}


def _checked_assignment(
    assignments: Mapping[int, tuple[int, ...]], brokers: list[int]
) -> dict[int, tuple[int, ...]]:
    partitions = sorted(assignments)
    if partitions != list(range(len(partitions))):
        raise errors.InvalidReplicaAssignmentError(
            f"Partitions should be a consecutive 0-based integer sequence, got {partitions}"
        )
    sizes = {len(assignments[p]) for p in partitions}
    if len(sizes) != 1 or 0 in sizes:
        raise errors.InvalidReplicaAssignmentError(
            "All partitions should have the same number of replicas, and at least one"
        )
    for p in partitions:
        replicas = assignments[p]
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignmentError(
                f"Duplicate replica assignment found: {list(replicas)} for partition {p}"
            )
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            raise errors.BrokerNotAvailableError(
                f"Unknown broker(s) {unknown} in the assignment of partition {p}"
            )
    return {p: tuple(assignments[p]) for p in partitions}


def plan_partition_addition(
    topic: str,
    existing: Mapping[int, tuple[int, ...]],
    new_count: int,
    assignments: Mapping[int, tuple[int, ...]] | None,
    *,
    live_brokers: Iterable[int],
) -> dict[int, tuple[int, ...]]:
    """The replicas of the partitions a CreatePartitions request adds to `topic` (whose
    assignment is `existing`), validated as Kafka's AdminZkClient.addPartitions does:
    `new_count` above the current count; a manual `assignments` (the new partitions in
    order, numbered from the current count) with the topic's replication factor and live
    brokers; otherwise Kafka's assignment, continuing from partition 0's first replica."""
    current = len(existing)
    if new_count < current:
        raise errors.InvalidPartitionsError(
            f"Topic {topic} currently has {current} partitions, which is higher than the "
            f"requested {new_count}."
        )
    if new_count == current:
        raise errors.InvalidPartitionsError(f"Topic already has {current} partitions.")
    brokers = sorted(live_brokers)
    first_replicas = existing[min(existing)]
    factor = len(first_replicas)
    added = new_count - current
    if assignments:
        if len(assignments) != added:
            raise errors.InvalidReplicaAssignmentError(
                f"Increasing the number of partitions by {added} but {len(assignments)} "
                f"assignments provided."
            )
        planned = _checked_assignment(
            {p - current: tuple(replicas) for p, replicas in assignments.items()}, brokers
        )
        if len(planned[0]) != factor:
            raise errors.InvalidReplicaAssignmentError(
                f"Inconsistent replication factor between partitions, partition 0 has "
                f"{factor} while the new partitions have {len(planned[0])}"
            )
        return {p + current: replicas for p, replicas in planned.items()}
    if factor > len(brokers):
        raise errors.InvalidReplicationFactorError(
            f"Replication factor: {factor} larger than available brokers: {len(brokers)}."
        )
    start_index = next((i for i, b in enumerate(brokers) if b >= first_replicas[0]), 0)
    planned = assign_replicas_to_brokers(
        brokers, added, factor, fixed_start_index=start_index, start_partition_id=current
    )
    return {p: tuple(replicas) for p, replicas in planned.items()}
