"""Kafka's ZkPartitionStateMachine: moves partitions between NewPartition, OnlinePartition,
OfflinePartition and NonExistentPartition under Kafka's transition table, electing leaders
on the way. An election reads first (the partitions' states, and the configs of the topics
whose unclean setting matters), then decides (`partition_election`, no I/O), then writes:
every leader or ISR change goes to the partition's state znode conditioned on its version
(a write that lost a race is re-read and decided again) and fenced by the controller epoch;
the brokers hear of it through the request batch.

Runs only on the controller's event task: no locking, one change at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import attrs

from actors import Counter
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.config import KafkaConfig
from kcore.controller import partition_election
from kcore.controller.context import ControllerContext
from kcore.controller.partition_election import ElectionStrategy, StateChangeFailedError
from kcore.controller.request_batch import ControllerBrokerRequestBatch
from kcore.states import IllegalStateChangeError, PartitionState, is_valid_transition
from kcore.zk_client import ControllerMovedError, KafkaZkClient, ZooKeeperError

state_change_logger = logging.getLogger("kcore.state.change")

_P = PartitionState


# Result per partition: the written leader and ISR, or why it failed.
StateChangeResults = dict[TopicPartition, LeaderAndIsr | Exception]


@attrs.define
class PartitionStateMachine:
    context: ControllerContext
    zk_client: KafkaZkClient
    batch: ControllerBrokerRequestBatch
    unclean_leader_elections: Counter  # Kafka's ControllerStats UncleanLeaderElectionsPerSec
    # The broker's config: the default unclean.leader.election.enable (Kafka's if None).
    config: KafkaConfig | None = None

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
        except ZooKeeperError as error:
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
        results: StateChangeResults = {}
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp, initial in partition_election.initial_leader_and_isrs(
            self.context, partitions
        ).items():
            if isinstance(initial, StateChangeFailedError):
                state_change_logger.error("%s", initial)
                results[tp] = initial
            else:
                to_create[tp] = initial
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
        context = self.context
        results: StateChangeResults = {}
        current: dict[TopicPartition, LeaderAndIsr] = {}
        states = await self.zk_client.get_partition_states(partitions)
        for tp, start in partition_election.current_leader_and_isrs(context, states).items():
            if isinstance(start, StateChangeFailedError):
                results[tp] = start
            else:
                current[tp] = start
        unclean_topics = await self._topics_allowing_unclean_election(
            partition_election.topics_consulted_for_unclean_election(context, current, strategy)
        )
        elections = partition_election.elect_leaders(context, current, strategy, unclean_topics)
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, outcome in elections.items():
            if isinstance(outcome, StateChangeFailedError):
                state_change_logger.error("%s", outcome)
                results[tp] = outcome
            else:
                to_write[tp] = outcome.leader_and_isr
        if not to_write:
            return results, []
        written = await self.zk_client.update_leader_and_isr(
            to_write, context.epoch, context.epoch_zk_version
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
            state = LeaderIsrAndControllerEpoch(outcome, context.epoch)
            context.partition_leadership[tp] = state
            self.batch.add_leader_and_isr(election.recipients, tp, state, context.assignment(tp))
            results[tp] = outcome
        return results, sorted(written.to_retry)

    async def _topics_allowing_unclean_election(self, topics: set[str]) -> set[str]:
        """Read at election time, so an override changed a moment ago counts."""
        if not topics:
            return set()
        configs = await self.zk_client.get_topic_configs(topics)
        return {
            topic
            for topic, overrides in configs.items()
            if partition_election.unclean_leader_election_enabled(topic, overrides, self.config)
        }
