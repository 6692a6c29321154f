"""What an admin request writes to ZooKeeper (Kafka's AdminZkClient and ZkProducerIdManager):
topic creation with validation, and producer id blocks.

Creating a topic writes `/config/topics/T` (its overrides) and then `/brokers/topics/T` (its
assignment); the controller's watch on `/brokers/topics` does the rest.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping

import attrs

import zkstub
from kcore import errors, zkdata
from kcore.assignment import assign_replicas_to_brokers
from kcore.common import ReplicaAssignment
from kcore.config import InvalidTopicConfigError, TopicConfig
from kcore.topics import has_collision, validate_topic_name

logger = logging.getLogger("kcore.admin_zk")


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


async def create_topic(
    zk,
    name: str,
    topic_id: str,
    assignment: Mapping[int, tuple[int, ...]],
    configs: Mapping[str, str],
) -> None:
    """Writes the topic's config and assignment (Kafka: config first, so the controller
    and brokers never see a topic without its overrides)."""
    config_path = zkdata.config_path("topics", name)
    data = zkdata.encode_config(dict(configs))
    try:
        await zk.create(config_path, data, make_parents=True)
    except zkstub.NodeExistsError:
        await zk.set(config_path, data)
    try:
        await zk.create(
            zkdata.topic_path(name),
            zkdata.encode_topic(
                topic_id, {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}
            ),
        )
    except zkstub.NodeExistsError:
        raise errors.TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None


async def mark_topic_for_deletion(zk, name: str) -> None:
    """/admin/delete_topics/T: the controller's TopicDeletion event takes it from there."""
    try:
        await zk.create(zkdata.delete_topic_path(name), None, make_parents=True)
    except zkstub.NodeExistsError:
        pass  # already marked


async def allocate_producer_id_block(zk, broker_id: int) -> tuple[int, int]:
    """Claims the next block of producer ids [start, end] with a conditional write on
    `/latest_producer_id_block`, retrying when another broker claims one at the same time."""
    while True:
        try:
            data, stat = await zk.get(zkdata.PRODUCER_ID_BLOCK)
        except zkstub.NoNodeError:
            data, stat = None, None
        previous = zkdata.decode_producer_id_block(data)
        start = 0 if previous is None else previous[2] + 1
        end = start + zkdata.PRODUCER_ID_BLOCK_SIZE - 1
        encoded = zkdata.encode_producer_id_block(broker_id, start, end)
        try:
            if stat is None:
                await zk.create(zkdata.PRODUCER_ID_BLOCK, encoded)
            else:
                await zk.set(zkdata.PRODUCER_ID_BLOCK, encoded, version=stat.version)
        except (zkstub.BadVersionError, zkstub.NodeExistsError):
            continue
        return start, end
