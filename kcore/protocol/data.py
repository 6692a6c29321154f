"""The client- and replica-facing requests (Produce, Fetch, ListOffsets, Metadata,
OffsetsForLeaderEpoch, CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DeleteRecords, InitProducerId), shaped after Kafka 3.5's
schemas but flattened: one entry per partition carrying its topic name, instead of Kafka's
topic -> partitions nesting (msgpack packs the flat lists as fast, and handlers need no
second loop).

Record data travels as bytes holding one or more record batches (`kcore.log.build_batch`),
one frame per request; the broker appends them without unpacking the records.
"""

from __future__ import annotations

import attrs

from kcore.common import NO_LEADER

CONSUMER_REPLICA_ID = -1  # Kafka's FetchRequest.CONSUMER_REPLICA_ID
NO_EPOCH = -1  # "no leader epoch known": the broker skips the KIP-320 check
EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
LATEST_TIMESTAMP = -1  # ListOffsets: the high watermark (what a consumer can read up to)
MAX_TIMESTAMP = -3  # ListOffsets (KIP-734): the record with the largest timestamp


def _non_negative(_instance: object, attribute: attrs.Attribute, value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _acks(_instance: object, _attribute: attrs.Attribute, value: int) -> None:
    if value not in (-1, 0, 1):
        raise ValueError(f"acks must be -1 (all), 0 or 1, got {value}")


# -- Produce ---------------------------------------------------------------------------


@attrs.frozen
class ProducePartitionData:
    topic: str
    partition: int
    records: bytes


@attrs.frozen
class ProduceRequest:
    acks: int = attrs.field(validator=_acks)
    timeout_ms: int = attrs.field(validator=_non_negative)
    partitions: tuple[ProducePartitionData, ...]


@attrs.frozen
class ProducePartitionResponse:
    topic: str
    partition: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@attrs.frozen
class ProduceResponse:
    partitions: tuple[ProducePartitionResponse, ...]


# -- Fetch -----------------------------------------------------------------------------


@attrs.frozen
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int = attrs.field(validator=_non_negative)
    current_leader_epoch: int = NO_EPOCH  # KIP-320: fenced when it is not the leader's
    last_fetched_epoch: int = NO_EPOCH  # KIP-595-style divergence check, sent by followers
    log_start_offset: int = -1  # a follower's, so the leader can track it


@attrs.frozen
class FetchRequest:
    replica_id: int  # CONSUMER_REPLICA_ID for consumers, the broker id for followers
    replica_epoch: int  # the follower's broker epoch (-1 from consumers)
    max_wait_ms: int = attrs.field(validator=_non_negative)
    min_bytes: int = attrs.field(validator=_non_negative)
    max_bytes: int = attrs.field(validator=_non_negative)
    partitions: tuple[FetchPartition, ...]


@attrs.frozen
class EpochEndOffset:
    epoch: int
    end_offset: int


@attrs.frozen
class FetchPartitionResponse:
    topic: str
    partition: int
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    # Set when the follower's last fetched epoch ends before its fetch offset on the
    # leader: the follower truncates to it before fetching again.
    diverging_epoch: EpochEndOffset | None = None
    current_leader: int = NO_LEADER
    current_leader_epoch: int = NO_EPOCH


@attrs.frozen
class FetchResponse:
    partitions: tuple[FetchPartitionResponse, ...]


# -- OffsetsForLeaderEpoch ---------------------------------------------------------------


@attrs.frozen
class OffsetForLeaderEpochPartition:
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int


@attrs.frozen
class OffsetForLeaderEpochRequest:
    replica_id: int
    partitions: tuple[OffsetForLeaderEpochPartition, ...]


@attrs.frozen
class OffsetForLeaderEpochPartitionResponse:
    topic: str
    partition: int
    error_code: int
    leader_epoch: int = NO_EPOCH
    end_offset: int = -1


@attrs.frozen
class OffsetForLeaderEpochResponse:
    partitions: tuple[OffsetForLeaderEpochPartitionResponse, ...]


# -- ListOffsets -----------------------------------------------------------------------


@attrs.frozen
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int  # EARLIEST_TIMESTAMP or LATEST_TIMESTAMP
    current_leader_epoch: int = NO_EPOCH


@attrs.frozen
class ListOffsetsRequest:
    replica_id: int
    partitions: tuple[ListOffsetsPartition, ...]


@attrs.frozen
class ListOffsetsPartitionResponse:
    topic: str
    partition: int
    error_code: int
    offset: int = -1
    leader_epoch: int = NO_EPOCH
    timestamp: int = -1  # the found record's, for a lookup by timestamp


@attrs.frozen
class ListOffsetsResponse:
    partitions: tuple[ListOffsetsPartitionResponse, ...]


# -- Metadata --------------------------------------------------------------------------


@attrs.frozen
class MetadataRequest:
    topics: tuple[str, ...] | None  # None: every topic


@attrs.frozen
class MetadataBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class MetadataPartition:
    partition: int
    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@attrs.frozen
class MetadataTopic:
    name: str
    error_code: int
    partitions: tuple[MetadataPartition, ...] = ()
    topic_id: str | None = None


@attrs.frozen
class MetadataResponse:
    brokers: tuple[MetadataBroker, ...]
    controller_id: int
    topics: tuple[MetadataTopic, ...]
    cluster_id: str | None = None


# -- Admin -----------------------------------------------------------------------------


@attrs.frozen
class CreatableTopic:
    name: str
    num_partitions: int  # -1: the broker's num.partitions (or the assignment's size)
    replication_factor: int  # -1: the broker's default.replication.factor
    assignments: dict[int, tuple[int, ...]] = attrs.field(factory=dict)
    configs: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int = attrs.field(validator=_non_negative)
    validate_only: bool = False


@attrs.frozen
class TopicResult:
    name: str
    error_code: int
    error_message: str | None = None


@attrs.frozen
class CreateTopicsResponse:
    topics: tuple[TopicResult, ...]


@attrs.frozen
class DeleteTopicsRequest:
    names: tuple[str, ...]
    timeout_ms: int = attrs.field(validator=_non_negative)


@attrs.frozen
class DeleteTopicsResponse:
    topics: tuple[TopicResult, ...]


@attrs.frozen
class CreatePartitionsTopic:
    name: str
    count: int  # the partition count the topic grows to
    # One replica list per new partition, in partition order; None: the broker assigns.
    assignments: tuple[tuple[int, ...], ...] | None = None


@attrs.frozen
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    timeout_ms: int = attrs.field(validator=_non_negative)
    validate_only: bool = False


@attrs.frozen
class CreatePartitionsResponse:
    topics: tuple[TopicResult, ...]


@attrs.frozen
class InitProducerIdRequest:
    transactional_id: str | None = None


@attrs.frozen
class InitProducerIdResponse:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


# -- Configs ---------------------------------------------------------------------------
# Resource types and config sources are Kafka's numbers (kcore.config: TOPIC_RESOURCE,
# BROKER_RESOURCE, ConfigSourceCode, ConfigTypeCode, AlterConfigOp); they travel as plain
# ints so that a number this side does not know yet still decodes.


@attrs.frozen
class ConfigResource:
    resource_type: int
    resource_name: str


@attrs.frozen
class DescribeConfigsRequest:
    resources: tuple[ConfigResource, ...]


@attrs.frozen
class DescribedConfig:
    name: str
    value: str | None  # None for a sensitive or unset value
    source: int
    config_type: int
    is_sensitive: bool = False
    read_only: bool = False


@attrs.frozen
class DescribeConfigsResult:
    resource_type: int
    resource_name: str
    error_code: int
    error_message: str | None = None
    configs: tuple[DescribedConfig, ...] = ()


@attrs.frozen
class DescribeConfigsResponse:
    results: tuple[DescribeConfigsResult, ...]


@attrs.frozen
class AlterableConfig:
    name: str
    operation: int  # SET 0, DELETE 1, APPEND 2, SUBTRACT 3
    value: str | None = None


@attrs.frozen
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@attrs.frozen
class IncrementalAlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@attrs.frozen
class AlterConfigsResult:
    resource_type: int
    resource_name: str
    error_code: int
    error_message: str | None = None


@attrs.frozen
class IncrementalAlterConfigsResponse:
    results: tuple[AlterConfigsResult, ...]


# -- DeleteRecords ---------------------------------------------------------------------


@attrs.frozen
class DeleteRecordsPartition:
    topic: str
    partition: int
    offset: int  # the new log start offset; -1: the high watermark


@attrs.frozen
class DeleteRecordsRequest:
    partitions: tuple[DeleteRecordsPartition, ...]
    timeout_ms: int = attrs.field(validator=_non_negative)


@attrs.frozen
class DeleteRecordsPartitionResponse:
    topic: str
    partition: int
    error_code: int
    low_watermark: int = -1


@attrs.frozen
class DeleteRecordsResponse:
    partitions: tuple[DeleteRecordsPartitionResponse, ...]


# -- ElectLeaders ----------------------------------------------------------------------


@attrs.frozen
class ElectionPartition:
    topic: str
    partition: int


@attrs.frozen
class ElectLeadersRequest:
    election_type: int  # Kafka's ElectionType: PREFERRED 0, UNCLEAN 1
    partitions: tuple[ElectionPartition, ...] | None  # None: every partition
    timeout_ms: int = attrs.field(validator=_non_negative)


@attrs.frozen
class ElectionResult:
    topic: str
    partition: int
    error_code: int  # 0: elected; ELECTION_NOT_NEEDED when the right leader leads already
    error_message: str | None = None


@attrs.frozen
class ElectLeadersResponse:
    error_code: int  # NOT_CONTROLLER when sent to another broker
    results: tuple[ElectionResult, ...] = ()


# -- AlterPartitionReassignments / ListPartitionReassignments --------------------------


@attrs.frozen
class ReassignablePartition:
    topic: str
    partition: int
    replicas: tuple[int, ...] | None  # the target replicas; None cancels its reassignment


@attrs.frozen
class AlterPartitionReassignmentsRequest:
    partitions: tuple[ReassignablePartition, ...]
    timeout_ms: int = attrs.field(validator=_non_negative)


@attrs.frozen
class ReassignablePartitionResponse:
    topic: str
    partition: int
    error_code: int  # 0: started (or cancelled)
    error_message: str | None = None


@attrs.frozen
class AlterPartitionReassignmentsResponse:
    error_code: int  # NOT_CONTROLLER when sent to another broker
    error_message: str | None = None
    partitions: tuple[ReassignablePartitionResponse, ...] = ()


@attrs.frozen
class ListedPartition:
    topic: str
    partition: int


@attrs.frozen
class ListPartitionReassignmentsRequest:
    partitions: tuple[ListedPartition, ...] | None  # None: every reassignment in progress
    timeout_ms: int = attrs.field(validator=_non_negative)


@attrs.frozen
class OngoingPartitionReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # RS: target and original replicas
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@attrs.frozen
class ListPartitionReassignmentsResponse:
    error_code: int  # NOT_CONTROLLER when sent to another broker
    error_message: str | None = None
    reassignments: tuple[OngoingPartitionReassignment, ...] = ()
