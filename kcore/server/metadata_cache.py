"""The broker's metadata cache (Kafka's ZkMetadataCache): what the controller last told it
about live brokers and partition leadership, fed by UpdateMetadata requests. Pure."""

from __future__ import annotations

import attrs

from kcore.common import LEADER_DURING_DELETE, Broker, TopicPartition
from kcore.protocol.control import UpdateMetadataPartitionState, UpdateMetadataRequest


@attrs.define
class MetadataCache:
    broker_id: int
    controller_id: int | None = None
    controller_epoch: int = -1
    brokers: dict[int, Broker] = attrs.field(factory=dict)
    partitions: dict[TopicPartition, UpdateMetadataPartitionState] = attrs.field(factory=dict)
    topic_ids: dict[str, str] = attrs.field(factory=dict)

    def update(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Applies an UpdateMetadata request; returns the partitions it deleted. The caller
        checks the controller epoch first (a stale one is refused, not applied)."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.brokers = {b.id: b.to_broker() for b in request.live_brokers}
        self.topic_ids.update(request.topic_ids)
        deleted = []
        for state in request.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            if state.leader == LEADER_DURING_DELETE:
                if self.partitions.pop(tp, None) is not None:
                    deleted.append(tp)
            else:
                self.partitions[tp] = state
        for topic in {tp.topic for tp in deleted}:
            if not any(tp.topic == topic for tp in self.partitions):
                self.topic_ids.pop(topic, None)
        return sorted(deleted)

    def leader_of(self, tp: TopicPartition) -> int | None:
        state = self.partitions.get(tp)
        return None if state is None or state.leader < 0 else state.leader

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.partitions})

    def partitions_of(self, topic: str) -> list[UpdateMetadataPartitionState]:
        return [self.partitions[tp] for tp in sorted(self.partitions) if tp.topic == topic]

    def alive_broker(self, broker_id: int) -> Broker | None:
        return self.brokers.get(broker_id)
