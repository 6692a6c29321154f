"""Kafka's rack-unaware replica assignment (AdminUtils.assignReplicasToBrokersRackUnaware).

Leaders go round-robin over the sorted brokers from a start index; followers follow the
leader at a shift that grows by one every time the partition ids wrap around the brokers,
so replicas of consecutive partitions do not all pile on the same neighbours.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from kcore.errors import InvalidPartitionsError, InvalidReplicationFactorError


def assign_replicas_to_brokers(
    broker_ids: Iterable[int],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition id -> replicas (the first is the preferred leader). `fixed_start_index`
    >= 0 makes the result independent of `rng`; otherwise `rng` (required) picks the
    start index and the initial shift, as Kafka does with its Random."""
    brokers = sorted(broker_ids)
    if n_partitions <= 0:
        raise InvalidPartitionsError(
            f"Number of partitions must be larger than 0, got {n_partitions}"
        )
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Replication factor must be larger than 0, got {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}"
        )
    count = len(brokers)
    if fixed_start_index >= 0:
        start_index = next_replica_shift = fixed_start_index
    else:
        if rng is None:
            raise ValueError("assign_replicas_to_brokers needs an rng without fixed_start_index")
        start_index = rng.randrange(count)
        next_replica_shift = rng.randrange(count)
    assignment: dict[int, list[int]] = {}
    partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition_id > 0 and partition_id % count == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % count
        replicas = [brokers[first]]
        replicas.extend(
            brokers[_replica_index(first, next_replica_shift, j, count)]
            for j in range(replication_factor - 1)
        )
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment


def _replica_index(first_replica_index: int, shift: int, replica: int, count: int) -> int:
    # Never lands on the leader's own index: the offset is in 1..count-1.
    return (first_replica_index + 1 + (shift + replica) % (count - 1)) % count
