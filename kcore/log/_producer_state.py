"""Idempotent producers' state per partition (Kafka's ProducerStateManager, simplified):
for each producer id its epoch and the sequence and offset ranges of its last five batches.

A batch from an idempotent producer (producer id >= 0) is checked before it is appended:
- a repeat of one of the last five batches is a duplicate: it is not appended again and the
  producer gets the offsets of the original (a retry after a lost response);
- otherwise its first sequence must follow the last one (a new epoch starts at 0), or it is
  OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.
The state is derived from the log: it is rebuilt from the batch headers after recovery or
truncation, so leader and followers agree on it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import attrs

from kcore import errors
from kcore.log._batch import NO_PRODUCER_ID, BatchHeader

BATCHES_KEPT = 5  # Kafka's ProducerStateEntry.NumBatchesToRetain
_INT32 = 2**31


@attrs.frozen
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int = -1  # the batch's (DescribeProducers' last timestamp)


@attrs.define
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = attrs.field(factory=lambda: deque(maxlen=BATCHES_KEPT))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _last_seq(header: BatchHeader) -> int:
    return (header.base_sequence + header.record_count - 1) % _INT32


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> tuple[int, int] | None:
        """Before a leader appends `header`'s batch: the (first, last) offsets of the
        original if it is a duplicate, None if it may be appended; raises if out of order."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        first_seq, last_seq = header.base_sequence, _last_seq(header)
        if entry is None or header.producer_epoch > entry.epoch:
            if first_seq != 0:
                raise errors.OutOfOrderSequenceError(
                    f"producer {header.producer_id} epoch {header.producer_epoch}: first "
                    f"sequence {first_seq} of a new producer or epoch must be 0"
                )
            return None
        if header.producer_epoch < entry.epoch:
            raise errors.InvalidProducerEpochError(
                f"producer {header.producer_id}: epoch {header.producer_epoch} is older than "
                f"the current {entry.epoch}"
            )
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch.first_offset, batch.last_offset
        if first_seq != (entry.last_seq + 1) % _INT32:
            raise errors.OutOfOrderSequenceError(
                f"producer {header.producer_id}: sequence {first_seq} does not follow "
                f"{entry.last_seq}"
            )
        return None

    def update(self, header: BatchHeader) -> None:
        """Records an appended batch (with its final offsets)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                _last_seq(header),
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        self.producers.clear()
        for header in headers:
            self.update(header)
