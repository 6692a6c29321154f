"""Trio-native Kafka clients over kcore's msgpack RPC (DESIGN.md section 6): `Producer`,
`Consumer` (manual assignment) and `Admin`. Settings are Kafka's, python-style
(`linger_ms`, `batch_size`, ...); every error is a `kcore.errors.KafkaError`. Bootstrap
servers are `"host:port"` strings or `(host, port)` pairs; the network is real TCP and the
randomness a fresh random.Random unless given."""

from kcore.client._config import ClientConfigError, InvalidPartitionError
from kcore.client._metadata import BrokerInfo, PartitionInfo
from kcore.client._partitioner import murmur2, partition_for_key
from kcore.client.admin import Admin, ClusterDescription, NewTopic, TopicDescription
from kcore.client.consumer import Consumer, ConsumerRecord
from kcore.client.producer import Producer, ProducerClosedError, RecordMetadata
from kcore.common import TopicPartition

__all__ = [
    "Admin",
    "BrokerInfo",
    "ClientConfigError",
    "ClusterDescription",
    "Consumer",
    "ConsumerRecord",
    "InvalidPartitionError",
    "NewTopic",
    "PartitionInfo",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
    "murmur2",
    "partition_for_key",
]
