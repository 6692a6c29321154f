"""Which partitions of a LeaderAndIsr request a broker accepts, and as what (the decision
alone: `decide_leader_and_isr`, no replica manager)."""

from kcore.common import TopicPartition
from kcore.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from kcore.server.leader_and_isr import StaleLeaderEpoch, decide_leader_and_isr

ME = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
STALE_CONTROLLER_EPOCH = 11


def _state(topic, partition, *, leader, epoch, replicas=(1, 2, 3)):
    return LeaderAndIsrPartitionState(
        topic, partition, 5, leader, epoch, tuple(replicas), 0, tuple(replicas)
    )


def _request(*states, controller_epoch=5):
    return LeaderAndIsrRequest(2, controller_epoch, 10, tuple(states), ())


def _decide(request, *, controller_epoch=5, hosted=None):
    return decide_leader_and_isr(
        request, broker_id=ME, controller_epoch=controller_epoch, hosted_leader_epochs=hosted or {}
    )


def test_a_request_from_an_older_controller_is_refused_whole():
    decision = _decide(_request(_state("t", 0, leader=ME, epoch=1), controller_epoch=4))
    assert decision.stale_controller_epoch
    assert (decision.leaders, decision.followers, decision.new_partitions) == ({}, {}, ())


def test_the_same_or_a_newer_controller_epoch_is_obeyed():
    for epoch in (5, 6):
        decision = _decide(_request(_state("t", 0, leader=ME, epoch=1), controller_epoch=epoch))
        assert not decision.stale_controller_epoch
        assert list(decision.leaders) == [TopicPartition("t", 0)]


def test_new_partitions_lead_or_follow_as_named_and_are_created_first():
    lead, follow = _state("t", 1, leader=ME, epoch=0), _state("t", 0, leader=2, epoch=0)
    decision = _decide(_request(lead, follow))
    assert decision.leaders == {TopicPartition("t", 1): lead}
    assert decision.followers == {TopicPartition("t", 0): follow}
    assert decision.new_partitions == (TopicPartition("t", 0), TopicPartition("t", 1))
    assert decision.error_codes == {TopicPartition("t", 0): 0, TopicPartition("t", 1): 0}


def test_a_hosted_partition_changes_only_with_a_newer_leader_epoch():
    hosted = {TopicPartition("t", 0): 3, TopicPartition("t", 1): 3}
    newer, same = _state("t", 0, leader=2, epoch=4), _state("t", 1, leader=2, epoch=3)
    decision = _decide(_request(newer, same), hosted=hosted)
    assert decision.followers == {TopicPartition("t", 0): newer}
    assert decision.new_partitions == ()  # both hosted already
    assert decision.error_codes == {
        TopicPartition("t", 0): 0,
        TopicPartition("t", 1): STALE_CONTROLLER_EPOCH,
    }
    assert decision.stale_leader_epochs == (StaleLeaderEpoch(TopicPartition("t", 1), 3, 3),)


def test_a_partition_this_broker_is_no_replica_of_is_unknown_to_it():
    decision = _decide(_request(_state("t", 0, leader=2, epoch=0, replicas=(2, 3))))
    assert decision.error_codes == {TopicPartition("t", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert (decision.leaders, decision.followers, decision.new_partitions) == ({}, {}, ())


def test_answers_come_in_partition_order_whatever_the_request_order():
    states = [_state(t, p, leader=ME, epoch=0) for t, p in (("b", 0), ("a", 2), ("a", 10))]
    decision = _decide(_request(*states))
    expected = [TopicPartition("a", 2), TopicPartition("a", 10), TopicPartition("b", 0)]
    assert list(decision.error_codes) == expected
    assert list(decision.leaders) == expected
