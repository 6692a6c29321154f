"""What the controller's state machines decide, as pure functions (Kafka's
PartitionStateMachine leaderFor* helpers and ReplicaStateMachine's ISR removal): given a
partition's assignment, its current leader and ISR and who is alive, the new leader and ISR
and the brokers that must hear of it. The state machines add the ZooKeeper writes and the
requests to brokers."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

from kcore import election
from kcore.common import INITIAL_LEADER_EPOCH, NO_LEADER, LeaderAndIsr


@attrs.frozen
class ElectionResult:
    leader_and_isr: LeaderAndIsr | None  # None: no replica may lead
    recipients: tuple[int, ...]  # the replicas that get the LeaderAndIsr
    unclean: bool = False  # the leader came from outside the ISR (data may be lost)


def initial_leader_and_isr(assignment: Sequence[int], live: Collection[int]) -> LeaderAndIsr | None:
    """A new partition: the first live assigned replica leads, every live one is in the ISR
    (Kafka's initializeLeaderAndIsrForPartitions); None when no replica is live."""
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], INITIAL_LEADER_EPOCH, live_replicas)


def leader_for_offline(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    unclean_allowed: bool,
) -> ElectionResult:
    """Kafka's leaderForOffline: the first live ISR member in assignment order; an unclean
    leader (a live replica outside the ISR) only when allowed, with an ISR of itself alone."""
    live_replicas = tuple(r for r in assignment if r in live)
    leader = election.offline_partition_leader_election(
        assignment, current.isr, live_replicas, unclean_allowed
    )
    if leader is None:
        return ElectionResult(None, live_replicas)
    if leader in current.isr:
        new_isr = tuple(r for r in current.isr if r in live)
        return ElectionResult(current.new_leader_and_isr(leader, new_isr), live_replicas)
    return ElectionResult(current.new_leader_and_isr(leader, (leader,)), live_replicas, True)


def has_live_isr_member(current: LeaderAndIsr, live: Collection[int]) -> bool:
    """Whether a clean election can succeed (otherwise the unclean setting is consulted)."""
    return any(r in live for r in current.isr)


def leader_for_controlled_shutdown(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> ElectionResult:
    """Kafka's leaderForControlledShutdown: leadership moves to the first live ISR member
    not shutting down; the shutting-down brokers leave the ISR. The shutting-down replica
    still hears of it (it becomes a follower and stops taking writes)."""
    recipients = tuple(r for r in assignment if r in live_or_shutting_down)
    leader = election.controlled_shutdown_partition_leader_election(
        assignment, current.isr, recipients, shutting_down
    )
    if leader is None:
        return ElectionResult(None, recipients)
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), recipients)


def leader_for_preferred(
    assignment: Sequence[int], current: LeaderAndIsr, live: Collection[int]
) -> ElectionResult:
    """Kafka's leaderForPreferredReplica: the first assigned replica, if live and in sync."""
    live_replicas = tuple(r for r in assignment if r in live)
    leader = election.preferred_replica_partition_leader_election(assignment, current.isr, live)
    if leader is None:
        return ElectionResult(None, live_replicas)
    return ElectionResult(current.new_leader(leader), live_replicas)


def without_replica(current: LeaderAndIsr, replica: int) -> LeaderAndIsr:
    """Kafka's removal of an offline replica from the ISR: the ISR is never emptied (its
    last member stays, so a clean election can wait for it), and a leader that is removed
    leaves the partition with no leader."""
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    leader = NO_LEADER if current.leader == replica else current.leader
    return current.new_leader_and_isr(leader, isr)
