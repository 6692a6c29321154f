"""Offsets by timestamp (Kafka's ListOffsets with a timestamp, KIP-79, and MAX_TIMESTAMP,
KIP-734), over batches read from a log: each batch's header says whether it can hold the
answer (its max timestamp), and only that batch's records are decoded. Pure: the caller
reads the batches."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from kcore.log._batch import iter_records, parse_header


@attrs.frozen
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int  # the epoch of the batch holding the record


def first_at_or_after(
    batches: Iterable[bytes], target: int, start_offset: int
) -> TimestampAndOffset | None:
    """The first record at or after `start_offset` whose timestamp is at least `target`
    (Kafka's LogSegment.findOffsetByTimestamp), or None when no record is."""
    for batch in batches:
        header = parse_header(batch)
        if header.max_timestamp < target or header.last_offset < start_offset:
            continue
        for record in iter_records(batch):
            if record.offset >= start_offset and record.timestamp >= target:
                return TimestampAndOffset(
                    record.timestamp, record.offset, header.partition_leader_epoch
                )
    return None


def max_timestamp(batches: Iterable[bytes], start_offset: int) -> TimestampAndOffset | None:
    """The record with the largest timestamp (the first of them if several share it), or
    None for no record: what ListOffsets' MAX_TIMESTAMP (-3) answers."""
    best_batch, best = None, None
    for batch in batches:
        header = parse_header(batch)
        if header.last_offset >= start_offset and (best is None or header.max_timestamp > best):
            best_batch, best = batch, header.max_timestamp
    if best_batch is None:
        return None
    header = parse_header(best_batch)
    for record in iter_records(best_batch):
        if record.offset >= start_offset and record.timestamp == best:
            return TimestampAndOffset(
                record.timestamp, record.offset, header.partition_leader_epoch
            )
    return None
