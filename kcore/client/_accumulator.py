"""Per-partition record batching for the producer (Kafka's RecordAccumulator, simplified).
Pure: the producer passes the time (`now`, Trio seconds) in.

Records are appended to the open (last) batch of their partition's queue; a batch closes
when the next record would take it past `batch_size` bytes, when it is drained for sending,
or when it comes back for a retry. The head batch of a partition is ready when it is full,
has waited `linger` seconds, a flush is under way, or (for a retry) its backoff has passed.

Ordering rule: at most ONE batch per partition is in flight. A batch that fails with a
retriable error goes back to the FRONT of its partition's queue, so it is sent again before
any later batch of that partition. Kafka keeps order with up to 5 in flight only with
idempotence (the broker rejects out-of-order sequences); one in flight is the simple rule
that is safe whether or not the broker checks sequences.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Set
from typing import Any

import attrs

from kcore.common import TopicPartition
from kcore.log import HEADER_SIZE

__all__ = ["ProducerBatch", "RecordAccumulator", "record_size"]

# A record's fixed fields in Kafka's DefaultRecord encoding: attributes (1 byte), the
# timestamp and offset deltas (varints; 2 bytes each covers 8 s of linger and 8 Ki records,
# more than a batch holds) and the header count (1 byte, kcore's producer sends none).
_FIXED_FIELDS = 1 + 2 + 2 + 1


def record_size(key: bytes | None, value: bytes | None) -> int:
    """What a record adds to a batch before compression: its DefaultRecord size with
    2-byte deltas (the exact size is known once encoded). Batches fill by this uncompressed
    count, so a compressed batch is mostly much smaller than `batch_size` (Java's producer
    instead estimates the compression ratio)."""
    # Computed for every record sent, so written out: a null key or value is a length of
    # -1 (one varint byte, no bytes), and a length n takes (bit_length(2n) + 6) // 7 bytes.
    body = _FIXED_FIELDS
    if key is None:
        body += 1
    else:
        n = len(key)
        body += n + ((n.bit_length() + 7) // 7 if n else 1)
    if value is None:
        body += 1
    else:
        n = len(value)
        body += n + ((n.bit_length() + 7) // 7 if n else 1)
    return body + (body.bit_length() + 7) // 7


@attrs.define(eq=False)
class ProducerBatch:
    """Records of one partition sent (and retried) together. `outcome` is what the
    producer resolves for the whole batch; the accumulator never looks at it."""

    tp: TopicPartition
    created: float  # when the first record was appended (delivery timeout counts from it)
    records: list[tuple[int, bytes | None, bytes | None]] = attrs.field(factory=list)
    outcome: Any = None
    size: int = HEADER_SIZE
    closed: bool = False
    attempts: int = 0  # sends so far
    retry_at: float = 0.0  # a retried batch is not sent before this
    last_error: BaseException | None = None
    # Idempotence: the producer id, epoch and base sequence the batch is sent with, set at
    # its first drain and kept across retries, unless an epoch bump re-stamps the batch
    # (`sequence_reset`, Kafka's ProducerBatch.resetProducerState).
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    sequence_reset: bool = False
    encoded: bytes | None = None  # the batch as sent; retries resend these bytes

    @property
    def record_count(self) -> int:
        return len(self.records)

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, *, reset: bool
    ) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.base_sequence = base_sequence
        self.sequence_reset = self.sequence_reset or reset
        self.encoded = None  # built again with the new header


class RecordAccumulator:
    def __init__(self, *, batch_size: int, linger: float) -> None:
        self.batch_size = batch_size
        self.linger = linger
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._in_flight: set[TopicPartition] = set()
        self._flushing = 0
        # Bytes of the batches appended and not yet completed, expired or aborted (their
        # `size`): what the producer's `buffer_memory` bounds.
        self.buffered = 0

    # -- appending ---------------------------------------------------------------------

    def try_append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        size: int,
    ) -> ProducerBatch | None:
        """Appends a record of `size` bytes (`record_size`) to its partition's open batch
        and returns the batch; None when there is no open batch or the record would take
        it past `batch_size` (it is closed then): the record needs `append_new_batch`.
        Split from it so that the common case needs no clock read."""
        queue = self._queues.get(tp)
        if not queue:
            return None
        batch = queue[-1]
        if batch.closed:
            return None
        if batch.size + size > self.batch_size:
            batch.closed = True
            return None
        batch.records.append((timestamp, key, value))
        batch.size += size
        self.buffered += size
        if batch.size >= self.batch_size:
            batch.closed = True
        return batch

    def append_new_batch(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        size: int,
        now: float,
    ) -> ProducerBatch:
        """Opens a batch created at `now` at the end of the partition's queue with the
        record in it (after `try_append` found no room)."""
        batch = ProducerBatch(tp, now)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        queue.append(batch)
        batch.records.append((timestamp, key, value))
        batch.size += size
        self.buffered += batch.size
        if batch.size >= self.batch_size:
            batch.closed = True
        return batch

    def append(
        self, tp: TopicPartition, timestamp: int, key: bytes | None, value: bytes | None, now: float
    ) -> ProducerBatch:
        """Appends a record to its partition's open batch (a new one when the record
        would take the open batch past `batch_size`); returns the batch."""
        size = record_size(key, value)
        batch = self.try_append(tp, timestamp, key, value, size)
        if batch is None:
            batch = self.append_new_batch(tp, timestamp, key, value, size, now)
        return batch

    # -- draining ----------------------------------------------------------------------

    def _is_ready(self, batch: ProducerBatch, queue_len: int, now: float) -> bool:
        if batch.attempts:
            return now >= batch.retry_at
        return (
            batch.closed
            or queue_len > 1
            or self._flushing > 0
            or now >= batch.created + self.linger
        )

    def drain(
        self,
        now: float,
        leader_of: Callable[[TopicPartition], int | None],
        *,
        max_request_size: int,
        node_ready: Callable[[int], bool] = lambda _node: True,
        may_drain: Callable[[ProducerBatch], bool] | None = None,
    ) -> tuple[dict[int, list[ProducerBatch]], set[TopicPartition]]:
        """Takes the ready head batches of partitions with no batch in flight, grouped by
        leader (at most `max_request_size` bytes per leader, and always one batch); marks
        them in flight and closed. Also returns the partitions whose ready batch waits for
        something other than time: a leader (the producer refreshes metadata), room in its
        leader's in-flight requests, or `may_drain` (idempotence: the partition's sequences
        are being resolved)."""
        by_node: dict[int, list[ProducerBatch]] = {}
        node_bytes: dict[int, int] = {}
        blocked: set[TopicPartition] = set()
        # In the queues' creation order (deterministic; sorting the partitions on every
        # pass cost more than the rest of the pass).
        for tp, queue in self._queues.items():
            if not queue or tp in self._in_flight:
                continue
            batch = queue[0]
            if not self._is_ready(batch, len(queue), now):
                continue
            node = leader_of(tp)
            if node is None or not node_ready(node):
                blocked.add(tp)
                continue
            if may_drain is not None and not may_drain(batch):
                blocked.add(tp)
                continue
            used = node_bytes.get(node, 0)
            if used and used + batch.size > max_request_size:
                continue
            queue.popleft()
            batch.closed = True
            self._in_flight.add(tp)
            by_node.setdefault(node, []).append(batch)
            node_bytes[node] = used + batch.size
        return by_node, blocked

    def next_ready_time(self, now: float, exclude: Set[TopicPartition] = frozenset()) -> float:
        """When a head batch becomes ready by time (`now` if one is; inf if none waits
        on time). Partitions with a batch in flight wait for its completion instead, and
        `exclude` (blocked ones, see `drain`) for a metadata update or a free slot."""
        wake = math.inf
        for tp, queue in self._queues.items():
            if not queue or tp in self._in_flight or tp in exclude:
                continue
            batch = queue[0]
            if self._is_ready(batch, len(queue), now):
                return now
            wake = min(wake, batch.retry_at if batch.attempts else batch.created + self.linger)
        return wake

    # -- completion --------------------------------------------------------------------

    def completed(self, batch: ProducerBatch) -> None:
        """The batch got its final outcome (acknowledged or failed)."""
        self.buffered -= batch.size
        self._in_flight.discard(batch.tp)
        queue = self._queues.get(batch.tp)
        if queue is not None and not queue:
            del self._queues[batch.tp]

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        """A retriable failure: the batch goes first in its partition's queue."""
        batch.retry_at = retry_at
        batch.closed = True
        self._in_flight.discard(batch.tp)
        self._queues.setdefault(batch.tp, deque()).appendleft(batch)

    def expired(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        """Removes and returns the queued (not in flight) batches whose delivery timeout
        has passed."""
        expired = []
        for tp, queue in list(self._queues.items()):
            if tp in self._in_flight:
                continue
            while queue and now >= queue[0].created + delivery_timeout:
                batch = queue.popleft()
                self.buffered -= batch.size
                expired.append(batch)
            if not queue:
                del self._queues[tp]
        return expired

    def next_expiry(self, delivery_timeout: float) -> float:
        times = [
            q[0].created + delivery_timeout
            for tp, q in self._queues.items()
            if q and tp not in self._in_flight
        ]
        return min(times, default=math.inf)

    def abort_all(self) -> list[ProducerBatch]:
        """Removes and returns every queued batch (the producer is closing on an error)."""
        batches = [b for tp in sorted(self._queues) for b in self._queues[tp]]
        self._queues.clear()
        self.buffered -= sum(b.size for b in batches)
        return batches

    # -- flushing ----------------------------------------------------------------------

    def begin_flush(self) -> None:
        self._flushing += 1

    def end_flush(self) -> None:
        self._flushing -= 1

    @property
    def has_undrained(self) -> bool:
        return any(self._queues.values())

    @property
    def in_flight_partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._in_flight)

    def batches(self) -> Iterator[ProducerBatch]:
        for tp in sorted(self._queues):
            yield from self._queues[tp]
