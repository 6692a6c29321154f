"""Kafka's ControllerBrokerRequestBatch: the state machines add LeaderAndIsr, UpdateMetadata
and StopReplica entries while they decide, and `send` turns them into one request of each
kind per broker, queued in the order LeaderAndIsr, UpdateMetadata, StopReplica (a broker
handles its queue in order, so it learns its role before the metadata that announces it).

No await: it reads the controller context and hands requests to a `send` callable (the
channel manager's), which queues them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from kcore.common import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.controller.context import ControllerContext
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

logger = logging.getLogger("kcore.controller.request_batch")


# (broker id, api key, request, callback(broker id, error code, body) or None) -> queued?
SendRequest = Callable[[int, ApiKey, Any, Callable[[int, int, Any], None] | None], bool]


class RequestBatchNotEmptyError(RuntimeError):
    """A new batch was started while the previous one still held unsent requests."""


@attrs.define
class ControllerBrokerRequestBatch:
    controller_id: int
    context: ControllerContext
    send_request: SendRequest
    # Called with each LeaderAndIsr response: (broker id, error code, body).
    on_leader_and_isr_response: Callable[[int, int, Any], None] | None = None
    _leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = attrs.field(
        factory=dict, init=False
    )
    _update_metadata_brokers: set[int] = attrs.field(factory=set, init=False)
    _update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = attrs.field(
        factory=dict, init=False
    )
    _stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = attrs.field(
        factory=dict, init=False
    )
    _stop_replica_callbacks: dict[int, Callable[[int, int, Any], None]] = attrs.field(
        factory=dict, init=False
    )

    def new_batch(self) -> None:
        if self.is_pending:
            raise RequestBatchNotEmptyError(
                "Controller to broker state change requests batch is not empty while creating "
                f"a new one: {self._describe()}"
            )

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()
        self._stop_replica.clear()
        self._stop_replica_callbacks.clear()

    @property
    def is_pending(self) -> bool:
        return bool(
            self._leader_and_isr
            or self._update_metadata_brokers
            or self._update_metadata_partitions
            or self._stop_replica
        )

    def _describe(self) -> str:
        return (
            f"LeaderAndIsr {sorted(self._leader_and_isr)}, UpdateMetadata "
            f"{sorted(self._update_metadata_brokers)}, StopReplica {sorted(self._stop_replica)}"
        )

    # -- adding -------------------------------------------------------------------------

    def add_leader_and_isr(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        state: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        *,
        is_new: bool = False,
    ) -> None:
        """LeaderAndIsr for `tp` to each broker, and UpdateMetadata for `tp` to every live
        broker (a partition's new state is always announced)."""
        leader_and_isr = state.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self._leader_and_isr.setdefault(broker_id, {})
            already_new = per_broker.get(tp) is not None and per_broker[tp].is_new
            per_broker[tp] = LeaderAndIsrPartitionState(
                tp.topic,
                tp.partition,
                state.controller_epoch,
                leader_and_isr.leader,
                leader_and_isr.leader_epoch,
                leader_and_isr.isr,
                leader_and_isr.partition_epoch,
                assignment.replicas,
                assignment.adding_replicas,
                assignment.removing_replicas,
                is_new or already_new,
            )
        self.add_update_metadata(self.context.live_brokers, [tp])

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        """UpdateMetadata to the brokers with the partitions' current states; with no
        partitions it only carries the live brokers (who is alive, who is controller)."""
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for tp in partitions:
            state = self._update_metadata_state(tp)
            if state is None:
                logger.info(
                    "Leader not yet assigned for partition %s. Skip sending UpdateMetadataRequest.",
                    tp,
                )
                continue
            self._update_metadata_partitions[tp] = state

    def _update_metadata_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        state = self.context.partition_leadership.get(tp)
        if state is None:
            return None
        replicas = self.context.replicas(tp)
        live = self.context.live_broker_ids
        leader_and_isr = state.leader_and_isr
        leader = leader_and_isr.leader
        if self.context.is_topic_queued_for_deletion(tp.topic):
            leader = LEADER_DURING_DELETE
        return UpdateMetadataPartitionState(
            tp.topic,
            tp.partition,
            state.controller_epoch,
            leader,
            leader_and_isr.leader_epoch,
            leader_and_isr.isr,
            leader_and_isr.partition_epoch,
            replicas,
            tuple(r for r in replicas if r not in live),
        )

    def add_stop_replica(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        *,
        delete_partition: bool,
        callback: Callable[[int, int, Any], None] | None = None,
    ) -> None:
        """StopReplica for `tp`; a deletion carries EpochDuringDelete (the broker deletes
        whatever epoch it has), a plain stop the current leader epoch (a broker with a newer
        one refuses it)."""
        if delete_partition:
            leader_epoch = EPOCH_DURING_DELETE
        else:
            leadership = self.context.partition_leadership.get(tp)
            leader_epoch = leadership.leader_and_isr.leader_epoch if leadership else NO_EPOCH
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self._stop_replica.setdefault(broker_id, {})
            per_broker[tp] = StopReplicaPartitionState(
                tp.topic, tp.partition, leader_epoch, delete_partition
            )
            if callback is not None:
                self._stop_replica_callbacks[broker_id] = callback

    # -- sending --------------------------------------------------------------------------

    def send(self, controller_epoch: int) -> None:
        """Queues every added request (to live brokers only) and empties the batch."""
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        finally:
            self.clear()

    def _broker_epoch(self, broker_id: int) -> int | None:
        broker = self.context.live_brokers.get(broker_id)
        return None if broker is None else broker.epoch

    def _send_leader_and_isr(self, controller_epoch: int) -> None:
        for broker_id in sorted(self._leader_and_isr):
            broker_epoch = self._broker_epoch(broker_id)
            if broker_epoch is None:
                continue
            states = self._leader_and_isr[broker_id]
            # (once per request: a topic's membership test per partition made it O(N^2))
            topics = _topics(states)
            leader_ids = {s.leader for s in states.values()}
            live_leaders = tuple(
                LiveLeader(b, endpoint.host, endpoint.port)
                for b in sorted(leader_ids)
                if (broker := self.context.live_brokers.get(b)) is not None
                for endpoint in broker.endpoints[:1]
            )
            request = LeaderAndIsrRequest(
                self.controller_id,
                controller_epoch,
                broker_epoch,
                tuple(states[tp] for tp in sorted(states)),
                live_leaders,
                topic_ids={t: i for t, i in self.context.topic_ids.items() if t in topics},
            )
            if logger.isEnabledFor(logging.DEBUG):
                for tp in sorted(states):
                    state = states[tp]
                    logger.debug(
                        "Sending LeaderAndIsr request with state leader=%d epoch=%d isr=%s to "
                        "broker %d for partition %s",
                        state.leader, state.leader_epoch, list(state.isr), broker_id, tp,
                    )  # fmt: skip
            self.send_request(
                broker_id, ApiKey.LEADER_AND_ISR, request, self.on_leader_and_isr_response
            )

    def _send_update_metadata(self, controller_epoch: int) -> None:
        if not self._update_metadata_brokers:
            return
        live = tuple(
            UpdateMetadataBroker.from_broker(self.context.live_brokers[b])
            for b in sorted(self.context.live_or_shutting_down_broker_ids)
        )
        partition_states = tuple(
            self._update_metadata_partitions[tp] for tp in sorted(self._update_metadata_partitions)
        )
        topics = {tp.topic for tp in self._update_metadata_partitions}
        topic_ids = {t: i for t, i in self.context.topic_ids.items() if t in topics}
        for broker_id in sorted(self._update_metadata_brokers):
            broker_epoch = self._broker_epoch(broker_id)
            if broker_epoch is None:
                continue
            request = UpdateMetadataRequest(
                self.controller_id,
                controller_epoch,
                broker_epoch,
                partition_states,
                live,
                topic_ids,
            )
            self.send_request(broker_id, ApiKey.UPDATE_METADATA, request, None)

    def _send_stop_replica(self, controller_epoch: int) -> None:
        for broker_id in sorted(self._stop_replica):
            broker_epoch = self._broker_epoch(broker_id)
            if broker_epoch is None:
                continue
            states = self._stop_replica[broker_id]
            request = StopReplicaRequest(
                self.controller_id,
                controller_epoch,
                broker_epoch,
                tuple(states[tp] for tp in sorted(states)),
            )
            self.send_request(
                broker_id,
                ApiKey.STOP_REPLICA,
                request,
                self._stop_replica_callbacks.get(broker_id),
            )


def _topics(states: dict[TopicPartition, Any]) -> set[str]:
    return {tp.topic for tp in states}
