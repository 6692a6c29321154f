"""The controller's pure decisions (Kafka's PartitionStateMachine leaderFor* helpers and the
ReplicaStateMachine's ISR removal): new leader, ISR, epoch and who must hear of it."""

from kcore.common import NO_LEADER, LeaderAndIsr
from kcore.controller import decisions


def test_a_new_partition_is_led_by_its_first_live_replica_with_every_live_one_in_sync():
    assert decisions.initial_leader_and_isr((2, 3, 1), live={1, 3}) == LeaderAndIsr(3, 0, (3, 1))
    assert decisions.initial_leader_and_isr((2, 3), live={1}) is None


def test_offline_election_picks_the_first_live_isr_member_in_assignment_order():
    current = LeaderAndIsr(1, 4, (1, 3, 2), partition_epoch=7)
    result = decisions.leader_for_offline((1, 2, 3), current, live={2, 3}, unclean_allowed=False)
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (3, 2), partition_epoch=7)
    assert result.recipients == (2, 3)
    assert not result.unclean


def test_offline_election_without_a_live_isr_member_waits_unless_unclean_is_allowed():
    current = LeaderAndIsr(1, 4, (1,))
    clean = decisions.leader_for_offline((1, 2, 3), current, live={3}, unclean_allowed=False)
    assert clean.leader_and_isr is None and clean.recipients == (3,)
    unclean = decisions.leader_for_offline((1, 2, 3), current, live={3}, unclean_allowed=True)
    assert unclean.leader_and_isr == LeaderAndIsr(3, 5, (3,))
    assert unclean.unclean


def test_has_live_isr_member():
    assert decisions.has_live_isr_member(LeaderAndIsr(1, 0, (1, 2)), live={2})
    assert not decisions.has_live_isr_member(LeaderAndIsr(1, 0, (1, 2)), live={3})


def test_controlled_shutdown_moves_leadership_and_drops_the_broker_from_the_isr():
    current = LeaderAndIsr(1, 2, (1, 2, 3))
    result = decisions.leader_for_controlled_shutdown(
        (1, 2, 3), current, live_or_shutting_down={1, 2, 3}, shutting_down={1}
    )
    assert result.leader_and_isr == LeaderAndIsr(2, 3, (2, 3))
    # The shutting-down broker hears of it too: it must stop acting as leader.
    assert result.recipients == (1, 2, 3)


def test_controlled_shutdown_of_the_last_isr_member_finds_no_leader():
    current = LeaderAndIsr(1, 2, (1,))
    result = decisions.leader_for_controlled_shutdown(
        (1, 2), current, live_or_shutting_down={1, 2}, shutting_down={1}
    )
    assert result.leader_and_isr is None


def test_preferred_election_needs_the_first_replica_live_and_in_sync():
    current = LeaderAndIsr(2, 3, (2, 1))
    result = decisions.leader_for_preferred((1, 2), current, live={1, 2})
    assert result.leader_and_isr == LeaderAndIsr(1, 4, (2, 1))
    out_of_sync = decisions.leader_for_preferred((1, 2), LeaderAndIsr(2, 3, (2,)), live={1, 2})
    assert out_of_sync.leader_and_isr is None
    dead = decisions.leader_for_preferred((1, 2), current, live={2})
    assert dead.leader_and_isr is None


def test_removing_a_replica_never_empties_the_isr_and_a_removed_leader_leaves_none():
    assert decisions.without_replica(LeaderAndIsr(1, 3, (1, 2)), 2) == LeaderAndIsr(1, 4, (1,))
    assert decisions.without_replica(LeaderAndIsr(1, 3, (1, 2)), 1) == LeaderAndIsr(
        NO_LEADER, 4, (2,)
    )
    # The last ISR member stays: a clean election can wait for it to come back.
    assert decisions.without_replica(LeaderAndIsr(1, 3, (1,)), 1) == LeaderAndIsr(
        NO_LEADER, 4, (1,)
    )
