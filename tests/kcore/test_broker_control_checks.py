"""What a broker does with control requests before any replica work: epoch checks and the
metadata cache."""

from kcore.common import LEADER_DURING_DELETE, Broker, EndPoint, TopicPartition
from kcore.errors import StaleBrokerEpochError, StaleControllerEpochError
from kcore.protocol.control import (
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kcore.server.control_requests import control_request_error
from kcore.server.metadata_cache import MetadataCache


def _check(broker_epoch_in_request, controller_epoch_in_request):
    return control_request_error(
        broker_epoch_in_request=broker_epoch_in_request,
        current_broker_epoch=100,
        controller_epoch_in_request=controller_epoch_in_request,
        current_controller_epoch=5,
    )


def test_a_request_for_an_earlier_incarnation_is_refused():
    assert _check(99, 5) == StaleBrokerEpochError.code


def test_a_newer_broker_epoch_or_an_unknown_one_is_accepted():
    assert _check(101, 5) == 0
    assert _check(-1, 5) == 0


def test_an_older_controller_is_refused_and_the_current_or_a_newer_accepted():
    assert _check(100, 4) == StaleControllerEpochError.code
    assert _check(100, 5) == 0
    assert _check(100, 6) == 0


def _state(topic, partition, leader):
    return UpdateMetadataPartitionState(topic, partition, 3, leader, 1, (1, 2), 0, (1, 2))


def test_update_metadata_replaces_brokers_and_merges_partitions():
    cache = MetadataCache(broker_id=1)
    broker = Broker(2, (EndPoint("broker-2", 9092),))
    first = UpdateMetadataRequest(
        1,
        3,
        10,
        (_state("a", 0, 1), _state("a", 1, 2)),
        (UpdateMetadataBroker.from_broker(broker),),
    )
    assert cache.update(first) == []
    assert (cache.controller_id, cache.controller_epoch) == (1, 3)
    assert cache.alive_broker(2) == broker
    assert cache.leader_of(TopicPartition("a", 1)) == 2
    second = UpdateMetadataRequest(2, 4, 10, (_state("a", 1, 1),), ())
    cache.update(second)
    assert cache.leader_of(TopicPartition("a", 0)) == 1  # not in the request: kept
    assert cache.leader_of(TopicPartition("a", 1)) == 1
    assert cache.alive_broker(2) is None  # the live broker list is replaced


def test_leader_during_delete_removes_the_partition():
    cache = MetadataCache(broker_id=1)
    cache.update(UpdateMetadataRequest(1, 1, 1, (_state("t", 0, 1),), (), {"t": "id-t"}))
    deleted = cache.update(
        UpdateMetadataRequest(1, 1, 1, (_state("t", 0, LEADER_DURING_DELETE),), ())
    )
    assert deleted == [TopicPartition("t", 0)]
    assert cache.topics() == [] and "t" not in cache.topic_ids
