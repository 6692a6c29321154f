"""The broker's replicas (Kafka's ReplicaManager): obeys LeaderAndIsr and StopReplica,
appends produced records as leader and answers acks=all from a purgatory, serves fetches
(long-polling) to consumers and followers, shrinks and expands ISRs, and keeps the
high-watermark checkpoint. The decisions are `Partition`'s; this module waits and writes.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import trio

import transport
import zkstub
from kcore import errors, zkdata
from kcore.common import EPOCH_DURING_DELETE, TopicPartition
from kcore.config import InvalidTopicConfigError, TopicConfig
from kcore.log import CorruptRecordError, split_batches, validate_batch
from kcore.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
)
from kcore.protocol.data import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
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
from kcore.server.fetcher import (
    BrokerEndPoint,
    FetcherSettings,
    InitialFetchState,
    ReplicaFetcherManager,
)
from kcore.server.isr_updates import IsrChangePropagation, write_isr
from kcore.server.log_manager import LogManager
from kcore.server.partition import IsrProposal, Partition

logger = logging.getLogger("kcore.server.replica_manager")
state_change_logger = logging.getLogger("kcore.state.change")


def _now_ms() -> int:
    """Trio's clock in ms: lag and purgatory timing (virtual under MockClock)."""
    return int(trio.current_time() * 1000)


def _error_code(error: BaseException) -> int:
    if isinstance(error, errors.KafkaError):
        return error.code
    return errors.UnknownServerError.code


@attrs.define(eq=False)
class ReplicaManager:
    config: Any  # kcore.config.KafkaConfig
    broker_id: int
    zk: Any  # the broker's zkstub client
    log_manager: LogManager
    network: transport.Network  # the broker's node
    rng: random.Random
    broker_epoch: Callable[[], int]
    wall_clock_ms: Callable[[], int]  # record timestamps and segment roll
    is_controller: Callable[[], bool] = lambda: False

    partitions: dict[TopicPartition, Partition] = attrs.field(factory=dict, init=False)
    controller_epoch: int = attrs.field(default=-1, init=False)
    fetcher_manager: ReplicaFetcherManager = attrs.field(init=False)
    isr_propagation: IsrChangePropagation = attrs.field(factory=IsrChangePropagation, init=False)
    _hw_checkpoints: dict[TopicPartition, int] = attrs.field(factory=dict, init=False)
    _topic_configs: dict[str, TopicConfig] = attrs.field(factory=dict, init=False)
    _state_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    # Waiters for "this partition's data or high watermark moved" (purgatories, long polls).
    _waiters: dict[TopicPartition, list[trio.Event]] = attrs.field(factory=dict, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _shutting_down: bool = attrs.field(default=False, init=False)
    _in_controlled_shutdown: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        config = self.config
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

    # -- ReplicaAccess for the fetchers -------------------------------------------------------

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def on_follower_append(self, partition: Partition) -> None:
        self._notify(partition.tp)

    # -- lifecycle ----------------------------------------------------------------------------

    def startup(self) -> None:
        """Opens the logs on disk (recovering their tails) and reads the HW checkpoint."""
        self._hw_checkpoints = self.log_manager.load_logs()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.fetcher_manager.run)
            nursery.start_soon(self._isr_expiration_loop, name="isr-expiration")
            nursery.start_soon(self._isr_propagation_loop, name="isr-change-propagation")
            nursery.start_soon(self._hw_checkpoint_loop, name="highwatermark-checkpoint")
            nursery.start_soon(self._retention_loop, name="log-retention")
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def shutdown(self) -> None:
        """A clean stop: fetchers stop, logs are flushed and checkpointed."""
        self._shutting_down = True
        self.fetcher_manager.shutdown()
        self.log_manager.close(self.high_watermarks())

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

    # -- waiting for progress -----------------------------------------------------------------

    def _notify(self, tp: TopicPartition) -> None:
        for event in self._waiters.pop(tp, ()):
            event.set()

    def _notify_all(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._notify(tp)

    async def _wait_for_progress(self, tps: Iterable[TopicPartition], deadline: float) -> bool:
        """Waits until one of `tps` moves or the deadline; False at the deadline."""
        event = trio.Event()
        for tp in tps:
            self._waiters.setdefault(tp, []).append(event)
        with trio.move_on_at(deadline):
            await event.wait()
            return True
        return False

    # -- topic configs -----------------------------------------------------------------------

    async def topic_config(self, topic: str, *, refresh: bool = False) -> TopicConfig:
        config = self._topic_configs.get(topic)
        if config is None or refresh:
            overrides = await self._read_topic_overrides(topic)
            try:
                config = TopicConfig.from_dict(overrides, self.config)
            except InvalidTopicConfigError as error:
                logger.error("Ignoring invalid config of topic %s: %s", topic, error)
                config = TopicConfig.from_dict({}, self.config)
            self._topic_configs[topic] = config
        return config

    async def _read_topic_overrides(self, topic: str) -> dict[str, str]:
        """/config/topics/T, retried across a lost connection or a session being replaced:
        guessing the defaults instead could weaken min.insync.replicas."""
        path = zkdata.config_path("topics", topic)
        while True:
            try:
                data, _ = await self.zk.get(path)
                return zkdata.decode_config(path, data)
            except zkstub.NoNodeError:
                return {}
            except (zkstub.ConnectionLossError, zkstub.SessionExpiredError) as error:
                logger.info("Reading %s failed (%r); retrying", path, error)
                await trio.sleep(0.1)

    # -- LeaderAndIsr ------------------------------------------------------------------------

    async def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        async with self._state_lock:
            return await self._become_leader_or_follower(request)

    async def _become_leader_or_follower(
        self, request: LeaderAndIsrRequest
    ) -> LeaderAndIsrResponse:
        if request.controller_epoch < self.controller_epoch:
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
        results: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, LeaderAndIsrPartitionState] = {}
        for state in sorted(request.partition_states, key=lambda s: (s.topic, s.partition)):
            tp = TopicPartition(state.topic, state.partition)
            current = self.partitions.get(tp)
            current_epoch = current.leader_epoch if current is not None else NO_EPOCH
            if self.broker_id not in state.replicas:
                results[tp] = errors.UnknownTopicOrPartitionError.code
            elif state.leader_epoch > current_epoch:
                accepted[tp] = state
                results[tp] = 0
            else:
                state_change_logger.info(
                    "Ignoring LeaderAndIsr for %s from controller %d epoch %d: its leader epoch "
                    "%d is not newer than the current %d",
                    tp,
                    request.controller_id,
                    request.controller_epoch,
                    state.leader_epoch,
                    current_epoch,
                )
                results[tp] = errors.StaleControllerEpochError.code
        new = sorted(tp for tp in accepted if tp not in self.partitions)
        # Each new topic's config read once per request, not once per partition.
        configs = {
            topic: await self.topic_config(topic, refresh=True)
            for topic in sorted({tp.topic for tp in new})
        }
        for tp in new:
            self._create_partition(tp, configs[tp.topic])
        leaders = {tp: s for tp, s in accepted.items() if s.leader == self.broker_id}
        followers = {tp: s for tp, s in accepted.items() if s.leader != self.broker_id}
        self._make_leaders(leaders, now_ms)
        self._make_followers(followers, request)
        self.fetcher_manager.shutdown_idle_fetchers()
        partition_errors = tuple(
            PartitionError(tp.topic, tp.partition, code) for tp, code in sorted(results.items())
        )
        return LeaderAndIsrResponse(0, partition_errors)

    def _create_partition(self, tp: TopicPartition, config: TopicConfig) -> Partition:
        log = self.log_manager.get_or_create_log(tp, config)
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
    ) -> None:
        if not states:
            return
        self.fetcher_manager.remove_fetcher_for_partitions(sorted(states))
        for tp in sorted(states):
            partition = self.partitions[tp]
            partition.make_leader(states[tp], now_ms)
            state_change_logger.info(
                "Leader %s with leader epoch %d, ISR %s, high watermark %d, log end offset %d",
                tp,
                partition.leader_epoch,
                list(partition.isr),
                partition.high_watermark,
                partition.log_end_offset,
            )
        self._notify_all(sorted(states))

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
        self._notify_all(changed)  # answers purgatory waiters with NOT_LEADER_OR_FOLLOWER
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
                    and state.leader_epoch
                    not in (
                        NO_EPOCH,
                        EPOCH_DURING_DELETE,
                    )
                    and state.leader_epoch < partition.leader_epoch
                ):
                    code = errors.FencedLeaderEpochError.code
                else:
                    stopped.append((tp, state.delete_partition))
                results.append(PartitionError(tp.topic, tp.partition, code))
            self.fetcher_manager.remove_fetcher_for_partitions(tp for tp, _ in stopped)
            for tp, delete in stopped:
                partition = self.partitions.get(tp)
                if partition is not None:
                    partition.stop_leading()
                if delete:
                    self.partitions.pop(tp, None)
                    self._hw_checkpoints.pop(tp, None)
                    self.log_manager.delete_log(tp)
                self._notify(tp)
            self.fetcher_manager.shutdown_idle_fetchers()
            return StopReplicaResponse(0, tuple(results))

    # -- Produce ---------------------------------------------------------------------------

    async def append_records(self, request: ProduceRequest) -> ProduceResponse:
        now_ms = _now_ms()
        answers: dict[TopicPartition, ProducePartitionResponse] = {}
        awaiting: dict[TopicPartition, tuple[Partition, int, int]] = {}
        for data in request.partitions:
            tp = TopicPartition(data.topic, data.partition)
            try:
                partition, first, last, min_isr = await self._append_to_leader(
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
                continue
            answers[tp] = ProducePartitionResponse(
                tp.topic, tp.partition, 0, first, -1, partition.log_start_offset
            )
            if request.acks == -1:
                awaiting[tp] = (partition, last + 1, min_isr)
            self._notify(tp)  # followers' long polls
        if awaiting:
            await self._wait_for_replication(awaiting, answers, request.timeout_ms)
        return ProduceResponse(tuple(answers[tp] for tp in answers))

    async def _append_to_leader(
        self, tp: TopicPartition, records: bytes, acks: int, now_ms: int
    ) -> tuple[Partition, int, int, int]:
        partition = self.partitions.get(tp)
        if partition is None:
            raise errors.UnknownTopicOrPartitionError(f"broker {self.broker_id} does not host {tp}")
        config = await self.topic_config(tp.topic)
        if len(records) > config.max_message_bytes:
            raise errors.MessageTooLargeError(
                f"{len(records)} bytes of records exceed max.message.bytes "
                f"{config.max_message_bytes} of {tp.topic}"
            )
        for _header, batch in split_batches(records):
            validate_batch(batch)
        first, last = partition.append_as_leader(
            records, acks, config.min_insync_replicas, self.wall_clock_ms()
        )
        return partition, first, last, config.min_insync_replicas

    async def _wait_for_replication(
        self,
        awaiting: dict[TopicPartition, tuple[Partition, int, int]],
        answers: dict[TopicPartition, ProducePartitionResponse],
        timeout_ms: int,
    ) -> None:
        """The produce purgatory: each partition is done when its HW passes the batch (or
        leadership is lost); what is not done at the timeout answers REQUEST_TIMED_OUT."""
        deadline = trio.current_time() + timeout_ms / 1000
        pending = dict(awaiting)
        while True:
            for tp in sorted(pending):
                partition, required, min_isr = pending[tp]
                if self.partitions.get(tp) is not partition:
                    done, code = True, errors.NotLeaderOrFollowerError.code
                else:
                    done, code = partition.check_enough_replicas_reach_offset(required, min_isr)
                if done:
                    del pending[tp]
                    if code:
                        answers[tp] = attrs.evolve(answers[tp], error_code=code, base_offset=-1)
            if not pending:
                return
            if not await self._wait_for_progress(sorted(pending), deadline):
                for tp in pending:
                    answers[tp] = attrs.evolve(
                        answers[tp],
                        error_code=errors.RequestTimedOutError.code,
                        base_offset=-1,
                        error_message="the high watermark did not reach the batch in time",
                    )
                return

    # -- Fetch -----------------------------------------------------------------------------

    async def fetch_messages(self, request: FetchRequest) -> FetchResponse:
        """Reads at once; if fewer than `min_bytes` came and nothing failed, waits for new
        data up to `max_wait_ms` (long polling) and reads again."""
        deadline = trio.current_time() + request.max_wait_ms / 1000
        tps = [TopicPartition(p.topic, p.partition) for p in request.partitions]
        while True:
            answers, size, failed = self._read(request)
            if (
                size >= request.min_bytes
                or failed
                or request.max_wait_ms == 0
                or not request.partitions
            ):
                return FetchResponse(answers)
            if not await self._wait_for_progress(tps, deadline):
                answers, _, _ = self._read(request)
                return FetchResponse(answers)

    def _read(self, request: FetchRequest) -> tuple[tuple[FetchPartitionResponse, ...], int, bool]:
        is_follower = request.replica_id >= 0
        now_ms = _now_ms()
        answers = []
        size = 0
        failed = False
        budget = request.max_bytes
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
                batches = (
                    partition.read(
                        ask.fetch_offset,
                        max(0, min(ask.partition_max_bytes, budget)),
                        up_to_high_watermark=not is_follower,
                    )
                    if budget > 0
                    else []
                )
            except errors.KafkaError as error:
                failed = True
                answers.append(self._fetch_error(tp, partition, error))
                continue
            records = b"".join(batches)
            size += len(records)
            budget -= len(records)
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
        moved = partition.update_follower_fetch_state(
            replica_id, ask.fetch_offset, ask.log_start_offset, now_ms
        )
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
            self._notify(partition.tp)

    # -- ISR changes -------------------------------------------------------------------------

    def _submit_isr(self, partition: Partition, proposal: IsrProposal) -> None:
        if self._nursery is None:
            partition.complete_isr_change(proposal, None)
            return
        self._nursery.start_soon(self._write_isr, partition, proposal)

    async def _write_isr(self, partition: Partition, proposal: IsrProposal) -> None:
        try:
            version = await write_isr(self.zk, proposal)
        except zkstub.ZkError as error:
            logger.warning("Failed to write the ISR of %s: %r", proposal.tp, error)
            version = None
        if partition.complete_isr_change(proposal, version):
            state_change_logger.info(
                "ISR of %s updated to %s with partition epoch %d",
                proposal.tp,
                list(proposal.isr),
                version,
            )
            self.isr_propagation.record(proposal.tp, _now_ms())
            # A smaller ISR may let the HW move; a bigger one may satisfy min.insync.
            partition.maybe_increment_high_watermark(_now_ms())
            self._notify(proposal.tp)

    async def _isr_expiration_loop(self) -> None:
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

    async def _isr_propagation_loop(self) -> None:
        while True:
            await trio.sleep(self.isr_propagation.check_interval_ms / 1000)
            due = self.isr_propagation.take_due(_now_ms())
            if due:
                try:
                    zk_client_path = zkdata.isr_change_path()
                    await self.zk.create(
                        zk_client_path, zkdata.encode_isr_change(due), sequence=True
                    )
                except zkstub.ZkError as error:
                    logger.warning("Failed to propagate ISR changes of %s: %r", due, error)
                    for tp in due:
                        self.isr_propagation.record(tp, _now_ms())

    # -- checkpoints and retention -----------------------------------------------------------

    async def _hw_checkpoint_loop(self) -> None:
        interval = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            self.log_manager.checkpoint_high_watermarks(self.high_watermarks())

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            now = self.wall_clock_ms()
            for tp in sorted(self.partitions):
                partition = self.partitions[tp]
                config = self._topic_configs.get(tp.topic) or await self.topic_config(tp.topic)
                partition.log.delete_old_segments(
                    now, config.retention_ms, config.retention_bytes, partition.high_watermark
                )

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
                else:
                    raise errors.UnsupportedVersionError(
                        f"ListOffsets by timestamp {ask.timestamp} is not supported; use "
                        f"{EARLIEST_TIMESTAMP} (earliest) or {LATEST_TIMESTAMP} (latest)"
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
