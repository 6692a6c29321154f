"""The producer: `await producer.send(topic, value, key=...)` queues a record and returns
a `FutureRecordMetadata`, which gives the record's offset once the cluster acknowledged it
(as `acks` asks); `await producer.send_and_wait(...)` does both.

Sends append records to per-partition batches (`RecordAccumulator`); one sender task drains
the ready batches, groups them per partition leader into one ProduceRequest each, and
settles every record of a batch at once from the answer: an offset, a retry, or an error.
Kafka's Java producer (KafkaProducer, RecordAccumulator, BufferPool, Sender,
BuiltInPartitioner) is the reference; the differences are noted where they are.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import time
from collections.abc import Callable, Generator
from typing import Any

import attrs
import trio

import actors
import transport
from kcore import errors
from kcore.client._accumulator import ProducerBatch, RecordAccumulator, record_size
from kcore.client._config import (
    SECURITY_SETTINGS,
    ClientConfigError,
    InvalidPartitionError,
    check_choice,
    check_int,
    check_no_unknown,
    parse_acks,
    parse_bootstrap,
    security_network,
)
from kcore.client._connections import Connections
from kcore.client._idempotence import IdempotenceManager
from kcore.client._metadata import MetadataManager, TopicMetadata
from kcore.client._partitioner import StickyPartitioner
from kcore.common import TopicPartition
from kcore.log import COMPRESSION_TYPES, build_batch
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)

__all__ = [
    "BufferExhaustedError",
    "FutureRecordMetadata",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
]

log = logging.getLogger("kcore.client.producer")

MAX_INT = 2**31 - 1
# Kafka's MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5

# Errors after which the leader we sent to is probably not the leader any more: refresh
# metadata before the retry (Kafka's InvalidMetadataException family).
_STALE_METADATA = frozenset(
    cls.code
    for cls in (
        errors.UnknownTopicOrPartitionError,
        errors.LeaderNotAvailableError,
        errors.NotLeaderOrFollowerError,
        errors.NetworkError,
        errors.FencedLeaderEpochError,
        errors.UnknownLeaderEpochError,
    )
)
_DUPLICATE_SEQUENCE = errors.ERROR_CODES["DUPLICATE_SEQUENCE_NUMBER"]
# Retried by the idempotent producer although not retriable as such (Kafka's canRetry).
_SEQUENCE_ERRORS = frozenset(
    errors.ERROR_CODES[name] for name in ("OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID")
)


def resolve_idempotence(
    enable_idempotence: bool | None, *, acks: int, retries: int, max_in_flight: int
) -> bool:
    """Kafka 3.x's ProducerConfig.postProcessAndValidateIdempotenceConfigs: idempotence is
    on by default. Explicitly enabled, it refuses `retries` 0, `acks` other than all and
    more than 5 requests in flight per connection (a `ClientConfigError` naming the
    settings); only defaulted, those settings quietly turn it off (logged at INFO)."""
    user_set = enable_idempotence is not None
    if user_set and not isinstance(enable_idempotence, bool):
        raise ClientConfigError(f"enable_idempotence must be a bool, got {enable_idempotence!r}")
    if user_set and not enable_idempotence:
        return False
    conflicts = []
    if retries == 0:
        conflicts.append("retries must be non-zero (got 0)")
    if acks != -1:
        conflicts.append(f"acks must be 'all' (got {acks})")
    if max_in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        conflicts.append(
            "max_in_flight_requests_per_connection must be at most "
            f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE} (got {max_in_flight})"
        )
    if not conflicts:
        return True
    if user_set:
        raise ClientConfigError(
            "enable_idempotence=True needs acks='all', retries > 0 and "
            f"max_in_flight_requests_per_connection <= {MAX_IN_FLIGHT_FOR_IDEMPOTENCE}: "
            + "; ".join(conflicts)
        )
    log.info("idempotence disabled (not set explicitly): %s", "; ".join(conflicts))
    return False


@attrs.frozen
class RecordMetadata:
    """Where an acknowledged record was written. `offset` is -1 with acks=0 (the broker's
    answer is not read), and after a DUPLICATE_SEQUENCE_NUMBER answer with idempotence
    (the record was written by an earlier attempt whose answer was lost, and the broker no
    longer knows where)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerClosedError(errors.KafkaError):
    """The producer closed (or its `async with` block failed) before the record was
    acknowledged; the record may or may not have been written."""

    name = "PRODUCER_CLOSED"


class BufferExhaustedError(errors.RequestTimedOutError):
    """`send` waited `max_block_ms` for room in the producer's `buffer_memory` (Kafka's
    BufferExhaustedException, a TimeoutException). The record was not queued."""


DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], object]


class _BatchOutcome:
    """What the records of one batch wait for, set once: the base offset and append time,
    or an error. One per batch rather than per record: an event per record, set one by
    one, was a third of the producer's time per record. Records' handles and callbacks
    hold this, never the batch, so a kept handle does not keep the batch's records."""

    __slots__ = ("base_offset", "callbacks", "done", "error", "log_append_time", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.done = trio.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        # (index in the batch, timestamp, callback) of the sends given `on_delivery`
        self.callbacks: list[tuple[int, int, DeliveryCallback]] | None = None

    def metadata(self, index: int, timestamp: int) -> RecordMetadata:
        """The metadata of the batch's `index`-th record (once done without error)."""
        base = self.base_offset
        return RecordMetadata(
            self.tp.topic,
            self.tp.partition,
            base + index if base >= 0 else -1,
            self.log_append_time if self.log_append_time >= 0 else timestamp,
        )


class FutureRecordMetadata:
    """A queued record's outcome, what `Producer.send` returns (Kafka's
    FutureRecordMetadata; aiokafka's send returns a future the same way).

    `await handle` returns the record's `RecordMetadata` once acknowledged, or raises the
    error that failed it (a fresh exception for each await), at once when the outcome is
    already known. Cancelling the await does not withdraw the record. `done()`, `result()`
    and `exception()` look without waiting. A handle nobody awaits costs nothing: its
    record is sent all the same, and a failure is logged by the producer.
    """

    __slots__ = ("_index", "_outcome", "_timestamp")

    def __init__(self, outcome: _BatchOutcome, index: int, timestamp: int) -> None:
        self._outcome = outcome
        self._index = index
        self._timestamp = timestamp

    def __repr__(self) -> str:
        outcome = self._outcome
        state = (
            "pending"
            if not outcome.done.is_set()
            else "failed"
            if outcome.error is not None
            else "done"
        )
        return f"<FutureRecordMetadata {outcome.tp} #{self._index} {state}>"

    def done(self) -> bool:
        """Whether the record has its outcome (acknowledged or failed)."""
        return self._outcome.done.is_set()

    def result(self) -> RecordMetadata:
        """The record's metadata; raises its error if it failed, and `RuntimeError` when
        it has no outcome yet (await the handle to wait for it)."""
        outcome = self._outcome
        if not outcome.done.is_set():
            raise RuntimeError("the record is not acknowledged yet: await it")
        if outcome.error is not None:
            raise _fresh(outcome.error)
        return outcome.metadata(self._index, self._timestamp)

    def exception(self) -> BaseException | None:
        """The record's error (a fresh copy), None if it was acknowledged; `RuntimeError`
        when it has no outcome yet."""
        outcome = self._outcome
        if not outcome.done.is_set():
            raise RuntimeError("the record is not acknowledged yet: await it")
        return None if outcome.error is None else _fresh(outcome.error)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self._wait().__await__()

    async def _wait(self) -> RecordMetadata:
        outcome = self._outcome
        if not outcome.done.is_set():
            await outcome.done.wait()
        return self.result()


_SETTINGS = (
    "acks",
    "retries",
    "linger_ms",
    "batch_size",
    "delivery_timeout_ms",
    "request_timeout_ms",
    "retry_backoff_ms",
    "enable_idempotence",
    "max_request_size",
    "max_in_flight_requests_per_connection",
    "max_block_ms",
    "buffer_memory",
    "metadata_max_age_ms",
    "compression_type",
    "client_id",
    "clock",
)


class Producer:
    """A Kafka producer (use it as `async with Producer(...) as producer:`).

    `bootstrap`: `"host:port,host:port"`, `["host:port", ...]` or `[(host, port), ...]`.
    `network`: a `transport` network (real TCP when None, or a `SimNetwork` node view).
    `rng`: every random choice (sticky partitions, backoff jitter, which broker to ask for
    metadata); a fresh random.Random when None. `clock`: the wall clock (seconds) that
    stamps records without an explicit timestamp.

    Settings are Kafka's, python-style: `acks` ("all" / -1, 0, 1), `retries`, `linger_ms`,
    `batch_size`, `delivery_timeout_ms`, `request_timeout_ms`, `retry_backoff_ms`,
    `enable_idempotence`, `max_request_size`, `max_in_flight_requests_per_connection`,
    `max_block_ms` (how long `send` waits, in all, for the topic's metadata and for room in
    the buffer), `buffer_memory` (bytes of records queued and not yet acknowledged, counted
    as they add to batches: past it `send` waits), `metadata_max_age_ms` (refresh at least
    this often, to see new partitions and leaders), `compression_type`
    ("none", "gzip", "snappy", "lz4" or "zstd": the codec of each batch's records). An unknown
    setting or a bad value raises `ClientConfigError` naming it.

    Delivery: records of one partition are sent in `send` order, one batch in flight per
    partition, and a batch retried after a retriable error is resent before any later batch
    of its partition. A batch is retried until `retries` retries or `delivery_timeout_ms`
    after its creation, whichever comes first; then each of its sends raises the last error.

    Idempotence (Kafka 3.x: on by default; `enable_idempotence=None` means "default") gets
    a producer id and stamps each batch with it, an epoch and per-partition sequences, so
    the broker writes a retried batch once. Set explicitly, it needs acks="all", retries > 0
    and max_in_flight_requests_per_connection <= 5 (else `ClientConfigError`); defaulted,
    such settings turn it off. A batch that fails for good after it was sent leaves a gap
    in its partition's sequences: the producer then bumps its epoch (KIP-360) and restarts
    that partition's sequences at 0 (see `kcore.client._idempotence`), so later records go
    through; the failed batch is never resent.

    acks=0: the producer still reads the broker's answer (so one connection's requests stay
    in order and a dead connection is noticed) but ignores its content: `send` returns
    offset -1 once the request reached the broker, and per-partition errors are not seen.
    """

    def __init__(
        self,
        bootstrap: Any,
        *,
        network: transport.Network | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.time,
        acks: int | str = "all",
        retries: int = MAX_INT,
        linger_ms: int = 0,
        batch_size: int = 16384,
        delivery_timeout_ms: int = 120000,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        enable_idempotence: bool | None = None,
        max_request_size: int = 1048576,
        max_in_flight_requests_per_connection: int = 5,
        max_block_ms: int = 60000,
        buffer_memory: int = 33554432,
        metadata_max_age_ms: int = 300000,
        compression_type: str = "none",
        client_id: str = "producer",
        **unknown: Any,
    ) -> None:
        # Kafka's security.protocol and ssl.* settings: the network they describe.
        security = {k: unknown.pop(k) for k in SECURITY_SETTINGS if k in unknown}
        check_no_unknown("producer", unknown, _SETTINGS + SECURITY_SETTINGS)
        self.bootstrap = parse_bootstrap(bootstrap)
        self.acks = parse_acks(acks)
        self.retries = check_int("retries", retries, maximum=MAX_INT)
        self.linger_ms = check_int("linger_ms", linger_ms)
        self.batch_size = check_int("batch_size", batch_size)
        self.delivery_timeout_ms = check_int("delivery_timeout_ms", delivery_timeout_ms)
        self.request_timeout_ms = check_int("request_timeout_ms", request_timeout_ms, minimum=1)
        self.retry_backoff_ms = check_int("retry_backoff_ms", retry_backoff_ms, minimum=1)
        self.max_request_size = check_int("max_request_size", max_request_size, minimum=1)
        self.max_in_flight = check_int(
            "max_in_flight_requests_per_connection",
            max_in_flight_requests_per_connection,
            minimum=1,
        )
        self.max_block_ms = check_int("max_block_ms", max_block_ms)
        self.buffer_memory = check_int("buffer_memory", buffer_memory, minimum=1)
        self.metadata_max_age_ms = check_int("metadata_max_age_ms", metadata_max_age_ms)
        self.compression_type = check_choice(
            "compression_type", compression_type, COMPRESSION_TYPES
        )
        self.enable_idempotence = resolve_idempotence(
            enable_idempotence,
            acks=self.acks,
            retries=self.retries,
            max_in_flight=self.max_in_flight,
        )
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            # Kafka's rule: a batch must be able to linger and wait for one answer.
            raise ClientConfigError(
                f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be >= linger_ms "
                f"({self.linger_ms}) + request_timeout_ms ({self.request_timeout_ms})"
            )
        if not isinstance(client_id, str) or not client_id:
            raise ClientConfigError(f"client_id must be a non-empty str, got {client_id!r}")
        self.client_id = client_id
        self._network = security_network(network, **security)
        self._rng = rng if rng is not None else random.Random()
        self._clock = clock
        self._accumulator = RecordAccumulator(
            batch_size=self.batch_size, linger=self.linger_ms / 1000
        )
        self._partitioner = StickyPartitioner(self._rng, batch_size=self.batch_size)
        self._topics: set[str] = set()
        # Built once per topic rather than per record: its TopicPartitions, and its
        # partitions with a leader for one metadata snapshot (the partitioner's view).
        self._topic_partitions: dict[str, tuple[TopicPartition, ...]] = {}
        self._available: dict[str, tuple[TopicMetadata, tuple[int, ...]]] = {}
        self._room_waiters = 0  # sends waiting for buffer room
        self._room = trio.Event()  # set (and replaced) when a batch frees its bytes
        # Insertion-ordered (a dict used as a set): closing settles records in send order,
        # never in hash order, so a seeded run replays exactly.
        self._incomplete: dict[ProducerBatch, None] = {}
        self._in_flight_per_node: dict[int, int] = {}
        self._idempotence = (
            IdempotenceManager(logger=log, name=self.client_id) if self.enable_idempotence else None
        )
        self._last_metadata_error: Exception | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._nursery: trio.Nursery | None = None
        self._connections: Connections | None = None
        self._metadata: MetadataManager | None = None
        self._wakeup = trio.Event()
        self._metadata_wanted = trio.Event()
        self._closed = False

    def __repr__(self) -> str:
        return f"<Producer {self.client_id} acks={self.acks}>"

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        if self._stack is not None or self._closed:
            raise RuntimeError("a Producer can be entered once")
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
        nursery.start_soon(self._run_metadata)
        nursery.start_soon(self._run_sender)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        """A clean exit flushes (every record sent gets its outcome); an exit on an error
        fails the records not yet acknowledged with `ProducerClosedError`."""
        stack = self._stack
        assert stack is not None and self._nursery is not None
        try:
            if exc_type is None:
                await self.flush()
        finally:
            self._closed = True
            self._abort_incomplete("the producer was closed before the record was acknowledged")
            self._nursery.cancel_scope.cancel()
            assert self._connections is not None
            await self._connections.aclose()
        return await stack.__aexit__(exc_type, exc, tb)

    # -- the public API ----------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> FutureRecordMetadata:
        """Queues one record and returns its `FutureRecordMetadata`: awaiting it gives
        where the record was written once acknowledged. Returns without letting other
        tasks run when the topic's metadata is known and the buffer has room; otherwise
        waits for them, `max_block_ms` in all.

        Raises here, the record not queued: `UnknownTopicOrPartitionError` when the topic
        is not in the metadata after `max_block_ms`, `BufferExhaustedError` when the
        buffer had no room for `max_block_ms`, `InvalidPartitionError` for a partition the
        topic does not have, `MessageTooLargeError` for a record over `max_request_size`
        or `buffer_memory`, `ProducerClosedError` once closing began.

        The handle raises the Kafka error that failed the record: a non-retriable one at
        once, a retriable one after `retries` / `delivery_timeout_ms`. A `NetworkError` or
        `RequestTimedOutError` means the outcome is unknown: the record may have been
        written.

        `on_delivery(metadata, error)`, when given, is called once with the record's
        `RecordMetadata` and None, or None and its error, as soon as its batch has its
        outcome, in the producer's own task: it must not block, and what it raises is
        logged and dropped. Records of one partition get theirs in `send` order.
        """
        if self._closed or self._metadata is None:
            self._check_open()
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic must be a non-empty str, got {topic!r}")
        # The common case (bytes) costs a type check, not a call.
        if value.__class__ is not bytes:
            value = _as_bytes("value", value)
        if key is not None and key.__class__ is not bytes:
            key = _as_bytes("key", key)
        size = record_size(key, value)
        if size > self.max_request_size:
            raise errors.MessageTooLargeError(
                f"the record is {size} bytes, more than max_request_size={self.max_request_size}"
            )
        if size > self.buffer_memory:
            raise errors.MessageTooLargeError(
                f"the record is {size} bytes, more than buffer_memory={self.buffer_memory}"
            )
        if timestamp_ms is None:
            timestamp_ms = int(self._clock() * 1000)
        elif isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
            raise TypeError(f"timestamp_ms must be an int, got {timestamp_ms!r}")
        accumulator = self._accumulator
        metadata = self._metadata.cluster.topics.get(topic)
        if (
            metadata is None
            or not metadata.partitions
            or accumulator.buffered + size > self.buffer_memory
        ):
            metadata = await self._wait_for_topic_and_room(topic, size)
        count = len(metadata.partitions)
        unkeyed = key is None and partition is None
        available: tuple[int, ...] = ()  # looked up only when the partitioner chooses
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, int):
                raise TypeError(f"partition must be an int, got {partition!r}")
            if not 0 <= partition < count:
                raise InvalidPartitionError(
                    f"partition {partition} of topic {topic!r} is out of range: the topic has "
                    f"{count} partition(s), 0..{count - 1}"
                )
            chosen = partition
        else:
            if unkeyed:
                available = self._available_partitions(metadata)
            chosen = self._partitioner.partition(topic, key, count, available)
        tps = self._topic_partitions.get(topic)
        if tps is None or chosen >= len(tps):
            tps = self._topic_partitions[topic] = tuple(
                TopicPartition(topic, p) for p in range(count)
            )
        tp = tps[chosen]
        batch = accumulator.try_append(tp, timestamp_ms, key, value, size)
        if batch is None:
            batch = accumulator.append_new_batch(
                tp, timestamp_ms, key, value, size, trio.current_time()
            )
            batch.outcome = _BatchOutcome(tp)
            self._incomplete[batch] = None
            # Kafka's rule: the sender needs waking only for a new batch (a new linger
            # deadline) or a full one (ready now); a record joining an open batch
            # changes neither, and waking per record made the sender rescan every queue
            # for every record.
            self._wake()
        elif batch.closed:
            self._wake()
        if unkeyed:
            self._partitioner.record_appended(topic, chosen, size, count, available)
        outcome = batch.outcome
        index = len(batch.records) - 1
        if on_delivery is not None:
            if outcome.callbacks is None:
                outcome.callbacks = []
            outcome.callbacks.append((index, timestamp_ms, on_delivery))
        return FutureRecordMetadata(outcome, index, timestamp_ms)

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Sends one record and returns where it was written once acknowledged: `send`,
        then awaiting its handle (raising what either raises). Cancelling it does not
        withdraw the record once queued."""
        handle = await self.send(topic, value, key, partition, timestamp_ms)
        return await handle

    async def flush(self) -> None:
        """Sends every record appended so far at once (ignoring `linger_ms`) and waits
        until each has its outcome (this does not raise the records' errors: their
        `send` calls do)."""
        self._check_open()
        pending = list(self._incomplete)
        if not pending:
            await trio.lowlevel.checkpoint()
            return
        self._accumulator.begin_flush()
        self._wake()
        try:
            for batch in pending:
                await batch.outcome.done.wait()
        finally:
            self._accumulator.end_flush()

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (waiting for its metadata up to `max_block_ms`)."""
        self._check_open()
        return [p.partition for p in (await self._wait_for_topic(topic)).partitions]

    # -- metadata ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        if self._metadata is None:
            raise RuntimeError("use the producer as `async with Producer(...) as producer:`")

    def _available_partitions(self, metadata: TopicMetadata) -> tuple[int, ...]:
        """The topic's partitions with a leader, computed once per metadata snapshot."""
        cached = self._available.get(metadata.name)
        if cached is not None and cached[0] is metadata:
            return cached[1]
        available = metadata.available_partitions()
        self._available[metadata.name] = (metadata, available)
        return available

    async def _wait_for_topic_and_room(self, topic: str, size: int) -> TopicMetadata:
        """`send` when the topic's metadata is unknown or the buffer has no room for a
        record of `size` bytes: waits for both, `max_block_ms` in all (Kafka's rule); the
        topic's latest metadata."""
        deadline = trio.current_time() + self.max_block_ms / 1000
        metadata = await self._wait_for_topic(topic, deadline)
        self._check_open()  # closing may have started while we waited
        accumulator = self._accumulator
        if not accumulator.buffered or accumulator.buffered + size <= self.buffer_memory:
            return metadata
        self._room_waiters += 1
        try:
            with trio.move_on_at(deadline):
                # Until the record fits, or fills an empty buffer alone.
                while accumulator.buffered and accumulator.buffered + size > self.buffer_memory:
                    await self._room.wait()
                    self._check_open()
                # The metadata may have been refreshed meanwhile: choose among today's.
                assert self._metadata is not None
                latest = self._metadata.cluster.topic(topic)
                return latest if latest is not None and latest.partitions else metadata
        finally:
            self._room_waiters -= 1
        raise BufferExhaustedError(
            f"Failed to allocate {size} bytes within the configured max blocking time "
            f"{self.max_block_ms} ms. Total memory: {self.buffer_memory} bytes. Available "
            f"memory: {max(self.buffer_memory - accumulator.buffered, 0)} bytes"
        )

    def _room_freed(self) -> None:
        if self._room_waiters:
            self._room.set()
            self._room = trio.Event()

    async def _wait_for_topic(self, topic: str, deadline: float | None = None) -> TopicMetadata:
        """The topic's metadata, waiting for it until `deadline` (`max_block_ms` from now
        when None)."""
        manager = self._metadata
        assert manager is not None
        known = manager.cluster.topic(topic)
        if known is not None and known.partitions:
            return known
        self._topics.add(topic)
        if deadline is None:
            deadline = trio.current_time() + self.max_block_ms / 1000
        with trio.move_on_at(deadline):
            while True:
                updated = manager.updated
                self._want_metadata()
                await updated.wait()
                known = manager.cluster.topic(topic)
                if known is not None and known.partitions:
                    return known
                manager.raise_if_unauthorized([topic])  # no wait for a refusal (Kafka's)
        code = manager.topic_errors.get(topic)
        reason = (
            f"the brokers answered {errors.ERROR_NAMES.get(code, code)}"
            if code is not None
            else f"last failure: {self._last_metadata_error}"
        )
        raise errors.UnknownTopicOrPartitionError(
            f"topic {topic!r} not present in metadata after max_block_ms={self.max_block_ms} "
            f"({reason})"
        )

    def _want_metadata(self) -> None:
        self._metadata_wanted.set()

    async def _run_metadata(self) -> None:
        """Refreshes metadata whenever someone asks (spaced by retry_backoff_ms inside
        `MetadataManager.refresh`) or every metadata_max_age_ms; a failed refresh is
        retried."""
        manager = self._metadata
        assert manager is not None
        while True:
            with trio.move_on_after(self.metadata_max_age_ms / 1000):
                await self._metadata_wanted.wait()
            self._metadata_wanted = trio.Event()
            try:
                await manager.refresh(sorted(self._topics))
            except errors.KafkaError as exc:
                log.warning("%s: metadata refresh failed: %s", self.client_id, exc)
                self._last_metadata_error = exc
                self._want_metadata()
            self._wake()

    # -- the sender --------------------------------------------------------------------

    def _wake(self) -> None:
        self._wakeup.set()

    def _leader_of(self, tp: TopicPartition) -> int | None:
        assert self._metadata is not None
        return self._metadata.cluster.leader_for(tp)

    def _nodes_backing_off(self) -> frozenset[int]:
        """The brokers whose last connection attempt failed and whose reconnect backoff has
        not passed: looked up once per sender pass (per broker, not per partition)."""
        assert self._metadata is not None and self._connections is not None
        backing_off = self._connections.backing_off_until
        return frozenset(
            node
            for node, broker in self._metadata.cluster.brokers.items()
            if backing_off(broker.address) != -math.inf
        )

    async def _run_sender(self) -> None:
        delivery_timeout = self.delivery_timeout_ms / 1000
        accumulator = self._accumulator
        while True:
            now = trio.current_time()
            self._expire(now, delivery_timeout)
            idempotence = self._idempotence
            if idempotence is not None:
                # Kafka's Sender.runOnce: settle the partitions whose sequences are in
                # doubt, then bump the epoch if a partition asked for it.
                idempotence.maybe_resolve_sequences()
                idempotence.bump_epoch_if_needed(accumulator.in_flight_partitions)
            wake_at = math.inf
            if idempotence is not None and not idempotence.has_producer_id:
                # No batch leaves before the producer has its id; meanwhile they wait
                # (and expire) in the accumulator.
                blocked = {b.tp for b in accumulator.batches()}
                if blocked:
                    if await self._init_producer_id():
                        continue
                    wake_at = trio.current_time() + self.retry_backoff_ms / 1000
                self._want_leaders(blocked, self._nodes_backing_off())
            else:
                blocked = self._send_ready(now)
            wake_at = min(
                wake_at,
                accumulator.next_ready_time(now, exclude=blocked),
                accumulator.next_expiry(delivery_timeout),
            )
            if blocked:
                # A leader backing off may be ready again before any metadata arrives.
                assert self._connections is not None
                wake_at = min(wake_at, self._connections.backoff_ends())
            if wake_at <= now:
                await trio.lowlevel.checkpoint()
                continue
            with trio.move_on_at(wake_at):
                await self._wakeup.wait()
            self._wakeup = trio.Event()

    # The sender's steps that touch batches are functions of their own: a batch is then
    # referenced by no frame of the sender while it waits, and is freed with its records
    # as soon as it has its outcome.

    def _expire(self, now: float, delivery_timeout: float) -> None:
        for batch in self._accumulator.expired(now, delivery_timeout):
            self._fail_expired(batch, now)

    def _send_ready(self, now: float) -> set[TopicPartition]:
        """Drains the ready batches and starts one produce request per leader; returns the
        partitions blocked (see `RecordAccumulator.drain`)."""
        idempotence = self._idempotence
        backing_off = self._nodes_backing_off()
        in_flight, max_in_flight = self._in_flight_per_node, self.max_in_flight

        def node_ready(node: int) -> bool:
            # Room for another request, and no reconnect backoff under way (Kafka's
            # NetworkClient.ready): batches for a leader that refuses connections wait in
            # the accumulator for the metadata to name another one, instead of queueing
            # one connection attempt each behind the backoff.
            return node not in backing_off and in_flight.get(node, 0) < max_in_flight

        ready, blocked = self._accumulator.drain(
            now,
            self._leader_of,
            max_request_size=self.max_request_size,
            node_ready=node_ready,
            may_drain=idempotence.may_drain if idempotence is not None else None,
        )
        if idempotence is not None:
            for batches in ready.values():
                for batch in batches:
                    idempotence.assign_sequence(batch)
        self._want_leaders(blocked, backing_off)
        assert self._nursery is not None
        for node, batches in sorted(ready.items()):
            self._in_flight_per_node[node] = self._in_flight_per_node.get(node, 0) + 1
            self._nursery.start_soon(self._send_produce, node, batches)
        return blocked

    def _want_leaders(self, blocked: set[TopicPartition], backing_off: frozenset[int]) -> None:
        """Metadata, when a blocked partition has no leader, or one backing off (it may
        have moved: Kafka's NetworkClient asks for metadata on a failed connection)."""
        leaders = {self._leader_of(tp) for tp in blocked}
        if None in leaders or not leaders.isdisjoint(backing_off):
            self._want_metadata()

    async def _init_producer_id(self) -> bool:
        """Kafka's idempotent producer gets its id before its first batch; True once it
        has one."""
        assert self._connections is not None and self._metadata is not None
        cluster = self._metadata.cluster
        addresses = [b.address for _, b in sorted(cluster.brokers.items())] or list(self.bootstrap)
        address = addresses[self._rng.randrange(len(addresses))]
        try:
            response = await self._connections.request(
                address, ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(), InitProducerIdResponse
            )
            if response.error_code != 0:
                raise errors.error_for_code(response.error_code, "InitProducerId failed")
        except errors.KafkaError as exc:
            log.warning("%s: could not get a producer id: %s", self.client_id, exc)
            self._want_metadata()
            return False
        assert self._idempotence is not None
        self._idempotence.set_producer_id_and_epoch(response.producer_id, response.producer_epoch)
        return True

    def _encode(self, batch: ProducerBatch) -> bytes:
        """The batch's bytes, built at its first send and resent unchanged on retries (with
        idempotence the broker recognises a retry by its unchanged producer id, epoch and
        sequence; an epoch bump that re-stamps the batch builds them again)."""
        if batch.encoded is None:
            if self._idempotence is not None:
                batch.encoded = build_batch(
                    batch.records,
                    producer_id=batch.producer_id,
                    producer_epoch=batch.producer_epoch,
                    base_sequence=batch.base_sequence,
                    compression=self.compression_type,
                )
            else:
                batch.encoded = build_batch(batch.records, compression=self.compression_type)
        return batch.encoded

    async def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        assert self._connections is not None and self._metadata is not None
        try:
            request = ProduceRequest(
                self.acks,
                self.request_timeout_ms,
                tuple(
                    ProducePartitionData(b.tp.topic, b.tp.partition, self._encode(b))
                    for b in batches
                ),
            )
            for batch in batches:
                batch.attempts += 1
            address = self._metadata.cluster.address_of(node)
            try:
                if address is None:
                    raise errors.NetworkError(f"broker {node} is not in the metadata any more")
                response = await self._connections.request(
                    address, ApiKey.PRODUCE, request, ProduceResponse
                )
            except errors.KafkaError as exc:
                log.debug("%s: produce request to broker %d failed: %s", self.client_id, node, exc)
                self._want_metadata()
                for batch in batches:
                    self._retry_or_fail(batch, exc)
                return
            if self.acks == 0:
                for batch in batches:
                    self._complete(batch, -1, -1)
                return
            answers = {(p.topic, p.partition): p for p in response.partitions}
            for batch in batches:
                self._settle(batch, answers.get((batch.tp.topic, batch.tp.partition)), node)
        finally:
            self._in_flight_per_node[node] -= 1
            self._wake()

    def _settle(
        self, batch: ProducerBatch, answer: ProducePartitionResponse | None, node: int
    ) -> None:
        if answer is None:
            self._fail(
                batch,
                errors.UnknownServerError(f"broker {node} did not answer for {batch.tp}"),
            )
        elif answer.error_code == 0:
            self._complete(batch, answer.base_offset, answer.log_append_time_ms)
        else:
            message = answer.error_message or (
                f"broker {node} answered {errors.ERROR_NAMES.get(answer.error_code)} for {batch.tp}"
            )
            error = errors.error_for_code(answer.error_code, message)
            if answer.error_code in _STALE_METADATA:
                self._want_metadata()
            self._retry_or_fail(batch, error, answer)

    def _retry_or_fail(
        self,
        batch: ProducerBatch,
        error: errors.KafkaError,
        answer: ProducePartitionResponse | None = None,
    ) -> None:
        """Kafka's Sender.completeBatch for an error: retry while within the delivery
        timeout and `retries` (with idempotence, as the sequence bookkeeping allows);
        else a DUPLICATE_SEQUENCE_NUMBER is a success at an unknown offset, anything else
        fails the batch."""
        now = trio.current_time()
        deadline = batch.created + self.delivery_timeout_ms / 1000
        batch.last_error = error
        within = batch.attempts <= self.retries and now < deadline
        if self._idempotence is None or batch.base_sequence < 0:
            retriable = error.retriable
        else:
            retriable = within and self._idempotence.can_retry(
                batch, error.code, answer.log_start_offset if answer is not None else -1
            )
        if retriable and within:
            log.info(
                "%s: retrying %d record(s) for %s (attempt %d) after: %s",
                self.client_id,
                batch.record_count,
                batch.tp,
                batch.attempts + 1,
                error,
            )
            self._accumulator.reenqueue(batch, now + self.retry_backoff_ms / 1000)
            return
        if error.code == _DUPLICATE_SEQUENCE and self._idempotence is not None:
            # An earlier attempt was written and its answer lost, and the broker no longer
            # knows its offsets: a success at an unknown offset (Kafka's Sender).
            base = answer.base_offset if answer is not None else -1
            self._complete(batch, base if base >= 0 else -1, -1)
            return
        # Kafka adjusts sequences only when the batch did not exhaust its retries: after
        # that it cannot know whether the broker took the batch.
        adjust = batch.attempts <= self.retries
        if error.retriable or (self._idempotence is not None and error.code in _SEQUENCE_ERRORS):
            why = (
                f"retries={self.retries} exhausted"
                if batch.attempts > self.retries
                else f"delivery_timeout_ms={self.delivery_timeout_ms} passed"
            )
            error = type(error)(f"{error} ({why} after {batch.attempts} attempt(s))")
        self._fail(batch, error, adjust_sequences=adjust)

    def _fail_expired(self, batch: ProducerBatch, now: float) -> None:
        elapsed_ms = round((now - batch.created) * 1000)
        if batch.last_error is not None:
            last = batch.last_error
            error: BaseException = type(last)(
                f"{last} (delivery_timeout_ms={self.delivery_timeout_ms} passed after "
                f"{batch.attempts} attempt(s))"
            )
        else:
            error = errors.RequestTimedOutError(
                f"expiring {batch.record_count} record(s) for {batch.tp}: {elapsed_ms} ms has "
                f"passed since batch creation (delivery_timeout_ms={self.delivery_timeout_ms}) "
                "and no leader could be sent to"
            )
        if self._idempotence is not None:
            self._idempotence.handle_expired(batch)
        self._fail(batch, error, completed=False, idempotence=False)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self._idempotence is not None and batch.base_sequence >= 0:
            self._idempotence.handle_completed(batch, base_offset)
        self._accumulator.completed(batch)
        self._incomplete.pop(batch, None)
        outcome = batch.outcome
        outcome.base_offset, outcome.log_append_time = base_offset, log_append_time
        self._resolve(outcome)

    def _fail(
        self,
        batch: ProducerBatch,
        error: BaseException,
        *,
        completed: bool = True,
        idempotence: bool = True,
        adjust_sequences: bool = True,
    ) -> None:
        log.warning(
            "%s: %d record(s) for %s failed: %s",
            self.client_id,
            batch.record_count,
            batch.tp,
            error,
        )
        if idempotence and self._idempotence is not None:
            self._idempotence.handle_failed(batch, error, adjust_sequences=adjust_sequences)
        if completed:
            self._accumulator.completed(batch)
        self._incomplete.pop(batch, None)
        batch.outcome.error = error
        self._resolve(batch.outcome)

    def _abort_incomplete(self, reason: str) -> None:
        for batch in self._accumulator.abort_all():
            self._incomplete.pop(batch, None)
            self._fail_quietly(batch, ProducerClosedError(reason))
        for batch in list(self._incomplete):  # in flight
            self._incomplete.pop(batch, None)
            self._fail_quietly(batch, ProducerClosedError(reason))

    def _fail_quietly(self, batch: ProducerBatch, error: BaseException) -> None:
        if not batch.outcome.done.is_set():
            batch.outcome.error = error
            self._resolve(batch.outcome)

    def _resolve(self, outcome: _BatchOutcome) -> None:
        """The batch has its outcome: wakes its records' awaiters, calls their delivery
        callbacks in record order, and lets the sends waiting for buffer room look again."""
        outcome.done.set()
        callbacks = outcome.callbacks
        if callbacks is not None:
            outcome.callbacks = None
            error = outcome.error
            for index, timestamp, callback in callbacks:
                try:
                    if error is None:
                        callback(outcome.metadata(index, timestamp), None)
                    else:
                        callback(None, _fresh(error))
                except Exception:
                    log.exception(
                        "%s: the delivery callback %r for %s failed",
                        self.client_id,
                        callback,
                        outcome.tp,
                    )
        self._room_freed()


def _as_bytes(name: str, value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{name} must be bytes or None, got {type(value).__name__}")


def _fresh(error: BaseException) -> BaseException:
    """A copy of a batch's error for one `send` (many tasks raise it; each gets its own
    traceback)."""
    try:
        copy = type(error)(*error.args)
    except Exception:
        return error
    copy.__cause__ = error.__cause__
    return copy
