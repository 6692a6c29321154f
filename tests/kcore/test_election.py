"""Vectors from Kafka's PartitionLeaderElectionAlgorithmsTest."""

from kcore.election import (
    controlled_shutdown_partition_leader_election,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)


def test_offline_election_picks_first_live_isr_replica() -> None:
    assert offline_partition_leader_election([2, 4], [2, 4], {4}, unclean=False) == 4


def test_offline_election_without_live_isr_and_unclean_disabled_elects_nobody() -> None:
    assert offline_partition_leader_election([2, 4], [2], {4}, unclean=False) is None


def test_offline_election_unclean_falls_back_to_first_live_replica() -> None:
    assert offline_partition_leader_election([2, 4], [2], {4}, unclean=True) == 4
    assert offline_partition_leader_election([3, 2, 4], [], {4, 2}, unclean=True) == 2


def test_offline_election_prefers_isr_even_when_unclean_allowed() -> None:
    assert offline_partition_leader_election([2, 4, 5], [5], {4, 5}, unclean=True) == 5


def test_offline_election_follows_assignment_order_not_isr_order() -> None:
    assert offline_partition_leader_election([4, 2], [2, 4], {2, 4}, unclean=False) == 4


def test_reassign_election() -> None:
    assert reassign_partition_leader_election([2, 4], [2, 4], {4}) == 4
    assert reassign_partition_leader_election([2, 4], [2], set()) is None
    assert reassign_partition_leader_election([2], [], {2}) is None


def test_preferred_replica_election() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [2, 4], {2, 4}) == 2
    assert preferred_replica_partition_leader_election([2, 4], [2], set()) is None
    assert preferred_replica_partition_leader_election([2, 4], [2, 4], {4}) is None
    assert preferred_replica_partition_leader_election([2, 4], [4], {2, 4}) is None
    assert preferred_replica_partition_leader_election([2, 4], [], set()) is None
    assert preferred_replica_partition_leader_election([], [2], {2}) is None


def test_controlled_shutdown_election() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2}) == 4
    assert controlled_shutdown_partition_leader_election([2, 4], [2], {2, 4}, {2}) is None
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2, 4}) is None
