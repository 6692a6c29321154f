"""Kafka's TopicDeletionManager: a topic marked under /admin/delete_topics is deleted by the
controller in steps that survive failures of brokers and of the controller itself.

1. Every broker is told the topic is going (UpdateMetadata with LeaderDuringDelete), its
   partitions go Offline then NonExistent.
2. Each replica on a live broker goes Offline then ReplicaDeletionStarted (StopReplica with
   delete); a replica on a dead broker is ReplicaDeletionIneligible, and the topic waits
   until that broker is back (`resume_for_topics` from broker start-up).
3. When every replica answered success (ReplicaDeletionSuccessful) the topic's znodes
   (/brokers/topics/T, /config/topics/T, /admin/delete_topics/T) go, fenced by the
   controller epoch, and the context forgets it.
A new controller picks up whatever is still marked. A topic with partitions being reassigned
waits (ineligible) until their reassignments complete, as Kafka intends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import attrs

from kcore.common import TopicPartition
from kcore.controller.context import ControllerContext
from kcore.controller.partition_state_machine import PartitionStateMachine
from kcore.controller.replica_state_machine import ReplicaStateMachine
from kcore.states import PartitionState, ReplicaState
from kcore.zk_client import KafkaZkClient

logger = logging.getLogger("kcore.controller.topic_deletion")

_R = ReplicaState


@attrs.define
class TopicDeletionManager:
    context: ControllerContext
    zk_client: KafkaZkClient
    partition_state_machine: PartitionStateMachine
    replica_state_machine: ReplicaStateMachine
    # Queues UpdateMetadata for the partitions to the brokers (the controller's helper).
    send_update_metadata: Callable[[list[int], list[TopicPartition]], None]
    delete_enabled: bool = True

    async def init(self, marked: Iterable[str]) -> None:
        """At failover: the marked topics that still exist are queued (or, with deletion
        disabled, the marks are removed, as Kafka does)."""
        marked = set(marked)
        missing = marked - self.context.all_topics
        if missing or not self.delete_enabled:
            await self._delete_marks(missing if self.delete_enabled else marked)
        if self.delete_enabled:
            self.context.topics_to_be_deleted |= marked & self.context.all_topics
            self.mark_ineligible(self.context.topics_being_reassigned())

    async def enqueue(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        missing = topics - self.context.all_topics
        if missing or not self.delete_enabled:
            await self._delete_marks(missing if self.delete_enabled else topics)
        if not self.delete_enabled:
            logger.info("delete.topic.enable is false: not deleting %s", sorted(topics))
            return
        self.context.topics_to_be_deleted |= topics & self.context.all_topics
        self.mark_ineligible(self.context.topics_being_reassigned())
        await self.resume()

    def mark_ineligible(self, topics: Iterable[str]) -> None:
        """Those of the topics queued for deletion wait (Kafka's
        markTopicIneligibleForDeletion): a reassignment of theirs is in progress."""
        halted = set(topics) & self.context.topics_to_be_deleted
        if halted - self.context.topics_ineligible_for_deletion:
            logger.info("Halted deletion of topics %s due to topic reassignment in progress",
                        sorted(halted))  # fmt: skip
        self.context.topics_ineligible_for_deletion |= halted

    async def resume_for_topics(self, topics: Iterable[str]) -> None:
        """A broker holding replicas of these topics came back, or a reassignment of theirs
        completed: try again (not while another of their partitions is being reassigned)."""
        queued = (
            set(topics) & self.context.topics_to_be_deleted
        ) - self.context.topics_being_reassigned()
        if queued:
            self.context.topics_ineligible_for_deletion -= queued
            await self.resume()

    async def resume(self) -> None:
        for topic in sorted(self.context.topics_to_be_deleted):
            states = [
                self.context.replica_state(tp, replica) for tp, replica in self._replicas(topic)
            ]
            if all(s is _R.REPLICA_DELETION_SUCCESSFUL for s in states):
                await self._complete(topic)
            elif any(s is _R.REPLICA_DELETION_STARTED for s in states):
                continue  # waiting for StopReplica answers
            elif topic not in self.context.topics_ineligible_for_deletion:
                await self._start(topic)

    async def on_stop_replica_response(
        self, broker_id: int, error_code: int, failed: Iterable[TopicPartition]
    ) -> None:
        """A broker answered StopReplica(delete): its replicas of queued topics are deleted,
        except those it reported failing (they, and their topics, become ineligible)."""
        failed = set(failed)
        done, not_done = [], []
        for tp, replica in self.context.replicas_on_brokers([broker_id]):
            if self.context.replica_state(tp, replica) is not _R.REPLICA_DELETION_STARTED:
                continue
            (not_done if error_code or tp in failed else done).append((tp, replica))
        if not_done:
            self.context.topics_ineligible_for_deletion |= {tp.topic for tp, _ in not_done}
            await self.replica_state_machine.handle_state_changes(
                not_done, _R.REPLICA_DELETION_INELIGIBLE
            )
        await self.replica_state_machine.handle_state_changes(done, _R.REPLICA_DELETION_SUCCESSFUL)
        await self.resume()

    def _replicas(self, topic: str) -> list[tuple[TopicPartition, int]]:
        return self.context.replicas_for_partitions(self.context.partitions_for_topic(topic))

    async def _start(self, topic: str) -> None:
        logger.info("Topic deletion callback for %s", topic)
        partitions = self.context.partitions_for_topic(topic)
        self.send_update_metadata(sorted(self.context.live_or_shutting_down_broker_ids), partitions)
        psm = self.partition_state_machine
        unseen = [
            tp
            for tp in partitions
            if self.context.partition_state(tp) is not PartitionState.NON_EXISTENT_PARTITION
        ]
        await psm.handle_state_changes(unseen, PartitionState.OFFLINE_PARTITION)
        await psm.handle_state_changes(unseen, PartitionState.NON_EXISTENT_PARTITION)
        replicas = [
            (tp, r)
            for tp, r in self._replicas(topic)
            if self.context.replica_state(tp, r) is not _R.REPLICA_DELETION_SUCCESSFUL
        ]
        dead = [
            (tp, r)
            for tp, r in replicas
            if not self.context.is_replica_online(r, True)
            and self.context.replica_state(tp, r) is not _R.REPLICA_DELETION_INELIGIBLE
        ]
        live = [(tp, r) for tp, r in replicas if self.context.is_replica_online(r, True)]
        rsm = self.replica_state_machine
        if len(live) < len(replicas):
            logger.info("Topic %s waits for brokers %s to delete its replicas", topic,
                        sorted({r for tp, r in replicas if (tp, r) not in live}))  # fmt: skip
            self.context.topics_ineligible_for_deletion.add(topic)
        if dead:
            await rsm.handle_state_changes(dead, _R.OFFLINE_REPLICA)
            await rsm.handle_state_changes(dead, _R.REPLICA_DELETION_INELIGIBLE)
        await rsm.handle_state_changes(live, _R.OFFLINE_REPLICA)
        await rsm.handle_state_changes(live, _R.REPLICA_DELETION_STARTED)

    async def _complete(self, topic: str) -> None:
        await self.replica_state_machine.handle_state_changes(
            self._replicas(topic), _R.NON_EXISTENT_REPLICA
        )
        version = self.context.epoch_zk_version
        await self.zk_client.delete_topic_znode(topic, version)
        await self.zk_client.delete_topic_configs([topic], version)
        await self.zk_client.delete_topic_deletions([topic], version)
        self.context.remove_topic(topic)
        logger.info("Deletion of topic %s successfully completed", topic)

    async def _delete_marks(self, topics: Iterable[str]) -> None:
        await self.zk_client.delete_topic_deletions(sorted(topics), self.context.epoch_zk_version)
