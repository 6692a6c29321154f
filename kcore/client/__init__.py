"""Trio-native Kafka clients over kcore's msgpack RPC (DESIGN.md section 6): `Producer`,
`Consumer` (manual assignment, or a consumer group's member with a group_id) and `Admin`.
Settings are Kafka's, python-style (`linger_ms`, `batch_size`, ...); every error is a
`kcore.errors.KafkaError`. Bootstrap servers are `"host:port"` strings or `(host, port)`
pairs; the network is real TCP and the randomness a fresh random.Random unless given."""

from kcore.client._config import ClientConfigError, InvalidPartitionError
from kcore.client._metadata import BrokerInfo, PartitionInfo
from kcore.client._partitioner import murmur2, partition_for_key
from kcore.client.admin import (
    Admin,
    ClusterDescription,
    NewTopic,
    PartitionReassignment,
    TopicDescription,
)
from kcore.client.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
)
from kcore.client.consumer import Consumer, ConsumerGroupMetadata, ConsumerRecord
from kcore.client.producer import (
    BufferExhaustedError,
    FutureRecordMetadata,
    Producer,
    ProducerClosedError,
    RecordMetadata,
)
from kcore.common import TopicPartition

__all__ = [
    "Admin",
    "BrokerInfo",
    "BufferExhaustedError",
    "ClientConfigError",
    "ClusterDescription",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "CooperativeStickyAssignor",
    "FutureRecordMetadata",
    "InvalidPartitionError",
    "NewTopic",
    "PartitionInfo",
    "PartitionReassignment",
    "Producer",
    "ProducerClosedError",
    "RangeAssignor",
    "RecordMetadata",
    "RoundRobinAssignor",
    "TopicDescription",
    "TopicPartition",
    "murmur2",
    "partition_for_key",
]
