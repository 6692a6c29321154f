"""KafkaController (ZooKeeper mode): every broker runs one; the one that wins the election on
/controller is active. All of its work runs on one EventManager task; ZooKeeper watch
handlers only put events.

Election: a multi that creates the ephemeral /controller and bumps /controller_epoch
conditioned on its version. Every later controller write is fenced by that version
(KafkaZkClient.fenced), so a replaced controller cannot write; when it tries, it learns it
moved (ControllerMovedError) and resigns.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

import transport
from actors import EventManager, EventPreemptedError, MetricsRegistry, metric_name, open_supervisor
from kcore import errors, zkdata
from kcore.common import (
    NO_LEADER,
    Broker,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.config import KafkaConfig
from kcore.controller import events as ev
from kcore.controller import reassignment
from kcore.controller.broker_change import classify_broker_change
from kcore.controller.channel import ControllerChannelManager
from kcore.controller.context import ControllerContext
from kcore.controller.controller_state import ControllerState
from kcore.controller.partition_election import ElectionStrategy, StateChangeFailedError
from kcore.controller.partition_state_machine import PartitionStateMachine
from kcore.controller.preferred_election import (
    ElectionOutcome,
    ElectionTrigger,
    ElectionType,
    classify_election_request,
    partitions_to_rebalance,
)
from kcore.controller.reassignment import ReassignmentResult
from kcore.controller.replica_state_machine import ReplicaStateMachine
from kcore.controller.request_batch import ControllerBrokerRequestBatch
from kcore.controller.topic_deletion import TopicDeletionManager
from kcore.protocol.control import StopReplicaResponse
from kcore.states import PartitionState, ReplicaState
from kcore.zk_client import ControllerMovedError, KafkaZkClient, Watch, ZooKeeperError

logger = logging.getLogger("kcore.controller")
state_change_logger = logging.getLogger("kcore.state.change")

_GROUP = "kafka.controller"
_ALREADY_MOVED = "Controller has already moved when trying to trigger controller movement"


@attrs.define(eq=False)
class KafkaController:
    broker: Broker  # this broker's registration (endpoints, rack); its epoch is updated here
    zk_client: KafkaZkClient
    network: transport.Network  # bound to this broker's node
    rng: random.Random
    metrics: MetricsRegistry = attrs.field(factory=MetricsRegistry)
    request_timeout: float = 30.0
    # Called with the new broker epoch each time this broker (re-)registers.
    on_broker_epoch: Callable[[int], None] = lambda epoch: None
    # The broker's config: unclean election and topic deletion defaults (Kafka's if None).
    config: KafkaConfig | None = None

    active_controller_id: int = attrs.field(default=-1, init=False)
    broker_epoch: int = attrs.field(default=-1, init=False)
    context: ControllerContext = attrs.field(factory=ControllerContext, init=False)
    event_manager: EventManager = attrs.field(init=False)
    channel: ControllerChannelManager = attrs.field(init=False)
    batch: ControllerBrokerRequestBatch = attrs.field(init=False)
    partition_state_machine: PartitionStateMachine = attrs.field(init=False)
    replica_state_machine: ReplicaStateMachine = attrs.field(init=False)
    topic_deletion: TopicDeletionManager = attrs.field(init=False)
    # Watches are one-shot and cannot be removed: a resigned controller ignores the ones
    # still armed by bumping this generation.
    _watch_generation: int = attrs.field(default=0, init=False)
    # Watch callbacks armed again and again on one znode, one per key for the generation: a
    # znode registers a callback once however often it is armed, so a change wakes the
    # controller once (the reassignment znode, the states of partitions being reassigned).
    _stable_watches: dict[Any, Watch] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        self.event_manager = EventManager(
            self, idle_state=ControllerState.IDLE, metrics=self.metrics, metrics_group=_GROUP
        )
        self.channel = ControllerChannelManager(
            self.broker.id,
            self.network,
            self.rng,
            self.metrics,
            request_timeout=self.request_timeout,
        )
        self.batch = self._new_batch()
        self.partition_state_machine = PartitionStateMachine(
            self.context,
            self.zk_client,
            self._new_batch(),
            self.metrics.counter(
                metric_name(_GROUP, "ControllerStats", "UncleanLeaderElectionsPerSec")
            ),
            self.config,
        )
        self.replica_state_machine = ReplicaStateMachine(
            self.context,
            self.zk_client,
            self._new_batch(),
            on_deletion_response=self._on_stop_replica_deletion_response,
        )
        self.topic_deletion = TopicDeletionManager(
            self.context,
            self.zk_client,
            self.partition_state_machine,
            self.replica_state_machine,
            self.send_update_metadata,
            delete_enabled=self.config.delete_topic_enable if self.config else True,
        )
        self.metrics.gauge(
            metric_name(_GROUP, "KafkaController", "ActiveControllerCount"),
            lambda: 1 if self.is_active else 0,
        )
        self.metrics.gauge(
            metric_name(_GROUP, "KafkaController", "ControllerState"),
            lambda: self.event_manager.state.value_id,
        )
        self.metrics.gauge(
            metric_name(_GROUP, "KafkaController", "GlobalTopicCount"),
            lambda: len(self.context.all_topics) if self.is_active else 0,
        )
        self.metrics.gauge(
            metric_name(_GROUP, "KafkaController", "GlobalPartitionCount"),
            lambda: len(self.context.all_partitions()) if self.is_active else 0,
        )
        self.metrics.gauge(
            metric_name(_GROUP, "KafkaController", "OfflinePartitionsCount"),
            lambda: self._offline_partition_count() if self.is_active else 0,
        )

    def _new_batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(
            self.broker.id,
            self.context,
            self.channel.send,
            on_leader_and_isr_response=self._on_leader_and_isr_response,
        )

    def _offline_partition_count(self) -> int:
        return sum(
            1
            for tp, state in self.context.partition_states.items()
            if state is PartitionState.OFFLINE_PARTITION
            and not self.context.is_topic_queued_for_deletion(tp.topic)
        )

    @property
    def broker_id(self) -> int:
        return self.broker.id

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker.id

    @property
    def epoch(self) -> int:
        return self.context.epoch

    # -- lifecycle ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Runs the event task and the channel manager until cancelled (KafkaController's
        startup: the session hooks, then the Startup event).

        Both run under a supervisor that restarts them when they die on an unexpected
        error: the event task already logs an event's processing error and goes on, and
        the channel manager restarts its own senders, so a death here is a bug in the loop
        itself; one that keeps coming back (the restart intensity) ends `run` with
        RestartIntensityError, taking the broker down rather than leaving it with a
        controller that cannot act."""
        async with open_supervisor(name=f"controller-{self.broker_id}") as supervisor:
            await supervisor.start(self.channel.run, name="controller-channel-manager")
            await supervisor.start(self.event_manager.run, name="controller-event-thread")
            if self.config is not None and self.config.auto_leader_rebalance_enable:
                await supervisor.start(
                    self._auto_leader_rebalance_timer, name="controller-auto-leader-rebalance"
                )
            self.zk_client.add_session_hooks(
                before_initializing_session=self._before_initializing_session,
                after_initializing_session=self._after_initializing_session,
            )
            self.event_manager.put(ev.Startup())
            task_status.started()

    async def _before_initializing_session(self) -> None:
        queued = self.event_manager.clear_and_put(ev.Expire())
        try:
            await queued.await_processing()
        except EventPreemptedError:
            pass  # shutting down: nothing left to resign from

    async def _after_initializing_session(self) -> None:
        self.event_manager.put(ev.RegisterBrokerAndReelect())

    # -- the event processor --------------------------------------------------------------

    async def process(self, event: ev.ControllerEvent) -> None:
        try:
            match event:
                case ev.Startup():
                    await self._process_startup()
                case ev.ControllerChange():
                    await self._maybe_resign()
                case ev.Reelect():
                    await self._process_reelect()
                case ev.RegisterBrokerAndReelect():
                    await self._register_broker()
                    await self._process_reelect()
                case ev.Expire():
                    self._process_expire()
                case ev.BrokerChange():
                    await self._process_broker_change()
                case ev.TopicChange():
                    await self._process_topic_change()
                case ev.PartitionModifications(topic=topic):
                    await self._process_partition_modifications(topic)
                case ev.UncleanLeaderElectionEnable():
                    if self.is_active:
                        await self.partition_state_machine.trigger_online_partition_state_change()
                case ev.TopicUncleanLeaderElectionEnable(topic=topic):
                    if self.is_active:
                        await self.partition_state_machine.trigger_online_partition_state_change(
                            topic
                        )
                case ev.TopicDeletion():
                    await self._process_topic_deletion()
                case ev.TopicDeletionStopReplicaResponseReceived():
                    await self._process_topic_deletion_stop_replica_response(event)
                case ev.IsrChangeNotification():
                    await self._process_isr_change_notification()
                case ev.ControlledShutdown():
                    await self._process_controlled_shutdown(event)
                case ev.LeaderAndIsrResponseReceived():
                    self._process_leader_and_isr_response(event)
                case ev.ReplicaLeaderElection():
                    await self._process_replica_leader_election(event)
                case ev.AutoPreferredReplicaLeaderElection():
                    await self._process_auto_preferred_replica_leader_election()
                case ev.LiveBrokerIds(callback=callback):
                    callback(sorted(self.context.live_broker_ids) if self.is_active else None)
                case ev.ZkPartitionReassignment():
                    await self._process_zk_partition_reassignment()
                case ev.ApiPartitionReassignment():
                    await self._process_api_partition_reassignment(event)
                case ev.ListPartitionReassignments(partitions=partitions, callback=callback):
                    callback(
                        reassignment.listed_reassignments(self.context, partitions)
                        if self.is_active
                        else None
                    )
                case ev.PartitionReassignmentIsrChange(partition=tp):
                    await self._process_partition_reassignment_isr_change(tp)
        except ControllerMovedError as error:
            logger.info("Controller moved to another broker when processing %r: %s", event, error)
            await self._maybe_resign()

    def enable_default_unclean_leader_election(self) -> None:
        """Kafka's enableDefaultUncleanLeaderElection: the broker's dynamic default became
        true; offline partitions are elected again (a no-op unless this is the controller)."""
        self.event_manager.put(ev.UncleanLeaderElectionEnable())

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """Kafka's enableTopicUncleanLeaderElection: `topic`'s own setting became true."""
        self.event_manager.put(ev.TopicUncleanLeaderElectionEnable(topic))

    def preempt(self, event: ev.ControllerEvent) -> None:
        event.preempt()

    # -- election -------------------------------------------------------------------------

    async def _process_startup(self) -> None:
        await self._watch_controller()
        await self._elect()

    async def _process_reelect(self) -> None:
        await self._maybe_resign()
        await self._elect()

    def _process_expire(self) -> None:
        self.active_controller_id = -1
        self._on_controller_resignation()

    async def _register_broker(self) -> None:
        self.broker_epoch = await self.zk_client.register_broker(self.broker)
        self.broker = attrs.evolve(self.broker, epoch=self.broker_epoch)
        self.on_broker_epoch(self.broker_epoch)

    async def _watch_controller(self) -> int | None:
        return await self.zk_client.watch_controller(
            on_deleted=self._on_controller_deleted, on_changed=self._on_controller_changed
        )

    def _on_controller_deleted(self) -> None:
        self.event_manager.put(ev.Reelect())

    def _on_controller_changed(self) -> None:
        self.event_manager.put(ev.ControllerChange())

    async def _elect(self) -> None:
        self.active_controller_id = await self._current_controller_id()
        if self.active_controller_id != -1:
            logger.debug(
                "Broker %d has been elected as the controller, so stopping the election process.",
                self.active_controller_id,
            )
            return
        try:
            (
                epoch,
                epoch_zk_version,
            ) = await self.zk_client.register_controller_and_increment_controller_epoch(
                self.broker_id
            )
        except ControllerMovedError:
            await self._maybe_resign()
            if self.active_controller_id != -1:
                logger.debug(
                    "Broker %d was elected as controller instead of broker %d",
                    self.active_controller_id, self.broker_id,
                )  # fmt: skip
            else:
                logger.warning("A controller has been elected but just resigned, will retry")
            return
        except ZooKeeperError as error:
            logger.error("Error while electing or becoming controller on broker %d: %r",
                         self.broker_id, error)  # fmt: skip
            await self._trigger_controller_move()
            return
        self.context.epoch = epoch
        self.context.epoch_zk_version = epoch_zk_version
        self.active_controller_id = self.broker_id
        logger.info(
            "%d successfully elected as the controller. Epoch incremented to %d and epoch zk "
            "version is now %d", self.broker_id, epoch, epoch_zk_version,
        )  # fmt: skip
        await self._on_controller_failover()

    async def _current_controller_id(self) -> int:
        controller_id = await self.zk_client.get_controller_id()
        return -1 if controller_id is None else controller_id

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        controller_id = await self._watch_controller()
        self.active_controller_id = -1 if controller_id is None else controller_id
        if was_active and not self.is_active:
            self._on_controller_resignation()

    async def _trigger_controller_move(self) -> None:
        self.active_controller_id = await self._current_controller_id()
        if not self.is_active:
            logger.warning(
                "Controller has already moved when trying to trigger controller movement"
            )
            return
        expected_version = self.context.epoch_zk_version
        self.active_controller_id = -1
        self._on_controller_resignation()
        try:
            await self.zk_client.delete_controller(expected_version)
        except ControllerMovedError:
            logger.warning(
                "Controller has already moved when trying to trigger controller movement"
            )

    # -- failover and resignation ---------------------------------------------------------

    async def _on_controller_failover(self) -> None:
        """Kafka's onControllerFailover: watches, context from ZooKeeper, the live brokers
        to every broker, then the replica and partition state machines (which elect leaders
        for offline partitions and tell every replica its state), then pending deletions.
        A ZooKeeper error on the way moves the controller away (as Kafka does)."""
        self._new_watch_generation()
        try:
            await self._register_failover_watches()
            await self._delete_isr_change_notifications()
            await self._initialize_context()
            await self.topic_deletion.init(await self.zk_client.get_topic_deletions())
            self.send_update_metadata(sorted(self.context.live_or_shutting_down_broker_ids), [])
            await self.replica_state_machine.startup()
            await self.partition_state_machine.startup()
            logger.info("Ready to serve as the new controller with epoch %d", self.epoch)
            await self._initialize_partition_reassignments()
            await self.topic_deletion.resume()
            # Elections asked for through ZooKeeper while no controller was there.
            pending = await self.zk_client.get_preferred_replica_election(
                watch=self._preferred_replica_election_watch()
            )
            if pending:
                await self._elect_requested(
                    pending, ElectionType.PREFERRED, ElectionTrigger.ZK, callback=None
                )
        except ControllerMovedError:
            raise
        except ZooKeeperError as error:
            logger.error("Error while initializing the controller on broker %d: %r",
                         self.broker_id, error)  # fmt: skip
            await self._trigger_controller_move()

    def _new_watch_generation(self) -> None:
        self._watch_generation += 1
        self._stable_watches.clear()

    def _stable_watch(self, key: Any, make_event: Callable[[], ev.ControllerEvent]) -> Watch:
        """`_watch`, the same callback each time for `key` (until the generation changes)."""
        watch = self._stable_watches.get(key)
        if watch is None:
            watch = self._stable_watches[key] = self._watch(make_event)
        return watch

    def _watch(self, make_event: Callable[[], ev.ControllerEvent]) -> Watch:
        """A watch callback that puts an event unless this controller resigned since."""
        generation = self._watch_generation

        def on_watch() -> None:
            if generation == self._watch_generation:
                self.event_manager.put(make_event())

        return on_watch

    async def _register_failover_watches(self) -> None:
        await self.zk_client.get_all_topics(watch=self._watch(ev.TopicChange))
        await self.zk_client.get_topic_deletions(watch=self._watch(ev.TopicDeletion))
        await self.zk_client.get_isr_change_notifications(
            watch=self._watch(ev.IsrChangeNotification)
        )

    def _preferred_replica_election_watch(self) -> Watch:
        return self._watch(
            lambda: ev.ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK)
        )

    def _broker_change_watch(self) -> Watch:
        return self._watch(ev.BrokerChange)

    def _partition_modifications_watch(self, topic: str) -> Watch:
        return self._watch(lambda: ev.PartitionModifications(topic))

    async def _initialize_context(self) -> None:
        brokers = await self.zk_client.get_all_brokers(watch=self._broker_change_watch())
        self.context.add_live_brokers(brokers.values())
        for topic in sorted(await self.zk_client.get_all_topics()):
            await self._read_topic(topic)
        # Reassignments a previous controller started: the topic znodes say what is being
        # added and removed.
        self.context.partitions_being_reassigned.update(
            tp
            for tp in self.context.all_partitions()
            if self.context.assignment(tp).is_being_reassigned
        )
        for broker in sorted(brokers.values(), key=lambda b: b.id):
            self.channel.add_broker(broker)
        logger.info("Initialized broker epochs cache: %s", self.context.live_broker_epochs())

    async def _read_topic(self, topic: str) -> list[TopicPartition]:
        """Reads a topic's assignment (watching it) and its partitions' states into the
        context; returns its partitions."""
        found = await self.zk_client.get_replica_assignment(
            topic, watch=self._partition_modifications_watch(topic)
        )
        if found is None:
            return []
        topic_id, assignment = found
        self.context.set_topic_assignment(topic, topic_id, assignment)
        partitions = self.context.partitions_for_topic(topic)
        states = await self.zk_client.get_partition_states(partitions)
        for tp in partitions:
            if states[tp] is not None:
                self.context.partition_leadership[tp] = states[tp]
        return partitions

    def _on_controller_resignation(self) -> None:
        """Undoes failover: no watches act, no requests go out, the context is forgotten."""
        logger.info("Resigning")
        self._new_watch_generation()
        self.channel.shutdown()
        for batch in (
            self.batch,
            self.partition_state_machine.batch,
            self.replica_state_machine.batch,
        ):
            batch.clear()
        self.context.reset()

    # -- brokers --------------------------------------------------------------------------

    async def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        # Listing the children re-arms the watch in the same read, so no change is missed.
        current = await self.zk_client.get_all_brokers(watch=self._broker_change_watch())
        change = classify_broker_change(
            self.context.live_broker_epochs(), {b: broker.epoch for b, broker in current.items()}
        )
        new_ids, dead_ids, bounced_ids = change.new, change.dead, change.bounced
        logger.info(
            "Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, "
            "all live brokers: %s",
            new_ids, dead_ids, bounced_ids, sorted(current),
        )  # fmt: skip
        for broker_id in new_ids:
            self.channel.add_broker(current[broker_id])
        for broker_id in bounced_ids:
            self.channel.remove_broker(broker_id)
            self.channel.add_broker(current[broker_id])
        for broker_id in dead_ids:
            self.channel.remove_broker(broker_id)
        if new_ids:
            self.context.add_live_brokers(current[b] for b in new_ids)
            await self.on_broker_startup(new_ids)
        if bounced_ids:
            self.context.remove_live_brokers(bounced_ids)
            await self.on_broker_failure(bounced_ids)
            self.context.add_live_brokers(current[b] for b in bounced_ids)
            await self.on_broker_startup(bounced_ids)
        if dead_ids:
            self.context.remove_live_brokers(dead_ids)
            await self.on_broker_failure(dead_ids)
        if change.changed:
            logger.info("Updated broker epochs cache: %s", self.context.live_broker_epochs())

    async def on_broker_startup(self, broker_ids: list[int]) -> None:
        """Kafka's onBrokerStartup: the others learn of the new brokers; the new ones get
        every partition's metadata and the state of each replica they host; partitions
        without a leader get one if a new broker can lead them."""
        logger.info("New broker startup callback for %s", broker_ids)
        existing = sorted(self.context.live_or_shutting_down_broker_ids - set(broker_ids))
        self.send_update_metadata(existing, [])
        self.send_update_metadata(broker_ids, sorted(self.context.partition_leadership))
        replicas = self.context.replicas_on_brokers(broker_ids)
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)
        await self.partition_state_machine.trigger_online_partition_state_change()
        # Reassignments waiting for these brokers to host their new replicas go on.
        started = set(broker_ids)
        await self._maybe_resume_reassignments(
            lambda _tp, assignment: bool(started & set(assignment.target_replicas))
        )
        await self.topic_deletion.resume_for_topics({tp.topic for tp, _ in replicas})

    async def on_broker_failure(self, broker_ids: list[int]) -> None:
        """Kafka's onBrokerFailure: the dead brokers' replicas go offline."""
        logger.info("Broker failure callback for %s", broker_ids)
        await self._on_replicas_become_offline(self.context.replicas_on_brokers(broker_ids))

    async def _on_replicas_become_offline(self, replicas: list[tuple[TopicPartition, int]]) -> None:
        """Partitions led by them go offline and are re-elected; the replicas leave the
        ISRs; brokers hear of the change even when nothing else had to change."""
        for_deletion = [(tp, r) for tp, r in replicas if self._queued_for_deletion(tp)]
        not_for_deletion = [(tp, r) for tp, r in replicas if not self._queued_for_deletion(tp)]
        psm = self.partition_state_machine
        await psm.handle_state_changes(
            self.context.partitions_with_offline_leader(), PartitionState.OFFLINE_PARTITION
        )
        elected = await psm.trigger_online_partition_state_change()
        await self.replica_state_machine.handle_state_changes(
            not_for_deletion,
            ReplicaState.OFFLINE_REPLICA,
            announced={tp for tp, outcome in elected.items() if isinstance(outcome, LeaderAndIsr)},
        )
        if for_deletion:
            self.context.topics_ineligible_for_deletion |= {tp.topic for tp, _ in for_deletion}
            await self.replica_state_machine.handle_state_changes(
                [
                    (tp, r)
                    for tp, r in for_deletion
                    if self.context.replica_state(tp, r) is ReplicaState.REPLICA_DELETION_STARTED
                ],
                ReplicaState.REPLICA_DELETION_INELIGIBLE,
            )
        if not not_for_deletion and all(isinstance(o, Exception) for o in elected.values()):
            self.send_update_metadata(sorted(self.context.live_or_shutting_down_broker_ids), [])

    def _queued_for_deletion(self, tp: TopicPartition) -> bool:
        return self.context.is_topic_queued_for_deletion(tp.topic)

    # -- topics ---------------------------------------------------------------------------

    async def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        topics = set(await self.zk_client.get_all_topics(watch=self._watch(ev.TopicChange)))
        new_topics = topics - self.context.all_topics
        deleted_topics = self.context.all_topics - topics
        for topic in sorted(deleted_topics):
            self.context.remove_topic(topic)
        new_partitions = []
        for topic in sorted(new_topics):
            new_partitions += await self._read_topic(topic)
        logger.info("New topics: %s, deleted topics: %s", sorted(new_topics),
                    sorted(deleted_topics))  # fmt: skip
        if new_partitions:
            await self._on_new_partition_creation(new_partitions)

    async def _process_partition_modifications(self, topic: str) -> None:
        """Partitions added to an existing topic (the admin rewrote its assignment)."""
        if not self.is_active:
            return
        found = await self.zk_client.get_replica_assignment(
            topic, watch=self._partition_modifications_watch(topic)
        )
        if found is None or topic not in self.context.all_topics:
            return
        topic_id, assignment = found
        known = self.context.partition_assignments.get(topic, {})
        added = {p: a for p, a in assignment.items() if p not in known}
        if not added:
            return
        if self.context.is_topic_queued_for_deletion(topic):
            logger.info("Skipping adding partitions %s to topic %s: it is being deleted",
                        sorted(added), topic)  # fmt: skip
            return
        self.context.set_topic_assignment(topic, topic_id, known | added)
        logger.info("New partitions to be added %s", sorted(added))
        await self._on_new_partition_creation([TopicPartition(topic, p) for p in sorted(added)])

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        """Kafka's onNewPartitionCreation: New, then Online (leader = first live replica,
        ISR = the live replicas), and every replica is told."""
        logger.info("New partition creation callback for %s", [str(tp) for tp in partitions])
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        replicas = self.context.replicas_for_partitions(partitions)
        await psm.handle_state_changes(partitions, PartitionState.NEW_PARTITION)
        await rsm.handle_state_changes(replicas, ReplicaState.NEW_REPLICA)
        await psm.handle_state_changes(
            partitions, PartitionState.ONLINE_PARTITION, ElectionStrategy.OFFLINE
        )
        await rsm.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)

    async def _process_topic_deletion(self) -> None:
        if not self.is_active:
            return
        marked = await self.zk_client.get_topic_deletions(watch=self._watch(ev.TopicDeletion))
        if marked:
            logger.info("Starting topic deletion for topics %s", sorted(marked))
        await self.topic_deletion.enqueue(marked)

    def _on_stop_replica_deletion_response(
        self, broker_id: int, error_code: int, body: Any
    ) -> None:
        """Called by the channel (not on the event task): hand the answer to the task."""
        failed: tuple[TopicPartition, ...] = ()
        if isinstance(body, StopReplicaResponse):
            error_code = error_code or body.error_code
            failed = tuple(
                TopicPartition(e.topic, e.partition) for e in body.partition_errors if e.error_code
            )
        self.event_manager.put(
            ev.TopicDeletionStopReplicaResponseReceived(broker_id, error_code, failed)
        )

    async def _process_topic_deletion_stop_replica_response(
        self, event: ev.TopicDeletionStopReplicaResponseReceived
    ) -> None:
        if not self.is_active:
            return
        await self.topic_deletion.on_stop_replica_response(
            event.broker_id, event.error_code, event.failed_partitions
        )

    # -- ISR changes ----------------------------------------------------------------------

    async def _process_isr_change_notification(self) -> None:
        """Leaders changed ISRs: re-read those partitions' states and tell every broker,
        then delete the notifications (fenced: only the active controller consumes them)."""
        if not self.is_active:
            return
        names = await self.zk_client.get_isr_change_notifications(
            watch=self._watch(ev.IsrChangeNotification)
        )
        try:
            await self._apply_isr_change_notifications(names)
        except trio.Cancelled:
            # The controller is going away (its ZooKeeper client with it): nothing more to
            # do here; its successor reads every partition's state when it takes over.
            raise
        except BaseException:
            # As Kafka's `finally`: a notification that fails is not processed again forever.
            await self.zk_client.delete_isr_change_notifications(
                names, self.context.epoch_zk_version
            )
            raise
        await self.zk_client.delete_isr_change_notifications(names, self.context.epoch_zk_version)

    async def _apply_isr_change_notifications(self, names: list[str]) -> None:
        partitions = await self.zk_client.read_isr_change_notifications(names)
        known = sorted(tp for tp in partitions if tp.topic in self.context.all_topics)
        states = await self.zk_client.get_partition_states(known)
        for tp in known:
            if states[tp] is not None:
                self.context.partition_leadership[tp] = states[tp]
        if known:
            self.send_update_metadata(sorted(self.context.live_or_shutting_down_broker_ids), known)
        # The state znode watch of a partition being reassigned usually wakes the controller
        # first; a notification is the fallback (as in Kafka).
        for tp in known:
            if tp in self.context.partitions_being_reassigned:
                await self._maybe_complete_reassignment(tp)

    async def _delete_isr_change_notifications(self) -> None:
        names = await self.zk_client.get_isr_change_notifications()
        await self.zk_client.delete_isr_change_notifications(names, self.context.epoch_zk_version)

    # -- questions from request handlers -------------------------------------------------

    async def live_broker_ids(self) -> list[int]:
        """The live brokers (not shutting down) as this controller sees them, answered by
        the event task (the context is its alone); NotControllerError when this broker is
        not the active controller."""
        done = trio.Event()
        answer: list[list[int] | None] = []

        def callback(ids: list[int] | None) -> None:
            answer.append(ids)
            done.set()

        self.event_manager.put(ev.LiveBrokerIds(callback))
        await done.wait()
        if answer[0] is None:
            raise errors.NotControllerError(f"Broker {self.broker_id} is not the controller")
        return answer[0]

    # -- leader elections asked for (ElectLeaders, the znode, the auto rebalance) --------

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None, election_type: ElectionType
    ) -> dict[TopicPartition, ElectionOutcome]:
        """An ElectLeaders request: each partition's outcome, once the event task has run
        the elections; None asks for every partition. NOT_CONTROLLER for each when this
        broker is not (or stops being) the controller."""
        done = trio.Event()
        answer: list[dict[TopicPartition, ElectionOutcome]] = []

        def callback(results: dict[TopicPartition, ElectionOutcome]) -> None:
            answer.append(results)
            done.set()

        asked = None if partitions is None else frozenset(partitions)
        self.event_manager.put(
            ev.ReplicaLeaderElection(asked, election_type, ElectionTrigger.ADMIN_CLIENT, callback)
        )
        await done.wait()
        return answer[0]

    async def _process_replica_leader_election(self, event: ev.ReplicaLeaderElection) -> None:
        if not self.is_active:
            if event.callback is not None:
                outcome = ElectionOutcome(errors.NotControllerError.code, "not the controller")
                event.callback(dict.fromkeys(event.partitions or (), outcome))
            return
        if event.trigger is ElectionTrigger.ZK:
            partitions = await self.zk_client.get_preferred_replica_election(
                watch=self._preferred_replica_election_watch()
            )
            if partitions is None:
                return  # deleted since the watch fired
        elif event.partitions is None:
            partitions = set(self.context.all_partitions())
        else:
            partitions = set(event.partitions)
        try:
            answers = await self._elect_requested(
                partitions, event.election_type, event.trigger, event.callback
            )
        except BaseException:
            if event.callback is not None:
                failed = ElectionOutcome(errors.UnknownServerError.code, "the election failed")
                event.callback(dict.fromkeys(partitions, failed))
            raise
        if event.callback is not None:
            event.callback(answers)

    async def _elect_requested(
        self,
        partitions: Iterable[TopicPartition],
        election_type: ElectionType,
        trigger: ElectionTrigger,
        callback: object,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Kafka's processReplicaLeaderElection after the checks: the partitions that need
        an election get one; every partition is answered."""
        valid, refused = classify_election_request(self.context, partitions, election_type)
        answers = {tp: ElectionOutcome(error.code, str(error)) for tp, error in refused.items()}
        logger.info("Starting replica leader election (%s) for partitions %s triggered by %s",
                    election_type.name, [str(tp) for tp in valid], trigger.value)  # fmt: skip
        results = await self._on_replica_election(valid, election_type, trigger)
        for tp, outcome in results.items():
            if isinstance(outcome, LeaderAndIsr):
                answers[tp] = ElectionOutcome(0, None, outcome.leader_epoch)
            elif isinstance(outcome, StateChangeFailedError):
                error_class = (
                    errors.PreferredLeaderNotAvailableError
                    if election_type is ElectionType.PREFERRED
                    else errors.EligibleLeadersNotAvailableError
                )
                answers[tp] = ElectionOutcome(error_class.code, str(outcome))
            elif isinstance(outcome, errors.KafkaError):
                answers[tp] = ElectionOutcome(outcome.code, str(outcome))
            else:
                answers[tp] = ElectionOutcome(errors.UnknownServerError.code, repr(outcome))
        return answers

    async def _on_replica_election(
        self,
        partitions: list[TopicPartition],
        election_type: ElectionType,
        trigger: ElectionTrigger,
    ) -> dict[TopicPartition, Any]:
        """Kafka's onReplicaElection: leaders elected under the type's strategy; a
        ZooKeeper-triggered election deletes /admin/preferred_replica_election after."""
        strategy = (
            ElectionStrategy.PREFERRED
            if election_type is ElectionType.PREFERRED
            else ElectionStrategy.UNCLEAN
        )
        try:
            return await self.partition_state_machine.handle_state_changes(
                partitions, PartitionState.ONLINE_PARTITION, strategy
            )
        finally:
            if trigger is ElectionTrigger.ZK:
                await self.zk_client.delete_preferred_replica_election(
                    self.context.epoch_zk_version
                )

    async def _process_auto_preferred_replica_leader_election(self) -> None:
        if (
            not self.is_active
            or self.config is None
            or not self.config.auto_leader_rebalance_enable
        ):
            return
        candidates = partitions_to_rebalance(
            self.context, self.config.leader_imbalance_per_broker_percentage
        )
        if candidates:
            await self._elect_requested(
                candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO, callback=None
            )

    async def _auto_leader_rebalance_timer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Kafka's auto-leader-rebalance-task: every leader.imbalance.check.interval.seconds
        the controller checks each broker's share of preferred leaderships."""
        assert self.config is not None
        task_status.started()
        while True:
            await trio.sleep(self.config.leader_imbalance_check_interval_seconds)
            self.event_manager.put(ev.AutoPreferredReplicaLeaderElection())

    # -- partition reassignment (KIP-455) -------------------------------------------------

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ReassignmentResult]:
        """An AlterPartitionReassignments request: each partition to its target replicas
        (None cancels its reassignment), answered once the event task started them.
        NotControllerError when this broker is not (or stops being) the controller."""
        done = trio.Event()
        answer: list[dict[TopicPartition, ReassignmentResult] | None] = []

        def callback(results: dict[TopicPartition, ReassignmentResult] | None) -> None:
            answer.append(results)
            done.set()

        asked = {tp: None if r is None else tuple(r) for tp, r in reassignments.items()}
        self.event_manager.put(ev.ApiPartitionReassignment(asked, callback))
        await done.wait()
        if answer[0] is None:
            raise errors.NotControllerError(f"Broker {self.broker_id} is not the controller")
        return answer[0]

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """The reassignments in progress (of `partitions`, or all): RS, adding, removing.
        NotControllerError when this broker is not the controller."""
        done = trio.Event()
        answer: list[dict[TopicPartition, ReplicaAssignment] | None] = []

        def callback(listed: dict[TopicPartition, ReplicaAssignment] | None) -> None:
            answer.append(listed)
            done.set()

        asked = None if partitions is None else frozenset(partitions)
        self.event_manager.put(ev.ListPartitionReassignments(asked, callback))
        await done.wait()
        if answer[0] is None:
            raise errors.NotControllerError(f"Broker {self.broker_id} is not the controller")
        return answer[0]

    def _zk_reassignment_watch(self) -> Watch:
        return self._stable_watch("reassign_partitions", ev.ZkPartitionReassignment)

    def _reassignment_isr_watch(self, tp: TopicPartition) -> Watch:
        return self._stable_watch(("isr", tp), lambda: ev.PartitionReassignmentIsrChange(tp))

    async def _process_api_partition_reassignment(self, event: ev.ApiPartitionReassignment) -> None:
        """Kafka's processApiPartitionReassignment: checked, then started; a reassignment
        asked for through /admin/reassign_partitions for the same partitions is replaced
        (the latest one wins)."""
        if not self.is_active:
            event.callback(None)
            return
        try:
            to_reassign, refused = reassignment.plan_reassignments(
                self.context, event.reassignments, validate=True
            )
            results = {tp: ReassignmentResult.of(error) for tp, error in refused.items()}
            await self._maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in to_reassign)
            results |= await self._maybe_trigger_partition_reassignment(to_reassign)
        except ControllerMovedError:
            event.callback(None)
            raise
        except BaseException:
            failed = ReassignmentResult(errors.UnknownServerError.code, "the reassignment failed")
            event.callback(dict.fromkeys(event.reassignments, failed))
            raise
        event.callback(results)

    async def _process_zk_partition_reassignment(self) -> set[TopicPartition]:
        """Kafka's processZkPartitionReassignment: what /admin/reassign_partitions asks for
        is started (watching for its next creation either way); partitions that cannot be
        reassigned are taken out of it. Returns the partitions started."""
        if not self.is_active:
            return set()
        requested = await self.zk_client.get_partition_reassignment(
            on_created=self._zk_reassignment_watch()
        )
        if requested is None:
            return set()
        to_reassign, refused = reassignment.plan_reassignments(
            self.context, requested, validate=False
        )
        results = {tp: ReassignmentResult.of(error) for tp, error in refused.items()}
        results |= await self._maybe_trigger_partition_reassignment(to_reassign)
        failed = {tp: result for tp, result in results.items() if result.error_code}
        if failed:
            logger.warning(
                "Failed reassignment through zk with the following errors: %s",
                {str(tp): result for tp, result in sorted(failed.items())},
            )
            await self._maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in failed)
        return {tp for tp, result in results.items() if not result.error_code}

    async def _maybe_trigger_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, ReassignmentResult]:
        """Kafka's maybeTriggerPartitionReassignment: each partition that exists and whose
        topic is not being deleted starts its reassignment; an error there fails that
        partition alone (a moved controller stops everything)."""
        results: dict[TopicPartition, ReassignmentResult] = {}
        for tp, target in sorted(reassignments.items()):
            refusal = reassignment.refusal_to_start(self.context, tp)
            if refusal is not None:
                if self.context.is_topic_queued_for_deletion(tp.topic):
                    logger.info(
                        "Skipping reassignment of %s since the topic is currently being deleted", tp
                    )
                results[tp] = ReassignmentResult.of(refusal)
                continue
            try:
                await self._on_partition_reassignment(tp, target)
            except ControllerMovedError:
                logger.info(
                    "Failed completing reassignment of partition %s because controller has "
                    "moved to another broker", tp,
                )  # fmt: skip
                raise
            except Exception as error:
                logger.error("Error completing reassignment of partition %s: %r", tp, error)
                results[tp] = ReassignmentResult(errors.UnknownServerError.code, str(error))
                continue
            results[tp] = reassignment.SUBMITTED
        return results

    async def _on_partition_reassignment(
        self, tp: TopicPartition, target: ReplicaAssignment
    ) -> None:
        """Kafka's onPartitionReassignment, run when a reassignment is asked for, when the
        ISR of a partition being reassigned changes, when a broker of its target starts,
        and at failover. Phase U writes the assignment (RS = TRS + ORS, adding, removing);
        then, until every target replica is in the ISR, phase A starts the new replicas;
        once they are, phase B moves the leader into the target if need be, stops and
        deletes the removed replicas and writes RS = TRS."""
        # While a reassignment is in progress, its topic is not deleted.
        self.topic_deletion.mark_ineligible({tp.topic})
        await self._update_current_reassignment(tp, target)
        rsm = self.replica_state_machine
        if not await self._is_reassignment_complete(tp, target):
            # A1: a new leader epoch, and LeaderAndIsr with RS to every replica.
            await self._update_leader_epoch_and_send_request(tp, target)
            # A2: the adding replicas go NewReplica (those already started stay).
            new = [
                (tp, r)
                for r in target.adding_replicas
                if self.context.replica_state(tp, r) is ReplicaState.NON_EXISTENT_REPLICA
            ]
            await rsm.handle_state_changes(new, ReplicaState.NEW_REPLICA)
            return
        # B1: the adding replicas are online.
        await rsm.handle_state_changes(
            [(tp, r) for r in target.adding_replicas], ReplicaState.ONLINE_REPLICA
        )
        # B2: RS = TRS in memory.
        done = reassignment.completed(target)
        self.context.update_partition_assignment(tp, done)
        # B3: the leader moves into TRS (or keeps leading at a new epoch).
        await self._move_reassigned_partition_leader_if_required(tp, done)
        # B4, B5: the removed replicas leave the ISR, stop, and are deleted.
        await self._stop_removed_replicas_of_reassigned_partition(tp, target.removing_replicas)
        # B6: RS = TRS in ZooKeeper (the ORS was kept there until now, for a failover).
        await self._write_partition_assignment(tp, done)
        # B7: done with it (and with its entry in /admin/reassign_partitions).
        await self._remove_partition_from_reassigning_partitions(tp, done)
        # B8: every broker learns the new replicas and ISR.
        self.send_update_metadata(sorted(self.context.live_or_shutting_down_broker_ids), [tp])
        logger.info("Reassignment of partition %s to %s completed", tp, list(done.replicas))
        # A deletion of the topic may have waited for this.
        await self.topic_deletion.resume_for_topics({tp.topic})

    async def _update_current_reassignment(
        self, tp: TopicPartition, target: ReplicaAssignment
    ) -> None:
        """Phase U (Kafka's updateCurrentReassignment): the new assignment to ZooKeeper
        first (so a failover resumes it), then to memory; adding replicas of a replaced or
        cancelled reassignment that the new one drops are stopped and deleted."""
        current = self.context.assignment(tp)
        if current != target:
            logger.debug("Updating assignment of partition %s from %s to %s", tp, current, target)
            await self._write_partition_assignment(tp, target)
            self.context.update_partition_assignment(tp, target)
            unneeded = reassignment.replicas_no_longer_needed(current, target)
            if unneeded:
                await self._stop_removed_replicas_of_reassigned_partition(tp, unneeded)
        self.context.partitions_being_reassigned.add(tp)

    async def _is_reassignment_complete(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> bool:
        """Every target replica is in the ISR, as the partition's state znode says; reading
        it (re-)arms the watch that wakes the controller when the ISR changes."""
        if not assignment.is_being_reassigned:
            return True
        state = await self.zk_client.get_partition_state(tp, watch=self._reassignment_isr_watch(tp))
        if state is not None and state.controller_epoch <= self.epoch:
            self.context.partition_leadership[tp] = state
        isr = None if state is None else state.leader_and_isr.isr
        return reassignment.is_reassignment_complete(assignment, isr)

    async def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        assignment = self.context.assignment(tp)
        if await self._is_reassignment_complete(tp, assignment):
            logger.info(
                "Target replicas %s have all caught up with the leader for reassigning "
                "partition %s", list(assignment.target_replicas), tp,
            )  # fmt: skip
            await self._on_partition_reassignment(tp, assignment)

    async def _process_partition_reassignment_isr_change(self, tp: TopicPartition) -> None:
        if self.is_active and tp in self.context.partitions_being_reassigned:
            await self._maybe_complete_reassignment(tp)

    async def _maybe_resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
    ) -> None:
        for tp in sorted(self.context.partitions_being_reassigned):
            assignment = self.context.assignment(tp)
            if not should_resume(tp, assignment):
                continue
            try:
                await self._on_partition_reassignment(tp, assignment)
            except (StateChangeFailedError, errors.KafkaError) as error:
                # One partition that cannot go on does not hold back the others (nor the
                # failover or broker start-up that resumes them).
                logger.error("Error resuming reassignment of partition %s: %r", tp, error)

    async def _initialize_partition_reassignments(self) -> None:
        """At failover: what /admin/reassign_partitions asks for (it may have been written
        while there was no controller) replaces what the topic znodes say is in progress;
        the rest of those resume."""
        resumed = await self._process_zk_partition_reassignment()
        await self._maybe_resume_reassignments(lambda tp, _assignment: tp not in resumed)

    async def _write_partition_assignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """The topic znode with this partition's assignment replaced (Kafka's
        updateReplicaAssignmentForPartition), fenced."""
        topic_assignment = dict(self.context.partition_assignments.get(tp.topic, {}))
        topic_assignment[tp.partition] = assignment
        await self.zk_client.set_topic_assignment(
            tp.topic,
            self.context.topic_ids.get(tp.topic),
            topic_assignment,
            self.context.epoch_zk_version,
        )
        logger.info("Updated assignment of partition %s to %s", tp, assignment)

    async def _update_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch:
        """Kafka's updateLeaderEpoch: the same leader and ISR at the next leader epoch (so
        the replicas accept a LeaderAndIsr carrying the new replica set), written
        conditioned on the partition epoch, re-read and retried when it lost a race."""
        while True:
            state = await self.zk_client.get_partition_state(tp)
            if state is None:
                raise StateChangeFailedError(
                    f"Cannot update leader epoch for partition {tp} as its state znode is "
                    "missing: it is being reassigned but does not exist"
                )
            if state.controller_epoch > self.epoch:
                raise ControllerMovedError(
                    f"Leader and isr path of {tp} written by controller epoch "
                    f"{state.controller_epoch}, newer than this controller's {self.epoch}"
                )
            current = state.leader_and_isr
            bumped = current.new_leader_and_isr(current.leader, current.isr)
            written = await self.zk_client.update_leader_and_isr(
                {tp: bumped}, self.epoch, self.context.epoch_zk_version
            )
            outcome = written.finished.get(tp)
            if outcome is None:
                continue  # the leader changed the ISR meanwhile
            if isinstance(outcome, Exception):
                raise outcome
            updated = LeaderIsrAndControllerEpoch(outcome, self.epoch)
            self.context.partition_leadership[tp] = updated
            logger.info("Updated leader epoch for partition %s to %d, zkVersion=%d",
                        tp, outcome.leader_epoch, outcome.partition_epoch)  # fmt: skip
            return updated

    async def _update_leader_epoch_and_send_request(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """A new leader epoch, and LeaderAndIsr with the assignment to every replica of it:
        isNew for the adding ones (a new replica may be placed on any good log dir)."""
        state = await self._update_leader_epoch(tp)
        self.batch.new_batch()
        self.batch.add_leader_and_isr(
            reassignment.origin_replicas(assignment), tp, state, assignment
        )
        self.batch.add_leader_and_isr(
            assignment.adding_replicas, tp, state, assignment, is_new=True
        )
        self.batch.send(self.epoch)
        state_change_logger.info(
            "Sent LeaderAndIsr request %s with new replica assignment %s to leader %d for "
            "partition being reassigned %s",
            state, assignment, state.leader_and_isr.leader, tp,
        )  # fmt: skip

    async def _move_reassigned_partition_leader_if_required(
        self, tp: TopicPartition, done: ReplicaAssignment
    ) -> None:
        leadership = self.context.partition_leadership.get(tp)
        leader = NO_LEADER if leadership is None else leadership.leader_and_isr.leader
        online = self.context.is_replica_online(leader)
        move = reassignment.leader_move(done.replicas, leader, online)
        if move is reassignment.LeaderMove.BUMP_EPOCH:
            logger.info(
                "Leader %d for partition %s being reassigned, is already in the new list of "
                "replicas %s and is alive", leader, tp, list(done.replicas),
            )  # fmt: skip
            await self._update_leader_epoch_and_send_request(tp, done)
            return
        logger.info(
            "Leader %d for partition %s being reassigned, is %s the new list of replicas %s. "
            "Re-electing leader",
            leader, tp, "dead, though in" if leader in done.replicas else "not in",
            list(done.replicas),
        )  # fmt: skip
        await self.partition_state_machine.handle_state_changes(
            [tp], PartitionState.ONLINE_PARTITION, ElectionStrategy.REASSIGN
        )

    async def _stop_removed_replicas_of_reassigned_partition(
        self, tp: TopicPartition, removed: Iterable[int]
    ) -> None:
        """Kafka's stopRemovedReplicasOfReassignedPartition: each removed replica leaves the
        ISR and stops (Offline), then is deleted (StopReplica with delete) and forgotten."""
        replicas = [(tp, r) for r in removed]
        if not replicas:
            return
        rsm = self.replica_state_machine
        await rsm.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA)
        await rsm.handle_state_changes(replicas, ReplicaState.REPLICA_DELETION_STARTED)
        await rsm.handle_state_changes(replicas, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
        await rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT_REPLICA)

    async def _remove_partition_from_reassigning_partitions(
        self, tp: TopicPartition, done: ReplicaAssignment
    ) -> None:
        """B7: the partition is no longer being reassigned; /admin/reassign_partitions drops
        it if it asked for exactly this."""
        await self._maybe_remove_from_zk_reassignment(
            lambda p, replicas: p == tp and replicas == done.replicas
        )
        self.context.partitions_being_reassigned.discard(tp)
        # Its state watch may still fire once: the event finds it no longer reassigning.
        self._stable_watches.pop(("isr", tp), None)

    async def _maybe_remove_from_zk_reassignment(
        self, remove: Callable[[TopicPartition, tuple[int, ...]], bool]
    ) -> None:
        """Kafka's maybeRemoveFromZkReassignment: /admin/reassign_partitions without the
        partitions `remove` picks; deleted when nothing is left, and then looked at again so
        the watch for its next creation is armed."""
        requested = await self.zk_client.get_partition_reassignment()
        if requested is None:
            return
        remaining = reassignment.without_partitions(requested, remove)
        if len(remaining) == len(requested):
            return
        logger.info(
            "Removing partitions %s from the list of reassigned partitions in zookeeper",
            sorted(str(tp) for tp in requested if tp not in remaining),
        )
        if remaining:
            await self.zk_client.set_partition_reassignment(
                remaining, self.context.epoch_zk_version
            )
            # Our own write used up the watch: arm it again.
            await self.zk_client.get_partition_reassignment(
                on_created=self._zk_reassignment_watch()
            )
            return
        logger.info(
            "No more partitions need to be reassigned. Deleting zk path %s",
            zkdata.REASSIGN_PARTITIONS,
        )
        await self.zk_client.delete_partition_reassignment(self.context.epoch_zk_version)
        self.event_manager.put(ev.ZkPartitionReassignment())

    # -- controlled shutdown --------------------------------------------------------------

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[int, tuple[TopicPartition, ...]]:
        """A broker asks to shut down: leadership moves off it and it leaves the ISRs.
        Returns (error code, partitions it still leads); the broker retries until none."""
        done = trio.Event()
        answer: list[tuple[int, tuple[TopicPartition, ...]]] = []

        def callback(code: int, remaining: Any) -> None:
            answer.append((code, tuple(remaining)))
            done.set()

        self.event_manager.put(ev.ControlledShutdown(broker_id, broker_epoch, callback))
        await done.wait()
        return answer[0]

    async def _process_controlled_shutdown(self, event: ev.ControlledShutdown) -> None:
        try:
            remaining = await self._do_controlled_shutdown(event.broker_id, event.broker_epoch)
        except errors.KafkaError as error:
            logger.info("Controlled shutdown of broker %d refused: %s", event.broker_id, error)
            event.callback(error.code, ())
            return
        except BaseException:
            event.callback(errors.UnknownServerError.code, ())
            raise
        event.callback(0, tuple(remaining))

    async def _do_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[TopicPartition]:
        """Kafka's doControlledShutdown."""
        if not self.is_active:
            raise errors.NotControllerError(
                "Controller moved to another broker. Aborting controlled shutdown"
            )
        known = self.context.live_brokers.get(broker_id)
        # Beyond Kafka (which lets -1 through, and any newer epoch): only the broker's current
        # registration may ask, so a request forged with -1 cannot empty a healthy broker.
        if known is not None and broker_epoch != known.epoch:
            raise errors.StaleBrokerEpochError(
                f"Received controlled shutdown request from broker epoch {broker_epoch} for "
                f"broker {broker_id}, whose current broker epoch is {known.epoch}."
            )
        if known is None:
            raise errors.BrokerNotAvailableError(f"Broker id {broker_id} does not exist.")
        logger.info("Shutting down broker %d", broker_id)
        self.context.shutting_down_broker_ids.add(broker_id)
        to_act_on = [
            tp
            for tp in self.context.partitions_on_broker(broker_id)
            if len(self.context.replicas(tp)) > 1
            and tp in self.context.partition_leadership
            and not self.context.is_topic_queued_for_deletion(tp.topic)
        ]
        led = [
            t
            for t in to_act_on
            if self.context.partition_leadership[t].leader_and_isr.leader == broker_id
        ]
        followed = [tp for tp in to_act_on if tp not in led]
        await self.partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE_PARTITION, ElectionStrategy.CONTROLLED_SHUTDOWN
        )
        await self.replica_state_machine.handle_state_changes(
            [(tp, broker_id) for tp in followed], ReplicaState.OFFLINE_REPLICA
        )
        # Kafka's replicatedPartitionsBrokerLeads: a partition with one replica has nowhere
        # to move, so it cannot hold the shutdown back (the broker would retry in vain).
        return [
            tp
            for tp in self.context.partitions_led_by(broker_id)
            if len(self.context.replicas(tp)) > 1
        ]

    def _process_leader_and_isr_response(self, event: ev.LeaderAndIsrResponseReceived) -> None:
        response = event.response
        failed = [
            f"{e.topic}-{e.partition}: {e.error_code}"
            for e in getattr(response, "partition_errors", ())
            if e.error_code
        ]
        if event.error_code or failed:
            logger.debug("LeaderAndIsr to broker %d answered %d, partition errors %s",
                         event.broker_id, event.error_code, failed)  # fmt: skip

    def _on_leader_and_isr_response(self, broker_id: int, error_code: int, body: Any) -> None:
        self.event_manager.put(ev.LeaderAndIsrResponseReceived(broker_id, error_code, body))

    # -- requests to brokers --------------------------------------------------------------

    def send_update_metadata(self, broker_ids: list[int], partitions: list[TopicPartition]) -> None:
        """UpdateMetadata to the brokers with the live brokers and the given partitions'
        states (none: only who is alive and who is the controller), as Kafka's
        sendUpdateMetadataRequest."""
        self.batch.new_batch()
        self.batch.add_update_metadata(broker_ids, partitions)
        self.batch.send(self.epoch)
