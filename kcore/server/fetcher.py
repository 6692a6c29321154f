"""Follower fetchers (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

A fetcher is one task with one connection to one leader; partitions go to the fetcher keyed
by (leader id, `fetcher_id(topic, partition, num.replica.fetchers)`). A fetcher is reused
while the leader's endpoint is unchanged, and shut down when it has no partitions left.

Each partition is first *truncating*: it asks the leader where its latest epoch ends
(OffsetsForLeaderEpoch) and truncates its log so it holds no record the leader does not
(KIP-101 / KIP-279, see `truncation`). Then it is *fetching*: long-polling Fetch requests
that carry the current leader epoch, so a leader at another epoch refuses them (KIP-320).

Failure policy (Kafka's AbstractFetcherThread, per fetcher rather than per partition): the
manager runs each fetcher under an `actors` supervisor; a fetcher that dies on an unexpected
error is restarted after `replica.fetch.backoff.ms` with each of its partitions set back to
truncating from its local log end, so they resume and catch up. A partition whose local log
fails (an OSError: its log dir is reported failed) is dropped from its fetcher, as Kafka
marks it failed.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
from collections.abc import Iterable
from typing import Any, Protocol

import attrs
import trio

import actors
import transport
from kcore import errors
from kcore._fetcher_id import fetcher_id
from kcore.common import TopicPartition
from kcore.log import parse_header, split_batches
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kcore.server.partition import Partition
from kcore.server.truncation import offset_truncation_state
from kcore.wire import WireError, from_wire, to_wire

logger = logging.getLogger("kcore.server.fetcher")


@attrs.frozen(order=True)
class BrokerEndPoint:
    id: int
    host: str
    port: int


@attrs.frozen
class InitialFetchState:
    leader: BrokerEndPoint
    current_leader_epoch: int
    init_offset: int


@attrs.define
class PartitionFetchState:
    fetch_offset: int
    current_leader_epoch: int
    truncating: bool = True
    delayed_until: float = -math.inf
    # KIP-279's next question after a round that could not finish (see truncation).
    epoch_to_ask: int | None = None
    # The leader's high watermark minus the fetch offset, at the last fetch (Kafka's
    # FetcherLagMetrics, which ReplicaFetcherManager's MaxLag is the max of).
    lag: int = 0


class ReplicaAccess(Protocol):
    """What fetchers need from the replica manager."""

    broker_id: int

    def partition(self, tp: TopicPartition) -> Partition | None: ...

    def broker_epoch(self) -> int: ...

    def on_follower_append(self, partition: Partition) -> None: ...

    def handling_log_io_errors(
        self, tp: TopicPartition, action: str
    ) -> contextlib.AbstractContextManager[None]:
        """Work on `tp`'s local log: an OSError comes out as KafkaStorageError, reported."""
        ...


@attrs.define(eq=False)
class FetcherSettings:
    max_wait_ms: int = 500
    min_bytes: int = 1
    partition_max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000
    request_timeout_ms: int = 30000


class FetcherError(Exception):
    pass


@attrs.define(eq=False)
class ReplicaFetcher:
    """One fetcher: a connection to `leader` and the partitions it fetches from it."""

    name: str
    leader: BrokerEndPoint
    replicas: ReplicaAccess
    network: transport.Network
    rng: random.Random
    settings: FetcherSettings
    partitions: dict[TopicPartition, PartitionFetchState] = attrs.field(factory=dict)
    stopped: bool = attrs.field(default=False, init=False)
    started_by_run: int = attrs.field(default=0, init=False)  # which run of the manager
    _runs: int = attrs.field(default=0, init=False)
    _cancel_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    def add_partitions(self, states: dict[TopicPartition, InitialFetchState]) -> None:
        for tp in sorted(states):
            state = states[tp]
            self.partitions[tp] = PartitionFetchState(state.init_offset, state.current_leader_epoch)
        self._wake()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def stop(self) -> None:
        """Ends the fetcher for good (its run returns, and is not restarted)."""
        self.stopped = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetches until stopped; raises on an unexpected error, for its supervisor to run it
        again. A run after a failed one starts every partition over from its local log."""
        if self._runs:
            self._restart_partitions()
        self._runs += 1
        with trio.CancelScope() as self._cancel_scope:
            if self.stopped:
                return
            async with transport.open_rpc_client(
                self.network,
                (self.leader.host, self.leader.port),
                client_id=self.name,
                rng=self.rng,
                request_timeout=self.settings.request_timeout_ms / 1000,
                close_on_timeout=True,
            ) as client:
                task_status.started()
                while True:
                    await self._do_work(client)

    def _restart_partitions(self) -> None:
        """What the failed run knew is lost: each partition truncates again from its log
        end (its state then is whatever the local log holds), at once."""
        for tp in sorted(self.partitions):
            partition = self.replicas.partition(tp)
            if partition is None:
                del self.partitions[tp]
                continue
            state = self.partitions[tp]
            self.partitions[tp] = PartitionFetchState(
                partition.log_end_offset, state.current_leader_epoch
            )
        logger.info(
            "[ReplicaFetcher %s] restarted: partitions %s truncate and fetch again",
            self.name,
            sorted(self.partitions),
        )

    async def _do_work(self, client: transport.RpcClient) -> None:
        now = trio.current_time()
        ready = [tp for tp in sorted(self.partitions) if self.partitions[tp].delayed_until <= now]
        if not ready:
            changed = self._changed
            wake_at = min((s.delayed_until for s in self.partitions.values()), default=math.inf)
            with trio.move_on_at(wake_at):
                await changed.wait()
            return
        truncating = [tp for tp in ready if self.partitions[tp].truncating]
        if truncating:
            await self._truncate(client, truncating)
        # Kafka's doWork: truncate what must be, then fetch the rest in the same round, so a
        # partition still truncating never holds back the others of this leader.
        now = trio.current_time()
        fetching = [
            tp
            for tp in ready
            if (state := self.partitions.get(tp)) is not None
            and not state.truncating
            and state.delayed_until <= now
        ]
        if fetching:
            await self._fetch(client, fetching)

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        until = trio.current_time() + self.settings.backoff_ms / 1000
        for tp in tps:
            state = self.partitions.get(tp)
            if state is not None:
                state.delayed_until = until

    def _current(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        """The state is still the one sent (no LeaderAndIsr replaced it meanwhile)."""
        return self.partitions.get(tp) is state

    async def _request(self, client, api_key: ApiKey, request: Any, response_type: type) -> Any:
        response = await client.request(api_key, to_wire(request))
        if response.error_code:
            raise FetcherError(f"{api_key.name} refused with error {response.error_code}")
        return from_wire(response_type, response.body)

    # -- truncation ------------------------------------------------------------------------

    async def _truncate(self, client: transport.RpcClient, tps: list[TopicPartition]) -> None:
        sent: dict[TopicPartition, PartitionFetchState] = {}
        asks = []
        for tp in tps:
            state = self.partitions[tp]
            partition = self.replicas.partition(tp)
            if partition is None:
                self.partitions.pop(tp, None)
                continue
            latest = partition.log.latest_epoch
            if latest is None:
                # No epochs to compare: the pre-KIP-101 rule, truncate to the HW.
                try:
                    with self.replicas.handling_log_io_errors(tp, "truncate"):
                        partition.truncate_to(partition.high_watermark)
                except errors.KafkaStorageError as error:
                    self._mark_failed(tp, error)
                    continue
                self._start_fetching(tp, state, partition)
                continue
            sent[tp] = state
            asked = latest if state.epoch_to_ask is None else min(state.epoch_to_ask, latest)
            asks.append(
                OffsetForLeaderEpochPartition(
                    tp.topic, tp.partition, state.current_leader_epoch, asked
                )
            )
        if not asks:
            return
        request = OffsetForLeaderEpochRequest(self.replicas.broker_id, tuple(asks))
        try:
            response = await self._request(
                client, ApiKey.OFFSET_FOR_LEADER_EPOCH, request, OffsetForLeaderEpochResponse
            )
        except (transport.TransportError, FetcherError, WireError) as error:
            logger.info(
                "%s: OffsetsForLeaderEpoch to %d failed: %r", self.name, self.leader.id, error
            )
            self._delay(sent)
            return
        for answer in response.partitions:
            tp = TopicPartition(answer.topic, answer.partition)
            state = sent.get(tp)
            if state is None or not self._current(tp, state):
                continue
            partition = self.replicas.partition(tp)
            if partition is None:
                continue
            if answer.error_code:
                self._on_partition_error(tp, state, answer.error_code)
                continue
            truncation = offset_truncation_state(
                leader_epoch=answer.leader_epoch,
                leader_end_offset=answer.end_offset,
                follower_lookup=partition.follower_end_offset_for,
                log_end_offset=partition.log_end_offset,
                high_watermark=partition.high_watermark,
            )
            if truncation.offset < partition.log_end_offset:
                logger.info(
                    "[ReplicaFetcher %s] Truncating %s to offset %d (leader epoch %d ends at %d "
                    "on the leader)",
                    self.name,
                    tp,
                    truncation.offset,
                    answer.leader_epoch,
                    answer.end_offset,
                )
                try:
                    with self.replicas.handling_log_io_errors(tp, "truncate"):
                        partition.truncate_to(truncation.offset)
                except errors.KafkaStorageError as error:
                    self._mark_failed(tp, error)
                    continue
            if truncation.truncation_completed:
                self._start_fetching(tp, state, partition)
            else:
                state.epoch_to_ask = truncation.epoch_to_ask

    def _start_fetching(
        self, tp: TopicPartition, state: PartitionFetchState, partition: Partition
    ) -> None:
        state.truncating = False
        state.fetch_offset = partition.log_end_offset

    # -- fetching --------------------------------------------------------------------------

    async def _fetch(self, client: transport.RpcClient, tps: list[TopicPartition]) -> None:
        sent: dict[TopicPartition, PartitionFetchState] = {}
        asks = []
        for tp in tps:
            state = self.partitions[tp]
            partition = self.replicas.partition(tp)
            if partition is None:
                self.partitions.pop(tp, None)
                continue
            sent[tp] = state
            asks.append(
                FetchPartition(
                    tp.topic,
                    tp.partition,
                    state.fetch_offset,
                    self.settings.partition_max_bytes,
                    state.current_leader_epoch,
                    log_start_offset=partition.log_start_offset,
                )
            )
        if not asks:
            return
        request = FetchRequest(
            self.replicas.broker_id,
            self.replicas.broker_epoch(),
            self.settings.max_wait_ms,
            self.settings.min_bytes,
            self.settings.response_max_bytes,
            tuple(asks),
        )
        try:
            response = await self._request(client, ApiKey.FETCH, request, FetchResponse)
        except (transport.TransportError, FetcherError, WireError) as error:
            logger.info("%s: fetch from %d failed: %r", self.name, self.leader.id, error)
            self._delay(sent)
            return
        for answer in response.partitions:
            tp = TopicPartition(answer.topic, answer.partition)
            state = sent.get(tp)
            if state is None or not self._current(tp, state):
                continue
            if answer.error_code == errors.OffsetOutOfRangeError.code:
                await self._handle_out_of_range(client, tp, state)
            elif answer.error_code:
                self._on_partition_error(tp, state, answer.error_code)
            else:
                self._process_data(tp, state, answer)

    def _process_data(self, tp: TopicPartition, state: PartitionFetchState, answer: Any) -> None:
        partition = self.replicas.partition(tp)
        if partition is None:
            return
        if state.fetch_offset != partition.log_end_offset:
            # The log moved under this fetch (a truncation): fetch again from its end.
            state.fetch_offset = partition.log_end_offset
            return
        records = answer.records
        if records:
            batches = split_batches(records)
            if batches[0][0].base_offset < state.fetch_offset:
                # The leader returns whole batches; drop any we already hold.
                records = b"".join(b for h, b in batches if h.base_offset >= state.fetch_offset)
        try:
            with self.replicas.handling_log_io_errors(tp, "append to"):
                partition.append_as_follower(records, answer.high_watermark)
                if answer.log_start_offset > partition.log_start_offset:
                    partition.log.increment_log_start_offset(
                        min(answer.log_start_offset, partition.log_end_offset)
                    )
        except errors.KafkaStorageError as error:
            self._mark_failed(tp, error)
            return
        if records:
            state.fetch_offset = parse_header(split_batches(records)[-1][1]).next_offset
            self.replicas.on_follower_append(partition)
        state.lag = max(0, answer.high_watermark - state.fetch_offset)

    async def _handle_out_of_range(
        self, client: transport.RpcClient, tp: TopicPartition, state: PartitionFetchState
    ) -> None:
        """Kafka's handleOutOfRangeError: the leader's log ends before ours (an unclean
        election) -> truncate to its end; it starts after ours -> start over at its start."""
        partition = self.replicas.partition(tp)
        if partition is None:
            return
        try:
            leader_end = await self._list_offset(client, tp, state, LATEST_TIMESTAMP)
            if leader_end < partition.log_end_offset:
                logger.warning(
                    "[ReplicaFetcher %s] %s: leader's log ends at %d, before ours at "
                    "%d: truncating",
                    self.name,
                    tp,
                    leader_end,
                    partition.log_end_offset,
                )
                with self.replicas.handling_log_io_errors(tp, "truncate"):
                    partition.truncate_to(leader_end)
            else:
                leader_start = await self._list_offset(client, tp, state, EARLIEST_TIMESTAMP)
                if partition.log_end_offset < leader_start:
                    with self.replicas.handling_log_io_errors(tp, "truncate"):
                        partition.truncate_fully_and_start_at(leader_start)
        except errors.KafkaStorageError as error:
            self._mark_failed(tp, error)
            return
        except (transport.TransportError, FetcherError, WireError, errors.KafkaError) as error:
            logger.info("%s: %s out of range and ListOffsets failed: %r", self.name, tp, error)
            self._delay([tp])
            return
        if self._current(tp, state):
            state.fetch_offset = partition.log_end_offset

    async def _list_offset(
        self,
        client: transport.RpcClient,
        tp: TopicPartition,
        state: PartitionFetchState,
        timestamp: int,
    ) -> int:
        request = ListOffsetsRequest(
            self.replicas.broker_id,
            (ListOffsetsPartition(tp.topic, tp.partition, timestamp, state.current_leader_epoch),),
        )
        response = await self._request(client, ApiKey.LIST_OFFSETS, request, ListOffsetsResponse)
        answer = response.partitions[0]
        errors.raise_for_code(answer.error_code)
        return answer.offset

    def _mark_failed(self, tp: TopicPartition, error: errors.KafkaStorageError) -> None:
        """Its local log failed (the log dir is reported): no longer fetched here."""
        logger.error("[ReplicaFetcher %s] %s: %s; no longer fetching it", self.name, tp, error)
        self.partitions.pop(tp, None)

    def _on_partition_error(
        self, tp: TopicPartition, state: PartitionFetchState, code: int
    ) -> None:
        if code == errors.FencedLeaderEpochError.code:
            # Our epoch is older than the leader's: wait for the LeaderAndIsr that tells us
            # the new one instead of fetching with a stale epoch (KIP-320).
            logger.info(
                "[ReplicaFetcher %s] %s fenced at leader epoch %d; removing it",
                self.name,
                tp,
                state.current_leader_epoch,
            )
            self.partitions.pop(tp, None)
            return
        logger.debug(
            "[ReplicaFetcher %s] %s error %s; backing off",
            self.name,
            tp,
            errors.ERROR_NAMES.get(code, code),
        )
        self._delay([tp])


# A fetcher failing more often than this gives up its supervisor: the manager's run raises
# and its own supervisor (the replica manager's) runs it again, every fetcher afresh.
FETCHER_MAX_RESTARTS = 10
FETCHER_RESTART_WINDOW_S = 60.0


@attrs.define(eq=False)
class ReplicaFetcherManager:
    replicas: ReplicaAccess
    network: transport.Network
    rng: random.Random
    settings: FetcherSettings
    num_fetchers: int = 1
    fetchers: dict[tuple[int, int], ReplicaFetcher] = attrs.field(factory=dict)
    # Fetchers created, for `run` to start (they are created where no task can be started).
    _created: trio.MemorySendChannel[ReplicaFetcher] = attrs.field(init=False)
    _to_start: trio.MemoryReceiveChannel[ReplicaFetcher] = attrs.field(init=False)
    _runs: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self._created, self._to_start = trio.open_memory_channel(math.inf)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Runs every fetcher under a supervisor (see the module's failure policy) until
        cancelled. Run again after a failure, it starts every fetcher it has over."""
        self._runs += 1
        this_run = self._runs
        async with actors.open_supervisor(
            name=f"replica-fetchers-on-{self.replicas.broker_id}",
            max_restarts=FETCHER_MAX_RESTARTS,
            within=FETCHER_RESTART_WINDOW_S,
            restart_delay=self.settings.backoff_ms / 1000,
        ) as supervisor:

            def start(fetcher: ReplicaFetcher) -> None:
                if fetcher.stopped or fetcher.started_by_run == this_run:
                    return
                fetcher.started_by_run = this_run
                supervisor.start_soon(fetcher.run, name=fetcher.name)

            for key in sorted(self.fetchers):
                start(self.fetchers[key])
            task_status.started()
            async for fetcher in self._to_start:
                start(fetcher)

    def fetcher_key(self, tp: TopicPartition, leader_id: int) -> tuple[int, int]:
        return leader_id, fetcher_id(tp.topic, tp.partition, self.num_fetchers)

    def add_fetcher_for_partitions(self, states: dict[TopicPartition, InitialFetchState]) -> None:
        grouped: dict[tuple[int, int], dict[TopicPartition, InitialFetchState]] = {}
        for tp in sorted(states):
            grouped.setdefault(self.fetcher_key(tp, states[tp].leader.id), {})[tp] = states[tp]
        for key in sorted(grouped):
            group = grouped[key]
            leader = next(iter(group.values())).leader
            fetcher = self.fetchers.get(key)
            if fetcher is not None and fetcher.leader != leader:
                # Same broker id, new endpoint (it restarted elsewhere): a new connection.
                self._stop(key)
                fetcher = None
            if fetcher is None:
                fetcher = self._create(key, leader)
            fetcher.add_partitions(group)

    def _create(self, key: tuple[int, int], leader: BrokerEndPoint) -> ReplicaFetcher:
        name = f"ReplicaFetcherThread-{key[1]}-{key[0]}-on-{self.replicas.broker_id}"
        fetcher = ReplicaFetcher(
            name,
            leader,
            self.replicas,
            self.network,
            random.Random(self.rng.getrandbits(64)),
            self.settings,
        )
        self.fetchers[key] = fetcher
        self._created.send_nowait(fetcher)
        return fetcher

    def _stop(self, key: tuple[int, int]) -> None:
        fetcher = self.fetchers.pop(key, None)
        if fetcher is not None:
            fetcher.stop()

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        removed = set(tps)
        for key in sorted(self.fetchers):
            fetcher = self.fetchers[key]
            # In the fetcher's own (deterministic) order: sorting a set of thousands of
            # partitions cost more than the rest of a broker's LeaderAndIsr.
            fetcher.remove_partitions([tp for tp in fetcher.partitions if tp in removed])

    def shutdown_idle_fetchers(self) -> None:
        for key in sorted(self.fetchers):
            if not self.fetchers[key].partitions:
                self._stop(key)

    def resize_thread_pool(self, new_size: int) -> None:
        """Kafka's resizeThreadPool (num.replica.fetchers changed at run time): every
        partition leaves its fetcher and is added again under the new fetcher ids, from
        the offset it had reached (truncating first, which finds nothing to cut); fetchers
        left without partitions stop."""
        if new_size == self.num_fetchers:
            return
        logger.info("Resizing fetcher thread pool size from %d to %d", self.num_fetchers, new_size)
        self.num_fetchers = new_size
        moved: dict[TopicPartition, InitialFetchState] = {}
        for key in sorted(self.fetchers):
            fetcher = self.fetchers[key]
            for tp, state in sorted(fetcher.partitions.items()):
                moved[tp] = InitialFetchState(
                    fetcher.leader, state.current_leader_epoch, state.fetch_offset
                )
            fetcher.remove_partitions(list(fetcher.partitions))
            if key[1] >= new_size:
                self._stop(key)
        self.add_fetcher_for_partitions(moved)
        self.shutdown_idle_fetchers()

    def shutdown(self) -> None:
        for key in sorted(self.fetchers):
            self._stop(key)
