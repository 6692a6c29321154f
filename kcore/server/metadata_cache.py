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
    # The same states by topic and partition id: a Metadata request about a topic reads
    # its partitions without a walk over (and a sort of) every partition of the cluster,
    # which with 10 000 partitions in 100 topics was most of a broker's Metadata answer.
    _by_topic: dict[str, dict[int, UpdateMetadataPartitionState]] = attrs.field(
        factory=dict, init=False
    )

    def update(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Applies an UpdateMetadata request; returns the partitions it deleted. The caller
        checks the controller epoch first (a stale one is refused, not applied)."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.brokers = {b.id: b.to_broker() for b in request.live_brokers}
        self.topic_ids.update(request.topic_ids)
        deleted = []
        by_topic = self._by_topic
        for state in request.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            if state.leader == LEADER_DURING_DELETE:
                if self.partitions.pop(tp, None) is not None:
                    deleted.append(tp)
                    of_topic = by_topic[tp.topic]
                    del of_topic[tp.partition]
                    if not of_topic:
                        del by_topic[tp.topic]
                        self.topic_ids.pop(tp.topic, None)
            else:
                self.partitions[tp] = state
                of_topic = by_topic.get(state.topic)
                if of_topic is None:
                    of_topic = by_topic[state.topic] = {}
                of_topic[state.partition] = state
        return sorted(deleted)

    def leader_of(self, tp: TopicPartition) -> int | None:
        state = self.partitions.get(tp)
        return None if state is None or state.leader < 0 else state.leader

    def topics(self) -> list[str]:
        return sorted(self._by_topic)

    def partitions_of(self, topic: str) -> list[UpdateMetadataPartitionState]:
        """The topic's partitions, by partition id (none for a topic the cache lacks)."""
        of_topic = self._by_topic.get(topic)
        if not of_topic:
            return []
        return [of_topic[partition] for partition in sorted(of_topic)]

    def alive_broker(self, broker_id: int) -> Broker | None:
        return self.brokers.get(broker_id)
