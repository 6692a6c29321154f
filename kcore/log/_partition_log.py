"""A partition's log: segments, offsets, the leader epoch cache, retention, compaction (the
cleaned segments swapped in) and recovery.

`PartitionLog` keeps its segments as files in a partition directory; `MemoryPartitionLog`
keeps them in memory and can `crash`. Both share every decision through `_Log`."""

from __future__ import annotations

import logging
import pathlib
import random
from collections.abc import Callable, Iterator

import attrs

from actors import Timer
from kcore import errors
from kcore.log._batch import (
    HEADER_SIZE,
    BatchHeader,
    parse_header,
    restamp,
    split_batches,
    validate_batch,
)
from kcore.log._checkpoint import LEADER_EPOCH_CHECKPOINT
from kcore.log._cleaner import (
    CleaningAbortedError,
    OffsetMap,
    SegmentSummary,
    clean_batch,
    group_segments_by_size,
    segments_holding,
)
from kcore.log._epoch_cache import LeaderEpochCache
from kcore.log._errors import CorruptRecordError, UnexpectedAppendOffsetError
from kcore.log._producer_snapshot import (
    CorruptSnapshotError,
    FileSnapshotStore,
    MemorySnapshotStore,
    SnapshotStore,
    decode_snapshot,
    encode_snapshot,
)
from kcore.log._producer_state import ProducerStateManager
from kcore.log._segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SWAP_SUFFIX,
    FileStore,
    MemoryStore,
    Segment,
    SegmentStore,
    complete_interrupted_swaps,
    segment_file_name,
)
from kcore.log._timestamps import TimestampAndOffset, first_at_or_after

logger = logging.getLogger("kcore.log.partition_log")

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024  # log.segment.bytes
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000  # log.roll.ms
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # log.index.interval.bytes
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024  # log.index.size.max.bytes (segment.index.bytes)


class _Log:
    def __init__(
        self,
        new_store: Callable[[int], SegmentStore],
        epoch_cache: LeaderEpochCache,
        producer_snapshots: SnapshotStore,
        *,
        segment_bytes: int,
        segment_ms: int | None,
        index_interval_bytes: int,
        max_index_bytes: int,
    ) -> None:
        self._new_store = new_store
        self.epoch_cache = epoch_cache
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        self.max_index_bytes = max_index_bytes
        # Kafka's flush.messages: fsync once this many messages are unflushed (None: never;
        # Kafka's default, durability comes from replication).
        self.flush_messages: int | None = None
        # Kafka's LogFlushStats LogFlushRateAndTimeMs, timing every segment's flush (its
        # fsyncs) as Kafka's LogSegment.flush does: set by the broker's log manager, None
        # when nobody measures.
        self.flush_timer: Timer | None = None
        self._segments: list[Segment] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        self.producer_state = ProducerStateManager()
        self.producer_snapshots = producer_snapshots  # `%020d.snapshot`: Kafka's files

    # -- state -----------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below this are flushed: the value for `recovery-point-offset-checkpoint`."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    def segment_base_offsets(self) -> list[int]:
        return [segment.base_offset for segment in self._segments]

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(requested_epoch, self.log_end_offset)

    # -- appends ---------------------------------------------------------------------

    def append(
        self, batch_bytes: bytes, leader_epoch: int, *, now_ms: int | None = None
    ) -> tuple[int, int]:
        """Appends one or more batches as the leader: offsets are assigned from the log end
        offset and each batch is stamped with `leader_epoch`. Returns (first, last) offset."""
        ranges = []
        for header, batch in split_batches(batch_bytes):
            duplicate = self.producer_state.check(header)
            if duplicate is not None:
                # A producer's retry of a batch already here: answer with its offsets.
                ranges.append(duplicate)
                continue
            offset = self.log_end_offset
            stamped = restamp(batch, offset, leader_epoch)
            self.epoch_cache.assign(leader_epoch, offset)
            renumbered = _renumbered(header, offset, leader_epoch)
            self._append_batch(renumbered, stamped, now_ms)
            self.producer_state.update(renumbered)
            ranges.append((offset, renumbered.last_offset))
        self._maybe_flush()
        return ranges[0][0], ranges[-1][1]

    def append_as_follower(
        self, batch_bytes: bytes, *, now_ms: int | None = None
    ) -> tuple[int, int]:
        """Appends the leader's batches keeping their offsets and epochs."""
        batches = split_batches(batch_bytes)
        first = batches[0][0].base_offset
        for header, batch in batches:
            if header.base_offset < self.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"follower append of a batch at offset {header.base_offset} below the "
                    f"log end offset {self.log_end_offset}"
                )
            if header.partition_leader_epoch >= 0:
                self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            self._append_batch(header, batch, now_ms)
            self.producer_state.update(header)
        self._maybe_flush()
        return first, batches[-1][0].last_offset

    def _append_batch(self, header: BatchHeader, batch: bytes, now_ms: int | None) -> None:
        active = self._segments[-1]
        if active.created_ms is None:
            active.created_ms = now_ms
        if self._should_roll(active, header, now_ms):
            active = self._roll(header.base_offset, now_ms)
        active.append(header, batch)

    def _should_roll(self, active: Segment, header: BatchHeader, now_ms: int | None) -> bool:
        if active.size == 0:
            return False
        if active.size + header.size > self.segment_bytes or not active.can_hold(header):
            return True
        if active.index_full:
            return True
        waited = _time_waited_for_roll(active, header, now_ms)
        return self.segment_ms is not None and waited is not None and waited > self.segment_ms

    def roll(self, now_ms: int | None = None) -> None:
        """Starts a new active segment at the log end offset (unless the active one is empty)."""
        if self._segments[-1].size:
            self._roll(self.log_end_offset, now_ms)

    def _roll(self, base_offset: int, now_ms: int | None) -> Segment:
        # The previous segment is complete: make it durable before starting the next. An
        # OSError opening the new segment's files (EMFILE) leaves the log as it was.
        self._segments[-1].seal()
        self._flush_segment(self._segments[-1])
        segment = self._new_segment(base_offset)
        segment.created_ms = now_ms
        self._segments.append(segment)
        # Kafka's roll: the producers' state as of the new segment's base offset, so that a
        # recovery needs to replay from this segment only.
        self.producer_state.map_end_offset = base_offset
        self._take_producer_snapshot()
        return segment

    def _new_segment(self, base_offset: int) -> Segment:
        return Segment(
            self._new_store(base_offset),
            base_offset,
            self.index_interval_bytes,
            self.max_index_bytes,
        )

    # -- reads -----------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None) -> list[bytes]:
        """Whole batches from the one holding `start_offset`, up to `max_bytes` but always at
        least one if there is one, none reaching `max_offset`."""
        if start_offset < self._log_start_offset or start_offset > self.log_end_offset:
            raise errors.OffsetOutOfRangeError(
                f"offset {start_offset} is out of range [{self._log_start_offset}, "
                f"{self.log_end_offset}]"
            )
        batches: list[bytes] = []
        remaining = max_bytes
        try:
            for segment in self._segments:
                if segment.next_offset <= start_offset:
                    continue
                found = segment.read(start_offset, remaining, max_offset, first=not batches)
                if not found:
                    if _ends_before(segment, start_offset):
                        continue  # compaction left a gap at the segment's end: go on
                    break
                batches += found
                remaining -= sum(len(batch) for batch in found)
                start_offset = _next_offset(found)
                if start_offset < segment.next_offset:
                    break  # a limit stopped the read inside this segment
        except CorruptRecordError:
            if not batches:
                raise
        return _valid_prefix(batches)

    def offset_for_timestamp(
        self, target: int, max_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """ListOffsets by timestamp (Kafka's fetchOffsetByTimestamp): the first record at or
        after the log start whose timestamp is at least `target`, among the batches below
        `max_offset`; None if none is. Only the first segment whose largest timestamp
        reaches `target` is read, from its time index's entry on (`_timestamps` decides)."""
        for segment in self._segments:
            if segment.next_offset <= self._log_start_offset or segment.max_timestamp < target:
                continue
            position = segment.timestamp_scan_position(target, self._log_start_offset)
            batches = _batches_below(segment, position, max_offset, target)
            return first_at_or_after(batches, target, self._log_start_offset)
        return None

    # -- truncation, retention -------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Removes the batches at or after `offset` (a batch holding it is removed whole)."""
        if offset >= self.log_end_offset:
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._segments.pop().delete()
        self._segments[-1].truncate_to(offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        self._rebuild_producer_state()

    def _headers(self):
        for segment in self._segments:
            for _, header in segment.headers_from(0):
                yield header

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments = [self._new_segment(offset)]
        self._log_start_offset = offset
        self._recovery_point = offset
        self.epoch_cache.clear()
        for snapshot_offset in self.producer_snapshots.offsets():
            self.producer_snapshots.delete(snapshot_offset)
        self.producer_state.truncate_fully_and_start_at(offset)

    def increment_log_start_offset(self, offset: int) -> None:
        """Moves the log start offset up (follower catching up with its leader, or
        DeleteRecords); segments wholly below it are deleted."""
        if offset <= self._log_start_offset:
            return
        if offset > self.log_end_offset:
            raise errors.OffsetOutOfRangeError(
                f"log start offset {offset} beyond the log end offset {self.log_end_offset}"
            )
        self._log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            self._delete_segment(self._segments.pop(0))

    def delete_old_segments(
        self, now_ms: int, retention_ms: int, retention_bytes: int, high_watermark: int
    ) -> int:
        """Deletes the oldest segments past `retention_ms` (by their largest timestamp) or
        beyond `retention_bytes` (-1 disables either), never the active segment nor one
        holding offsets at or above `high_watermark`. Returns how many were deleted."""
        excess = self.size_in_bytes - retention_bytes if retention_bytes >= 0 else 0
        deleted = 0
        while len(self._segments) > 1:
            oldest, following = self._segments[0], self._segments[1]
            if following.base_offset > high_watermark:
                break
            expired = retention_ms >= 0 and now_ms - oldest.max_timestamp > retention_ms
            oversized = retention_bytes >= 0 and excess - oldest.size >= 0
            if not (expired or oversized):
                break
            excess -= oldest.size
            self._delete_segment(self._segments.pop(0))
            deleted += 1
        if deleted:
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self.epoch_cache.truncate_from_start(self._log_start_offset)
            logger.info(
                "deleted %d old segments; log start offset %d", deleted, self._log_start_offset
            )
        return deleted

    # -- compaction (what is kept is kcore.log._cleaner's decision; here it is read, ----
    # -- written and swapped in) ---------------------------------------------------------

    def cleaner_segments(self) -> list[SegmentSummary]:
        """The segments as the cleaner's choices read them, the active one last."""
        return [
            SegmentSummary(s.base_offset, s.size, s.max_timestamp, s.rolling_timestamp, s)
            for s in self._segments
        ]

    def clean(
        self,
        offset_map: OffsetMap,
        *,
        first_dirty_offset: int,
        first_uncleanable_offset: int,
        now_ms: int,
        delete_retention_ms: int,
    ) -> Iterator[int]:
        """One pass of Kafka's Cleaner.doClean: builds `offset_map` from the dirty section
        [first dirty, first uncleanable) (up to its capacity), then recopies every segment
        holding offsets up to the map's latest through `_cleaner.clean_batch`, in groups
        that fit one segment, each group swapped in as one segment (`_replace_segments`).
        The log is clean up to `offset_map.latest_offset + 1` after it.

        Yields the bytes read and written for each batch: a point where the caller may let
        others run. Raises CleaningAbortedError, at the next swap, when the log changed
        under the map (truncated, or its segments deleted): what was swapped in stays."""
        dirty = list(segments_holding(self._segments, first_dirty_offset, first_uncleanable_offset))
        if not dirty:
            return
        # Truncation removes the tail: while the last dirty segment is as it was, the
        # records the map names are all there.
        guard = (dirty[-1], dirty[-1].size)
        yield from self._build_offset_map(
            offset_map, dirty, first_dirty_offset, first_uncleanable_offset, guard
        )
        holding = segments_holding(self.cleaner_segments(), 0, offset_map.latest_offset + 1)
        for group in group_segments_by_size(holding, self.segment_bytes, first_uncleanable_offset):
            old = [summary.handle for summary in group]
            yield from self._clean_segments(old, offset_map, guard, now_ms, delete_retention_ms)

    def _build_offset_map(
        self,
        offset_map: OffsetMap,
        dirty: list[Segment],
        start: int,
        end: int,
        guard: tuple[Segment, int],
    ) -> Iterator[int]:
        """Kafka's buildOffsetMap: batch by batch until the map is full; a segment read whole
        moves the map's latest offset to its end (over a gap compaction left)."""
        for index, segment in enumerate(dirty):
            following = dirty[index + 1].base_offset if index + 1 < len(dirty) else end
            for position, header in segment.headers_from(segment.lookup(start)):
                if header.base_offset >= end:
                    break
                batch = _whole_batch(segment, position, header)
                full = offset_map.add_batch(header, batch, start)
                yield header.size
                _check_unchanged([guard, (segment, segment.size)])
                if full:
                    return
            offset_map.update_latest_offset(following - 1)

    def _clean_segments(
        self,
        old: list[Segment],
        offset_map: OffsetMap,
        guard: tuple[Segment, int],
        now_ms: int,
        delete_retention_ms: int,
    ) -> Iterator[int]:
        """Kafka's cleanSegments: `old` recopied into one `.cleaned` segment, swapped in
        unless the log changed meanwhile (`old` or the `guard` segment gone or resized)."""
        unchanged = [guard, *((segment, segment.size) for segment in old)]
        last_batches = {
            producer_id: entry.batches[-1].last_offset
            for producer_id, entry in self.producer_state.producers.items()
            if entry.batches
        }
        base_offset = old[0].base_offset
        cleaned = Segment(
            self._new_cleaned_store(base_offset),
            base_offset,
            self.index_interval_bytes,
            self.max_index_bytes,
        )
        swapping = False
        try:
            for segment in old:
                for position, header in segment.headers_from(0):
                    batch = _whole_batch(segment, position, header)
                    kept = clean_batch(
                        header,
                        batch,
                        offset_map,
                        now_ms=now_ms,
                        delete_retention_ms=delete_retention_ms,
                        producer_last_batch=last_batches.get(header.producer_id)
                        == header.last_offset,
                    )
                    if kept is not None:
                        cleaned.append(parse_header(kept), kept)
                    yield header.size + (len(kept) if kept is not None else 0)
                    _check_unchanged(unchanged)
            _check_unchanged(unchanged)
            swapping = True  # from here a failure leaves files a restart sorts out
            self._replace_segments(cleaned, old)
        finally:
            if not swapping:
                cleaned.delete()

    def _replace_segments(self, cleaned: Segment, old: list[Segment]) -> None:
        """Kafka's replaceSegments, so that a crash at any point leaves a log that loads
        with every record it held: the cleaned segment is made durable and renamed `.swap`
        (from then on a restart completes the swap: `complete_interrupted_swaps`), the old
        segments are renamed `.deleted`, the swap takes its final name (that of the first
        old segment) and the old files go, with the producer snapshots named after the
        segments that no longer begin anywhere."""
        cleaned.seal()
        self._flush_segment(cleaned)
        cleaned.store.rename(SWAP_SUFFIX)
        for segment in old:
            segment.store.rename(DELETED_SUFFIX)
        cleaned.store.rename("")
        first = next(index for index, s in enumerate(self._segments) if s is old[0])
        self._segments[first : first + len(old)] = [cleaned]
        old[0].delete()
        for segment in old[1:]:
            self._delete_segment(segment)
        logger.info(
            "swapped in cleaned segment %020d for %d segment(s)", cleaned.base_offset, len(old)
        )

    def _new_cleaned_store(self, base_offset: int) -> SegmentStore:
        raise NotImplementedError

    # -- durability ------------------------------------------------------------------

    def _maybe_flush(self) -> None:
        unflushed = self.log_end_offset - self._recovery_point
        if self.flush_messages is not None and unflushed >= self.flush_messages:
            self.flush()

    def flush(self) -> int:
        """Makes everything appended durable (the broker group-commits these) and returns how
        many segments were fsynced: 0 when nothing was dirty."""
        if self._recovery_point == self.log_end_offset:
            return 0
        dirty = [seg for seg in self._segments if seg.next_offset > self._recovery_point]
        for segment in dirty:
            self._flush_segment(segment)
        self._recovery_point = self.log_end_offset
        return len(dirty)

    def _flush_segment(self, segment: Segment) -> None:
        if self.flush_timer is None:
            segment.flush()
            return
        with self.flush_timer.time():  # a flush that fails is counted too, as Kafka's
            segment.flush()

    def close(self) -> None:
        self._segments[-1].seal()  # (the others were sealed when rolled)
        self.flush()
        self._take_producer_snapshot()  # Kafka's close: so a restart need not replay
        for segment in self._segments:
            segment.close()

    def _recover(self, segments: list[Segment], recovery_point: int) -> None:
        """Validates the segments holding offsets at or after `recovery_point`, truncating a
        torn or corrupt tail and everything after it, then fits the epoch cache."""
        segments.sort(key=lambda segment: segment.base_offset)
        kept: list[Segment] = []
        for position, segment in enumerate(segments):
            following = segments[position + 1].base_offset if position + 1 < len(segments) else None
            if following is None or following > recovery_point:
                dropped = segment.recover(validate=True)
            else:
                segment.load()
                # A damaged batch kept in place: the segment still ends where the next begins.
                segment.next_offset = max(segment.next_offset, following)
                dropped = 0
            kept.append(segment)
            if dropped and position + 1 < len(segments):
                for later in segments[position + 1 :]:
                    logger.warning("deleting segment %020d after a corrupt one", later.base_offset)
                    later.delete()
                break
        self._segments = kept or [self._new_segment(self._log_start_offset)]
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._recovery_point = self.log_end_offset
        if self.epoch_cache.rebuild_needed:
            # Its checkpoint was unreadable: every batch carries its leader epoch.
            self.epoch_cache.rebuild(
                (header.partition_leader_epoch, header.base_offset) for header in self._headers()
            )
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        self._load_producer_state()

    # -- producer state snapshots (Kafka's ProducerStateManager files) -----------------

    def _take_producer_snapshot(self) -> None:
        """Snapshots the producers' state at its end offset, unless one is there already
        (Kafka's takeSnapshot: at a roll, on close, after a reload)."""
        state = self.producer_state
        if state.snapshot_due:
            data = encode_snapshot(state.snapshot_entries())
            self.producer_snapshots.write(state.map_end_offset, data)
            state.snapshot_taken()

    def _delete_segment(self, segment: Segment) -> None:
        """Deletes a segment below the log start and the producer snapshot named after it
        (Kafka's deleteSegments with deleteProducerSnapshots)."""
        segment.delete()
        self.producer_snapshots.delete(segment.base_offset)

    def _load_producer_state(self) -> None:
        """At start-up (Kafka's LogLoader): nothing in memory; the snapshots of segments
        that are gone are deleted, except the latest if above every segment (the one
        taken at the log end offset on close); then the state is rebuilt."""
        self.producer_state.truncate_fully_and_start_at(0)
        bases = self.segment_base_offsets()
        strays = [o for o in self.producer_snapshots.offsets() if o not in set(bases)]
        if strays and strays[-1] > bases[-1]:
            strays.pop()
        for offset in strays:
            self.producer_snapshots.delete(offset)
        self._rebuild_producer_state()

    def _rebuild_producer_state(self) -> None:
        """After truncation or recovery (Kafka's rebuildProducerState with
        truncateAndReload): snapshots above the log end offset or at or below the log start
        are deleted, the latest other one is loaded and the batches after it replayed
        (none to replay if no producer wrote below the old end offset); then a snapshot is
        taken at the log end offset."""
        state, log_end = self.producer_state, self.log_end_offset
        had_no_producers = not state.producers and state.map_end_offset >= log_end
        for offset in self.producer_snapshots.offsets():
            if offset > log_end or offset <= self._log_start_offset:
                self.producer_snapshots.delete(offset)
        if state.map_end_offset != log_end:
            self._load_latest_producer_snapshot()
            if log_end > state.map_end_offset and not had_no_producers:
                self._replay_producer_state()
        state.map_end_offset = log_end
        self._take_producer_snapshot()

    def _load_latest_producer_snapshot(self) -> None:
        """Kafka's loadFromSnapshot: a corrupt snapshot is deleted with a warning and the
        next older one tried; with none, the state starts empty at the log start."""
        for offset in reversed(self.producer_snapshots.offsets()):
            name = self.producer_snapshots.name(offset)
            try:
                entries = decode_snapshot(self.producer_snapshots.read(offset), name)
            except CorruptSnapshotError as error:
                logger.warning("deleting producer snapshot %s: %s", name, error)
                self.producer_snapshots.delete(offset)
                continue
            self.producer_state.load_snapshot(entries, offset)
            logger.info("loaded producer state from snapshot %s", name)
            return
        self.producer_state.truncate_fully_and_start_at(self._log_start_offset)

    def _replay_producer_state(self) -> None:
        """The batches from the state's end offset to the log end offset, as a follower's
        appends update it, taking the snapshots missing at the last two segments' base
        offsets on the way (Kafka's rebuildProducerState)."""
        state = self.producer_state
        logger.info("replaying producer state from offset %d", state.map_end_offset)
        snapshot_points = self.segment_base_offsets()[-2:]
        for segment in self._segments:
            if segment.next_offset <= state.map_end_offset:
                continue
            start = max(segment.base_offset, state.map_end_offset, self._log_start_offset)
            state.map_end_offset = start
            if segment.base_offset in snapshot_points:
                self._take_producer_snapshot()
            for _, header in segment.headers_from(segment.lookup(start)):
                if header.size < HEADER_SIZE:
                    break  # a damaged batch kept below the recovery point: reads stop here
                if header.last_offset >= start:
                    state.update(header)


def _time_waited_for_roll(active: Segment, header: BatchHeader, now_ms: int | None) -> int | None:
    """How long `active` has waited to be rolled (Kafka's LogSegment.timeWaitedForRoll):
    measured in record time, from its first batch's timestamp to the new batch's, when the
    first batch has one; otherwise in the caller's clock from the segment's creation. None:
    unknown (no clock was passed). Batches stamped 0 thus never roll by time among
    themselves, instead of rolling a segment per batch against the wall clock."""
    first = active.rolling_timestamp
    if first is not None and first >= 0:
        return header.max_timestamp - first
    if now_ms is None or active.created_ms is None:
        return None
    return now_ms - active.created_ms


def _renumbered(header: BatchHeader, base_offset: int, epoch: int) -> BatchHeader:
    return attrs.evolve(header, base_offset=base_offset, partition_leader_epoch=epoch)


def _valid_prefix(batches: list[bytes]) -> list[bytes]:
    """`batches` up to the first that fails validation; a CorruptRecordError when that is
    the first. Segments below the recovery point are not re-validated at start-up (as in
    Kafka), so a flipped bit there reaches a read: the intact batches before it are served,
    and a read from the damaged batch itself fails, naming it."""
    for position, batch in enumerate(batches):
        try:
            validate_batch(batch)
        except CorruptRecordError as error:
            if position == 0:
                raise
            logger.error("serving the batches before a corrupt one: %s", error)
            return batches[:position]
    return batches


def _next_offset(batches: list[bytes]) -> int:
    return parse_header(batches[-1]).next_offset


def _ends_before(segment: Segment, offset: int) -> bool:
    """Whether `segment` is whole and holds no batch at or after `offset` (Kafka's read
    then goes on to the next segment; a damaged batch instead stops the read)."""
    for position, header in segment.headers_from(segment.lookup(offset)):
        if header.size < HEADER_SIZE or position + header.size > segment.size:
            return False
        if header.last_offset >= offset:
            return False
    return True


def _batches_below(
    segment: Segment, position: int, max_offset: int | None, target: int
) -> Iterator[bytes]:
    """The batches of `segment` from `position` on, ending below `max_offset`. Only those
    whose header says they may hold a timestamp of at least `target` are read whole (and
    validated: their records are decoded next); others pass as their header's bytes."""
    for batch_position, header in segment.headers_from(position):
        if header.size < HEADER_SIZE or batch_position + header.size > segment.size:
            # A damaged batch kept below the recovery point: what follows cannot be found.
            raise CorruptRecordError(
                f"segment {segment.base_offset:020d}: the record batch at byte "
                f"{batch_position} has an impossible length {header.length}"
            )
        if max_offset is not None and header.last_offset >= max_offset:
            return
        if header.max_timestamp < target:
            yield segment.store.read(batch_position, HEADER_SIZE)
        else:
            yield _whole_batch(segment, batch_position, header)


def _check_unchanged(segments: list[tuple[Segment, int]]) -> None:
    """Raises CleaningAbortedError if any of `segments` was deleted or resized (truncated)
    since its size was taken."""
    for segment, size in segments:
        if segment.deleted or segment.size != size:
            raise CleaningAbortedError(
                f"segment {segment.base_offset:020d} was truncated or deleted while cleaned"
            )


def _whole_batch(segment: Segment, position: int, header: BatchHeader) -> bytes:
    """The batch at `position` of `segment`, validated: the cleaner rewrites batches with a
    new CRC, so a damaged one must stop it rather than come out looking sound."""
    batch = segment.store.read(position, max(header.size, HEADER_SIZE))
    validate_batch(batch)
    return batch


class PartitionLog(_Log):
    """A partition directory: `%020d.log` segments with `.index` files and a
    `leader-epoch-checkpoint`. Opening it recovers the tail after `recovery_point`."""

    def __init__(
        self,
        directory: pathlib.Path | str,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_ms: int | None = DEFAULT_SEGMENT_MS,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
        recovery_point: int = 0,
        log_start_offset: int = 0,
    ) -> None:
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        super().__init__(
            lambda base_offset: FileStore(self.directory, base_offset),
            LeaderEpochCache(self.directory / LEADER_EPOCH_CHECKPOINT),
            FileSnapshotStore(self.directory),
            segment_bytes=segment_bytes,
            segment_ms=segment_ms,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
        )
        self._log_start_offset = log_start_offset
        for stale in self.directory.glob("*.tmp"):
            stale.unlink()
        complete_interrupted_swaps(self.directory)  # a clean the last run did not finish
        existing = [
            self._new_segment(int(path.stem))
            for path in self.directory.glob("*.log")
            if path.stem.isdigit()
        ]
        self._recover(existing, recovery_point)

    def _new_cleaned_store(self, base_offset: int) -> SegmentStore:
        for suffix in SEGMENT_FILE_SUFFIXES:  # an earlier attempt's, abandoned
            stale = segment_file_name(base_offset, suffix + CLEANED_SUFFIX)
            (self.directory / stale).unlink(missing_ok=True)
        return FileStore(self.directory, base_offset, CLEANED_SUFFIX)


class MemoryPartitionLog(_Log):
    """The same log held in memory, for simulations; `crash` loses what was not flushed."""

    def __init__(
        self,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_ms: int | None = DEFAULT_SEGMENT_MS,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
    ) -> None:
        super().__init__(
            lambda base_offset: MemoryStore(),
            LeaderEpochCache(),
            MemorySnapshotStore(),
            segment_bytes=segment_bytes,
            segment_ms=segment_ms,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
        )
        self._segments = [self._new_segment(0)]

    def _new_cleaned_store(self, base_offset: int) -> SegmentStore:
        return MemoryStore()

    def recover(self) -> None:
        """A restart after a process crash: nothing written is lost (the OS holds it), but
        the tail after the recovery point is validated again, as at any unclean start."""
        self._recover(self._segments, self._recovery_point)

    def close(self) -> None:
        """A clean shutdown. The broker's next incarnation reuses this object without
        opening it again, so what it knows of the producers becomes what a reopened file
        log loads: the snapshot just taken (Kafka's keeps each producer's last batch)."""
        super().close()
        self._load_producer_state()

    def crash(self, rng: random.Random, *, torn_tail: bool = False) -> None:
        """A power cut and restart: unflushed bytes are lost (any prefix of them may survive,
        torn mid-batch when `torn_tail`), then start-up recovery runs. The epoch cache, like
        Kafka's checkpoint written on every assign, survives and is truncated to the LEO."""
        for segment in self._segments:
            store = segment.store
            assert isinstance(store, MemoryStore)
            store.crash(rng, torn_tail)
        self._recover(self._segments, self._recovery_point)
