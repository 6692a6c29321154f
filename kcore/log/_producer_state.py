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
The state is derived from the log: a follower's appends update it without checks (an epoch
change clearing the kept batches), so leader and followers agree on it, and after recovery
or truncation it is reloaded from the latest snapshot at or below the log end offset and
the batches after it are replayed (Kafka's truncateAndReload and rebuildProducerState).

Snapshots (`_producer_snapshot`) are Kafka's: an entry keeps only the producer's LAST batch.
A state loaded from a snapshot thus recognises a retry of that batch only, and of the
batches replayed after it, until more are appended; exactly Kafka's loadFromSnapshot, which
builds each entry with the one batch the file holds. The epoch and the sequence to follow
are never lost: they are the last batch's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import attrs

from kcore import errors
from kcore.log._batch import NO_PRODUCER_ID, BatchHeader
from kcore.log._producer_snapshot import NO_SEQUENCE, SnapshotEntry

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
    last_timestamp: int = -1  # the last batch's max timestamp (kept if its batch is not)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def snapshot_entry(self, producer_id: int) -> SnapshotEntry:
        """What a snapshot keeps of the entry: its epoch and last batch (Kafka's
        writeSnapshot: lastSeq, lastDataOffset, lastOffsetDelta, lastTimestamp)."""
        if not self.batches:
            return SnapshotEntry(producer_id, self.epoch, NO_SEQUENCE, -1, 0, self.last_timestamp)
        last = self.batches[-1]
        return SnapshotEntry(
            producer_id,
            self.epoch,
            last.last_seq,
            last.last_offset,
            last.last_offset - last.first_offset,
            self.last_timestamp,
        )

    @classmethod
    def from_snapshot(cls, entry: SnapshotEntry) -> ProducerEntry:
        """An entry as Kafka's readSnapshot builds it: the one batch the file holds."""
        loaded = cls(entry.producer_epoch, last_timestamp=entry.timestamp)
        if entry.has_batch:
            loaded.batches.append(
                BatchMetadata(
                    entry.first_sequence,
                    entry.last_sequence,
                    entry.first_offset,
                    entry.last_offset,
                    entry.timestamp,
                )
            )
        return loaded


def _last_seq(header: BatchHeader) -> int:
    # Kafka's RecordBatch.lastSequence: by the offset delta, which a compacted batch keeps
    # when it loses records.
    return (header.base_sequence + header.last_offset_delta) % _INT32


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
    """The producers' state as of `map_end_offset` (the state of the log below it; Kafka's
    lastMapOffset), and the offset of the last snapshot taken or loaded (lastSnapOffset).
    Sans-IO: the partition log reads and writes the snapshot files."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset = 0

    def check(self, header: BatchHeader) -> tuple[int, int] | None:
        """Before a leader appends `header`'s batch: the (first, last) offsets of the
        original if it is a duplicate, None if it may be appended; raises if out of order."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        return check_batch(self.producers.get(header.producer_id), header)

    def update(self, header: BatchHeader) -> None:
        """Records an appended batch (with its final offsets); any batch, idempotent or
        not, moves the state's end offset past it (Kafka's updateMapEndOffset on append)."""
        self.map_end_offset = header.next_offset
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
        entry.last_timestamp = header.max_timestamp

    def rebuild(self, headers: Iterable[BatchHeader], start_offset: int = 0) -> None:
        """The state of exactly `headers` (replayed from nothing, as of `start_offset`)."""
        self.truncate_fully_and_start_at(start_offset)
        for header in headers:
            self.update(header)

    # -- snapshots -------------------------------------------------------------------

    @property
    def snapshot_due(self) -> bool:
        """Whether the state moved past the last snapshot (Kafka's takeSnapshot writes only
        then)."""
        return self.map_end_offset > self.last_snapshot_offset

    def snapshot_entries(self) -> list[SnapshotEntry]:
        """The state as a snapshot holds it (as of `map_end_offset`); a caller writing it
        calls `snapshot_taken`."""
        return [
            self.producers[producer_id].snapshot_entry(producer_id)
            for producer_id in sorted(self.producers)
        ]

    def snapshot_taken(self) -> None:
        self.last_snapshot_offset = self.map_end_offset

    def load_snapshot(self, entries: Iterable[SnapshotEntry], offset: int) -> None:
        """Replaces the state by a snapshot's, taken at `offset` (Kafka's loadFromSnapshot;
        kcore does not expire producers, so every entry is loaded)."""
        self.producers = {
            entry.producer_id: ProducerEntry.from_snapshot(entry) for entry in entries
        }
        self.map_end_offset = self.last_snapshot_offset = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """No producers, as of `offset` (no snapshot to load: a replay starts here)."""
        self.producers = {}
        self.map_end_offset = offset
        self.last_snapshot_offset = offset
