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
from collections.abc import Callable
from typing import Any

import attrs
import trio

import transport
import zkstub
from actors import EventManager, EventPreemptedError, MetricsRegistry, metric_name
from kcore import zkdata
from kcore.common import Broker, TopicPartition
from kcore.controller import events as ev
from kcore.controller.broker_change import classify_broker_change
from kcore.controller.channel import ControllerChannelManager
from kcore.controller.context import ControllerContext
from kcore.controller.controller_state import ControllerState
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import (
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kcore.zk_client import ControllerMovedError, KafkaZkClient

logger = logging.getLogger("kcore.controller")

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

    active_controller_id: int = attrs.field(default=-1, init=False)
    broker_epoch: int = attrs.field(default=-1, init=False)
    context: ControllerContext = attrs.field(factory=ControllerContext, init=False)
    event_manager: EventManager = attrs.field(init=False)
    channel: ControllerChannelManager = attrs.field(init=False)
    # Watches are one-shot and cannot be removed: a resigned controller ignores the ones
    # still armed by bumping this generation.
    _watch_generation: int = attrs.field(default=0, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)

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
        startup: the session hooks, then the Startup event)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.channel.run)
            await nursery.start(self.event_manager.run)
            self.zk_client.zk.add_session_hooks(
                before_initializing_session=self._before_initializing_session,
                after_initializing_session=self._after_initializing_session,
            )
            self.event_manager.put(ev.Startup())
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

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
                case _:
                    await self._process_other(event)
        except ControllerMovedError as error:
            logger.info("Controller moved to another broker when processing %r: %s", event, error)
            await self._maybe_resign()

    def preempt(self, event: ev.ControllerEvent) -> None:
        event.preempt()

    async def _process_other(self, event: ev.ControllerEvent) -> None:
        """Events whose handling the later issues add (topics, ISR changes, ...)."""
        logger.debug("Controller %d ignores %r", self.broker_id, event)

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
        return await self.zk_client.watch_controller(self._controller_watch)

    def _controller_watch(self, event: zkstub.WatchedEvent) -> None:
        if event.type is zkstub.EventType.DELETED:
            self.event_manager.put(ev.Reelect())
        else:
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
        except zkstub.ZkError as error:
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
        """Kafka's onControllerFailover: watches, context from ZooKeeper, metadata to every
        broker. A ZooKeeper error on the way moves the controller away (as Kafka does)."""
        self._watch_generation += 1
        try:
            await self._register_failover_watches()
            await self._initialize_context()
            self.send_update_metadata(sorted(self.context.live_or_shutting_down_broker_ids), [])
        except ControllerMovedError:
            raise
        except zkstub.ZkError as error:
            logger.error("Error while initializing the controller on broker %d: %r",
                         self.broker_id, error)  # fmt: skip
            await self._trigger_controller_move()

    def _watch(self, make_event: Callable[[], ev.ControllerEvent]) -> Callable[[Any], None]:
        """A watch callback that puts an event unless this controller resigned since."""
        generation = self._watch_generation

        def on_watch(_event: zkstub.WatchedEvent) -> None:
            if generation == self._watch_generation:
                self.event_manager.put(make_event())

        return on_watch

    async def _register_failover_watches(self) -> None:
        zk = self.zk_client.zk
        await zk.get_children(zkdata.BROKER_TOPICS, watch=self._watch(ev.TopicChange))
        await zk.get_children(zkdata.DELETE_TOPICS, watch=self._watch(ev.TopicDeletion))
        await zk.get_children(
            zkdata.ISR_CHANGE_NOTIFICATION, watch=self._watch(ev.IsrChangeNotification)
        )
        await zk.exists(
            zkdata.PREFERRED_REPLICA_ELECTION, watch=self._watch(ev.PreferredReplicaElection)
        )
        await zk.exists(zkdata.REASSIGN_PARTITIONS, watch=self._watch(ev.ZkPartitionReassignment))

    def _broker_change_watch(self) -> Callable[[Any], None]:
        return self._watch(ev.BrokerChange)

    async def _initialize_context(self) -> None:
        brokers = await self.zk_client.get_all_brokers(watch=self._broker_change_watch())
        self.context.add_live_brokers(brokers.values())
        for topic in sorted(await self.zk_client.get_all_topics()):
            found = await self.zk_client.get_replica_assignment(
                topic, watch=self._watch(lambda t=topic: ev.PartitionModifications(t))
            )
            if found is None:
                continue
            topic_id, assignment = found
            self.context.set_topic_assignment(topic, topic_id, assignment)
            for partition in sorted(assignment):
                tp = TopicPartition(topic, partition)
                state = await self.zk_client.get_partition_state(tp)
                if state is not None:
                    self.context.partition_leadership[tp] = state
        for broker in sorted(brokers.values(), key=lambda b: b.id):
            self.channel.add_broker(broker)
        logger.info("Initialized broker epochs cache: %s", self.context.live_broker_epochs())

    def _on_controller_resignation(self) -> None:
        """Undoes failover: no watches act, no requests go out, the context is forgotten."""
        logger.info("Resigning")
        self._watch_generation += 1
        self.channel.shutdown()
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
            self.on_broker_startup(new_ids)
        if bounced_ids:
            self.context.remove_live_brokers(bounced_ids)
            self.on_broker_failure(bounced_ids)
            self.context.add_live_brokers(current[b] for b in bounced_ids)
            self.on_broker_startup(bounced_ids)
        if dead_ids:
            self.context.remove_live_brokers(dead_ids)
            self.on_broker_failure(dead_ids)
        if change.changed:
            logger.info("Updated broker epochs cache: %s", self.context.live_broker_epochs())

    def on_broker_startup(self, broker_ids: list[int]) -> None:
        """Existing brokers learn of the new ones; new ones get every partition's metadata."""
        existing = sorted(self.context.live_or_shutting_down_broker_ids - set(broker_ids))
        self.send_update_metadata(existing, [])
        self.send_update_metadata(broker_ids, self.context.all_partitions())

    def on_broker_failure(self, broker_ids: list[int]) -> None:
        self.send_update_metadata(sorted(self.context.live_or_shutting_down_broker_ids), [])

    # -- requests to brokers --------------------------------------------------------------

    def send_update_metadata(self, broker_ids: list[int], partitions: list[TopicPartition]) -> None:
        """UpdateMetadata with the live brokers and the given partitions' states (every
        partition when `partitions` is empty, as Kafka's full update after failover)."""
        chosen = partitions or self.context.all_partitions()
        states = tuple(self._update_metadata_state(tp) for tp in chosen)
        request_states = tuple(s for s in states if s is not None)
        live = tuple(
            UpdateMetadataBroker.from_broker(self.context.live_brokers[b])
            for b in sorted(self.context.live_or_shutting_down_broker_ids)
        )
        for broker_id in broker_ids:
            broker = self.context.live_brokers.get(broker_id)
            if broker is None:
                continue
            request = UpdateMetadataRequest(
                self.broker_id,
                self.context.epoch,
                broker.epoch,
                request_states,
                live,
                dict(self.context.topic_ids),
            )
            self.channel.send(broker_id, ApiKey.UPDATE_METADATA, request)

    def _update_metadata_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        state = self.context.partition_leadership.get(tp)
        if state is None:
            return None
        replicas = self.context.replicas(tp)
        leader_and_isr = state.leader_and_isr
        return UpdateMetadataPartitionState(
            tp.topic,
            tp.partition,
            state.controller_epoch,
            leader_and_isr.leader,
            leader_and_isr.leader_epoch,
            leader_and_isr.isr,
            leader_and_isr.partition_epoch,
            replicas,
            tuple(r for r in replicas if not self.context.is_replica_online(r, True)),
        )
