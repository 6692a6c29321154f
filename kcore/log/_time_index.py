"""A segment's time index (Kafka's TimeIndex, the `.timeindex` file): sparse entries of
(timestamp, offset), both increasing, each saying "up to this offset's batch the largest
timestamp is this one". ListOffsets by timestamp looks up the last entry at or below its
target and scans the batches from that offset on instead of from the segment's start.

Kafka's binary layout: 12-byte entries, a big-endian int64 timestamp then an int32 offset
relative to the segment's base offset. Pure: the segment persists the bytes this returns."""

from __future__ import annotations

import bisect
import struct

import attrs

ENTRY = struct.Struct(">qi")  # timestamp, offset relative to the segment's base
ENTRY_SIZE = ENTRY.size  # 12
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP: a batch without timestamps is never indexed
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024  # log.index.size.max.bytes / segment.index.bytes


class CorruptTimeIndexError(Exception):
    """Stored time index bytes that cannot be this segment's (Kafka's CorruptIndexException
    from TimeIndex.sanityCheck, plus entries out of order): the caller rebuilds the index
    from the batches."""


@attrs.frozen
class TimestampOffset:
    timestamp: int
    offset: int


class TimeIndex:
    """The entries of one segment's time index, in memory."""

    def __init__(self, base_offset: int, max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES) -> None:
        self.base_offset = base_offset
        # Kafka rounds the index file's size down to whole entries.
        self.max_entries = max_index_bytes // ENTRY_SIZE
        self._timestamps: list[int] = []
        self._offsets: list[int] = []

    # -- state ----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def entries(self) -> list[TimestampOffset]:
        return [TimestampOffset(t, o) for t, o in zip(self._timestamps, self._offsets, strict=True)]

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry; for an empty index (NO_TIMESTAMP, base offset) (Kafka's
        lastEntryFromIndexFile)."""
        if not self._timestamps:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self._offsets[-1])

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    # -- changes --------------------------------------------------------------------

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bytes:
        """Adds (timestamp, offset) if `timestamp` is above the last entry's (Kafka's
        maybeAppend; the same entry again, as at a roll after a close, is a no-op). Returns
        the bytes to append to the file: empty when nothing was added. Raises ValueError
        for an entry going backwards or a full index (unless `skip_full_check`: the last
        entry written when the segment is rolled or closed)."""
        if not skip_full_check and self.is_full:
            raise ValueError(f"attempt to append to a full time index ({len(self)} entries)")
        last = self.last_entry
        if self._timestamps and offset < last.offset:
            raise ValueError(
                f"time index entry offset {offset} below the last entry's {last.offset}"
            )
        if self._timestamps and timestamp < last.timestamp:
            raise ValueError(
                f"time index entry timestamp {timestamp} below the last entry's {last.timestamp}"
            )
        if timestamp <= last.timestamp:
            return b""
        if not 0 <= offset - self.base_offset <= 2**31 - 1:
            raise ValueError(f"offset {offset} is outside segment {self.base_offset:020d}")
        self._timestamps.append(timestamp)
        self._offsets.append(offset)
        return ENTRY.pack(timestamp, offset - self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Removes the entries whose offset is `offset` or above (Kafka's truncateTo)."""
        keep = bisect.bisect_left(self._offsets, offset)
        del self._timestamps[keep:]
        del self._offsets[keep:]

    def clear(self) -> None:
        self._timestamps.clear()
        self._offsets.clear()

    # -- lookup ---------------------------------------------------------------------

    def lookup(self, target: int) -> TimestampOffset:
        """The last entry whose timestamp is at most `target`: every record before that
        entry's batch has a smaller timestamp, so a scan for the first record at or after
        `target` may start at its offset. (NO_TIMESTAMP, base offset) when no entry is:
        scan the whole segment (Kafka's TimeIndex.lookup)."""
        slot = bisect.bisect_right(self._timestamps, target) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[slot], self._offsets[slot])

    # -- bytes ----------------------------------------------------------------------

    def encode(self) -> bytes:
        return b"".join(
            ENTRY.pack(t, o - self.base_offset)
            for t, o in zip(self._timestamps, self._offsets, strict=True)
        )

    @classmethod
    def decode(
        cls, data: bytes, base_offset: int, max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES
    ) -> TimeIndex:
        """The index stored in `data`; CorruptTimeIndexError if its length is not whole
        entries or its entries do not increase (Kafka's sanityCheck, entry by entry)."""
        if len(data) % ENTRY_SIZE:
            raise CorruptTimeIndexError(
                f"{len(data)} bytes, which is not a multiple of {ENTRY_SIZE}"
            )
        index = cls(base_offset, max_index_bytes)
        for timestamp, relative in ENTRY.iter_unpack(data):
            last = index.last_entry
            if relative < 0 or (
                len(index) and (timestamp <= last.timestamp or relative + base_offset < last.offset)
            ):
                raise CorruptTimeIndexError(
                    f"entry {len(index)} (timestamp {timestamp}, offset {base_offset + relative}) "
                    f"does not follow (timestamp {last.timestamp}, offset {last.offset})"
                )
            index._timestamps.append(timestamp)
            index._offsets.append(base_offset + relative)
        return index


def decode_entries(data: bytes, base_offset: int) -> list[TimestampOffset]:
    """The whole entries of a `.timeindex` file as stored, unchecked (for dumping a damaged
    one); trailing bytes short of an entry are left out."""
    whole = len(data) - len(data) % ENTRY_SIZE
    return [
        TimestampOffset(timestamp, base_offset + relative)
        for timestamp, relative in ENTRY.iter_unpack(data[:whole])
    ]
