"""The broker's replicas (Kafka's ReplicaManager): obeys LeaderAndIsr and StopReplica,
appends produced records as leader, serves fetches to consumers and followers, and shrinks
and expands ISRs, propagating the changes to the controller.

What it decides lives elsewhere, sans-IO: the partition's rules in `partition`, which
LeaderAndIsr states to accept in `leader_and_isr`, when a waiting produce or fetch is done
in `purgatory`. The logs, their checkpoints and retention are the `LogManager`'s.

`run` supervises its long-lived tasks (`actors.open_supervisor`): the fetcher manager (which
supervises its fetchers), ISR expiration, ISR writes, ISR change propagation, and the log
manager's high-watermark checkpoint and retention loops; one that fails unexpectedly is
restarted. An OSError from a log is reported to `log_dir_failures` and answers
KAFKA_STORAGE_ERROR (the broker then goes down).
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

import attrs
import trio

import actors
import transport
from kcore import errors
from kcore.common import EPOCH_DURING_DELETE, TopicPartition
from kcore.config import InvalidTopicConfigError, TopicConfig
from kcore.log import (
    BatchHeader,
    CorruptRecordError,
    check_keys_for_compaction,
    check_produced_batch,
    split_batches,
    with_log_append_time,
)
from kcore.metrics import BrokerTopicStats, IsrChangeMeters, log_flush_timer
from kcore.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from kcore.protocol.data import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_EPOCH,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)
from kcore.protocol.sizing import fetch_records_limit
from kcore.server.fetcher import (
    BrokerEndPoint,
    FetcherSettings,
    InitialFetchState,
    ReplicaFetcherManager,
)
from kcore.server.isr_updates import IsrChangePropagation
from kcore.server.leader_and_isr import decide_leader_and_isr
from kcore.server.log_cleaner import CleanerSettings, CompactedReplica, LogCleaner
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager, RetentionLimits
from kcore.server.partition import IsrProposal, Partition
from kcore.server.purgatory import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedOperationPurgatory,
    DelayedProduce,
    FetchRead,
)
from kcore.zk_client import KafkaZkClient, ZooKeeperError

logger = logging.getLogger("kcore.server.replica_manager")
state_change_logger = logging.getLogger("kcore.state.change")


def _now_ms() -> int:
    """Trio's clock in ms: lag and purgatory timing (virtual under MockClock)."""
    return int(trio.current_time() * 1000)


def _error_code(error: BaseException) -> int:
    if isinstance(error, errors.KafkaError):
        return error.code
    return errors.UnknownServerError.code


@attrs.define
class FetchBudget:
    """How much a fetch may still read (KIP-74, Kafka's ReplicaManager.readFromLocalLog):
    partitions are read in request order, each up to its own `partition_max_bytes` and what
    is left of the request's `max_bytes`; the first batch of the first partition that has
    one is returned even if larger (so a consumer always progresses), after which the
    limits are strict. Besides, every response must fit the frame limit (kcore's transport
    bounds responses, Kafka's does not): `frame_bytes` is a hard limit, even for that first
    batch."""

    request_bytes: int  # what is left of the request's max_bytes
    frame_bytes: int  # what is left of the frame for records
    min_one: bool = True  # nothing read yet: the first batch goes even if larger

    @classmethod
    def for_request(cls, request: FetchRequest, frame_limit: int) -> FetchBudget:
        topics = (ask.topic for ask in request.partitions)
        return cls(request.max_bytes, fetch_records_limit(frame_limit, topics))

    def partition_limit(self, partition_max_bytes: int) -> int | None:
        """The `max_bytes` to read a partition with; None: do not read it."""
        limit = min(partition_max_bytes, self.request_bytes, self.frame_bytes)
        if limit <= 0 and not self.min_one:
            return None
        return max(0, limit)

    def take(self, batches: list[bytes], limit: int) -> list[bytes]:
        """What of `batches` (read with `limit`, so only a lone first batch can exceed it)
        goes into the response; the budget is charged for it. A lone batch larger than the
        frame raises MessageTooLargeError: it can never be sent."""
        size = sum(len(batch) for batch in batches)
        if size > limit and not self.min_one:
            return []
        if size > self.frame_bytes:
            raise errors.MessageTooLargeError(
                f"a record batch of {size} bytes does not fit in a response under the frame "
                f"limit ({self.frame_bytes} bytes left for records)"
            )
        if size:
            self.min_one = False
            self.request_bytes -= size
            self.frame_bytes -= size
        return batches


class _HostedLeaderEpochs(Mapping[TopicPartition, int]):
    """The hosted partitions' leader epochs, read through (no copy per request)."""

    def __init__(self, partitions: Mapping[TopicPartition, Partition]) -> None:
        self._partitions = partitions

    def __getitem__(self, tp: TopicPartition) -> int:
        return self._partitions[tp].leader_epoch

    def __contains__(self, tp: object) -> bool:
        return tp in self._partitions

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._partitions)

    def __len__(self) -> int:
        return len(self._partitions)


@attrs.define(eq=False)
class ReplicaManager:
    config: Any  # kcore.config.KafkaConfig
    broker_id: int
    zk_client: KafkaZkClient
    log_manager: LogManager
    network: transport.Network  # the broker's node
    rng: random.Random
    broker_epoch: Callable[[], int]
    wall_clock_ms: Callable[[], int]  # record timestamps and segment roll
    is_controller: Callable[[], bool] = lambda: False
    log_dir_failures: LogDirFailureChannel = attrs.field(kw_only=True)
    metrics: actors.MetricsRegistry = attrs.field(factory=actors.MetricsRegistry, kw_only=True)

    partitions: dict[TopicPartition, Partition] = attrs.field(factory=dict, init=False)
    controller_epoch: int = attrs.field(default=-1, init=False)
    fetcher_manager: ReplicaFetcherManager = attrs.field(init=False)
    isr_propagation: IsrChangePropagation = attrs.field(factory=IsrChangePropagation, init=False)
    # acks=all produces waiting for the HW; fetches waiting for data (long polls).
    produce_purgatory: DelayedOperationPurgatory = attrs.field(
        factory=lambda: DelayedOperationPurgatory("Produce"), init=False
    )
    fetch_purgatory: DelayedOperationPurgatory = attrs.field(
        factory=lambda: DelayedOperationPurgatory("Fetch"), init=False
    )
    # DeleteRecords waiting for every live replica's log start offset to pass the offset.
    delete_records_purgatory: DelayedOperationPurgatory = attrs.field(
        factory=lambda: DelayedOperationPurgatory("DeleteRecords"), init=False
    )
    _hw_checkpoints: dict[TopicPartition, int] = attrs.field(factory=dict, init=False)
    # Kafka's onLeadershipChange: told, after each LeaderAndIsr and StopReplica, which
    # partitions this broker now leads (with their leader epochs) and which it stopped
    # leading; the group coordinator loads and unloads its groups by it.
    leadership_listeners: list[
        Callable[[dict[TopicPartition, int], list[TopicPartition]], None]
    ] = attrs.field(factory=list, init=False)
    _topic_configs: dict[str, TopicConfig] = attrs.field(factory=dict, init=False)
    # Each cached config's own overrides, to rebuild it over new broker defaults.
    _topic_overrides: dict[str, dict[str, str]] = attrs.field(factory=dict, init=False)
    # The log cleaner, once `run` started it (log.cleaner.enable).
    log_cleaner: LogCleaner | None = attrs.field(default=None, init=False)
    _state_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    # ISR proposals for the ISR-write task (a write must not hold up the fetch or the loop
    # that proposed it).
    _isr_writes: trio.MemorySendChannel[tuple[Partition, IsrProposal]] = attrs.field(init=False)
    _isr_writes_received: trio.MemoryReceiveChannel[tuple[Partition, IsrProposal]] = attrs.field(
        init=False
    )
    _shutting_down: bool = attrs.field(default=False, init=False)
    _in_controlled_shutdown: bool = attrs.field(default=False, init=False)
    # Kafka's BrokerTopicMetrics and ISR meters (kcore.metrics), counted as requests pass.
    topic_stats: BrokerTopicStats = attrs.field(init=False)
    isr_meters: IsrChangeMeters = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        config = self.config
        self.topic_stats = BrokerTopicStats(self.metrics)
        self.isr_meters = IsrChangeMeters(self.metrics)
        self.log_manager.flush_timer = log_flush_timer(self.metrics)
        self.fetcher_manager = ReplicaFetcherManager(
            self,
            self.network,
            random.Random(self.rng.getrandbits(64)),
            FetcherSettings(
                max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                partition_max_bytes=config.replica_fetch_max_bytes,
                response_max_bytes=config.replica_fetch_response_max_bytes,
                backoff_ms=config.replica_fetch_backoff_ms,
                request_timeout_ms=config.replica_socket_timeout_ms,
            ),
            num_fetchers=config.num_replica_fetchers,
        )
        self._isr_writes, self._isr_writes_received = trio.open_memory_channel(math.inf)

    # -- ReplicaAccess for the fetchers -------------------------------------------------------

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def on_follower_append(self, partition: Partition) -> None:
        self._complete_delayed_requests(partition.tp)

    def handling_log_io_errors(
        self, tp: TopicPartition, action: str
    ) -> contextlib.AbstractContextManager[None]:
        """Work on `tp`'s log: an OSError is reported to `log_dir_failures` and raised as
        KafkaStorageError (as is any work on a log in a dir that already failed)."""
        return self.log_dir_failures.handling_io_errors(self.log_manager.log_dir_of(tp), action, tp)

    # -- lifecycle ----------------------------------------------------------------------------

    def startup(self) -> None:
        """Opens the logs on disk (recovering their tails) and reads the HW checkpoint."""
        self._hw_checkpoints = self.log_manager.load_logs()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        async with actors.open_supervisor(name=f"replica-manager-{self.broker_id}") as tasks:
            await tasks.start(self.fetcher_manager.run, name="replica-fetcher-manager")
            tasks.start_soon(self._isr_expiration_loop, name="isr-expiration")
            tasks.start_soon(self._isr_propagation_loop, name="isr-change-propagation")
            tasks.start_soon(
                self.log_manager.run_high_watermark_checkpoints,
                config.replica_high_watermark_checkpoint_interval_ms,
                self.high_watermarks,
                self.log_dir_failures,
                name="highwatermark-checkpoint",
            )
            tasks.start_soon(
                self.log_manager.run_retention,
                config.log_retention_check_interval_ms,
                self.wall_clock_ms,
                self.retention_limits,
                self.log_dir_failures,
                name="log-retention",
            )
            if config.log_cleaner_enable:
                cleaner = self.log_cleaner = LogCleaner(
                    self.log_manager,
                    CleanerSettings.from_config(config),
                    self.wall_clock_ms,
                    self.log_dir_failures,
                )
                await tasks.start(cleaner.run, self.compacted_replicas, name="log-cleaner")
            tasks.start_soon(self._isr_write_loop, name="isr-writes")
            task_status.started()

    def shutdown(self) -> None:
        """A clean stop: fetchers stop, logs are flushed and checkpointed."""
        self._shutting_down = True
        self.fetcher_manager.shutdown()
        self.log_manager.close(self.high_watermarks(), self.log_dir_failures)

    def begin_controlled_shutdown(self) -> None:
        """From now on, partitions this broker is told to follow are not fetched. The
        controller moves leadership off a shutting-down broker and takes it out of the
        ISRs; if it kept fetching, the new leaders would add it straight back (Kafka 3.5's
        controller refuses such an expansion in AlterPartition; here ISR changes are
        written to ZooKeeper by the leaders, so the shutting-down broker refrains)."""
        self._in_controlled_shutdown = True

    def high_watermarks(self) -> dict[TopicPartition, int]:
        found = dict(self._hw_checkpoints)
        found.update({tp: p.high_watermark for tp, p in self.partitions.items()})
        return {tp: hw for tp, hw in found.items() if tp in self.log_manager.logs}

    def retention_limits(self) -> dict[TopicPartition, RetentionLimits]:
        """Each hosted replica's retention, in partition order, for the log manager; none
        for a topic whose cleanup.policy lacks delete (compacted only)."""
        limits = {}
        for tp in sorted(self.partitions):
            config = self._topic_configs[tp.topic]  # read when the partition was created
            if not config.delete:
                continue
            limits[tp] = RetentionLimits(
                config.retention_ms, config.retention_bytes, self.partitions[tp].high_watermark
            )
        return limits

    def compacted_replicas(self) -> dict[TopicPartition, CompactedReplica]:
        """Each hosted replica of a compacted topic, for the log cleaner."""
        return {
            tp: CompactedReplica(config, partition.high_watermark)
            for tp, partition in sorted(self.partitions.items())
            if (config := self._topic_configs[tp.topic]).compact
        }

    def min_insync_replicas(self, topic: str) -> int:
        """min.insync.replicas of a hosted topic, as its partitions were created with."""
        config = self._topic_configs.get(topic)
        return config.min_insync_replicas if config else self.config.min_insync_replicas

    def _complete_delayed_requests(self, tp: TopicPartition) -> None:
        """`tp` moved (its log end, HW or leadership): waiting produces and fetches check."""
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    # -- topic configs -----------------------------------------------------------------------

    async def topic_config(self, topic: str, *, refresh: bool = False) -> TopicConfig:
        config = self._topic_configs.get(topic)
        if config is None or refresh:
            overrides = await self.zk_client.read_topic_configs(topic)
            self._topic_overrides[topic] = overrides
            config = self._topic_configs[topic] = self._topic_config_from(topic, overrides)
        return config

    def _topic_config_from(self, topic: str, overrides: dict[str, str]) -> TopicConfig:
        """The topic's overrides over the broker's current defaults."""
        try:
            return TopicConfig.from_dict(overrides, self.config)
        except InvalidTopicConfigError as error:
            logger.error("Ignoring invalid config of topic %s: %s", topic, error)
            return TopicConfig.from_dict({}, self.config)

    def reconfigure_log_defaults(self) -> None:
        """The broker's log.* defaults changed (a dynamic broker config; Kafka's
        DynamicLogConfig.updateLogsConfig): every topic config is rebuilt from its own
        overrides over the new defaults, and the hosted logs take their new segment and
        flush settings; retention, min.insync.replicas and the cleaner read the rebuilt
        configs where they use them."""
        for topic in sorted(self._topic_configs):
            overrides = self._topic_overrides.get(topic, {})
            self._topic_configs[topic] = self._topic_config_from(topic, overrides)
        for tp in sorted(self.partitions):
            try:
                with self.handling_log_io_errors(tp, "reconfigure"):
                    self.log_manager.get_or_create_log(
                        tp, self._topic_configs[tp.topic], self.log_dir_failures
                    )
            except errors.KafkaStorageError as error:
                logger.error("Reconfiguring the log of %s failed: %s", tp, error)

    async def reload_topic_config(self, topic: str) -> None:
        """`topic`'s config changed (an admin's AlterConfigs): read it again, and give its
        hosted logs their new segment and flush settings; retention, min.insync.replicas
        and max.message.bytes are read from the cached config each time they are used."""
        if topic not in self._topic_configs:
            return  # never used here, so nothing holds the old config
        config = await self.topic_config(topic, refresh=True)
        for tp in sorted(self.partitions):
            if tp.topic == topic:
                with self.handling_log_io_errors(tp, "reconfigure"):
                    self.log_manager.get_or_create_log(tp, config, self.log_dir_failures)

    # -- LeaderAndIsr ------------------------------------------------------------------------

    async def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        async with self._state_lock:
            return await self._become_leader_or_follower(request)

    async def _become_leader_or_follower(
        self, request: LeaderAndIsrRequest
    ) -> LeaderAndIsrResponse:
        decision = decide_leader_and_isr(
            request,
            broker_id=self.broker_id,
            controller_epoch=self.controller_epoch,
            hosted_leader_epochs=_HostedLeaderEpochs(self.partitions),
        )
        if decision.stale_controller_epoch:
            state_change_logger.warning(
                "Ignoring LeaderAndIsr request from controller %d with correlation epoch %d "
                "since its controller epoch is older than the current %d",
                request.controller_id,
                request.controller_epoch,
                self.controller_epoch,
            )
            return LeaderAndIsrResponse(errors.StaleControllerEpochError.code)
        self.controller_epoch = request.controller_epoch
        now_ms = _now_ms()
        for stale in decision.stale_leader_epochs:
            state_change_logger.info(
                "Ignoring LeaderAndIsr for %s from controller %d epoch %d: its leader epoch "
                "%d is not newer than the current %d",
                stale.tp,
                request.controller_id,
                request.controller_epoch,
                stale.leader_epoch,
                stale.current_leader_epoch,
            )
        codes = dict(decision.error_codes)
        # Each new topic's config read once per request, not once per partition.
        configs = {
            topic: await self.topic_config(topic, refresh=True)
            for topic in sorted({tp.topic for tp in decision.new_partitions})
        }
        for tp in decision.new_partitions:
            try:
                self._create_partition(tp, configs[tp.topic])
            except errors.KafkaStorageError:
                codes[tp] = errors.KafkaStorageError.code
        leaders = {tp: s for tp, s in decision.leaders.items() if not codes[tp]}
        followers = {tp: s for tp, s in decision.followers.items() if not codes[tp]}
        codes |= self._make_leaders(leaders, now_ms)
        self._make_followers(followers, request)
        self.fetcher_manager.shutdown_idle_fetchers()
        self._tell_leadership(
            {tp: self.partitions[tp].leader_epoch for tp in leaders if not codes.get(tp)},
            sorted(followers),
        )
        partition_errors = tuple(
            PartitionError(tp.topic, tp.partition, code) for tp, code in sorted(codes.items())
        )
        return LeaderAndIsrResponse(0, partition_errors)

    def _tell_leadership(
        self, leaders: dict[TopicPartition, int], resigned: list[TopicPartition]
    ) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(leaders, resigned)
            except Exception:  # a listener's bug must not fail the LeaderAndIsr
                logger.exception("leadership listener %r failed", listener)

    def _create_partition(self, tp: TopicPartition, config: TopicConfig) -> Partition:
        log = self.log_manager.get_or_create_log(tp, config, self.log_dir_failures)
        partition = Partition(
            tp,
            self.broker_id,
            log,
            high_watermark=self._hw_checkpoints.get(tp, 0),
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
        )
        self.partitions[tp] = partition
        return partition

    def _make_leaders(
        self, states: dict[TopicPartition, LeaderAndIsrPartitionState], now_ms: int
    ) -> dict[TopicPartition, int]:
        """Makes this broker the leader; the error code of each partition that failed."""
        if not states:
            return {}
        failed = {}
        self.fetcher_manager.remove_fetcher_for_partitions(sorted(states))
        for tp in sorted(states):
            partition = self.partitions[tp]
            try:
                # A new leader epoch is written to the log's epoch checkpoint.
                with self.handling_log_io_errors(tp, "become leader of"):
                    partition.make_leader(states[tp], now_ms)
            except errors.KafkaStorageError:
                failed[tp] = errors.KafkaStorageError.code
                continue
            state_change_logger.info(
                "Leader %s with leader epoch %d, ISR %s, high watermark %d, log end offset %d",
                tp,
                partition.leader_epoch,
                list(partition.isr),
                partition.high_watermark,
                partition.log_end_offset,
            )
        for tp in sorted(states):
            self._complete_delayed_requests(tp)
        return failed

    def _make_followers(
        self,
        states: dict[TopicPartition, LeaderAndIsrPartitionState],
        request: LeaderAndIsrRequest,
    ) -> None:
        if not states:
            return
        live_leaders = {leader.broker_id: leader for leader in request.live_leaders}
        changed = [tp for tp in sorted(states) if self.partitions[tp].make_follower(states[tp])]
        self.fetcher_manager.remove_fetcher_for_partitions(changed)
        for tp in changed:  # answers waiting produces with NOT_LEADER_OR_FOLLOWER
            self._complete_delayed_requests(tp)
        if self._shutting_down or self._in_controlled_shutdown:
            return
        to_fetch: dict[TopicPartition, InitialFetchState] = {}
        for tp in changed:
            partition = self.partitions[tp]
            leader = live_leaders.get(partition.leader_id)
            if leader is None:
                state_change_logger.info(
                    "Follower %s: leader %d is not alive; not fetching until it is",
                    tp,
                    partition.leader_id,
                )
                continue
            to_fetch[tp] = InitialFetchState(
                BrokerEndPoint(leader.broker_id, leader.host, leader.port),
                partition.leader_epoch,
                partition.log_end_offset,
            )
            state_change_logger.info(
                "Follower %s starts fetching from leader %d at offset %d, leader epoch %d",
                tp,
                leader.broker_id,
                partition.log_end_offset,
                partition.leader_epoch,
            )
        self.fetcher_manager.add_fetcher_for_partitions(to_fetch)

    # -- StopReplica ---------------------------------------------------------------------------

    async def stop_stray_replicas(self, update: UpdateMetadataRequest) -> None:
        """Beyond Kafka's ZooKeeper mode (KRaft brokers do it from the metadata log): a
        replica this broker hosts that the controller's metadata, at a newer leader epoch,
        no longer lists here was removed (a reassignment) while the StopReplica could not
        reach this broker; it is stopped and deleted as that StopReplica would have done,
        so it cannot go on believing it leads."""
        stray = []
        for state in update.partition_states:
            partition = self.partitions.get(TopicPartition(state.topic, state.partition))
            if (
                partition is not None
                and self.broker_id not in state.replicas
                and state.leader_epoch > partition.leader_epoch
            ):
                stray.append(
                    StopReplicaPartitionState(
                        state.topic, state.partition, state.leader_epoch, delete_partition=True
                    )
                )
        if not stray:
            return
        state_change_logger.warning(
            "Broker %d deletes its replicas of %s: the controller's metadata no longer lists "
            "it among their replicas (removed while it could not be told)",
            self.broker_id,
            [f"{s.topic}-{s.partition}" for s in stray],
        )
        await self.stop_replicas(
            StopReplicaRequest(
                update.controller_id, update.controller_epoch, update.broker_epoch, tuple(stray)
            )
        )

    async def stop_replicas(self, request: StopReplicaRequest) -> StopReplicaResponse:
        async with self._state_lock:
            if request.controller_epoch < self.controller_epoch:
                return StopReplicaResponse(errors.StaleControllerEpochError.code)
            self.controller_epoch = request.controller_epoch
            results = []
            stopped = []
            for state in request.partition_states:
                tp = TopicPartition(state.topic, state.partition)
                partition = self.partitions.get(tp)
                code = 0
                if (
                    partition is not None
                    and state.leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE)
                    and state.leader_epoch < partition.leader_epoch
                ):
                    code = errors.FencedLeaderEpochError.code
                else:
                    stopped.append((tp, state.delete_partition))
                results.append(PartitionError(tp.topic, tp.partition, code))
            self.fetcher_manager.remove_fetcher_for_partitions(tp for tp, _ in stopped)
            not_deleted = set()
            for tp, delete in stopped:
                partition = self.partitions.get(tp)
                if partition is not None:
                    partition.stop_leading()
                if delete:
                    self.partitions.pop(tp, None)
                    self._hw_checkpoints.pop(tp, None)
                    try:
                        self.log_manager.delete_log(tp, self.log_dir_failures)
                    except errors.KafkaStorageError:
                        not_deleted.add((tp.topic, tp.partition))
                self._complete_delayed_requests(tp)
            # A topic with no partition left here loses its BrokerTopicMetrics, as in Kafka.
            deleted = {tp.topic for tp, delete in stopped if delete}
            for topic in sorted(deleted - {tp.topic for tp in self.partitions}):
                self.topic_stats.remove_topic(topic)
            self.fetcher_manager.shutdown_idle_fetchers()
            self._tell_leadership({}, sorted(tp for tp, _ in stopped))
            return StopReplicaResponse(
                0,
                tuple(
                    attrs.evolve(result, error_code=errors.KafkaStorageError.code)
                    if (result.topic, result.partition) in not_deleted
                    else result
                    for result in results
                ),
            )

    # -- Produce ---------------------------------------------------------------------------

    async def append_records(self, request: ProduceRequest) -> ProduceResponse:
        now_ms = _now_ms()
        answers: dict[TopicPartition, ProducePartitionResponse] = {}
        awaiting: dict[TopicPartition, tuple[Partition, int, int]] = {}
        for data in request.partitions:
            tp = TopicPartition(data.topic, data.partition)
            try:
                partition, first, last, min_isr, log_append_time = await self._append_to_leader(
                    tp, data.records, request.acks, now_ms
                )
            except (errors.KafkaError, CorruptRecordError) as error:
                code = (
                    errors.CorruptMessageError.code
                    if isinstance(error, CorruptRecordError)
                    else _error_code(error)
                )
                answers[tp] = ProducePartitionResponse(
                    tp.topic, tp.partition, code, error_message=str(error)
                )
                self.topic_stats.record_append(tp.topic, code, len(data.records))
                continue
            self.topic_stats.record_append(tp.topic, 0, len(data.records), last - first + 1)
            answers[tp] = ProducePartitionResponse(
                tp.topic, tp.partition, 0, first, log_append_time, partition.log_start_offset
            )
            if request.acks == -1:
                awaiting[tp] = (partition, last + 1, min_isr)
            self._complete_delayed_requests(tp)  # followers' long polls
        if awaiting:
            delayed = DelayedProduce(awaiting, answers, self.partitions.get)
            deadline = trio.current_time() + request.timeout_ms / 1000
            await self.produce_purgatory.try_complete_else_watch(delayed, deadline)
        self.topic_stats.record_produce_response(answer.error_code for answer in answers.values())
        return ProduceResponse(tuple(answers[tp] for tp in answers))

    async def _append_to_leader(
        self, tp: TopicPartition, records: bytes, acks: int, now_ms: int
    ) -> tuple[Partition, int, int, int, int]:
        partition = self.partitions.get(tp)
        if partition is None:
            raise errors.UnknownTopicOrPartitionError(f"broker {self.broker_id} does not host {tp}")
        config = await self.topic_config(tp.topic)
        if len(records) > config.max_message_bytes:
            raise errors.MessageTooLargeError(
                f"{len(records)} bytes of records exceed max.message.bytes "
                f"{config.max_message_bytes} of {tp.topic}"
            )
        now_ms = self.wall_clock_ms()
        batches = split_batches(records)  # each batch's CRC checked
        for header, batch in batches:
            check_produced_batch(header, str(tp))
            if config.compact:
                check_keys_for_compaction(header, batch, str(tp))
            if config.message_timestamp_type == "CreateTime":
                check_create_time(header, now_ms, config.message_timestamp_difference_max_ms, tp)
        log_append_time = -1
        if config.message_timestamp_type == "LogAppendTime":
            log_append_time = now_ms
            records = b"".join(with_log_append_time(batch, now_ms) for _, batch in batches)
        with self.handling_log_io_errors(tp, "append to"):
            first, last = partition.append_as_leader(
                records, acks, config.min_insync_replicas, now_ms
            )
        return partition, first, last, config.min_insync_replicas, log_append_time

    # -- Fetch -----------------------------------------------------------------------------

    async def fetch_messages(self, request: FetchRequest) -> FetchResponse:
        """Reads at once; if fewer than `min_bytes` came and nothing failed, waits in the
        fetch purgatory for new data up to `max_wait_ms` (long polling) and reads again."""
        delayed = DelayedFetch(request, self._read, may_read=self._may_read)
        deadline = trio.current_time() + request.max_wait_ms / 1000
        await self.fetch_purgatory.try_complete_else_watch(delayed, deadline)
        assert delayed.response is not None
        self.topic_stats.record_fetch(request.replica_id >= 0, delayed.response.partitions)
        return delayed.response

    def _may_read(self, request: FetchRequest) -> bool:
        """Whether reading `request` again could answer more than its last read: a
        partition has records past its fetch offset (to the log end for a follower, the high
        watermark for a consumer) or would answer an error. Offsets only, nothing read."""
        is_follower = request.replica_id >= 0
        for ask in request.partitions:
            partition = self.partitions.get(TopicPartition(ask.topic, ask.partition))
            if partition is None:
                return True
            try:
                partition.check_leader(ask.current_leader_epoch)
            except errors.KafkaError:
                return True
            offset = ask.fetch_offset
            if not (partition.log_start_offset <= offset <= partition.log_end_offset):
                return True
            if offset < (partition.log_end_offset if is_follower else partition.high_watermark):
                return True
        return False

    def _read(self, request: FetchRequest) -> FetchRead:
        is_follower = request.replica_id >= 0
        now_ms = _now_ms()
        answers = []
        size = 0
        failed = False
        budget = FetchBudget.for_request(request, self.config.socket_request_max_bytes)
        for ask in request.partitions:
            tp = TopicPartition(ask.topic, ask.partition)
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise errors.UnknownTopicOrPartitionError(f"{tp} is not on {self.broker_id}")
                partition.check_leader(ask.current_leader_epoch)
                if not (partition.log_start_offset <= ask.fetch_offset <= partition.log_end_offset):
                    raise errors.OffsetOutOfRangeError(
                        f"{tp}: fetch offset {ask.fetch_offset} outside "
                        f"[{partition.log_start_offset}, {partition.log_end_offset}]"
                    )
                if is_follower:
                    self._update_follower(partition, request.replica_id, ask, now_ms)
                limit = budget.partition_limit(ask.partition_max_bytes)
                batches = []
                if limit is not None:
                    with self.handling_log_io_errors(tp, "read"):
                        batches = partition.read(
                            ask.fetch_offset, limit, up_to_high_watermark=not is_follower
                        )
                    batches = budget.take(batches, limit)
            except errors.KafkaError as error:
                if isinstance(error, CorruptRecordError):
                    # The batches before it were served by an earlier read; this one cannot be.
                    logger.error("Fetch of %s at offset %d: %s", tp, ask.fetch_offset, error)
                failed = True
                answers.append(self._fetch_error(tp, partition, error))
                continue
            records = b"".join(batches)
            size += len(records)
            answers.append(
                FetchPartitionResponse(
                    tp.topic,
                    tp.partition,
                    0,
                    partition.high_watermark,
                    partition.log_start_offset,
                    records,
                    current_leader=partition.leader_id,
                    current_leader_epoch=partition.leader_epoch,
                )
            )
        return tuple(answers), size, failed

    def _fetch_error(
        self, tp: TopicPartition, partition: Partition | None, error: errors.KafkaError
    ) -> FetchPartitionResponse:
        return FetchPartitionResponse(
            tp.topic,
            tp.partition,
            error.code,
            current_leader=partition.leader_id if partition else -1,
            current_leader_epoch=partition.leader_epoch if partition else NO_EPOCH,
        )

    def _update_follower(self, partition: Partition, replica_id: int, ask, now_ms: int) -> None:
        follower = partition.followers.get(replica_id)
        start_before = follower.log_start_offset if follower is not None else None
        moved = partition.update_follower_fetch_state(
            replica_id, ask.fetch_offset, ask.log_start_offset, now_ms
        )
        if ask.log_start_offset != start_before:
            # The follower deleted records below its new start: a DeleteRecords may be done.
            self.delete_records_purgatory.check_and_complete(partition.tp)
        proposal = partition.propose_isr_expansion(replica_id)
        if proposal is not None:
            state_change_logger.info(
                "Expanding ISR of %s from %s to %s",
                partition.tp,
                list(partition.isr),
                list(proposal.isr),
            )
            self._submit_isr(partition, proposal)
        if moved:
            self._complete_delayed_requests(partition.tp)

    # -- DeleteRecords -----------------------------------------------------------------------

    async def delete_records(
        self,
        offsets: dict[TopicPartition, int],
        timeout_ms: int,
        live_brokers: Callable[[], Collection[int]],
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Kafka's deleteRecords: each leader moves its log start offset up to the offset
        asked for (-1: its high watermark); answered per partition with (low watermark,
        error code) once every live replica has deleted as far, or REQUEST_TIMED_OUT."""
        answers: dict[TopicPartition, tuple[int, int]] = {}
        pending: dict[TopicPartition, tuple[Partition, int]] = {}
        for tp, offset in offsets.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise errors.UnknownTopicOrPartitionError(f"{tp} is not on {self.broker_id}")
                with self.handling_log_io_errors(tp, "delete records of"):
                    required = partition.delete_records_on_leader(offset)
            except errors.KafkaError as error:
                answers[tp] = (-1, error.code)
                continue
            logger.info("Deleted records of %s before offset %d", tp, required)
            answers[tp] = (partition.log_start_offset, 0)
            pending[tp] = (partition, required)
            self._complete_delayed_requests(tp)
        if pending:
            delayed = DelayedDeleteRecords(pending, answers, self.partitions.get, live_brokers)
            deadline = trio.current_time() + timeout_ms / 1000
            await self.delete_records_purgatory.try_complete_else_watch(delayed, deadline)
        return answers

    # -- ISR changes -------------------------------------------------------------------------

    def _submit_isr(self, partition: Partition, proposal: IsrProposal) -> None:
        self._isr_writes.send_nowait((partition, proposal))

    async def _isr_write_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Writes each ISR proposal on a task of its own, so writes to many partitions are
        in flight together; one that fails unexpectedly is written again."""
        async with actors.open_supervisor(name=f"isr-writes-{self.broker_id}") as writes:
            task_status.started()
            async for partition, proposal in self._isr_writes_received:
                writes.start_soon(
                    self._write_isr, partition, proposal, name=f"isr-write-{proposal.tp}"
                )

    async def _write_isr(
        self,
        partition: Partition,
        proposal: IsrProposal,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            version = await self.zk_client.conditional_update_partition_state(
                proposal.tp, proposal.partition_state(), proposal.partition_epoch
            )
        except ZooKeeperError as error:
            logger.warning("Failed to write the ISR of %s: %r", proposal.tp, error)
            version = None
        isr_before = len(partition.isr)
        if version is None:
            self.isr_meters.record(isr_before, None)
        if partition.complete_isr_change(proposal, version):
            self.isr_meters.record(isr_before, len(proposal.isr))
            state_change_logger.info(
                "ISR of %s updated to %s with partition epoch %d",
                proposal.tp,
                list(proposal.isr),
                version,
            )
            self.isr_propagation.record(proposal.tp, _now_ms())
            # A smaller ISR may let the HW move; a bigger one may satisfy min.insync.
            partition.maybe_increment_high_watermark(_now_ms())
            self._complete_delayed_requests(proposal.tp)

    async def _isr_expiration_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        interval = self.config.replica_lag_time_max_ms / 2 / 1000
        while True:
            await trio.sleep(interval)
            self.maybe_shrink_isrs()

    def maybe_shrink_isrs(self) -> None:
        now_ms = _now_ms()
        for tp in sorted(self.partitions):
            partition = self.partitions[tp]
            proposal = partition.propose_isr_shrink(now_ms)
            if proposal is not None:
                state_change_logger.info(
                    "Shrinking ISR of %s from %s to %s: out of sync %s",
                    tp,
                    list(partition.isr),
                    list(proposal.isr),
                    partition.out_of_sync_replicas(now_ms),
                )
                self._submit_isr(partition, proposal)

    async def _isr_propagation_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        while True:
            await trio.sleep(self.isr_propagation.check_interval_ms / 1000)
            due = self.isr_propagation.take_due(_now_ms())
            if due:
                try:
                    await self.zk_client.create_isr_change_notification(due)
                except ZooKeeperError as error:
                    logger.warning("Failed to propagate ISR changes of %s: %r", due, error)
                    for tp in due:
                        self.isr_propagation.record(tp, _now_ms())

    # -- OffsetsForLeaderEpoch and ListOffsets ------------------------------------------------

    def last_offsets_for_leader_epochs(
        self, request: OffsetForLeaderEpochRequest
    ) -> OffsetForLeaderEpochResponse:
        answers = []
        for ask in request.partitions:
            tp = TopicPartition(ask.topic, ask.partition)
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise errors.UnknownTopicOrPartitionError(f"{tp} is not on {self.broker_id}")
                epoch, end_offset = partition.last_offset_for_leader_epoch(
                    ask.current_leader_epoch, ask.leader_epoch
                )
            except errors.KafkaError as error:
                answers.append(
                    OffsetForLeaderEpochPartitionResponse(tp.topic, tp.partition, error.code)
                )
                continue
            answers.append(
                OffsetForLeaderEpochPartitionResponse(tp.topic, tp.partition, 0, epoch, end_offset)
            )
        return OffsetForLeaderEpochResponse(tuple(answers))

    def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        answers = []
        for ask in request.partitions:
            tp = TopicPartition(ask.topic, ask.partition)
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise errors.UnknownTopicOrPartitionError(f"{tp} is not on {self.broker_id}")
                partition.check_leader(ask.current_leader_epoch)
                if ask.timestamp == EARLIEST_TIMESTAMP:
                    offset = partition.log_start_offset
                elif ask.timestamp == LATEST_TIMESTAMP:
                    # Followers ask for the log end; consumers may read up to the HW only.
                    offset = (
                        partition.log_end_offset
                        if request.replica_id >= 0
                        else partition.high_watermark
                    )
                elif ask.timestamp >= 0 or ask.timestamp == MAX_TIMESTAMP:
                    with self.handling_log_io_errors(tp, "search"):
                        found = partition.offset_for_timestamp(
                            ask.timestamp, up_to_high_watermark=request.replica_id < 0
                        )
                    # Kafka's "no such record": offset and timestamp -1.
                    answers.append(
                        ListOffsetsPartitionResponse(tp.topic, tp.partition, 0)
                        if found is None
                        else ListOffsetsPartitionResponse(
                            tp.topic, tp.partition, 0, found.offset, found.leader_epoch,
                            found.timestamp,
                        )
                    )  # fmt: skip
                    continue
                else:
                    raise errors.UnsupportedVersionError(
                        f"ListOffsets timestamp {ask.timestamp} is not supported: a timestamp "
                        f"(ms), {EARLIEST_TIMESTAMP} (earliest), {LATEST_TIMESTAMP} (latest) or "
                        f"{MAX_TIMESTAMP} (the largest timestamp)"
                    )
            except errors.KafkaError as error:
                answers.append(ListOffsetsPartitionResponse(tp.topic, tp.partition, error.code))
                continue
            answers.append(
                ListOffsetsPartitionResponse(
                    tp.topic, tp.partition, 0, offset, partition.leader_epoch
                )
            )
        return ListOffsetsResponse(tuple(answers))


def check_create_time(header: BatchHeader, now_ms: int, max_difference_ms: int, tp: object) -> None:
    """message.timestamp.difference.max.ms for a CreateTime topic: a batch whose first or
    largest timestamp is further from the broker's clock is refused with INVALID_TIMESTAMP.
    Kafka checks every record; kcore checks the two timestamps the batch header carries,
    the first record's and the largest, without decoding records (a later record older than
    the first goes unchecked)."""
    for stamp in (header.base_timestamp, header.max_timestamp):
        if abs(stamp - now_ms) > max_difference_ms:
            raise errors.InvalidTimestampError(
                f"Timestamp {stamp} of a record in {tp} is out of range: more than "
                f"message.timestamp.difference.max.ms={max_difference_ms} from {now_ms}"
            )
