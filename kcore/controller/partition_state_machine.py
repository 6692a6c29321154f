"""Kafka's ZkPartitionStateMachine: moves partitions between NewPartition, OnlinePartition,
OfflinePartition and NonExistentPartition under Kafka's transition table, electing leaders
on the way. Every leader or ISR change is written to the partition's state znode
conditioned on its version (a write that lost a race is re-read and retried) and fenced by
the controller epoch; the brokers hear of it through the request batch.

Runs only on the controller's event task: no locking, one change at a time.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Iterable

import attrs

import zkstub
from actors import Counter
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.controller import decisions
from kcore.controller.context import ControllerContext
from kcore.controller.request_batch import ControllerBrokerRequestBatch
from kcore.states import IllegalStateChangeError, PartitionState, is_valid_transition
from kcore.zk_client import ControllerMovedError, KafkaZkClient

state_change_logger = logging.getLogger("kcore.state.change")

_P = PartitionState


class ElectionStrategy(enum.Enum):
    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    OFFLINE_ALLOW_UNCLEAN = "OfflinePartitionLeaderElectionStrategy(allowUnclean=true)"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"


class StateChangeFailedError(Exception):
    """A partition could not be moved (no live replica to lead, no state in ZooKeeper, ...)."""


# Result per partition: the written leader and ISR, or why it failed.
StateChangeResults = dict[TopicPartition, LeaderAndIsr | Exception]


@attrs.define
class PartitionStateMachine:
    context: ControllerContext
    zk_client: KafkaZkClient
    batch: ControllerBrokerRequestBatch
    unclean_leader_elections: Counter  # Kafka's ControllerStats UncleanLeaderElectionsPerSec
    # A topic's unclean.leader.election.enable (its override, else the broker default).
    unclean_enabled: Callable[[str], Awaitable[bool]]

    # -- start-up -------------------------------------------------------------------------

    async def startup(self) -> None:
        self.initialize_partition_states()
        await self.trigger_online_partition_state_change()

    def initialize_partition_states(self) -> None:
        """From what the context read in ZooKeeper: no state yet is New, a live leader is
        Online, anything else Offline."""
        for tp in self.context.all_partitions():
            leadership = self.context.partition_leadership.get(tp)
            if leadership is None:
                self.context.partition_states[tp] = _P.NEW_PARTITION
            elif self.context.is_replica_online(leadership.leader_and_isr.leader):
                self.context.partition_states[tp] = _P.ONLINE_PARTITION
            else:
                self.context.partition_states[tp] = _P.OFFLINE_PARTITION

    async def trigger_online_partition_state_change(
        self, topic: str | None = None
    ) -> StateChangeResults:
        """Elects leaders for every New or Offline partition (of `topic`, if given) not being
        deleted, with clean election unless a topic allows unclean."""
        partitions = [
            tp
            for tp in self.context.partitions_in_states(_P.NEW_PARTITION, _P.OFFLINE_PARTITION)
            if not self.context.is_topic_queued_for_deletion(tp.topic)
            and (topic is None or tp.topic == topic)
        ]
        return await self.handle_state_changes(
            partitions, _P.ONLINE_PARTITION, ElectionStrategy.OFFLINE
        )

    # -- transitions ----------------------------------------------------------------------

    async def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> StateChangeResults:
        partitions = sorted(partitions)
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            results = await self._do_handle_state_changes(partitions, target, strategy)
        except ControllerMovedError:
            self.batch.clear()
            raise
        except zkstub.ZkError as error:
            # What was written before the error is announced below; the rest stays as it
            # was and is retried by the next trigger.
            state_change_logger.error(
                "Error while moving partitions %s to %s: %r",
                [str(tp) for tp in partitions], target.value, error,
            )  # fmt: skip
            results = dict.fromkeys(partitions, error)
        self.batch.send(self.context.epoch)
        return results

    async def _do_handle_state_changes(
        self,
        partitions: list[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None,
    ) -> StateChangeResults:
        results: StateChangeResults = {}
        valid = []
        for tp in partitions:
            current = self.context.partition_state(tp)
            if is_valid_transition(current, target):
                valid.append(tp)
            else:
                error = IllegalStateChangeError(tp, current, target)
                state_change_logger.error("%s", error)
                results[tp] = error
        if target is _P.ONLINE_PARTITION:
            # (sets for membership: these lists hold every partition a broker had)
            uninitialized = [
                tp for tp in valid if self.context.partition_state(tp) is _P.NEW_PARTITION
            ]
            new = set(uninitialized)
            to_elect = [tp for tp in valid if tp not in new]
            if uninitialized:
                results |= await self._initialize_leader_and_isr(uninitialized)
            if to_elect:
                results |= await self._elect_leaders(to_elect, strategy or ElectionStrategy.OFFLINE)
            moving = set(valid)
            for tp, outcome in results.items():
                if tp in moving and isinstance(outcome, LeaderAndIsr):
                    self._put_state(tp, _P.ONLINE_PARTITION, outcome)
        else:
            for tp in valid:
                self._put_state(tp, target)
        return results

    def _put_state(
        self, tp: TopicPartition, target: PartitionState, leader_and_isr: LeaderAndIsr | None = None
    ) -> None:
        current = self.context.partition_state(tp)
        suffix = "" if leader_and_isr is None else f" with state {leader_and_isr}"
        state_change_logger.info(
            "Changed partition %s from %s to %s%s", tp, current.value, target.value, suffix
        )
        self.context.partition_states[tp] = target

    async def _initialize_leader_and_isr(
        self, partitions: list[TopicPartition]
    ) -> StateChangeResults:
        """New partitions: leader and ISR from the live replicas, written by creating the
        state znodes; LeaderAndIsr (isNew) to the live replicas."""
        live = self.context.live_broker_ids
        results: StateChangeResults = {}
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            initial = decisions.initial_leader_and_isr(self.context.replicas(tp), live)
            if initial is None:
                error = StateChangeFailedError(
                    f"Controller failed to elect a leader for new partition {tp}: none of its "
                    f"replicas {list(self.context.replicas(tp))} is live; it stays New"
                )
                state_change_logger.error("%s", error)
                results[tp] = error
                continue
            to_create[tp] = LeaderIsrAndControllerEpoch(initial, self.context.epoch)
        if not to_create:
            return results
        created = await self.zk_client.create_partition_states(
            to_create, self.context.epoch_zk_version
        )
        for tp, error in created.items():
            if error is not None:
                state_change_logger.error(
                    "Controller failed to initialize the state of new partition %s: %r", tp, error
                )
                results[tp] = error
                continue
            state = to_create[tp]
            self.context.partition_leadership[tp] = state
            self.batch.add_leader_and_isr(
                state.leader_and_isr.isr, tp, state, self.context.assignment(tp), is_new=True
            )
            results[tp] = state.leader_and_isr
        return results

    async def _elect_leaders(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy
    ) -> StateChangeResults:
        """Elects until every partition is decided: a write that lost to a concurrent ISR
        change (the leader's own) is re-read and decided again."""
        results: StateChangeResults = {}
        remaining = partitions
        while remaining:
            finished, remaining = await self._try_elect_leaders(remaining, strategy)
            results |= finished
        return results

    async def _try_elect_leaders(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy
    ) -> tuple[StateChangeResults, list[TopicPartition]]:
        results: StateChangeResults = {}
        current: dict[TopicPartition, LeaderAndIsr] = {}
        states = await self.zk_client.get_partition_states(partitions)
        for tp in partitions:
            state = states[tp]
            if state is None:
                results[tp] = StateChangeFailedError(
                    f"Failed to elect a leader for {tp}: it has no state in ZooKeeper"
                )
            elif state.controller_epoch > self.context.epoch:
                raise ControllerMovedError(
                    f"Aborted leader election for {tp}: its state was written by controller "
                    f"epoch {state.controller_epoch}, newer than this controller's "
                    f"{self.context.epoch}"
                )
            else:
                current[tp] = state.leader_and_isr
        elections = await self._decide(current, strategy)
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, outcome in elections.items():
            if outcome.leader_and_isr is None:
                error = StateChangeFailedError(
                    f"Failed to elect leader for partition {tp} under strategy {strategy.value}"
                    f": no eligible replica (ISR {list(current[tp].isr)}, live replicas "
                    f"{list(outcome.recipients)})"
                )
                state_change_logger.error("%s", error)
                results[tp] = error
            else:
                to_write[tp] = outcome.leader_and_isr
        if not to_write:
            return results, []
        written = await self.zk_client.update_leader_and_isr(
            to_write, self.context.epoch, self.context.epoch_zk_version
        )
        for tp, outcome in written.finished.items():
            if isinstance(outcome, Exception):
                results[tp] = outcome
                continue
            election = elections[tp]
            if election.unclean:
                self.unclean_leader_elections.inc()
                state_change_logger.warning(
                    "Unclean leader election for %s: %d was not in the ISR %s; records it "
                    "did not have are lost",
                    tp, outcome.leader, list(current[tp].isr),
                )  # fmt: skip
            state = LeaderIsrAndControllerEpoch(outcome, self.context.epoch)
            self.context.partition_leadership[tp] = state
            self.batch.add_leader_and_isr(
                election.recipients, tp, state, self.context.assignment(tp)
            )
            results[tp] = outcome
        return results, sorted(written.to_retry)

    async def _decide(
        self, current: dict[TopicPartition, LeaderAndIsr], strategy: ElectionStrategy
    ) -> dict[TopicPartition, decisions.ElectionResult]:
        context = self.context
        live = context.live_broker_ids
        outcomes = {}
        for tp, leader_and_isr in current.items():
            assignment = context.replicas(tp)
            match strategy:
                case ElectionStrategy.OFFLINE | ElectionStrategy.OFFLINE_ALLOW_UNCLEAN:
                    unclean = strategy is ElectionStrategy.OFFLINE_ALLOW_UNCLEAN
                    if not unclean and not decisions.has_live_isr_member(leader_and_isr, live):
                        unclean = await self.unclean_enabled(tp.topic)
                    outcome = decisions.leader_for_offline(
                        assignment, leader_and_isr, live, unclean
                    )
                case ElectionStrategy.CONTROLLED_SHUTDOWN:
                    outcome = decisions.leader_for_controlled_shutdown(
                        assignment,
                        leader_and_isr,
                        context.live_or_shutting_down_broker_ids,
                        context.shutting_down_broker_ids,
                    )
                case ElectionStrategy.PREFERRED:
                    outcome = decisions.leader_for_preferred(assignment, leader_and_isr, live)
            outcomes[tp] = outcome
        return outcomes
