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
