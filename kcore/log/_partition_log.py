"""A partition's log: segments, offsets, the leader epoch cache, retention and recovery.

`PartitionLog` keeps its segments as files in a partition directory; `MemoryPartitionLog`
keeps them in memory and can `crash`. Both share every decision through `_Log`."""

from __future__ import annotations

import logging
import pathlib
import random
from collections.abc import Callable

import attrs

from kcore import errors
from kcore.log._batch import (
    BatchHeader,
    parse_header,
    restamp,
    split_batches,
    validate_batch,
)
from kcore.log._checkpoint import LEADER_EPOCH_CHECKPOINT
from kcore.log._epoch_cache import LeaderEpochCache
from kcore.log._errors import CorruptRecordError, UnexpectedAppendOffsetError
from kcore.log._producer_state import ProducerStateManager
from kcore.log._segment import FileStore, MemoryStore, Segment, SegmentStore

logger = logging.getLogger("kcore.log.partition_log")

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024  # log.segment.bytes
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000  # log.roll.ms
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # log.index.interval.bytes


class _Log:
    def __init__(
        self,
        new_store: Callable[[int], SegmentStore],
        epoch_cache: LeaderEpochCache,
        *,
        segment_bytes: int,
        segment_ms: int | None,
        index_interval_bytes: int,
    ) -> None:
        self._new_store = new_store
        self.epoch_cache = epoch_cache
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        # Kafka's flush.messages: fsync once this many messages are unflushed (None: never;
        # Kafka's default, durability comes from replication).
        self.flush_messages: int | None = None
        self._segments: list[Segment] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        self.producer_state = ProducerStateManager()

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
        waited = _time_waited_for_roll(active, header, now_ms)
        return self.segment_ms is not None and waited is not None and waited > self.segment_ms

    def roll(self, now_ms: int | None = None) -> None:
        """Starts a new active segment at the log end offset (unless the active one is empty)."""
        if self._segments[-1].size:
            self._roll(self.log_end_offset, now_ms)

    def _roll(self, base_offset: int, now_ms: int | None) -> Segment:
        # The previous segment is complete: make it durable before starting the next. An
        # OSError opening the new segment's files (EMFILE) leaves the log as it was.
        self._segments[-1].flush()
        segment = self._new_segment(base_offset)
        segment.created_ms = now_ms
        self._segments.append(segment)
        return segment

    def _new_segment(self, base_offset: int) -> Segment:
        return Segment(self._new_store(base_offset), base_offset, self.index_interval_bytes)

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

    def _rebuild_producer_state(self) -> None:
        # Derived from the log so it matches it exactly after truncation or recovery
        # (Kafka reloads from a snapshot and replays; we replay the headers).
        self.producer_state.rebuild(self._headers())

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments = [self._new_segment(offset)]
        self._log_start_offset = offset
        self._recovery_point = offset
        self.epoch_cache.clear()
        self.producer_state.rebuild(())

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
            self._segments.pop(0).delete()

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
            self._segments.pop(0).delete()
            deleted += 1
        if deleted:
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self.epoch_cache.truncate_from_start(self._log_start_offset)
            logger.info(
                "deleted %d old segments; log start offset %d", deleted, self._log_start_offset
            )
        return deleted

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
            segment.flush()
        self._recovery_point = self.log_end_offset
        return len(dirty)

    def close(self) -> None:
        self.flush()
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
        self._rebuild_producer_state()


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
        recovery_point: int = 0,
        log_start_offset: int = 0,
    ) -> None:
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        super().__init__(
            lambda base_offset: FileStore(self.directory, base_offset),
            LeaderEpochCache(self.directory / LEADER_EPOCH_CHECKPOINT),
            segment_bytes=segment_bytes,
            segment_ms=segment_ms,
            index_interval_bytes=index_interval_bytes,
        )
        self._log_start_offset = log_start_offset
        for stale in self.directory.glob("*.tmp"):
            stale.unlink()
        existing = [
            self._new_segment(int(path.stem))
            for path in self.directory.glob("*.log")
            if path.stem.isdigit()
        ]
        self._recover(existing, recovery_point)


class MemoryPartitionLog(_Log):
    """The same log held in memory, for simulations; `crash` loses what was not flushed."""

    def __init__(
        self,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_ms: int | None = DEFAULT_SEGMENT_MS,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    ) -> None:
        super().__init__(
            lambda base_offset: MemoryStore(),
            LeaderEpochCache(),
            segment_bytes=segment_bytes,
            segment_ms=segment_ms,
            index_interval_bytes=index_interval_bytes,
        )
        self._segments = [self._new_segment(0)]

    def recover(self) -> None:
        """A restart after a process crash: nothing written is lost (the OS holds it), but
        the tail after the recovery point is validated again, as at any unclean start."""
        self._recover(self._segments, self._recovery_point)

    def crash(self, rng: random.Random, *, torn_tail: bool = False) -> None:
        """A power cut and restart: unflushed bytes are lost (any prefix of them may survive,
        torn mid-batch when `torn_tail`), then start-up recovery runs. The epoch cache, like
        Kafka's checkpoint written on every assign, survives and is truncated to the LEO."""
        for segment in self._segments:
            store = segment.store
            assert isinstance(store, MemoryStore)
            store.crash(rng, torn_tail)
        self._recover(self._segments, self._recovery_point)
