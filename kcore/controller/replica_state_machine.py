"""Kafka's ZkReplicaStateMachine: moves each (partition, replica) between NewReplica,
OnlineReplica, OfflineReplica and the deletion states under Kafka's transition table.

Going online sends the replica the partition's current LeaderAndIsr (a restarted broker
learns what it hosts). Going offline stops the replica and removes it from the ISR in
ZooKeeper (conditioned on the znode version, fenced by the controller epoch); the ISR is
never emptied, and a removed leader leaves the partition leaderless.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from itertools import groupby
from typing import Any

import attrs

from kcore.common import LeaderIsrAndControllerEpoch, TopicPartition
from kcore.controller import decisions
from kcore.controller.context import ControllerContext
from kcore.controller.request_batch import ControllerBrokerRequestBatch
from kcore.states import IllegalStateChangeError, ReplicaState, is_valid_transition
from kcore.zk_client import ControllerMovedError, KafkaZkClient, ZooKeeperError

state_change_logger = logging.getLogger("kcore.state.change")

_R = ReplicaState
PartitionReplica = tuple[TopicPartition, int]


@attrs.define
class ReplicaStateMachine:
    context: ControllerContext
    zk_client: KafkaZkClient
    batch: ControllerBrokerRequestBatch
    # StopReplica(delete) responses: (broker id, error code, body); set by topic deletion.
    on_deletion_response: Callable[[int, int, Any], None] | None = None

    async def startup(self) -> None:
        """Replicas on live brokers go online (each learns its partitions' state), the rest
        offline (they leave the ISRs they are still in)."""
        self.initialize_replica_states()
        replicas = self.context.replicas_for_partitions(self.context.all_partitions())
        online = [(tp, r) for tp, r in replicas if self.context.is_replica_online(r)]
        offline = [(tp, r) for tp, r in replicas if not self.context.is_replica_online(r)]
        await self.handle_state_changes(online, _R.ONLINE_REPLICA)
        await self.handle_state_changes(offline, _R.OFFLINE_REPLICA)

    def initialize_replica_states(self) -> None:
        for tp, replica in self.context.replicas_for_partitions(self.context.all_partitions()):
            self.context.replica_states[tp, replica] = (
                _R.ONLINE_REPLICA
                if self.context.is_replica_online(replica)
                else _R.REPLICA_DELETION_INELIGIBLE
            )

    async def handle_state_changes(
        self,
        replicas: Iterable[PartitionReplica],
        target: ReplicaState,
        *,
        announced: Collection[TopicPartition] = frozenset(),
    ) -> None:
        """`announced`: partitions whose new state this controller has just written and
        sent to every replica after these replicas went offline (the election of the same
        event); if ZooKeeper still holds that state, going offline tells no one again."""
        replicas = sorted(replicas, key=lambda pr: (pr[1], pr[0]))
        if not replicas:
            return
        self.batch.new_batch()
        try:
            for replica_id, group in groupby(replicas, key=lambda pr: pr[1]):
                await self._do_handle_state_changes(
                    replica_id, [tp for tp, _ in group], target, announced
                )
        except ControllerMovedError:
            self.batch.clear()
            raise
        except ZooKeeperError as error:
            state_change_logger.error(
                "Error while moving replicas %s to %s: %r",
                [f"{tp}:{r}" for tp, r in replicas], target.value, error,
            )  # fmt: skip
        self.batch.send(self.context.epoch)

    async def _do_handle_state_changes(
        self,
        replica_id: int,
        partitions: list[TopicPartition],
        target: ReplicaState,
        announced: Collection[TopicPartition],
    ) -> None:
        context = self.context
        valid = []
        for tp in partitions:
            current = context.replica_state(tp, replica_id)
            if is_valid_transition(current, target):
                valid.append(tp)
            else:
                state_change_logger.error(
                    "%s", IllegalStateChangeError(f"replica {replica_id} of {tp}", current, target)
                )
        match target:
            case _R.NEW_REPLICA:
                for tp in valid:
                    leadership = context.partition_leadership.get(tp)
                    if leadership is not None:
                        if leadership.leader_and_isr.leader == replica_id:
                            state_change_logger.error(
                                "Replica %d for partition %s cannot be moved to NewReplica "
                                "state as it is being requested to become leader",
                                replica_id, tp,
                            )  # fmt: skip
                            continue
                        self.batch.add_leader_and_isr(
                            [replica_id], tp, leadership, context.assignment(tp), is_new=True
                        )
                    self._put_state(replica_id, tp, target)
            case _R.ONLINE_REPLICA:
                for tp in valid:
                    if context.replica_state(tp, replica_id) is not _R.NEW_REPLICA:
                        leadership = context.partition_leadership.get(tp)
                        if leadership is not None:
                            self.batch.add_leader_and_isr(
                                [replica_id], tp, leadership, context.assignment(tp)
                            )
                    self._put_state(replica_id, tp, target)
            case _R.OFFLINE_REPLICA:
                await self._go_offline(replica_id, valid, announced)
            case _R.REPLICA_DELETION_STARTED:
                for tp in valid:
                    # Topic deletion waits for the answers; a reassignment deleting the
                    # replicas it removed does not (as in Kafka).
                    deleting_topic = context.is_topic_queued_for_deletion(tp.topic)
                    self.batch.add_stop_replica(
                        [replica_id],
                        tp,
                        delete_partition=True,
                        callback=self.on_deletion_response if deleting_topic else None,
                    )
                    self._put_state(replica_id, tp, target)
            case _R.NON_EXISTENT_REPLICA:
                for tp in valid:
                    self._put_state(replica_id, tp, target)
                    context.replica_states.pop((tp, replica_id), None)
            case _:
                for tp in valid:
                    self._put_state(replica_id, tp, target)

    async def _go_offline(
        self,
        replica_id: int,
        partitions: list[TopicPartition],
        announced: Collection[TopicPartition],
    ) -> None:
        context = self.context
        for tp in partitions:
            self.batch.add_stop_replica([replica_id], tp, delete_partition=False)
        with_leadership = [tp for tp in partitions if tp in context.partition_leadership]
        updated, failed, unchanged = await self.remove_replica_from_isr(
            replica_id, with_leadership, announced
        )
        live = sorted(context.live_or_shutting_down_broker_ids)
        for tp in partitions:
            if tp in failed:
                continue  # its state could not be read or written: not offline yet
            if tp in updated and not context.is_topic_queued_for_deletion(tp.topic):
                recipients = [r for r in context.replicas(tp) if r != replica_id]
                self.batch.add_leader_and_isr(recipients, tp, updated[tp], context.assignment(tp))
            elif tp not in unchanged:
                self.batch.add_update_metadata(live, [tp])
            self._put_state(replica_id, tp, _R.OFFLINE_REPLICA)

    async def remove_replica_from_isr(
        self,
        replica_id: int,
        partitions: list[TopicPartition],
        announced: Collection[TopicPartition] = frozenset(),
    ) -> tuple[
        dict[TopicPartition, LeaderIsrAndControllerEpoch], set[TopicPartition], set[TopicPartition]
    ]:
        """Removes the replica from each partition's ISR in ZooKeeper, re-reading and
        retrying a write that lost to a concurrent change; returns the partitions whose
        state changed (with their new state), those that could not be handled, and those
        of `announced` still in the state this controller wrote and sent (nothing to tell
        anyone again)."""
        updated: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failed: set[TopicPartition] = set()
        unchanged: set[TopicPartition] = set()
        remaining = partitions
        while remaining:
            to_write = {}
            states = await self.zk_client.get_partition_states(remaining)
            for tp in remaining:
                state = states[tp]
                if state is None:
                    state_change_logger.warning(
                        "Cannot remove replica %d from the ISR of %s: it has no state in "
                        "ZooKeeper", replica_id, tp,
                    )  # fmt: skip
                    failed.add(tp)
                    continue
                if state.controller_epoch > self.context.epoch:
                    raise ControllerMovedError(
                        f"Aborted removing replica {replica_id} from the ISR of {tp}: its "
                        f"state was written by controller epoch {state.controller_epoch}"
                    )
                if replica_id in state.leader_and_isr.isr:
                    to_write[tp] = decisions.without_replica(state.leader_and_isr, replica_id)
                elif tp in announced and self._is_cached(tp, state):
                    # Kafka sends it again; the brokers would ignore it (not a newer leader
                    # epoch), and 10 000 of them doubled a failover's work.
                    unchanged.add(tp)
                else:
                    # Already out (say our own write applied but its reply was lost, so
                    # the retry met BadVersion): the replicas must still hear of this
                    # state, or a leader stays on an older leader epoch for good (Kafka's
                    # leaderAndIsrsWithoutReplica).
                    state = LeaderIsrAndControllerEpoch(state.leader_and_isr, self.context.epoch)
                    self.context.partition_leadership[tp] = state
                    updated[tp] = state
            if not to_write:
                break
            written = await self.zk_client.update_leader_and_isr(
                to_write, self.context.epoch, self.context.epoch_zk_version
            )
            for tp, outcome in written.finished.items():
                if isinstance(outcome, Exception):
                    state_change_logger.error(
                        "Failed to remove replica %d from the ISR of %s: %r",
                        replica_id,
                        tp,
                        outcome,
                    )
                    failed.add(tp)
                    continue
                state = LeaderIsrAndControllerEpoch(outcome, self.context.epoch)
                self.context.partition_leadership[tp] = state
                updated[tp] = state
                state_change_logger.info(
                    "Partition %s state changed to %s after removing replica %d from the ISR",
                    tp, outcome, replica_id,
                )  # fmt: skip
            remaining = sorted(written.to_retry)
        return updated, failed, unchanged

    def _is_cached(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> bool:
        """Whether `state` (read from ZooKeeper) is the one this controller wrote: its
        cached state, at its own epoch, with the same znode version. A write of ours that
        applied without our hearing of it (its reply lost) leaves an older cached version,
        so that state is still sent."""
        cached = self.context.partition_leadership.get(tp)
        return (
            cached is not None
            and cached.controller_epoch == self.context.epoch
            and cached.leader_and_isr == state.leader_and_isr
        )

    def _put_state(self, replica_id: int, tp: TopicPartition, target: ReplicaState) -> None:
        current = self.context.replica_state(tp, replica_id)
        state_change_logger.debug(
            "Changed state of replica %d for partition %s from %s to %s",
            replica_id, tp, current.value, target.value,
        )  # fmt: skip
        self.context.replica_states[tp, replica_id] = target
