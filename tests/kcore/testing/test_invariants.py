"""Each safety invariant trips on a snapshot that breaks it, and only then."""

import pytest

from kcore.common import TopicPartition
from kcore.testing.invariants import (
    ClusterSnapshot,
    ControllerView,
    InvariantChecker,
    InvariantViolation,
    ReplicaView,
)

TP = TopicPartition("t", 0)


def _controllers(*views):
    return ClusterSnapshot(tuple(ControllerView(*v) for v in views), ())


def _replicas(*views):
    return ClusterSnapshot((), tuple(ReplicaView(b, 1, TP, *rest) for b, *rest in views))


def test_two_active_controllers_in_one_epoch():
    checker = InvariantChecker()
    checker.observe(_controllers((1, 1, True, 1), (2, 1, False, 1)))
    checker.observe(_controllers((1, 1, False, 1), (2, 1, True, 2)))  # a new epoch: fine
    with pytest.raises(InvariantViolation, match="both active controllers in epoch 2"):
        checker.observe(_controllers((1, 1, True, 2), (2, 1, True, 2)))


def test_controller_epoch_going_back():
    checker = InvariantChecker()
    checker.observe(_controllers((1, 1, False, 3)))
    with pytest.raises(InvariantViolation, match="went back"):
        checker.observe(_controllers((1, 1, False, 2)))


def test_leader_epoch_going_back_and_leader_outside_its_isr():
    checker = InvariantChecker()
    checker.observe(_replicas((1, True, 2, (1, 2), 0)))
    with pytest.raises(InvariantViolation, match="leader epoch went back"):
        checker.observe(_replicas((1, True, 1, (1, 2), 0)))
    with pytest.raises(InvariantViolation, match="not in its ISR"):
        InvariantChecker().observe(_replicas((1, True, 2, (2, 3), 0)))


def test_two_leaders_in_one_leader_epoch():
    checker = InvariantChecker()
    checker.observe(_replicas((1, True, 4, (1, 2), 0), (2, False, 4, (1, 2), 0)))
    with pytest.raises(InvariantViolation, match="both lead epoch 4"):
        checker.observe(_replicas((1, True, 4, (1, 2), 0), (2, True, 4, (1, 2), 0)))


def test_leader_high_watermark_going_back():
    checker = InvariantChecker()
    checker.observe(_replicas((1, True, 1, (1,), 5)))
    with pytest.raises(InvariantViolation, match="high watermark went back"):
        checker.observe(_replicas((1, True, 1, (1,), 4)))


def test_committed_records_changing_unless_unclean_election_is_on():
    checker = InvariantChecker()
    checker.observe_committed(TP, [(0, b"a"), (1, b"b")])
    checker.observe_committed(TP, [(1, b"b"), (2, b"c")])
    with pytest.raises(InvariantViolation, match="committed offset 1 changed"):
        checker.observe_committed(TP, [(1, b"x")])
    unclean = InvariantChecker(committed_may_change=True)
    unclean.observe_committed(TP, [(1, b"b")])
    unclean.observe_committed(TP, [(1, b"x")])
