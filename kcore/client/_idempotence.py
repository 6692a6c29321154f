"""The idempotent producer's sequence bookkeeping (the idempotent, non-transactional part of
Kafka's TransactionManager and TxnPartitionMap, 3.5). Pure: no I/O, no clock; the producer's
sender calls it at the points Kafka's Sender does.

Per partition it keeps the producer id and epoch the partition's sequences belong to, the
next sequence, the last acknowledged sequence and offset, and the batches that hold a
sequence and have no final outcome yet ("in flight": sent, or queued for a retry).

Kafka's rules, as followed here:
- A batch gets its producer id, epoch and base sequence when it is first drained, and keeps
  them on every retry (the broker recognises a retry by them and answers a duplicate with
  the original offsets). A new batch is not drained while its partition has sequences in an
  unknown state (`unresolved`) or in-flight batches of an older producer id / epoch.
- A batch that fails for good after it was sent leaves a gap in its partition's sequences
  (it may or may not be in the log; it is never sent again). The producer then bumps its
  epoch locally (KIP-360; a new producer id from InitProducerId once the epoch is
  exhausted) and the partition's sequences restart at 0 in the new epoch, which the broker
  accepts from a newer epoch. The bump waits until no batch of the affected partitions is
  on the wire.
- A batch expired by `delivery_timeout_ms` after it was sent marks its partition
  unresolved: no new batch goes until the partition has nothing in flight, then the epoch
  is bumped unless the acknowledged sequences reach the next sequence.
- OUT_OF_ORDER_SEQUENCE_NUMBER is retried (`can_retry`); when the batch is the one right
  after the last acknowledged sequence the gap is real and the epoch is bumped, and the
  batch itself (refused, so certainly not written) is re-stamped at sequence 0 of the new
  epoch. UNKNOWN_PRODUCER_ID likewise (the broker lost the producer's state).
  DUPLICATE_SEQUENCE_NUMBER is a success at an unknown offset (the producer's caller).
- Re-stamping only ever touches batches of the partitions whose bump was requested, whose
  sequences are known not to be written under the old epoch; a retried batch of another
  partition keeps its old id, epoch and sequence (so a retry never writes a record twice),
  and the partition moves to the new epoch with its next new batch once nothing of it is
  in flight (`maybeUpdateProducerIdAndEpoch`).

One difference from Kafka: a batch that fails after exhausting `retries` marks its
partition unresolved like an expired one (Kafka does nothing, and the partition's later
batches then fail with OUT_OF_ORDER_SEQUENCE_NUMBER).
"""

from __future__ import annotations

import logging
from collections.abc import Set
from typing import Any

import attrs

from kcore import errors
from kcore.common import TopicPartition

__all__ = [
    "NO_PRODUCER_ID_AND_EPOCH",
    "IdempotenceManager",
    "ProducerIdAndEpoch",
]

MAX_EPOCH = 2**15 - 1  # Short.MAX_VALUE
_INT32 = 2**31
NO_SEQUENCE = -1
NO_LAST_ACKED_SEQUENCE = -1

_OUT_OF_ORDER = errors.ERROR_CODES["OUT_OF_ORDER_SEQUENCE_NUMBER"]
_UNKNOWN_PRODUCER_ID = errors.ERROR_CODES["UNKNOWN_PRODUCER_ID"]


@attrs.frozen
class ProducerIdAndEpoch:
    producer_id: int = -1
    epoch: int = -1

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


NO_PRODUCER_ID_AND_EPOCH = ProducerIdAndEpoch()


def _increment(sequence: int, increment: int) -> int:
    return (sequence + increment) % _INT32


@attrs.define(eq=False)
class _PartitionEntry:
    producer_id_and_epoch: ProducerIdAndEpoch = NO_PRODUCER_ID_AND_EPOCH
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE
    last_acked_offset: int = -1
    # batches with a sequence and no outcome yet, by base sequence
    in_flight: list[Any] = attrs.field(factory=list)


class IdempotenceManager:
    """What Kafka's TransactionManager does for an idempotent producer without a
    transactional id. Batches are `ProducerBatch`es (fields `tp`, `record_count`,
    `producer_id`, `producer_epoch`, `base_sequence`, `sequence_reset`, and
    `set_producer_state(producer_id, epoch, base_sequence, reset)`)."""

    def __init__(self, *, logger: logging.Logger | None = None, name: str = "producer") -> None:
        self.log = logger or logging.getLogger("kcore.client.producer")
        self.name = name
        self.producer_id_and_epoch = NO_PRODUCER_ID_AND_EPOCH
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        self._unresolved: dict[TopicPartition, int] = {}
        self._epoch_bump_required = False
        self._partitions_to_rewrite: set[TopicPartition] = set()

    # -- the producer id ---------------------------------------------------------------

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id_and_epoch.is_valid

    @property
    def epoch_bump_required(self) -> bool:
        return self._epoch_bump_required

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """An InitProducerId answer. Partitions waiting for a bump (the epoch was exhausted)
        restart their sequences under the new id; the others move to it with their next
        new batch."""
        self.producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
        self.log.info("%s: producer id set to %d with epoch %d", self.name, producer_id, epoch)
        if self._partitions_to_rewrite:
            self._rewrite_sequences()
        self._epoch_bump_required = False

    def bump_epoch_if_needed(self, on_the_wire: Set[TopicPartition] = frozenset()) -> None:
        """Kafka's bumpIdempotentEpochAndResetIdIfNeeded, once no batch of the partitions
        that asked for the bump is on the wire: the epoch goes up by one and those
        partitions restart at sequence 0 (their in-flight batches re-stamped in order); at
        the last epoch the producer id is dropped instead (`has_producer_id` is False: the
        producer asks for a new one)."""
        if not self._epoch_bump_required:
            return
        if any(tp in on_the_wire for tp in self._partitions_to_rewrite):
            return
        current = self.producer_id_and_epoch
        if not current.is_valid:
            return  # the next producer id is the bump
        self._epoch_bump_required = False
        if current.epoch >= MAX_EPOCH:
            self.log.info(
                "%s: producer id %d exhausted its epochs; asking for a new producer id",
                self.name,
                current.producer_id,
            )
            self.producer_id_and_epoch = NO_PRODUCER_ID_AND_EPOCH
            return
        self.producer_id_and_epoch = ProducerIdAndEpoch(current.producer_id, current.epoch + 1)
        self.log.info(
            "%s: bumped the epoch of producer id %d to %d; sequences of %s restart at 0",
            self.name,
            current.producer_id,
            current.epoch + 1,
            ", ".join(str(tp) for tp in sorted(self._partitions_to_rewrite)),
        )
        self._rewrite_sequences()

    def _rewrite_sequences(self) -> None:
        for tp in sorted(self._partitions_to_rewrite):
            self._start_sequences_at_beginning(tp, self.producer_id_and_epoch)
            self._unresolved.pop(tp, None)
        self._partitions_to_rewrite.clear()

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        self._epoch_bump_required = True
        self._partitions_to_rewrite.add(tp)

    # -- per partition -----------------------------------------------------------------

    def _entry(self, tp: TopicPartition) -> _PartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = _PartitionEntry()
        return entry

    def _start_sequences_at_beginning(self, tp: TopicPartition, pid: ProducerIdAndEpoch) -> None:
        entry = self._entry(tp)
        sequence = 0
        for batch in entry.in_flight:
            self.log.info(
                "%s: re-stamping %d record(s) for %s: sequence %d epoch %d -> sequence %d epoch %d",
                self.name,
                batch.record_count,
                tp,
                batch.base_sequence,
                batch.producer_epoch,
                sequence,
                pid.epoch,
            )
            batch.set_producer_state(pid.producer_id, pid.epoch, sequence, reset=True)
            sequence = _increment(sequence, batch.record_count)
        entry.producer_id_and_epoch = pid
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE

    def _reset_sequence_for_partition(self, tp: TopicPartition) -> None:
        self._partitions.pop(tp, None)
        self._unresolved.pop(tp, None)

    def has_in_flight(self, tp: TopicPartition) -> bool:
        entry = self._partitions.get(tp)
        return entry is not None and bool(entry.in_flight)

    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        return self._entry(tp).producer_id_and_epoch != self.producer_id_and_epoch

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._entry(tp).next_sequence

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        return self._entry(tp).last_acked_sequence

    def partition_producer_id_and_epoch(self, tp: TopicPartition) -> ProducerIdAndEpoch:
        return self._entry(tp).producer_id_and_epoch

    def _first_in_flight_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        if entry is None or not entry.in_flight:
            return NO_SEQUENCE
        return entry.in_flight[0].base_sequence

    def _is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        return (sequence - self._entry(tp).last_acked_sequence) % _INT32 == 1

    def _remove_in_flight(self, batch: Any) -> None:
        entry = self._partitions.get(batch.tp)
        if entry is not None and batch in entry.in_flight:
            entry.in_flight.remove(batch)

    # -- draining ----------------------------------------------------------------------

    def may_drain(self, batch: Any) -> bool:
        """Not Kafka's shouldStopDrainBatchesForPartition: may `batch`, the head of its
        partition's queue, be sent now?"""
        if not self.has_producer_id:
            return False
        tp = batch.tp
        if batch.base_sequence == NO_SEQUENCE:
            if self.has_in_flight(tp) and self.has_stale_producer_id_and_epoch(tp):
                # A new batch would start the new epoch at 0 before the old one's batches
                # complete.
                return False
            if tp in self._unresolved:
                # Earlier sequences are in an unknown state (expired after being sent).
                return False
            if tp in self._partitions_to_rewrite:
                return False  # its sequences restart at 0 once the epoch is bumped
        first = self._first_in_flight_sequence(tp)
        # A retried batch goes only as the first in flight of its partition.
        return not (
            first != NO_SEQUENCE
            and batch.base_sequence != NO_SEQUENCE
            and batch.base_sequence != first
        )

    def assign_sequence(self, batch: Any) -> None:
        """A batch drained for its first send: the current producer id and epoch and the
        partition's next sequence (the partition first restarts at 0 if its sequences
        belong to an older id / epoch and nothing of it is in flight)."""
        if batch.base_sequence != NO_SEQUENCE:
            return  # a retry keeps what it was sent with
        tp = batch.tp
        if self.has_stale_producer_id_and_epoch(tp) and not self.has_in_flight(tp):
            self._start_sequences_at_beginning(tp, self.producer_id_and_epoch)
        entry = self._entry(tp)
        pid = self.producer_id_and_epoch
        batch.set_producer_state(pid.producer_id, pid.epoch, entry.next_sequence, reset=False)
        entry.next_sequence = _increment(entry.next_sequence, batch.record_count)
        entry.in_flight.append(batch)
        entry.in_flight.sort(key=lambda b: b.base_sequence)

    # -- outcomes ----------------------------------------------------------------------

    def handle_completed(self, batch: Any, base_offset: int) -> None:
        """Acknowledged (or DUPLICATE_SEQUENCE_NUMBER: written by an earlier attempt)."""
        entry = self._entry(batch.tp)
        last_sequence = _increment(batch.base_sequence, batch.record_count - 1)
        entry.last_acked_sequence = max(entry.last_acked_sequence, last_sequence)
        if base_offset >= 0:
            entry.last_acked_offset = max(
                entry.last_acked_offset, base_offset + batch.record_count - 1
            )
        self._remove_in_flight(batch)

    def can_retry(self, batch: Any, error_code: int, log_start_offset: int = -1) -> bool:
        """Kafka's TransactionManager.canRetry for the idempotent producer (called only
        while the batch is within its delivery timeout and retries): may the batch that got
        `error_code` be retried? May request an epoch bump, which re-stamps the batch."""
        tp = batch.tp
        if error_code == _UNKNOWN_PRODUCER_ID:
            # The broker lost this producer's state: retry; bump unless the answer lacks
            # the log start offset or the batch was re-stamped already.
            if log_start_offset == -1 or batch.sequence_reset:
                return True
            self.request_epoch_bump(tp)
            return True
        if error_code == _OUT_OF_ORDER:
            if tp not in self._unresolved and (
                batch.sequence_reset or not self._is_next_sequence(tp, batch.base_sequence)
            ):
                # Not the batch right after the acknowledged ones: an earlier one will
                # settle the gap.
                return True
            if tp not in self._unresolved or self._unresolved[tp] == batch.base_sequence:
                self.log.warning(
                    "%s: OUT_OF_ORDER_SEQUENCE_NUMBER for %s at sequence %d (producer id %d, "
                    "epoch %d): bumping the epoch",
                    self.name,
                    tp,
                    batch.base_sequence,
                    batch.producer_id,
                    batch.producer_epoch,
                )
                self.request_epoch_bump(tp)
            return True
        cls = errors.ERROR_CLASSES.get(error_code)
        return cls is not None and cls.retriable

    def handle_failed(self, batch: Any, error: BaseException, *, adjust_sequences: bool) -> None:
        """Kafka's handleFailedBatch: `batch` failed for good (its records' sends raise).
        `adjust_sequences` is False when its outcome is unknown after it exhausted its
        retries."""
        self._remove_in_flight(batch)
        if batch.base_sequence == NO_SEQUENCE:
            return  # never sent: no sequence used
        tp = batch.tp
        if isinstance(error, errors.OutOfOrderSequenceError):
            self.request_epoch_bump(tp)
        elif isinstance(error, errors.UnknownProducerIdError):
            self._reset_sequence_for_partition(tp)
        elif adjust_sequences:
            self.request_epoch_bump(tp)
        else:
            self.mark_unresolved(batch)

    def handle_expired(self, batch: Any) -> None:
        """`batch` expired (delivery timeout) while queued; if it had been sent, its
        sequences are unresolved (Sender.sendProducerData: markSequenceUnresolved)."""
        self._remove_in_flight(batch)
        if batch.base_sequence != NO_SEQUENCE:
            self.mark_unresolved(batch)

    def mark_unresolved(self, batch: Any) -> None:
        next_sequence = _increment(batch.base_sequence, batch.record_count)
        tp = batch.tp
        known = self._unresolved.get(tp)
        self._unresolved[tp] = next_sequence if known is None else max(known, next_sequence)

    def maybe_resolve_sequences(self) -> None:
        """Kafka's maybeResolveSequences: an unresolved partition with nothing in flight is
        resolved if its acknowledged sequences reach its next sequence (a later batch was
        acknowledged), else its epoch is bumped."""
        for tp in sorted(self._unresolved):
            if self.has_in_flight(tp):
                continue
            entry = self._entry(tp)
            if not self._is_next_sequence(tp, entry.next_sequence):
                self.log.info(
                    "%s: nothing in flight for %s; last acknowledged sequence %d, next "
                    "sequence %d: bumping the epoch and restarting its sequences",
                    self.name,
                    tp,
                    entry.last_acked_sequence,
                    entry.next_sequence,
                )
                self.request_epoch_bump(tp)
            del self._unresolved[tp]
