"""The broker's metadata cache, fed UpdateMetadata requests."""

from kcore.common import LEADER_DURING_DELETE, TopicPartition
from kcore.protocol.control import UpdateMetadataPartitionState, UpdateMetadataRequest
from kcore.server.metadata_cache import MetadataCache


def state(topic, partition, leader=1):
    return UpdateMetadataPartitionState(topic, partition, 1, leader, 0, (1,), 0, (1,))


def update(cache, *states, topic_ids=None):
    return cache.update(UpdateMetadataRequest(1, 1, 0, states, (), topic_ids=topic_ids or {}))


def test_a_topics_partitions_come_in_partition_order_whatever_the_updates_order():
    cache = MetadataCache(1)
    update(cache, state("b", 2), state("a", 1), state("b", 0), topic_ids={"a": "ia", "b": "ib"})
    update(cache, state("b", 1), state("a", 0), state("b", 2, leader=3))
    assert [(s.partition, s.leader) for s in cache.partitions_of("b")] == [(0, 1), (1, 1), (2, 3)]
    assert [s.partition for s in cache.partitions_of("a")] == [0, 1]
    assert cache.partitions_of("unknown") == []
    assert cache.topics() == ["a", "b"]


def test_deleting_a_topics_last_partition_forgets_the_topic_and_its_id():
    cache = MetadataCache(1)
    update(cache, state("a", 0), state("a", 1), state("b", 0), topic_ids={"a": "ia", "b": "ib"})
    deleted = update(cache, state("a", 1, leader=LEADER_DURING_DELETE))
    assert deleted == [TopicPartition("a", 1)]
    assert [s.partition for s in cache.partitions_of("a")] == [0]
    assert cache.topic_ids == {"a": "ia", "b": "ib"}
    update(cache, state("a", 0, leader=LEADER_DURING_DELETE))
    assert cache.partitions_of("a") == [] and cache.topics() == ["b"]
    assert cache.topic_ids == {"b": "ib"}
    assert cache.leader_of(TopicPartition("a", 0)) is None
