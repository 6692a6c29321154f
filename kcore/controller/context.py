"""The controller's view of the cluster (Kafka's ControllerContext): live brokers and their
epochs, topics, replica assignments, partition leadership, and the controller's own epoch.
Pure data, touched only by the controller's event task."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from kcore.common import (
    NO_LEADER,
    Broker,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.states import PartitionState, ReplicaState
from kcore.zkdata import INITIAL_CONTROLLER_EPOCH, INITIAL_CONTROLLER_EPOCH_ZK_VERSION


@attrs.define
class ControllerContext:
    epoch: int = INITIAL_CONTROLLER_EPOCH
    epoch_zk_version: int = INITIAL_CONTROLLER_EPOCH_ZK_VERSION
    live_brokers: dict[int, Broker] = attrs.field(factory=dict)  # id -> broker (with epoch)
    shutting_down_broker_ids: set[int] = attrs.field(factory=set)
    all_topics: set[str] = attrs.field(factory=set)
    topic_ids: dict[str, str] = attrs.field(factory=dict)
    partition_assignments: dict[str, dict[int, ReplicaAssignment]] = attrs.field(factory=dict)
    partition_leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = attrs.field(
        factory=dict
    )
    topics_to_be_deleted: set[str] = attrs.field(factory=set)
    topics_ineligible_for_deletion: set[str] = attrs.field(factory=set)
    # Partitions whose reassignment the controller is driving (their assignments say what
    # is being added and removed).
    partitions_being_reassigned: set[TopicPartition] = attrs.field(factory=set)
    # The state machines' states (Kafka keeps them in the context too).
    partition_states: dict[TopicPartition, PartitionState] = attrs.field(factory=dict)
    replica_states: dict[tuple[TopicPartition, int], ReplicaState] = attrs.field(factory=dict)

    # -- brokers --------------------------------------------------------------------------

    def add_live_brokers(self, brokers: Iterable[Broker]) -> None:
        for broker in brokers:
            self.live_brokers[broker.id] = broker

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.shutting_down_broker_ids.discard(broker_id)

    @property
    def live_broker_ids(self) -> set[int]:
        """Live and not shutting down (Kafka's liveBrokerIds)."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def live_broker_epochs(self) -> dict[int, int]:
        return {broker_id: b.epoch for broker_id, b in sorted(self.live_brokers.items())}

    def is_live_or_shutting_down(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    # -- topics and partitions ------------------------------------------------------------

    def set_topic_assignment(
        self, topic: str, topic_id: str | None, assignment: dict[int, ReplicaAssignment]
    ) -> None:
        self.all_topics.add(topic)
        if topic_id is not None:
            self.topic_ids[topic] = topic_id
        self.partition_assignments[topic] = dict(assignment)

    def update_partition_assignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """One partition's full assignment (Kafka's updatePartitionFullReplicaAssignment)."""
        self.partition_assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def remove_topic(self, topic: str) -> None:
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for partition, assignment in self.partition_assignments.pop(topic, {}).items():
            tp = TopicPartition(topic, partition)
            self.partition_leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
            for replica in assignment.replicas:
                self.replica_states.pop((tp, replica), None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.partition_assignments.get(tp.topic, {}).get(tp.partition, ReplicaAssignment(()))

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignment(tp).replicas

    def all_partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(topic, partition)
            for topic in sorted(self.partition_assignments)
            for partition in sorted(self.partition_assignments[topic])
        ]

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.partition_assignments.get(topic, {}))]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return sorted(
            tp
            for tp, state in self.partition_leadership.items()
            if state.leader_and_isr.leader == broker_id
        )

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT_PARTITION)

    def replica_state(self, tp: TopicPartition, replica: int) -> ReplicaState:
        return self.replica_states.get((tp, replica), ReplicaState.NON_EXISTENT_REPLICA)

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[tuple[TopicPartition, int]]:
        """(partition, replica) for every replica the given brokers host."""
        wanted = set(broker_ids)
        return [
            (tp, replica)
            for tp in self.all_partitions()
            for replica in self.replicas(tp)
            if replica in wanted
        ]

    def replicas_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> list[tuple[TopicPartition, int]]:
        return [(tp, replica) for tp in partitions for replica in self.replicas(tp)]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        """Partitions whose leader is not a live broker (or that have none), not being
        deleted (Kafka's partitionsWithOfflineLeader)."""
        return sorted(
            tp
            for tp, state in self.partition_leadership.items()
            if tp.topic not in self.topics_to_be_deleted
            and (
                state.leader_and_isr.leader == NO_LEADER
                or not self.is_replica_online(state.leader_and_isr.leader)
            )
        )

    def partitions_in_states(self, *states: PartitionState) -> list[TopicPartition]:
        return sorted(tp for tp, state in self.partition_states.items() if state in states)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def topics_being_reassigned(self) -> set[str]:
        return {tp.topic for tp in self.partitions_being_reassigned}

    def is_replica_online(self, broker_id: int, include_shutting_down: bool = False) -> bool:
        if include_shutting_down:
            return broker_id in self.live_brokers
        return broker_id in self.live_broker_ids

    def reset(self) -> None:
        """What resignation forgets (the epoch stays: it is the last one this broker saw)."""
        epoch, epoch_zk_version = self.epoch, self.epoch_zk_version
        self.__init__()  # type: ignore[misc]
        self.epoch, self.epoch_zk_version = epoch, epoch_zk_version
