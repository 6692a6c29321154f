"""When a leader tells the controller about its ISR changes (Kafka's
ReplicaManager.maybePropagateIsrChanges).

The leader writes the partition's state znode itself, conditioned on the version it last
saw (the partition epoch: `KafkaZkClient.conditional_update_partition_state`): a controller
that changed the partition meanwhile wins, and the leader drops its proposal until the
controller's LeaderAndIsr arrives. Then it tells the controller through a sequential
`/isr_change_notification/isr_change_` node; those are batched: written once no change came
for `linger_ms`, or at the latest `max_delay_ms` after the previous write.
"""

from __future__ import annotations

import attrs

from kcore.common import TopicPartition


@attrs.define
class IsrChangePropagation:
    """When to write the batched ISR change notification. Sans-IO: times are passed in."""

    check_interval_ms: int = 2500
    linger_ms: int = 5000
    max_delay_ms: int = 60000
    pending: set[TopicPartition] = attrs.field(factory=set)
    last_change_ms: int = 0
    last_propagation_ms: int = 0

    def record(self, tp: TopicPartition, now_ms: int) -> None:
        self.pending.add(tp)
        self.last_change_ms = now_ms

    def take_due(self, now_ms: int) -> list[TopicPartition]:
        """The partitions to announce now (and forget), or [] when it is not time yet."""
        if not self.pending:
            return []
        quiet = self.last_change_ms + self.linger_ms < now_ms
        overdue = self.last_propagation_ms + self.max_delay_ms < now_ms
        if not (quiet or overdue):
            return []
        due = sorted(self.pending)
        self.pending.clear()
        self.last_propagation_ms = now_ms
        return due
