"""Safety invariants of a running cluster, checked on every step of a simulation.

`snapshot(cluster)` reads what each running broker believes (no I/O); `InvariantChecker`
remembers what earlier steps saw and raises `InvariantViolation` the moment one breaks:

- at most one active controller per controller epoch;
- a broker's controller epoch and a replica's leader epoch never go backwards (within one
  incarnation of the broker);
- a leader is in its own ISR;
- no two brokers lead one partition at one leader epoch;
- a leader's high watermark never goes backwards;
- records below a leader's high watermark never change (unless `committed_may_change`:
  an unclean leader, or power lost everywhere without fsync, may legitimately rewrite them).
"""

from __future__ import annotations

from typing import Any

import attrs

from kcore.common import TopicPartition
from kcore.log import iter_batch_records


class InvariantViolation(AssertionError):
    pass


@attrs.frozen
class ReplicaView:
    broker_id: int
    incarnation: int  # the broker epoch of this run of the broker
    tp: TopicPartition
    is_leader: bool
    leader_epoch: int
    isr: tuple[int, ...]
    high_watermark: int


@attrs.frozen
class ControllerView:
    broker_id: int
    incarnation: int
    active: bool
    epoch: int


@attrs.frozen
class ClusterSnapshot:
    controllers: tuple[ControllerView, ...]
    replicas: tuple[ReplicaView, ...]


def snapshot(cluster: Any) -> ClusterSnapshot:
    controllers = []
    replicas = []
    for broker_id in sorted(cluster.brokers):
        broker = cluster.brokers[broker_id]
        incarnation = broker.broker_epoch
        if broker.controller is not None:
            controllers.append(
                ControllerView(
                    broker_id, incarnation, broker.controller.is_active, broker.controller.epoch
                )
            )
        manager = broker.replica_manager
        if manager is None:
            continue
        for tp in sorted(manager.partitions):
            p = manager.partitions[tp]
            replicas.append(
                ReplicaView(
                    broker_id,
                    incarnation,
                    tp,
                    p.is_leader,
                    p.leader_epoch,
                    tuple(p.isr),
                    p.high_watermark,
                )
            )
    return ClusterSnapshot(tuple(controllers), tuple(replicas))


@attrs.define
class InvariantChecker:
    # Unclean election, or power losses without fsync (flush.messages unset), may
    # legitimately rewrite committed records; then that check is off.
    committed_may_change: bool = False
    controller_of_epoch: dict[int, int] = attrs.field(factory=dict)
    controller_epoch_seen: dict[tuple[int, int], int] = attrs.field(factory=dict)
    leader_epoch_seen: dict[tuple[int, int, TopicPartition], int] = attrs.field(factory=dict)
    leader_of_epoch: dict[tuple[TopicPartition, int], int] = attrs.field(factory=dict)
    leader_hw_seen: dict[tuple[int, int, TopicPartition, int], int] = attrs.field(factory=dict)
    committed: dict[TopicPartition, dict[int, bytes | None]] = attrs.field(factory=dict)
    steps: int = 0
    _leaderships_read: set[tuple[TopicPartition, int, int, int]] = attrs.field(factory=set)

    def _fail(self, message: str) -> None:
        raise InvariantViolation(f"step {self.steps}: {message}")

    def observe(self, state: ClusterSnapshot) -> None:
        self.steps += 1
        for c in state.controllers:
            key = (c.broker_id, c.incarnation)
            if c.epoch < self.controller_epoch_seen.get(key, c.epoch):
                self._fail(f"broker {c.broker_id}'s controller epoch went back to {c.epoch}")
            self.controller_epoch_seen[key] = c.epoch
            if c.active:
                holder = self.controller_of_epoch.setdefault(c.epoch, c.broker_id)
                if holder != c.broker_id:
                    self._fail(
                        f"brokers {holder} and {c.broker_id} both active controllers in "
                        f"epoch {c.epoch}"
                    )
        for r in state.replicas:
            key = (r.broker_id, r.incarnation, r.tp)
            if r.leader_epoch < self.leader_epoch_seen.get(key, r.leader_epoch):
                self._fail(f"{r.tp} on {r.broker_id}: leader epoch went back to {r.leader_epoch}")
            self.leader_epoch_seen[key] = r.leader_epoch
            if not r.is_leader:
                continue
            if r.broker_id not in r.isr:
                self._fail(f"{r.tp}: leader {r.broker_id} is not in its ISR {list(r.isr)}")
            holder = self.leader_of_epoch.setdefault((r.tp, r.leader_epoch), r.broker_id)
            if holder != r.broker_id:
                self._fail(
                    f"{r.tp}: brokers {holder} and {r.broker_id} both lead epoch {r.leader_epoch}"
                )
            hw_key = (r.broker_id, r.incarnation, r.tp, r.leader_epoch)
            if r.high_watermark < self.leader_hw_seen.get(hw_key, r.high_watermark):
                self._fail(
                    f"{r.tp}: leader {r.broker_id}'s high watermark went back to {r.high_watermark}"
                )
            self.leader_hw_seen[hw_key] = r.high_watermark

    def observe_committed(
        self, tp: TopicPartition, records: list[tuple[int, bytes | None]]
    ) -> None:
        """Records a leader read below its HW; a different value at a known offset fails."""
        if self.committed_may_change:
            return
        known = self.committed.setdefault(tp, {})
        for offset, value in records:
            if offset in known and known[offset] != value:
                self._fail(
                    f"{tp}: committed offset {offset} changed from {known[offset]!r} to {value!r}"
                )
            known[offset] = value

    def check(self, cluster: Any) -> None:
        """One step: the snapshot invariants, then the committed records of each leader:
        all of them when the leadership is new (a failover must not change any), else the
        ones committed since the last step."""
        state = snapshot(cluster)
        self.observe(state)
        for r in state.replicas:
            if not r.is_leader:
                continue
            partition = cluster.brokers[r.broker_id].replica_manager.partition(r.tp)
            leadership = (r.tp, r.broker_id, r.incarnation, r.leader_epoch)
            start = partition.log_start_offset
            if leadership in self._leaderships_read:
                start = max(start, max(self.committed.get(r.tp, {}), default=-1) + 1)
            self._leaderships_read.add(leadership)
            if start < r.high_watermark:
                batches = partition.log.read(start, 1 << 30, r.high_watermark)
                self.observe_committed(
                    r.tp, [(rec.offset, rec.value) for rec in iter_batch_records(batches)]
                )
