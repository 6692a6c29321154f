from kcore.common import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.controller.context import ControllerContext


def _broker(broker_id, epoch):
    return Broker(broker_id, (EndPoint(f"broker-{broker_id}", 9092),), None, epoch)


def test_live_and_shutting_down_brokers():
    context = ControllerContext()
    context.add_live_brokers([_broker(1, 10), _broker(2, 20), _broker(3, 30)])
    context.shutting_down_broker_ids.add(3)
    assert context.live_broker_ids == {1, 2}
    assert context.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert context.is_replica_online(3, include_shutting_down=True)
    assert not context.is_replica_online(3)
    context.remove_live_brokers([3])
    assert context.live_broker_epochs() == {1: 10, 2: 20}
    assert context.shutting_down_broker_ids == set()


def test_partitions_by_topic_broker_and_leader():
    context = ControllerContext()
    context.set_topic_assignment(
        "t", "id", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))}
    )
    context.partition_leadership[TopicPartition("t", 1)] = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(2, 0, (2, 3)), 1
    )
    assert context.partitions_on_broker(2) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert context.partitions_on_broker(3) == [TopicPartition("t", 1)]
    assert context.partitions_led_by(2) == [TopicPartition("t", 1)]
    assert context.replicas(TopicPartition("t", 9)) == ()
    context.remove_topic("t")
    assert context.all_partitions() == [] and context.partition_leadership == {}


def test_reset_forgets_the_cluster_but_keeps_the_epoch():
    context = ControllerContext(epoch=7, epoch_zk_version=6)
    context.add_live_brokers([_broker(1, 10)])
    context.set_topic_assignment("t", None, {0: ReplicaAssignment((1,))})
    context.reset()
    assert (context.epoch, context.epoch_zk_version) == (7, 6)
    assert context.live_brokers == {} and context.all_topics == set()
