"""Partition reassignment's decisions (kcore.controller.reassignment), as Kafka 3.5's controller
makes them: what is written while a reassignment runs, when it is complete, what a request
is answered, where the leader goes at the end."""

from __future__ import annotations

from kcore import errors
from kcore.common import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.controller import events as ev
from kcore.controller import reassignment as r
from kcore.controller.context import ControllerContext

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
UNKNOWN = TopicPartition("u", 0)


def _context(live=(1, 2, 3, 4), assignments=None) -> ControllerContext:
    context = ControllerContext()
    context.add_live_brokers(Broker(b, (EndPoint("h", 9000 + b),)) for b in live)
    assignments = assignments or {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 4))}
    context.set_topic_assignment("t", None, assignments)
    for p in assignments:
        context.partition_leadership[TopicPartition("t", p)] = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(1, 1, (1, 2, 3), 1), 1
        )
    return context


def test_a_reassignment_is_written_as_target_then_original_replicas():
    # Kafka's ControllerContextTest cases: RS = TRS + ORS, in that order.
    moving = r.reassign_to(ReplicaAssignment((1, 2, 3)), [2, 3, 4])
    assert moving == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    # The original replicas, in the order the reassignment left them (Kafka's caveat: a
    # cancellation cannot bring the original order back).
    assert r.origin_replicas(moving) == (2, 3, 1)
    assert moving.target_replicas == (2, 3, 4)
    assert r.reassign_to(ReplicaAssignment((1, 2, 3)), [4, 5, 6]) == ReplicaAssignment(
        (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)
    )
    # An overlap keeps the target's order (the original order cannot come back).
    assert r.reassign_to(ReplicaAssignment((1, 2, 3)), [3, 4, 2]) == ReplicaAssignment(
        (3, 4, 2, 1), (4,), (1,)
    )
    # Done: RS = TRS, nothing adding or removing.
    assert r.completed(moving) == ReplicaAssignment((2, 3, 4))


def test_a_new_target_replaces_the_one_in_progress_and_none_cancels():
    moving = ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    # The original replicas stay {1, 2, 3}: 4 is no longer wanted, 5 comes instead.
    replaced = r.build_reassignment(moving, [2, 3, 5])
    assert replaced == ReplicaAssignment((2, 3, 5, 1), (5,), (1,))
    assert r.replicas_no_longer_needed(moving, replaced) == (4,)
    # Cancelled: back to the original replicas, the adding one stopped.
    cancelled = r.build_reassignment(moving, None)
    assert cancelled == ReplicaAssignment((2, 3, 1))
    assert r.replicas_no_longer_needed(moving, cancelled) == (4,)
    # Nothing to cancel.
    assert r.build_reassignment(ReplicaAssignment((1, 2, 3)), None) is None


def test_a_reassignment_is_complete_when_every_target_replica_is_in_sync():
    moving = ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert not r.is_reassignment_complete(moving, (1, 2, 3))
    assert r.is_reassignment_complete(moving, (1, 2, 3, 4))
    assert not r.is_reassignment_complete(moving, None)  # no state: cannot tell
    assert r.is_reassignment_complete(ReplicaAssignment((1, 2, 3)), (1,))


def test_a_request_is_checked_as_kafka_checks_it():
    context = _context(live=(1, 2, 3, 4))
    asked = {
        T0: [2, 3, 4],
        T1: None,  # cancels what is not running
        UNKNOWN: [1, 2],
        TopicPartition("t", 5): [],
        TopicPartition("t", 6): [1, 1],
        TopicPartition("t", 7): [1, -2],
        TopicPartition("t", 8): [1, 9],  # 9 is not alive
    }
    to_reassign, refused = r.plan_reassignments(context, asked, validate=True)
    assert to_reassign == {
        T0: ReplicaAssignment((2, 3, 4, 1), (4,), (1,)),
        UNKNOWN: ReplicaAssignment((1, 2), (1, 2), ()),
    }
    assert isinstance(refused[T1], errors.NoReassignmentInProgressError)
    for p, reason in ((5, "Empty"), (6, "Duplicate"), (7, "Invalid broker id"), (8, "not alive")):
        error = refused[TopicPartition("t", p)]
        assert isinstance(error, errors.InvalidReplicaAssignmentError)
        assert reason in str(error)
    # An unknown partition passes the checks but is not started (the topic check).
    assert isinstance(r.refusal_to_start(context, UNKNOWN), errors.UnknownTopicOrPartitionError)
    assert r.refusal_to_start(context, T0) is None
    context.topics_to_be_deleted.add("t")
    assert isinstance(r.refusal_to_start(context, T0), errors.UnknownTopicOrPartitionError)
    # Through the znode nothing is checked (Kafka's processZkPartitionReassignment).
    to_reassign, refused = r.plan_reassignments(
        context, {TopicPartition("t", 8): [1, 9]}, validate=False
    )
    assert to_reassign and not refused


def test_listing_shows_only_partitions_being_reassigned():
    context = _context(
        assignments={0: ReplicaAssignment((2, 3, 4, 1), (4,), (1,)), 1: ReplicaAssignment((2,))}
    )
    context.partitions_being_reassigned.add(T0)
    assert r.listed_reassignments(context, None) == {T0: context.assignment(T0)}
    assert r.listed_reassignments(context, [T0, T1, UNKNOWN]) == {T0: context.assignment(T0)}


def test_the_znode_loses_the_partitions_done_and_is_deleted_when_empty():
    asked = {T0: (2, 3, 4), T1: (1, 2)}
    done = r.without_partitions(asked, lambda tp, replicas: tp == T0 and replicas == (2, 3, 4))
    assert done == {T1: (1, 2)}
    # A partition whose znode entry asks for something else stays.
    assert r.without_partitions(asked, lambda tp, replicas: replicas == (9,)) == asked
    assert r.without_partitions(asked, lambda tp, _replicas: True) == {}


def test_the_leader_moves_into_the_target_only_when_it_must():
    assert r.leader_move((2, 3, 4), 2, True) is r.LeaderMove.BUMP_EPOCH
    assert r.leader_move((2, 3, 4), 1, True) is r.LeaderMove.ELECT  # removed
    assert r.leader_move((2, 3, 4), 2, False) is r.LeaderMove.ELECT  # in the target, dead
    current = LeaderAndIsr(1, 5, (1, 2, 3, 4), 7)
    elected = r.leader_for_reassign((4, 3, 2), current, live={2, 3, 4})
    assert elected.leader_and_isr == LeaderAndIsr(4, 6, (1, 2, 3, 4), 7)
    assert elected.recipients == (4, 3, 2)
    # Only in-sync, live target replicas may lead.
    assert r.leader_for_reassign((4, 3), current, live={2}).leader_and_isr is None
    assert r.leader_for_reassign((5, 3), current, live={3, 5}).leader_and_isr.leader == 3


def test_preempted_reassignment_requests_answer_not_controller():
    answers = []
    ev.ApiPartitionReassignment({T0: (2, 3, 4)}, answers.append).preempt()
    ev.ListPartitionReassignments(None, answers.append).preempt()
    assert answers == [None, None]
