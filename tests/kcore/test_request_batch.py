"""The controller's per-broker request batch: one LeaderAndIsr, UpdateMetadata and StopReplica
per broker, sent in that order, to live brokers only, with Kafka's deletion markers."""

import pytest

from kcore.common import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.controller.context import ControllerContext
from kcore.controller.request_batch import ControllerBrokerRequestBatch, RequestBatchNotEmptyError
from kcore.protocol.api_keys import ApiKey

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def _context(live=(1, 2, 3)):
    context = ControllerContext(epoch=5)
    context.add_live_brokers(
        Broker(b, (EndPoint(f"broker-{b}", 9092),), None, 100 + b) for b in live
    )
    context.set_topic_assignment(
        "t", "topic-id", {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 4))}
    )
    context.partition_leadership[T0] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2)), 5)
    context.partition_leadership[T1] = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 7, (2, 3)), 5)
    return context


def _batch(context):
    sent = []

    def send(broker_id, api_key, request, callback):
        sent.append((broker_id, api_key, request, callback))
        return True

    return ControllerBrokerRequestBatch(1, context, send), sent


def test_one_request_per_broker_and_kind_in_leader_and_isr_metadata_stop_order():
    context = _context()
    batch, sent = _batch(context)
    batch.new_batch()
    for tp in (T0, T1):
        leadership = context.partition_leadership[tp]
        batch.add_leader_and_isr(context.replicas(tp), tp, leadership, context.assignment(tp))
    batch.add_stop_replica([3], T0, delete_partition=False)
    batch.send(5)
    kinds = [(broker, key) for broker, key, _, _ in sent]
    # Broker 4 is assigned a replica of t-1 but is not alive: nothing is sent to it.
    assert kinds == [
        (1, ApiKey.LEADER_AND_ISR),
        (2, ApiKey.LEADER_AND_ISR),
        (3, ApiKey.LEADER_AND_ISR),
        (1, ApiKey.UPDATE_METADATA),
        (2, ApiKey.UPDATE_METADATA),
        (3, ApiKey.UPDATE_METADATA),
        (3, ApiKey.STOP_REPLICA),
    ]
    to_two = sent[1][2]
    assert to_two.controller_epoch == 5 and to_two.broker_epoch == 102
    assert [(s.partition, s.leader, s.leader_epoch) for s in to_two.partition_states] == [
        (0, 1, 3),
        (1, 2, 7),
    ]
    assert {leader.broker_id for leader in to_two.live_leaders} == {1, 2}
    metadata = sent[3][2]
    assert [s.offline_replicas for s in metadata.partition_states] == [(), (4,)]
    stop = sent[-1][2]
    assert [(s.partition, s.leader_epoch, s.delete_partition) for s in stop.partition_states] == [
        (0, 3, False)
    ]
    assert not batch.is_pending


def test_deleting_topics_carry_the_deletion_markers():
    context = _context()
    context.topics_to_be_deleted.add("t")
    batch, sent = _batch(context)
    responses = []
    batch.add_stop_replica([2], T1, delete_partition=True, callback=lambda *a: responses.append(a))
    batch.add_update_metadata([1], [T0])
    batch.send(5)
    (metadata,) = [request for _, key, request, _ in sent if key is ApiKey.UPDATE_METADATA]
    assert [s.leader for s in metadata.partition_states] == [LEADER_DURING_DELETE]
    (stop,) = [(request, cb) for _, key, request, cb in sent if key is ApiKey.STOP_REPLICA]
    assert stop[0].partition_states[0].leader_epoch == EPOCH_DURING_DELETE
    stop[1](2, 0, None)
    assert responses == [(2, 0, None)]


def test_metadata_without_partitions_only_announces_the_live_brokers():
    context = _context(live=(1, 2))
    batch, sent = _batch(context)
    batch.add_update_metadata([1, 2, 3], [])
    batch.send(5)
    assert [broker for broker, *_ in sent] == [1, 2]
    request = sent[0][2]
    assert request.partition_states == ()
    assert sorted(b.id for b in request.live_brokers) == [1, 2]


def test_a_new_batch_refuses_to_start_over_unsent_requests():
    context = _context()
    batch, sent = _batch(context)
    batch.add_update_metadata([1], [])
    with pytest.raises(RequestBatchNotEmptyError, match="UpdateMetadata \\[1\\]"):
        batch.new_batch()
    batch.clear()
    batch.new_batch()
    batch.send(5)
    assert sent == []
