"""What a broker's controlled shutdown can still achieve (sans-IO): leadership moves only to
another live replica, so partitions without one are no reason to keep retrying."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kcore.common import TopicPartition


def movable_partitions(
    broker_id: int,
    led: Mapping[TopicPartition, Sequence[int]],
    live_brokers: Collection[int],
) -> list[TopicPartition]:
    """The partitions in `led` (this broker's leaderships, with their replicas) whose
    leadership another live broker could take: more than one replica (Kafka's
    replicatedPartitionsBrokerLeads), and one of the others registered."""
    return sorted(
        (
            tp
            for tp, replicas in led.items()
            if len(replicas) > 1 and any(r != broker_id and r in live_brokers for r in replicas)
        ),
        key=lambda tp: (tp.topic, tp.partition),
    )
