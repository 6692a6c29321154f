"""The counting behind a broker's metrics, on plain state: the ReplicaManager, controller and
group coordinator gauges, BrokerTopicMetrics, ISR meters and RequestMetrics."""

import types

import pytest
import trio

import transport
from actors import MetricsRegistry
from kcore.common import (
    Broker,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.controller.context import ControllerContext
from kcore.coordinator.group import GroupState
from kcore.metrics import (
    BrokerTopicStats,
    IsrChangeMeters,
    RequestMetrics,
    controller_counts,
    error_codes_in,
    group_counts,
    note_remote_time,
    replica_counts,
)
from kcore.states import ReplicaState


def _partition(topic, partition, *, leader, replicas, isr, local=1):
    return types.SimpleNamespace(
        tp=TopicPartition(topic, partition), is_leader=leader == local, replicas=replicas, isr=isr
    )


def test_replica_counts_are_kafkas():
    partitions = [
        _partition("a", 0, leader=1, replicas=(1, 2, 3), isr=(1, 2, 3)),  # healthy
        _partition("a", 1, leader=1, replicas=(1, 2, 3), isr=(1, 2)),  # under-replicated, at min
        _partition("a", 2, leader=1, replicas=(1, 2, 3), isr=(1,)),  # under min ISR
        _partition("a", 3, leader=2, replicas=(2, 1, 3), isr=(2,)),  # a follower: not counted
        _partition("b", 0, leader=1, replicas=(1,), isr=(1,)),  # min ISR 1: at min
        _partition("c", 0, leader=1, replicas=(1, 2), isr=(1,)),  # its log dir failed
    ]
    counts = replica_counts(
        partitions,
        min_insync_replicas={"a": 2, "b": 1, "c": 1}.__getitem__,
        is_offline=lambda tp: tp.topic == "c",
    )
    assert counts.partitions == 6
    assert counts.leaders == 4
    assert counts.under_replicated == 2
    assert (counts.under_min_isr, counts.at_min_isr) == (1, 2)
    assert counts.offline == 1


def _led(context, tp, replicas, leader, isr, **assignment):
    context.set_topic_assignment(
        tp.topic,
        None,
        {**context.partition_assignments.get(tp.topic, {}),
         tp.partition: ReplicaAssignment(replicas, **assignment)},
    )  # fmt: skip
    context.partition_leadership[tp] = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader, 0, isr, 0), 1
    )


def test_controller_counts_preferred_imbalance_and_deletions():
    context = ControllerContext()
    context.add_live_brokers([Broker(b, ()) for b in (1, 2, 3)])
    _led(context, TopicPartition("t", 0), (1, 2, 3), 1, (1, 2, 3))  # preferred leads
    _led(context, TopicPartition("t", 1), (2, 3, 1), 3, (3, 1))  # not its preferred
    # Reassigning to a new preferred replica not in the ISR yet: not counted.
    _led(context, TopicPartition("t", 2), (4, 1, 2), 1, (1, 2), adding_replicas=(4,))
    _led(context, TopicPartition("gone", 0), (1, 2), 2, (2,))  # being deleted: not counted
    context.topics_to_be_deleted.add("gone")
    gone = TopicPartition("gone", 0)
    context.replica_states[(gone, 1)] = ReplicaState.REPLICA_DELETION_SUCCESSFUL
    context.replica_states[(gone, 2)] = ReplicaState.REPLICA_DELETION_INELIGIBLE
    assert controller_counts(context) == {
        "PreferredReplicaImbalanceCount": 1,
        "ActiveBrokerCount": 3,
        "TopicsToDeleteCount": 1,
        "ReplicasToDeleteCount": 1,
        "TopicsIneligibleToDeleteCount": 0,
        "ReplicasIneligibleToDeleteCount": 1,
    }


def test_group_counts():
    def group(state, offsets):
        return types.SimpleNamespace(state=state, offsets=dict.fromkeys(range(offsets)))

    groups = {
        "a": group(GroupState.STABLE, 3),
        "b": group(GroupState.EMPTY, 2),
        "c": group(GroupState.STABLE, 0),
    }
    counts = group_counts(groups)
    assert (counts["NumGroups"], counts["NumOffsets"]) == (3, 5)
    assert (counts["NumGroupsStable"], counts["NumGroupsEmpty"]) == (2, 1)
    assert counts["NumGroupsPreparingRebalance"] == 0


def test_isr_meters():
    registry = MetricsRegistry()
    meters = IsrChangeMeters(registry)
    meters.record(3, 2)
    meters.record(2, 3)
    meters.record(2, 3)
    meters.record(3, None)
    meters.record(2, 2)  # nothing changed size
    assert (meters.shrinks.count, meters.expands.count, meters.failed.count) == (1, 2, 1)


def _count(registry, name, **tags):
    tags_text = "".join(f",{k}={v}" for k, v in sorted(tags.items()))
    metric = registry.get(f"kafka.server:type=BrokerTopicMetrics,name={name}{tags_text}")
    return None if metric is None else metric.count


def test_broker_topic_metrics_count_what_kafka_counts():
    registry = MetricsRegistry()
    stats = BrokerTopicStats(registry)
    stats.record_append("t", 0, 300, messages=5)
    stats.record_append("t", 6, 100)  # NOT_LEADER_OR_FOLLOWER: an answer, not a failure
    stats.record_append("t", 10, 2000)  # MESSAGE_TOO_LARGE: rejected bytes
    stats.record_append("u", 19, 50)  # NOT_ENOUGH_REPLICAS: a failure
    assert _count(registry, "MessagesInPerSec", topic="t") == 5
    assert _count(registry, "BytesInPerSec", topic="t") == 300
    assert _count(registry, "TotalProduceRequestsPerSec", topic="t") == 3
    assert _count(registry, "FailedProduceRequestsPerSec", topic="t") == 0
    assert _count(registry, "BytesRejectedPerSec", topic="t") == 2000
    assert _count(registry, "FailedProduceRequestsPerSec", topic="u") == 1
    assert _count(registry, "TotalProduceRequestsPerSec") == 4  # all topics
    assert _count(registry, "FailedProduceRequestsPerSec") == 1

    def answer(topic, code, records=b""):
        return types.SimpleNamespace(topic=topic, error_code=code, records=records)

    stats.record_fetch(False, [answer("t", 0, b"x" * 40), answer("t", 1)])  # out of range
    stats.record_fetch(True, [answer("t", 0, b"x" * 70)])  # a follower's: replication
    stats.record_fetch(False, [answer("t", -1)])  # UNKNOWN_SERVER_ERROR: a failure
    assert _count(registry, "TotalFetchRequestsPerSec", topic="t") == 4
    assert _count(registry, "FailedFetchRequestsPerSec", topic="t") == 1
    assert _count(registry, "BytesOutPerSec", topic="t") == 40
    assert _count(registry, "ReplicationBytesOutPerSec") == 70

    stats.remove_topic("t")
    assert _count(registry, "MessagesInPerSec", topic="t") is None
    assert _count(registry, "MessagesInPerSec") == 5  # the all-topics meters stay


def test_error_codes_in_a_kafka_response_body():
    body = {
        "responses": [
            {"name": "t", "partition_responses": [{"index": 0, "error_code": 0},
                                                  {"index": 1, "error_code": 6}]},
        ],
        "error_code": 0,
    }  # fmt: skip
    assert error_codes_in(body) == {0: 2, 6: 1}
    assert error_codes_in(None) == {0: 1}  # acks=0: no response, no error


def _request(api_key, body=None, version=0):
    return transport.Request(api_key, version, 1, "client", body, connection=None)


async def test_request_metrics_time_requests_and_count_their_errors(autojump_clock):
    registry = MetricsRegistry()
    metrics = RequestMetrics(registry)

    async def produce(request):
        await trio.sleep(0.010)  # local work
        note_remote_time(0.030)  # as a purgatory reports its wait
        await trio.sleep(0.030)
        return {"responses": [{"partition_responses": [{"error_code": 0}, {"error_code": 6}]}]}

    async def refused(request):
        raise transport.RpcError(41, "not controller")

    handlers = metrics.instrument({0: produce, 7: refused}, kafka_protocol=True)
    await handlers[0](_request(0, version=9))
    with pytest.raises(transport.RpcError):
        await handlers[7](_request(7))

    def get(name, **tags):
        tags_text = "".join(f",{k}={v}" for k, v in sorted(tags.items()))
        return registry.get(f"kafka.network:type=RequestMetrics,name={name}{tags_text}")

    assert get("RequestsPerSec", request="Produce", version="9").count == 1
    assert get("TotalTimeMs", request="Produce").max == pytest.approx(40)
    assert get("RemoteTimeMs", request="Produce").max == pytest.approx(30)
    assert get("LocalTimeMs", request="Produce").max == pytest.approx(10)
    assert get("ErrorsPerSec", request="Produce", error="NONE").count == 1
    assert get("ErrorsPerSec", request="Produce", error="NOT_LEADER_OR_FOLLOWER").count == 1
    assert get("ErrorsPerSec", request="ControlledShutdown", error="NOT_CONTROLLER").count == 1
    note_remote_time(5.0)  # outside a request: nobody to tell, nothing happens
