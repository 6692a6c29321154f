"""The consumer (manual assignment): `assign`, `seek*`, then `await poll()` returns the
records from each partition's position on, in offset order, and advances the positions.

A poll sends one FetchRequest per partition leader (as a consumer: replica id -1) carrying
the leader epoch the client's metadata knows (KIP-320), so a fetch that reaches a deposed
leader is fenced instead of returning records that may be truncated. Leader changes are
handled by refreshing metadata and fetching again; an out-of-range position is reset as
`auto_offset_reset` says. Consumer groups (subscribe, commit) are not implemented.
Reference: Kafka's KafkaConsumer / Fetcher / SubscriptionState.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections import deque
from collections.abc import Iterable
from typing import Any

import attrs
import trio

import actors
import transport
from kcore import errors
from kcore.client._config import (
    ClientConfigError,
    check_choice,
    check_int,
    check_no_unknown,
    parse_bootstrap,
    to_topic_partition,
)
from kcore.client._connections import Connections
from kcore.client._metadata import MetadataManager
from kcore.common import TopicPartition
from kcore.log import CorruptRecordError, iter_records, split_valid_batches
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kcore.protocol.sizing import fetch_records_limit

__all__ = ["Consumer", "ConsumerRecord"]

log = logging.getLogger("kcore.client.consumer")

# Answers meaning "your metadata is stale": refresh it and fetch again.
_REFRESH_CODES = frozenset(
    {
        3,  # UNKNOWN_TOPIC_OR_PARTITION
        5,  # LEADER_NOT_AVAILABLE
        errors.NotLeaderOrFollowerError.code,
        errors.FencedLeaderEpochError.code,
        errors.UnknownLeaderEpochError.code,
        errors.ERROR_CODES["KAFKA_STORAGE_ERROR"],
    }
)
_OFFSET_OUT_OF_RANGE = errors.ERROR_CODES["OFFSET_OUT_OF_RANGE"]
_RESETS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


@attrs.frozen
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Any, ...] = ()


@attrs.define
class _PartitionState:
    position: int | None = None  # the offset of the next record poll returns
    reset: str | None = None  # a pending seek_to_beginning/end ("earliest" / "latest")
    buffered: deque[ConsumerRecord] = attrs.field(factory=deque)
    # The position once every buffered record is returned (the end of the fetched
    # batches); None when nothing is buffered.
    buffer_end: int | None = None

    def move_to(self, position: int | None, reset: str | None = None) -> None:
        """A seek: what was buffered for the old position is dropped."""
        self.position, self.reset = position, reset
        self.buffered.clear()
        self.buffer_end = None


_SETTINGS = (
    "client_id",
    "fetch_max_wait_ms",
    "fetch_min_bytes",
    "fetch_max_bytes",
    "max_partition_fetch_bytes",
    "max_poll_records",
    "auto_offset_reset",
    "request_timeout_ms",
    "retry_backoff_ms",
    "default_api_timeout_ms",
    "group_id",
)


class Consumer:
    """A Kafka consumer with manual assignment (use it as `async with Consumer(...)`).

    `bootstrap`, `network` and `rng` as for the Producer (real TCP and a fresh
    random.Random when None).

    Settings are Kafka's, python-style: `fetch_max_wait_ms`, `fetch_min_bytes`,
    `fetch_max_bytes`, `max_partition_fetch_bytes`, `max_poll_records`,
    `auto_offset_reset` ("earliest", the default here, where Kafka's is "latest": a test or
    a demo usually wants what was produced before it started; "latest"; or "none"),
    `request_timeout_ms`,
    `retry_backoff_ms`, `default_api_timeout_ms` (how long `position`, `end_offsets` and
    `beginning_offsets` retry). A fetch asks for at most `fetch_max_bytes` of records but
    never more than a response frame can carry (`transport.DEFAULT_MAX_FRAME_BYTES`, 16 MiB,
    less the response's envelope): Kafka's clients read responses of any size, kcore's
    transport bounds them, so the default 50 MiB is capped there. `group_id` is refused
    until consumer groups exist (a consumer that seemed to join a group but committed nothing
    would lose its place).
    """

    def __init__(
        self,
        bootstrap: Any,
        *,
        network: transport.Network | None = None,
        rng: random.Random | None = None,
        client_id: str = "consumer",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        max_poll_records: int = 500,
        auto_offset_reset: str = "earliest",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        default_api_timeout_ms: int = 60000,
        group_id: str | None = None,
        **unknown: Any,
    ) -> None:
        check_no_unknown("consumer", unknown, _SETTINGS)
        self.bootstrap = parse_bootstrap(bootstrap)
        self.fetch_max_wait_ms = check_int("fetch_max_wait_ms", fetch_max_wait_ms)
        self.fetch_min_bytes = check_int("fetch_min_bytes", fetch_min_bytes)
        self.fetch_max_bytes = check_int("fetch_max_bytes", fetch_max_bytes)
        self.max_partition_fetch_bytes = check_int(
            "max_partition_fetch_bytes", max_partition_fetch_bytes
        )
        self.max_poll_records = check_int("max_poll_records", max_poll_records, minimum=1)
        self.auto_offset_reset = check_choice(
            "auto_offset_reset", auto_offset_reset, ("earliest", "latest", "none")
        )
        self.request_timeout_ms = check_int("request_timeout_ms", request_timeout_ms, minimum=1)
        self.retry_backoff_ms = check_int("retry_backoff_ms", retry_backoff_ms, minimum=1)
        self.default_api_timeout_ms = check_int("default_api_timeout_ms", default_api_timeout_ms)
        if self.request_timeout_ms <= self.fetch_max_wait_ms:
            raise ClientConfigError(
                f"request_timeout_ms ({request_timeout_ms}) must be > fetch_max_wait_ms "
                f"({fetch_max_wait_ms}): a long-polling fetch would time out"
            )
        if group_id is not None:
            raise ClientConfigError(
                f"group_id={group_id!r} is not supported yet: kcore has no consumer groups; "
                "use assign() and seek()"
            )
        self.client_id = client_id
        self._network = network if network is not None else transport.TcpNetwork()
        self._rng = rng if rng is not None else random.Random()
        self._assignment: dict[TopicPartition, _PartitionState] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self._connections: Connections | None = None
        self._metadata: MetadataManager | None = None
        self._metadata_stale = True
        self._nursery: trio.Nursery | None = None
        self._fetching: set[int] = set()  # leaders with a fetch in flight
        self._fetch_done = trio.Event()  # replaced each time a fetch finishes
        self._fetch_error: errors.KafkaError | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<Consumer {self.client_id} assigned={sorted(map(str, self._assignment))}>"

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        if self._stack is not None or self._closed:
            raise RuntimeError("a Consumer can be entered once")
        stack = contextlib.AsyncExitStack()
        nursery = await stack.enter_async_context(actors.open_background_nursery())
        self._stack, self._nursery = stack, nursery
        self._connections = Connections(
            self._network,
            client_id=self.client_id,
            rng=self._rng,
            nursery=nursery,
            request_timeout=self.request_timeout_ms / 1000,
            logger=log,
        )
        self._metadata = MetadataManager(
            self._connections,
            self.bootstrap,
            rng=self._rng,
            retry_backoff=self.retry_backoff_ms / 1000,
            request_timeout=self.request_timeout_ms / 1000,
            logger=log,
        )
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        assert self._stack is not None and self._connections is not None
        self._closed = True
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()  # fetches still out
        await self._connections.aclose()
        return await self._stack.__aexit__(exc_type, exc, tb)

    # -- assignment and positions ------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        raise NotImplementedError(
            "consumer groups are not implemented: use assign([(topic, partition), ...]) "
            "(manual assignment) instead of subscribe"
        )

    def assign(self, partitions: Iterable[Any]) -> None:
        """Replaces the assignment; partitions kept keep their positions, new ones start
        where `auto_offset_reset` says unless `seek` is called."""
        tps = [to_topic_partition(p) for p in partitions]
        self._assignment = {tp: self._assignment.get(tp) or _PartitionState() for tp in tps}
        self._metadata_stale = True

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def _state(self, tp: Any) -> _PartitionState:
        tp = to_topic_partition(tp)
        state = self._assignment.get(tp)
        if state is None:
            raise errors.KafkaError(f"{tp} is not assigned to this consumer (assign it first)")
        return state

    def seek(self, tp: Any, offset: int) -> None:
        """The next poll returns records of `tp` from `offset` on."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        self._state(tp).move_to(offset)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        """Positions at the log start offset, looked up lazily (at the next `poll` or
        `position`), as Kafka does."""
        self._seek_lazily(partitions, "earliest")

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        """Positions at the high watermark (looked up lazily)."""
        self._seek_lazily(partitions, "latest")

    def _seek_lazily(self, partitions: Iterable[Any] | None, reset: str) -> None:
        states = (
            list(self._assignment.values())
            if partitions is None
            else [self._state(p) for p in partitions]
        )
        for state in states:
            state.move_to(None, reset)

    async def position(self, tp: Any) -> int:
        """The offset of the next record `poll` returns for `tp` (looked up if a seek to
        the beginning / end is pending)."""
        state = self._state(tp)
        self._check_open()
        if state.position is None:
            with trio.move_on_after(self.default_api_timeout_ms / 1000):
                await self._resolve_positions(retry=True)
        if state.position is None:
            raise errors.RequestTimedOutError(
                f"the position of {tp} could not be looked up within "
                f"default_api_timeout_ms={self.default_api_timeout_ms}"
            )
        return state.position

    async def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return await self._offsets_for(partitions, EARLIEST_TIMESTAMP)

    async def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """The high watermark of each partition (what a consumer can read up to)."""
        return await self._offsets_for(partitions, LATEST_TIMESTAMP)

    async def _offsets_for(
        self, partitions: Iterable[Any], timestamp: int
    ) -> dict[TopicPartition, int]:
        self._check_open()
        tps = sorted({to_topic_partition(p) for p in partitions})
        found: dict[TopicPartition, int] = {}
        with trio.move_on_after(self.default_api_timeout_ms / 1000):
            while True:
                missing = [tp for tp in tps if tp not in found]
                if not missing:
                    return found
                found.update(await self._list_offsets({tp: timestamp for tp in missing}))
        raise errors.RequestTimedOutError(
            f"offsets of {', '.join(str(tp) for tp in tps if tp not in found)} could not be "
            f"looked up within default_api_timeout_ms={self.default_api_timeout_ms}"
        )

    # -- polling -----------------------------------------------------------------------

    async def poll(self, timeout: float = 1.0) -> list[ConsumerRecord]:
        """Records from the assigned partitions' positions on (per partition in offset
        order, at most `max_poll_records`), advancing the positions; [] when nothing came
        within `timeout` seconds. Raises `OffsetOutOfRangeError` when a position is out of
        range and auto_offset_reset='none', and non-retriable fetch errors.

        Fetches may outlive the poll that sent them; their records wait for the next poll.
        `timeout=0` returns what earlier fetches buffered and sends new fetches, but does not
        wait for a metadata refresh or a position lookup: give a first poll some time."""
        self._check_open()
        deadline = trio.current_time() + max(0.0, timeout)
        while True:
            self._raise_fetch_error()
            records = self._drain_buffered()
            if records:
                return records
            started = trio.current_time()
            with trio.move_on_at(deadline):
                await self._resolve_positions(retry=False)
                fetch_done = self._fetch_done
                if await self._send_fetches(deadline) or self._fetching:
                    await fetch_done.wait()
                elif self._metadata_stale:
                    await self._refresh_metadata()
                else:
                    await trio.sleep_until(deadline)  # nothing to fetch: wait out the poll
            self._raise_fetch_error()
            records = self._drain_buffered()
            if records:
                return records
            now = trio.current_time()
            if now >= deadline:
                return []
            if now == started:
                # Nothing was waited for (errors answered at once): do not spin.
                await trio.sleep(min(self.retry_backoff_ms / 1000, deadline - now))

    def _raise_fetch_error(self) -> None:
        error, self._fetch_error = self._fetch_error, None
        if error is not None:
            raise error

    def _check_open(self) -> None:
        if self._closed:
            raise errors.KafkaError("the consumer is closed")
        if self._metadata is None:
            raise RuntimeError("use the consumer as `async with Consumer(...) as consumer:`")

    def _drain_buffered(self) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        for tp in sorted(self._assignment):
            state = self._assignment[tp]
            while state.buffered and len(records) < self.max_poll_records:
                record = state.buffered.popleft()
                records.append(record)
                state.position = record.offset + 1
            if not state.buffered and state.buffer_end is not None:
                state.position, state.buffer_end = state.buffer_end, None
        return records

    async def _refresh_metadata(self, also: Iterable[TopicPartition] = ()) -> None:
        """Metadata of the assigned topics, and of `also`'s (offsets asked for partitions
        that are not assigned)."""
        assert self._metadata is not None
        topics = sorted({tp.topic for tp in self._assignment} | {tp.topic for tp in also})
        try:
            await self._metadata.refresh(topics)
            self._metadata_stale = False
        except errors.KafkaError as exc:
            log.warning("%s: metadata refresh failed: %s", self.client_id, exc)

    async def _leaders(self) -> dict[TopicPartition, int]:
        """The leader of each assigned partition that has a known one."""
        assert self._metadata is not None
        if self._metadata_stale:
            await self._refresh_metadata()
        cluster = self._metadata.cluster
        leaders = {}
        for tp in sorted(self._assignment):
            leader = cluster.leader_for(tp)
            if leader is None:
                self._metadata_stale = True
            else:
                leaders[tp] = leader
        return leaders

    async def _resolve_positions(self, *, retry: bool) -> None:
        """Looks up the positions of partitions that have none (pending seeks to the
        beginning / end, new assignments): ListOffsets to their leaders."""
        while True:
            wanted = {}
            for tp, state in sorted(self._assignment.items()):
                if state.position is not None:
                    continue
                strategy = state.reset or self.auto_offset_reset
                if strategy == "none":
                    raise errors.OffsetOutOfRangeError(
                        f"{tp} has no position and auto_offset_reset='none': seek first"
                    )
                wanted[tp] = _RESETS[strategy]
            if not wanted:
                return
            found = await self._list_offsets(wanted)
            for tp, offset in found.items():
                state = self._assignment.get(tp)
                if state is not None and state.position is None:
                    state.move_to(offset)
            if not retry or len(found) == len(wanted):
                return

    async def _list_offsets(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """One round of ListOffsets (one request per leader); partitions that failed with a
        retriable error are left out (and metadata marked stale)."""
        assert self._metadata is not None and self._connections is not None
        if self._metadata_stale or any(
            self._metadata.cluster.leader_for(tp) is None for tp in wanted
        ):
            await self._refresh_metadata(also=wanted)
        cluster = self._metadata.cluster
        by_leader: dict[int, list[ListOffsetsPartition]] = {}
        for tp, timestamp in sorted(wanted.items()):
            leader = cluster.leader_for(tp)
            if leader is None:
                self._metadata_stale = True
                continue
            by_leader.setdefault(leader, []).append(
                ListOffsetsPartition(tp.topic, tp.partition, timestamp, cluster.leader_epoch(tp))
            )
        found: dict[TopicPartition, int] = {}
        for leader, queries in sorted(by_leader.items()):
            address = cluster.address_of(leader)
            assert address is not None
            try:
                response = await self._connections.request(
                    address,
                    ApiKey.LIST_OFFSETS,
                    ListOffsetsRequest(CONSUMER_REPLICA_ID, tuple(queries)),
                    ListOffsetsResponse,
                )
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("%s: ListOffsets to broker %d failed: %s", self.client_id, leader, exc)
                self._metadata_stale = True
                continue
            for answer in response.partitions:
                tp = TopicPartition(answer.topic, answer.partition)
                if answer.error_code == 0:
                    found[tp] = answer.offset
                    continue
                error = errors.error_for_code(
                    answer.error_code, f"ListOffsets for {tp} on broker {leader}"
                )
                if not error.retriable:
                    raise error
                self._metadata_stale = True
        if len(found) < len(wanted) and self._metadata_stale:
            await self._refresh_metadata(also=wanted)  # spaced by retry_backoff_ms
        return found

    async def _send_fetches(self, deadline: float) -> bool:
        """Starts one FetchRequest per leader that has none in flight, for the partitions
        with a position and no buffered records; True if any was started.

        Fetches run in the consumer's nursery and may outlive the poll that sent them (as
        in Kafka): their records wait in the partitions' buffers for the next poll, and a
        poll returns as soon as one fetch brought records.
        """
        assert self._metadata is not None and self._nursery is not None
        leaders = await self._leaders()
        cluster = self._metadata.cluster
        by_leader: dict[int, list[FetchPartition]] = {}
        for tp, leader in leaders.items():
            state = self._assignment[tp]
            if state.position is None or state.buffered or leader in self._fetching:
                continue
            by_leader.setdefault(leader, []).append(
                FetchPartition(
                    tp.topic,
                    tp.partition,
                    state.position,
                    self.max_partition_fetch_bytes,
                    current_leader_epoch=cluster.leader_epoch(tp),
                )
            )
        remaining_ms = max(0, int((deadline - trio.current_time()) * 1000))
        max_wait_ms = min(self.fetch_max_wait_ms, remaining_ms)
        for leader, partitions in sorted(by_leader.items()):
            log.debug(
                "%s: fetching %s from broker %d (max_wait_ms=%d)",
                self.client_id,
                ", ".join(f"{p.topic}-{p.partition}@{p.fetch_offset}" for p in partitions),
                leader,
                max_wait_ms,
            )
            self._fetching.add(leader)
            self._nursery.start_soon(self._fetch_from, leader, partitions, max_wait_ms)
        return bool(by_leader)

    async def _fetch_from(
        self, leader: int, partitions: list[FetchPartition], max_wait_ms: int
    ) -> None:
        try:
            await self._fetch_and_buffer(leader, partitions, max_wait_ms)
        except errors.KafkaError as exc:
            # Not retriable: the next poll raises it.
            self._fetch_error = exc
        finally:
            self._fetching.discard(leader)
            done, self._fetch_done = self._fetch_done, trio.Event()
            done.set()

    async def _fetch_and_buffer(
        self, leader: int, partitions: list[FetchPartition], max_wait_ms: int
    ) -> None:
        assert self._metadata is not None and self._connections is not None
        address = self._metadata.cluster.address_of(leader)
        assert address is not None
        # The response must fit this client's frame limit (the transport's default): ask
        # for no more records than that leaves room for.
        frame_room = fetch_records_limit(
            transport.DEFAULT_MAX_FRAME_BYTES, (p.topic for p in partitions)
        )
        request = FetchRequest(
            CONSUMER_REPLICA_ID,
            -1,
            max_wait_ms,
            self.fetch_min_bytes,
            min(self.fetch_max_bytes, frame_room),
            tuple(partitions),
        )
        try:
            response = await self._connections.request(
                address, ApiKey.FETCH, request, FetchResponse
            )
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.info("%s: fetch from broker %d failed: %s", self.client_id, leader, exc)
            self._metadata_stale = True
            return
        sent = {(p.topic, p.partition): p.fetch_offset for p in partitions}
        for answer in response.partitions:
            fetch_offset = sent.get((answer.topic, answer.partition))
            if fetch_offset is not None:
                self._handle_fetched(answer, fetch_offset, leader)

    def _handle_fetched(
        self, answer: FetchPartitionResponse, fetch_offset: int, leader: int
    ) -> bool:
        """Buffers a partition's fetched records; True when there are any."""
        tp = TopicPartition(answer.topic, answer.partition)
        state = self._assignment.get(tp)
        if state is None or state.position != fetch_offset or state.buffered:
            return False  # unassigned or seeked while the fetch was out: drop it
        if answer.error_code == _OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == "none":
                raise errors.OffsetOutOfRangeError(
                    f"fetch offset {fetch_offset} of {tp} is out of range on broker {leader} "
                    "and auto_offset_reset='none'"
                )
            log.info(
                "%s: fetch offset %d of %s is out of range; resetting to %s",
                self.client_id,
                fetch_offset,
                tp,
                self.auto_offset_reset,
            )
            state.move_to(None, self.auto_offset_reset)
            return False
        if answer.error_code in _REFRESH_CODES:
            log.info(
                "%s: fetch of %s from broker %d: %s; refreshing metadata",
                self.client_id,
                tp,
                leader,
                errors.ERROR_NAMES.get(answer.error_code, answer.error_code),
            )
            self._metadata_stale = True
            return False
        if answer.error_code == errors.CorruptMessageError.code:
            raise CorruptRecordError(
                f"the record batch of {tp} at offset {fetch_offset} on broker {leader} is "
                "corrupt; seek past it to go on"
            )
        if answer.error_code != 0:
            raise errors.error_for_code(
                answer.error_code, f"fetch of {tp} from broker {leader} failed"
            )
        if not answer.records:
            return False
        # The records before a corrupt batch are delivered; the next fetch, from the corrupt
        # batch on, raises (Kafka's Fetcher does the same).
        batches, corrupt = split_valid_batches(answer.records)
        if corrupt is not None and not any(h.next_offset > fetch_offset for h, _ in batches):
            raise CorruptRecordError(
                f"fetch of {tp} at offset {fetch_offset} from broker {leader}: {corrupt}; "
                "seek past it to go on"
            )
        end = fetch_offset
        for header, batch in batches:
            if header.next_offset <= fetch_offset:
                continue  # a whole batch below the position
            for record in iter_records(batch):
                # A fetch returns whole batches: skip the records below the position.
                if record.offset >= fetch_offset:
                    state.buffered.append(
                        ConsumerRecord(
                            tp.topic,
                            tp.partition,
                            record.offset,
                            record.timestamp,
                            record.key,
                            record.value,
                            tuple(record.headers),
                        )
                    )
            end = max(end, header.next_offset)
        if state.buffered:
            state.buffer_end = end
            return True
        state.position = end  # only records below the position: skip past them
        return False
