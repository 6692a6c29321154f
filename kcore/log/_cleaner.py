"""Log compaction decided (Kafka 3.5's LogCleaner, LogCleanerManager and the cleaner's
RecordFilter), with no I/O and no clock: the callers pass in what they read and `now_ms`.

A compacted log has a clean head (cleaned before, up to the `cleaner-offset-checkpoint`) and
a dirty tail. A pass over one log:

1. `cleanable_offsets` bounds the dirty section: from the checkpoint (the log start if the
   checkpoint is unusable) to the first uncleanable offset, the lowest of the active
   segment's base offset, the high watermark (kcore has no transactions, so it is the last
   stable offset) and the first dirty segment holding a record younger than
   `min.compaction.lag.ms`. `log_to_clean` rounds that down to a segment boundary and
   measures the dirty ratio; `filthiest` picks the log to clean, as `grabFilthiestCompactedLog`
   does: the highest ratio above `min.cleanable.dirty.ratio`, or any log with a dirty record
   older than `max.compaction.lag.ms`.
2. An `OffsetMap` of key -> offset of the key's last record is built from the dirty section
   (`OffsetMap.add_batch`, batch by batch), up to as many keys as Kafka's dedupe buffer holds;
   the cleaned range ends after the last record it took.
3. Every segment up to there is recopied, grouped so that a group fits one segment
   (`group_segments_by_size`), each batch through `clean_batch`: a record is kept if it is
   past the map, or the last of its key and not an expired tombstone. A batch keeps its
   offsets (gaps are normal), producer id, epoch, base sequence, last offset delta and
   codec; the last batch of each producer is kept even when emptied, so that the producer's
   sequence survives; a batch whose kept records include a tombstone is stamped, the first
   time, with a delete horizon (KIP-534: `now + delete.retention.ms` in its base timestamp,
   attributes bit 6), after which later cleans drop the tombstone.

`kcore.log._partition_log` reads the segments and swaps the cleaned ones in; the log cleaner
of `kcore.server.log_cleaner` chooses the log and paces the work.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar

import attrs
import crc32c

from kcore import errors
from kcore.log._batch import (
    _CRC_AT,
    _CRC_END,
    _HEADER,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    batch_records,
)
from kcore.log._compression import CODEC_MASK, NONE, compress
from kcore.log._records import Record, _encode_headers, zigzag_varint

# Kafka's SkimpyOffsetMap: a slot holds a 16-byte MD5 of the key and an 8-byte offset.
BYTES_PER_MAP_ENTRY = 24
_INT32_MAX = 2**31 - 1
_NO_TIMESTAMP = -1


# -- which log, how far --------------------------------------------------------------------


@attrs.frozen
class SegmentSummary:
    """What the cleaner's choices read of a segment. `handle` is the caller's segment, for
    the caller (not compared)."""

    base_offset: int
    size: int
    max_timestamp: int  # the largest record timestamp (-1: none)
    first_batch_timestamp: int | None  # the first batch's max timestamp (None: no batch)
    handle: Any = attrs.field(default=None, eq=False, repr=False)


Segmented = TypeVar("Segmented", bound="_HasBaseOffset")


class _HasBaseOffset(Protocol):
    @property
    def base_offset(self) -> int: ...


class CleaningAbortedError(Exception):
    """The log changed under a clean (truncated, its segments deleted): the clean stops
    where it is (Kafka's LogCleaningAbortedException); what it swapped in stays."""


@attrs.frozen
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool  # the checkpoint was unusable: write the reset one


def segments_holding(segments: Sequence[Segmented], start: int, end: int) -> Sequence[Segmented]:
    """The segments (anything with a `base_offset`, in order) holding offsets in [start,
    end): from the one containing `start` (the first if none does) to the last beginning
    before `end` (Kafka's LogSegments.values)."""
    if start >= end:
        return []
    bases = [segment.base_offset for segment in segments]
    first = max(bisect.bisect_right(bases, start) - 1, 0)
    last = bisect.bisect_left(bases, end)
    return segments[first:last]


def cleanable_offsets(
    segments: Sequence[SegmentSummary],
    *,
    log_start_offset: int,
    log_end_offset: int,
    checkpoint: int | None,
    last_stable_offset: int,
    min_compaction_lag_ms: int,
    now_ms: int,
) -> OffsetsToClean:
    """Kafka's LogCleanerManager.cleanableOffsets: the dirty section [first dirty, first
    uncleanable) of a log whose last segment is the active one. A checkpoint below the log
    start or beyond the log end (a truncated log) restarts from the log start."""
    force_update = False
    first_dirty = log_start_offset if checkpoint is None else checkpoint
    if first_dirty < log_start_offset or first_dirty > log_end_offset:
        first_dirty, force_update = log_start_offset, True
    active_base = segments[-1].base_offset
    uncleanable = min(last_stable_offset, active_base)
    lag = max(min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in segments_holding(segments, first_dirty, active_base):
            if segment.max_timestamp > now_ms - lag:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, uncleanable), force_update)


def max_compaction_delay(
    segments: Sequence[SegmentSummary],
    first_dirty_offset: int,
    *,
    max_compaction_lag_ms: int,
    now_ms: int,
) -> int:
    """Kafka's maxCompactionDelay: how long past `max.compaction.lag.ms` the oldest dirty
    record (by its segment's first batch) waits; above 0, the log must be cleaned now."""
    dirty = segments_holding(segments, first_dirty_offset, segments[-1].base_offset)
    stamps = [s.first_batch_timestamp for s in dirty if (s.first_batch_timestamp or 0) > 0]
    clean_until = now_ms - max(max_compaction_lag_ms, 0)
    earliest = min(stamps, default=None)
    if earliest is not None and earliest < clean_until:
        return clean_until - earliest
    return 0


@attrs.frozen
class LogToClean:
    """A compacted log's case for cleaning (Kafka's LogToClean): its clean and cleanable
    bytes, the segment-aligned end of the cleanable section, and whether a record waited
    past `max.compaction.lag.ms`. `key` names the log for the caller."""

    key: Any
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool
    min_cleanable_ratio: float

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def is_cleanable(self) -> bool:
        """Dirty enough for a pass: past the topic's ratio, or holding overdue records."""
        if self.needs_compaction_now and self.cleanable_bytes > 0:
            return True
        return self.cleanable_ratio > self.min_cleanable_ratio


def log_to_clean(
    key: Any,
    segments: Sequence[SegmentSummary],
    offsets: OffsetsToClean,
    *,
    needs_compaction_now: bool,
    min_cleanable_ratio: float,
) -> LogToClean:
    """Kafka's LogToClean with calculateCleanableBytes: the uncleanable offset rounded down
    to the base of the segment holding it."""
    active = segments[-1]
    first_dirty = offsets.first_dirty_offset
    holding = segments_holding(segments, offsets.first_uncleanable_dirty_offset, active.base_offset)
    first_uncleanable = holding[0].base_offset if holding else active.base_offset
    clean = [s for s in segments if s.base_offset < first_dirty]
    cleanable = segments_holding(segments, min(first_dirty, first_uncleanable), first_uncleanable)
    return LogToClean(
        key,
        first_dirty,
        first_uncleanable,
        sum(s.size for s in clean),
        sum(s.size for s in cleanable),
        needs_compaction_now,
        min_cleanable_ratio,
    )


def filthiest(candidates: Iterable[LogToClean]) -> LogToClean | None:
    """The log to clean next (Kafka's grabFilthiestCompactedLog): of the non-empty logs that
    are cleanable, the one with the highest dirty ratio; the first of equals."""
    best = None
    for candidate in candidates:
        if candidate.total_bytes <= 0 or not candidate.is_cleanable:
            continue
        if best is None or candidate.cleanable_ratio > best.cleanable_ratio:
            best = candidate
    return best


def group_segments_by_size(
    segments: Sequence[SegmentSummary], max_size: int, first_uncleanable_offset: int
) -> list[list[SegmentSummary]]:
    """Kafka's groupSegmentsBySize: consecutive segments cleaned into one, while their sizes
    add up to at most `max_size` (segment.bytes) and their offsets fit one segment's 32-bit
    relative offsets (the last offset of a segment estimated by where the next begins)."""
    groups: list[list[SegmentSummary]] = []
    remaining = list(segments)
    while remaining:
        group = [remaining.pop(0)]
        size = group[0].size
        while remaining and size + remaining[0].size <= max_size:
            following = remaining[1].base_offset if len(remaining) > 1 else None
            last = (first_uncleanable_offset if following is None else following) - 1
            if remaining[0].size != 0 and last - group[0].base_offset > _INT32_MAX:
                break
            size += remaining[0].size
            group.append(remaining.pop(0))
        groups.append(group)
    return groups


# -- the offset map ------------------------------------------------------------------------


def offset_map_capacity(dedupe_buffer_size: int, threads: int, load_factor: float) -> int:
    """How many keys one cleaner's map takes in a pass: Kafka's SkimpyOffsetMap gives each
    of `log.cleaner.threads` an equal share of `log.cleaner.dedupe.buffer.size` (at most
    2 GiB), one slot per 24 bytes, filled up to `log.cleaner.io.buffer.load.factor`."""
    memory = min(dedupe_buffer_size // threads, _INT32_MAX)
    return int((memory // BYTES_PER_MAP_ENTRY) * load_factor)


class OffsetMap:
    """Key -> offset of the key's last record in the dirty section (Kafka's OffsetMap, by the
    key's MD5 as SkimpyOffsetMap stores it), holding at most `capacity` keys, and the latest
    offset the map accounts for: records beyond it are not judged by this pass."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(
                "offset map is too small to fit in even a single message, so log cleaning "
                "will never make progress. You can increase log.cleaner.dedupe.buffer.size "
                "or decrease log.cleaner.threads"
            )
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)

    def get(self, key: bytes) -> int:
        """The offset of `key`'s last record, -1 if the map has none."""
        return self._offsets.get(hashlib.md5(key).digest(), -1)

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[hashlib.md5(key).digest()] = offset
        self.latest_offset = offset

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity

    def add_batch(self, header: BatchHeader, batch: bytes, start_offset: int) -> bool:
        """Kafka's buildOffsetMapForSegment for one batch: puts each keyed record at or after
        `start_offset`. True when the map filled first (the batch's remaining records, and
        what follows, are left for the next pass)."""
        if not header.is_control:  # (kcore writes no control batches: no transactions)
            for record in batch_records(batch, header):
                if record.key is not None and record.offset >= start_offset:
                    if len(self._offsets) >= self.capacity:
                        return True
                    self.put(record.key, record.offset)
        if header.last_offset >= start_offset:
            self.update_latest_offset(header.last_offset)
        return False


# -- what a batch becomes ------------------------------------------------------------------


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534: attributes bit 6, the value in the base
    timestamp), None when it has none."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


def should_retain_record(
    record: Record, header: BatchHeader, offset_map: OffsetMap, now_ms: int
) -> bool:
    """Kafka's Cleaner.shouldRetainRecord: a record past the map is kept; one without a key
    is dropped (it should not be there); else it is kept when it is its key's last and
    either holds a value or is a tombstone whose batch's delete horizon has not passed."""
    if record.offset > offset_map.latest_offset:
        return True
    if record.key is None:
        return False
    if record.offset < offset_map.get(record.key):
        return False
    if record.value is not None:
        return True
    horizon = delete_horizon_ms(header)
    return horizon is None or now_ms < horizon


def clean_batch(
    header: BatchHeader,
    batch: bytes,
    offset_map: OffsetMap,
    *,
    now_ms: int,
    delete_retention_ms: int,
    producer_last_batch: bool,
) -> bytes | None:
    """What the batch becomes in the cleaned segment (Kafka's MemoryRecords.filterTo with
    the cleaner's filter): the same bytes when every record stays and it needs no new delete
    horizon; a batch rebuilt with the records kept; an empty batch when none is kept but it
    is its producer's last (`producer_last_batch`, Kafka's RETAIN_EMPTY); None to drop it."""
    if header.is_control:
        return batch  # transaction markers: kcore has no transactions, so never any
    records = batch_records(batch, header)
    kept = [r for r in records if should_retain_record(r, header, offset_map, now_ms)]
    if not kept:
        return empty_batch(header) if producer_last_batch and header.producer_id >= 0 else None
    horizon = delete_horizon_ms(header)
    needs_horizon = horizon is None and any(record.value is None for record in kept)
    if len(kept) == len(records) and not needs_horizon:
        return batch
    if needs_horizon:
        horizon = now_ms + delete_retention_ms
    return rebuilt_batch(header, kept, horizon)


def rebuilt_batch(header: BatchHeader, records: Sequence[Record], horizon: int | None) -> bytes:
    """The batch with only `records` (Kafka's buildRetainedRecordsInto): the same base
    offset, last offset delta (so the producer's last sequence stays), producer id / epoch /
    base sequence, leader epoch, codec, timestamp type; the base timestamp is the delete
    horizon when there is one (attributes bit 6), else the first record's."""
    base_timestamp = records[0].timestamp if horizon is None else horizon
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max([_NO_TIMESTAMP, *(record.timestamp for record in records)])
    payload = b"".join(
        _encoded_record(record, header.base_offset, base_timestamp) for record in records
    )
    codec = header.attributes & CODEC_MASK
    if codec != NONE:
        payload = compress(codec, payload)
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_MASK
    return _sealed(
        header,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        record_count=len(records),
        payload=payload,
    )


def empty_batch(header: BatchHeader) -> bytes:
    """The header alone (Kafka's DefaultRecordBatch.writeEmptyHeader): no records, no codec,
    the same offsets, producer fields, leader epoch and max timestamp."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return _sealed(
        header,
        attributes=attributes,
        base_timestamp=_NO_TIMESTAMP,
        max_timestamp=header.max_timestamp,
        record_count=0,
        payload=b"",
    )


def _sealed(
    header: BatchHeader,
    *,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    record_count: int,
    payload: bytes,
) -> bytes:
    batch = bytearray(
        _HEADER.pack(
            header.base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            header.partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            header.last_offset_delta,
            base_timestamp,
            max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            record_count,
        )
    )
    batch += payload
    struct.pack_into(">I", batch, _CRC_AT, crc32c.crc32c(memoryview(batch)[_CRC_END:]))
    return bytes(batch)


def _encoded_record(record: Record, base_offset: int, base_timestamp: int) -> bytes:
    """One DefaultRecord at its own offset delta (`_records.encode_records` numbers records
    from 0; a cleaned batch keeps each record's offset)."""
    key, value = record.key, record.value
    body = b"".join(
        (
            b"\x00",  # attributes
            zigzag_varint(record.timestamp - base_timestamp),
            zigzag_varint(record.offset - base_offset),
            zigzag_varint(-1) if key is None else zigzag_varint(len(key)) + key,
            zigzag_varint(-1) if value is None else zigzag_varint(len(value)) + value,
            _encode_headers(record.headers),
        )
    )
    return zigzag_varint(len(body)) + body


# -- what a compacted topic accepts --------------------------------------------------------


def check_keys_for_compaction(header: BatchHeader, batch: bytes, where: str) -> None:
    """Kafka's LogValidator.validateKey: a compacted topic refuses a batch holding a record
    without a key (INVALID_RECORD), with Kafka's message listing the first three."""
    problems = [
        f"RecordError(batchIndex={index}, message='Compacted topic cannot accept message "
        f"without key in topic partition {where}.')"
        for index, record in enumerate(batch_records(batch, header))
        if record.key is None
    ]
    if problems:
        raise errors.InvalidRecordError(
            f"One or more records have been rejected due to {len(problems)} record errors in "
            f"total, and only showing the first three errors at most: "
            f"[{', '.join(problems[:3])}]"
        )
