"""Idempotent producers' state per partition (Kafka's ProducerStateManager, simplified):
for each producer id its epoch and the sequence and offset ranges of its last five batches.

A batch from an idempotent producer (producer id >= 0) is checked before a leader appends
it, as Kafka 3.5's UnifiedLog.analyzeAndValidateProducerState and ProducerAppendInfo do:
- a repeat (same epoch, same first and last sequence) of one of the producer's last five
  batches is a duplicate: it is not appended again and the producer gets the offsets of the
  original (a retry after a lost response) (ProducerStateEntry.findDuplicateBatch);
- an epoch older than the producer's is INVALID_PRODUCER_EPOCH (checkProducerEpoch);
- a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER; in the same
  epoch the first sequence must follow the last one (Int.MaxValue wraps to 0)
  (checkSequence);
- a producer id the partition has no state for (new, or its batches were all removed by
  retention, DeleteRecords or truncation) is accepted at any epoch and sequence (its entry
  has no epoch yet: "accept writes with any sequence number").
The state is derived from the log: it is rebuilt from the batch headers after recovery or
truncation (as a follower's appends update it: without checks, an epoch change clearing the
kept batches), so leader and followers agree on it.
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


def check_batch(entry: ProducerEntry | None, header: BatchHeader) -> tuple[int, int] | None:
    """The rules a leader applies to an idempotent producer's batch (`entry`: the
    producer's state in the partition, None if it has none): the (first, last) offsets of
    the original if the batch is a duplicate of one of the last five, None if it may be
    appended; raises InvalidProducerEpochError or OutOfOrderSequenceError."""
    first_seq, last_seq = header.base_sequence, _last_seq(header)
    producer_id, epoch = header.producer_id, header.producer_epoch
    if entry is None:
        return None  # no state: any epoch and sequence (Kafka's NO_PRODUCER_EPOCH entry)
    if epoch == entry.epoch:
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch.first_offset, batch.last_offset
    if epoch < entry.epoch:
        raise errors.InvalidProducerEpochError(
            f"epoch of producer {producer_id} is {epoch}, which is smaller than the last "
            f"seen epoch {entry.epoch}"
        )
    if epoch != entry.epoch:
        if first_seq != 0:
            raise errors.OutOfOrderSequenceError(
                f"invalid sequence number for new epoch of producer {producer_id}: {epoch} "
                f"(request epoch), {first_seq} (seq. number), {entry.epoch} (current "
                "producer epoch)"
            )
        return None
    if first_seq != (entry.last_seq + 1) % _INT32:
        raise errors.OutOfOrderSequenceError(
            f"out of order sequence number for producer {producer_id}: {first_seq} (incoming "
            f"seq. number), {entry.last_seq} (current end sequence number)"
        )
    return None


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> tuple[int, int] | None:
        """Before a leader appends `header`'s batch: the (first, last) offsets of the
        original if it is a duplicate, None if it may be appended; raises if out of order."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        return check_batch(self.producers.get(header.producer_id), header)

    def update(self, header: BatchHeader) -> None:
        """Records an appended batch (with its final offsets)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            # Kafka's ProducerStateEntry.maybeUpdateProducerEpoch: another epoch clears the
            # kept batches (a follower or a rebuild may see an older epoch after a newer one,
            # and takes it as it comes, as Kafka's REPLICATION origin only warns).
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
