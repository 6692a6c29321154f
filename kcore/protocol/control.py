"""The controller's requests to brokers (LeaderAndIsr, UpdateMetadata, StopReplica) and a
broker's ControlledShutdown request to the controller, shaped as Kafka's (3.5) schemas.

Every control request carries the controller's id and epoch and the receiving broker's
epoch: a broker refuses a stale controller epoch (STALE_CONTROLLER_EPOCH) and an epoch of
an earlier incarnation of itself (STALE_BROKER_EPOCH).
"""

from __future__ import annotations

import attrs

from kcore.common import Broker, EndPoint
from kcore.protocol.api_keys import ApiKey


@attrs.frozen
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False


@attrs.frozen
class LiveLeader:
    broker_id: int
    host: str
    port: int


@attrs.frozen
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[LiveLeader, ...]
    is_full: bool = False  # Kafka's `type`: a full request lists every partition of the broker
    topic_ids: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class PartitionError:
    topic: str
    partition: int
    error_code: int


@attrs.frozen
class LeaderAndIsrResponse:
    error_code: int
    partition_errors: tuple[PartitionError, ...] = ()


@attrs.frozen
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@attrs.frozen
class UpdateMetadataEndpoint:
    port: int
    host: str
    listener: str
    security_protocol: str


@attrs.frozen
class UpdateMetadataBroker:
    id: int
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = None

    @classmethod
    def from_broker(cls, broker: Broker) -> UpdateMetadataBroker:
        return cls(
            broker.id,
            tuple(
                UpdateMetadataEndpoint(e.port, e.host, e.listener_name, e.security_protocol)
                for e in broker.endpoints
            ),
            broker.rack,
        )

    def to_broker(self, epoch: int = -1) -> Broker:
        endpoints = tuple(
            EndPoint(e.host, e.port, e.listener, e.security_protocol) for e in self.endpoints
        )
        return Broker(self.id, endpoints, self.rack, epoch)


@attrs.frozen
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]
    topic_ids: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class UpdateMetadataResponse:
    error_code: int


@attrs.frozen
class StopReplicaPartitionState:
    topic: str
    partition: int
    leader_epoch: int
    delete_partition: bool


@attrs.frozen
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]


@attrs.frozen
class StopReplicaResponse:
    error_code: int
    partition_errors: tuple[PartitionError, ...] = ()


@attrs.frozen
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int


@attrs.frozen
class TopicPartitionEntry:
    topic: str
    partition: int


@attrs.frozen
class ControlledShutdownResponse:
    error_code: int
    remaining_partitions: tuple[TopicPartitionEntry, ...] = ()


# What each control request is answered with.
CONTROL_RESPONSE_TYPES: dict[ApiKey, type] = {
    ApiKey.LEADER_AND_ISR: LeaderAndIsrResponse,
    ApiKey.UPDATE_METADATA: UpdateMetadataResponse,
    ApiKey.STOP_REPLICA: StopReplicaResponse,
    ApiKey.CONTROLLED_SHUTDOWN: ControlledShutdownResponse,
}
