"""What the partition state machine decides about a batch of partitions, from what it read
first (Kafka's PartitionStateMachine initializeLeaderAndIsrForPartitions and
doElectLeaderForPartitions, without their ZooKeeper calls): the leader and ISR each new
partition starts with, and each electable partition's new leader and ISR, or why it has
none. Sans-IO: the state machine reads the partitions' states and the topic configs the
decision needs, calls these, then writes the outcome.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Collection, Iterable, Mapping

from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.config import InvalidTopicConfigError, KafkaConfig, TopicConfig
from kcore.controller import decisions, reassignment
from kcore.controller.context import ControllerContext
from kcore.zk_client import ControllerMovedError

logger = logging.getLogger("kcore.controller")


class ElectionStrategy(enum.Enum):
    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    # An ElectLeaders(UNCLEAN) request: the offline election with unclean allowed, whatever
    # the topic's setting (Kafka's OfflinePartitionLeaderElectionStrategy(allowUnclean=true)).
    UNCLEAN = "OfflinePartitionLeaderElectionStrategy(allowUnclean=true)"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"
    # A reassignment completes: the first live, in-sync target replica (Kafka's
    # ReassignPartitionLeaderElectionStrategy).
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"


class StateChangeFailedError(Exception):
    """A partition could not be moved (no live replica to lead, no state in ZooKeeper, ...)."""


def initial_leader_and_isrs(
    context: ControllerContext, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | StateChangeFailedError]:
    """New partitions: the first live replica leads, the live replicas are the ISR, at
    this controller's epoch; an error for a partition none of whose replicas is live."""
    live = context.live_broker_ids
    outcomes: dict[TopicPartition, LeaderIsrAndControllerEpoch | StateChangeFailedError] = {}
    for tp in partitions:
        initial = decisions.initial_leader_and_isr(context.replicas(tp), live)
        if initial is None:
            outcomes[tp] = StateChangeFailedError(
                f"Controller failed to elect a leader for new partition {tp}: none of its "
                f"replicas {list(context.replicas(tp))} is live; it stays New"
            )
        else:
            outcomes[tp] = LeaderIsrAndControllerEpoch(initial, context.epoch)
    return outcomes


def current_leader_and_isrs(
    context: ControllerContext,
    states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch | None],
) -> dict[TopicPartition, LeaderAndIsr | StateChangeFailedError]:
    """What each election starts from: the leader and ISR read from ZooKeeper, or an
    error for a partition with no state there. ControllerMovedError when a state was
    written by a newer controller (this one is a zombie)."""
    outcomes: dict[TopicPartition, LeaderAndIsr | StateChangeFailedError] = {}
    for tp, state in states.items():
        if state is None:
            outcomes[tp] = StateChangeFailedError(
                f"Failed to elect a leader for {tp}: it has no state in ZooKeeper"
            )
        elif state.controller_epoch > context.epoch:
            raise ControllerMovedError(
                f"Aborted leader election for {tp}: its state was written by controller "
                f"epoch {state.controller_epoch}, newer than this controller's {context.epoch}"
            )
        else:
            outcomes[tp] = state.leader_and_isr
    return outcomes


def topics_consulted_for_unclean_election(
    context: ControllerContext,
    current: Mapping[TopicPartition, LeaderAndIsr],
    strategy: ElectionStrategy,
) -> set[str]:
    """The topics whose unclean.leader.election.enable the election needs: those of the
    partitions an offline election cannot give a clean leader (no live ISR member)."""
    if strategy is not ElectionStrategy.OFFLINE:
        return set()
    live = context.live_broker_ids
    return {
        tp.topic
        for tp, leader_and_isr in current.items()
        if not decisions.has_live_isr_member(leader_and_isr, live)
    }


def unclean_leader_election_enabled(
    topic: str, overrides: Mapping[str, str], config: KafkaConfig | None
) -> bool:
    """The topic's unclean.leader.election.enable (its override, else the broker's
    default); an invalid config counts as none."""
    try:
        return TopicConfig.from_dict(dict(overrides), config).unclean_leader_election_enable
    except InvalidTopicConfigError as error:
        logger.error("Ignoring the invalid config of topic %s: %s", topic, error)
        return TopicConfig.from_dict({}, config).unclean_leader_election_enable


def elect_leaders(
    context: ControllerContext,
    current: Mapping[TopicPartition, LeaderAndIsr],
    strategy: ElectionStrategy,
    unclean_topics: Collection[str],
) -> dict[TopicPartition, decisions.ElectionResult | StateChangeFailedError]:
    """Each partition's new leader and ISR (with the replicas to tell, and whether the
    leader is unclean) under the strategy, or an error when no replica may lead.
    `unclean_topics`: the topics that allow an unclean leader."""
    live = context.live_broker_ids
    outcomes: dict[TopicPartition, decisions.ElectionResult | StateChangeFailedError] = {}
    for tp, leader_and_isr in current.items():
        assignment = context.replicas(tp)
        match strategy:
            case ElectionStrategy.OFFLINE:
                unclean = tp.topic in unclean_topics and not decisions.has_live_isr_member(
                    leader_and_isr, live
                )
                election = decisions.leader_for_offline(assignment, leader_and_isr, live, unclean)
            case ElectionStrategy.UNCLEAN:
                election = decisions.leader_for_offline(
                    assignment,
                    leader_and_isr,
                    live,
                    not decisions.has_live_isr_member(leader_and_isr, live),
                )
            case ElectionStrategy.PREFERRED:
                election = decisions.leader_for_preferred(assignment, leader_and_isr, live)
            case ElectionStrategy.REASSIGN:
                election = reassignment.leader_for_reassign(
                    context.assignment(tp).target_replicas, leader_and_isr, live
                )
            case ElectionStrategy.CONTROLLED_SHUTDOWN:
                election = decisions.leader_for_controlled_shutdown(
                    assignment,
                    leader_and_isr,
                    context.live_or_shutting_down_broker_ids,
                    context.shutting_down_broker_ids,
                )
        if election.leader_and_isr is None:
            outcomes[tp] = StateChangeFailedError(
                f"Failed to elect leader for partition {tp} under strategy {strategy.value}"
                f": no eligible replica (ISR {list(leader_and_isr.isr)}, live replicas "
                f"{list(election.recipients)})"
            )
        else:
            outcomes[tp] = election
    return outcomes
