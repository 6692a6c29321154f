"""Kafka's partition leader election algorithms (PartitionLeaderElectionAlgorithms).

Each takes the partition's replica list in preference order, its ISR and the live brokers,
and returns the new leader's broker id, or None when no replica qualifies.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence


def offline_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean: bool
) -> int | None:
    """First assigned replica that is live and in the ISR; failing that, and only when
    unclean election is enabled, the first live assigned replica (data may be lost)."""
    leader = _first(assignment, lambda r: r in live and r in isr)
    if leader is None and unclean:
        leader = _first(assignment, lambda r: r in live)
    return leader


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """First replica of the target assignment that is live and in the ISR."""
    return _first(reassignment, lambda r: r in live and r in isr)


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """The preferred (first assigned) replica, only if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    """First assigned replica that is live, in the ISR and not shutting down."""
    return _first(assignment, lambda r: r in live and r in isr and r not in shutting_down)


def _first(replicas: Sequence[int], qualifies: Callable[[int], bool]) -> int | None:
    return next((replica for replica in replicas if qualifies(replica)), None)
