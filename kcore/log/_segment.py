"""A log segment: batches appended back to back plus a sparse offset index and a time index.

What a segment decides (indexes, lookup, truncation, recovery) lives in `Segment`; where the
bytes live is a `SegmentStore`: files on disk (`FileStore`: `%020d.log` + `%020d.index` +
`%020d.timeindex`) or memory with a flushed watermark (`MemoryStore`, for simulations that
crash brokers)."""

from __future__ import annotations

import bisect
import logging
import os
import pathlib
import random
import struct
from typing import Protocol

from kcore.log._batch import HEADER_SIZE, BatchHeader, parse_header, validate_batch
from kcore.log._errors import CorruptRecordError
from kcore.log._time_index import (
    DEFAULT_MAX_INDEX_BYTES,
    NO_TIMESTAMP,
    CorruptTimeIndexError,
    TimeIndex,
)

logger = logging.getLogger("kcore.log.segment")

_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, byte position (Kafka's OffsetIndex)
_MAX_RELATIVE_OFFSET = 2**31 - 1
# A segment's files, in the order Kafka's changeFileSuffixes renames them.
SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex")


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


# Kafka's suffixes for a segment on its way in or out (UnifiedLog / LogFileUtils): a cleaned
# segment is written as `.cleaned`, renamed `.swap` once complete, and the segments it
# replaces are renamed `.deleted` before it takes their place.
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"


class SegmentStore(Protocol):
    def size(self) -> int: ...
    def read(self, position: int, size: int) -> bytes: ...
    def append(self, data: bytes) -> None: ...
    def truncate(self, size: int) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def delete(self) -> None: ...
    def read_index(self) -> bytes | None: ...
    def append_index(self, entry: bytes) -> None: ...
    def write_index(self, data: bytes) -> None: ...
    def read_time_index(self) -> bytes | None: ...
    def append_time_index(self, entry: bytes) -> None: ...
    def write_time_index(self, data: bytes) -> None: ...
    def rename(self, suffix: str) -> None: ...


class FileStore:
    """Plain blocking files; appends only at the end; fsync only in `flush`.

    Unbuffered: each write reaches the operating system at once, which is what a crashed
    process leaves behind. A Python-side buffer would instead be written whenever the
    object is garbage-collected, possibly after a restarted broker truncated the file."""

    def __init__(self, directory: pathlib.Path, base_offset: int, suffix: str = "") -> None:
        self.log_path = directory / segment_file_name(base_offset, ".log" + suffix)
        self.index_path = directory / segment_file_name(base_offset, ".index" + suffix)
        self.time_index_path = directory / segment_file_name(base_offset, ".timeindex" + suffix)
        self._suffix = suffix
        self._log = open(self.log_path, "a+b", buffering=0)
        self._index = None
        # The time index takes an entry only when the largest timestamp grows: it is opened
        # for each write rather than held open (one file descriptor fewer per segment).
        self._time_index_dirty = False

    def size(self) -> int:
        return self._log.seek(0, os.SEEK_END)

    def read(self, position: int, size: int) -> bytes:
        self._log.seek(position)
        chunks = []
        while size > 0:
            chunk = self._log.read(size)  # raw reads may return less than asked
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def append(self, data: bytes) -> None:
        _write_all(self._log, data)

    def truncate(self, size: int) -> None:
        self._log.truncate(size)

    def flush(self) -> None:
        os.fsync(self._log.fileno())
        if self._index is not None:
            os.fsync(self._index.fileno())
        if self._time_index_dirty:
            with open(self.time_index_path, "rb") as time_index:
                os.fsync(time_index.fileno())
            self._time_index_dirty = False

    def close(self) -> None:
        self._log.close()
        if self._index is not None:
            self._index.close()

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)

    def read_index(self) -> bytes | None:
        return self.index_path.read_bytes() if self.index_path.exists() else None

    def append_index(self, entry: bytes) -> None:
        if self._index is None:
            self._index = open(self.index_path, "ab", buffering=0)
        _write_all(self._index, entry)

    def write_index(self, data: bytes) -> None:
        if self._index is not None:
            self._index.close()
        self._index = open(self.index_path, "wb", buffering=0)
        _write_all(self._index, data)

    def read_time_index(self) -> bytes | None:
        path = self.time_index_path
        return path.read_bytes() if path.exists() else None

    def append_time_index(self, entry: bytes) -> None:
        self._write_time_index("ab", entry)

    def write_time_index(self, data: bytes) -> None:
        self._write_time_index("wb", data)

    def _write_time_index(self, mode: str, data: bytes) -> None:
        with open(self.time_index_path, mode, buffering=0) as time_index:
            _write_all(time_index, data)
        self._time_index_dirty = True

    def rename(self, suffix: str) -> None:
        """Gives the files `suffix` in place of the current one (Kafka's
        changeFileSuffixes: the log first, then the offset index, then the time index), open
        files staying open, and makes the renames durable."""
        renamed = []
        for path in (self.log_path, self.index_path, self.time_index_path):
            target = path.with_name(path.name[: len(path.name) - len(self._suffix)] + suffix)
            if path.exists():
                os.replace(path, target)
            renamed.append(target)
        self.log_path, self.index_path, self.time_index_path = renamed
        self._suffix = suffix
        fsync_directory(self.log_path.parent)


def fsync_directory(directory: pathlib.Path) -> None:
    """Makes the renames and deletions in `directory` durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def complete_interrupted_swaps(directory: pathlib.Path) -> None:
    """Before a partition directory's segments are opened, finishes or undoes a clean that a
    crash interrupted (Kafka's LogLoader.removeTempFilesAndCollectSwapFiles and the swap
    passes of its load): `.deleted` files go; a `.swap` segment at or above a `.cleaned`
    file's offset was not wholly renamed and goes, as do the `.cleaned` files (the segments
    they were to replace are all still there); the remaining `.swap` segments were complete:
    the segments whose base offsets fall in their offset range are deleted and the `.swap`
    files take their names."""
    suffixes = (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)
    if not any(name.endswith(suffixes) for name in os.listdir(directory)):
        return  # (no clean was under way: what every start but a crashed one finds)
    files = sorted(
        path
        for path in directory.iterdir()
        if path.is_file() and path.name.split(".")[0].isdigit()  # (a segment's offset)
    )
    cleaned = [path for path in files if path.name.endswith(CLEANED_SUFFIX)]
    lowest_cleaned = min((_file_offset(path) for path in cleaned), default=None)
    changed = False
    swaps = []
    for path in files:
        if path.name.endswith(DELETED_SUFFIX) or path in cleaned:
            path.unlink(missing_ok=True)
            changed = True
        elif path.name.endswith(SWAP_SUFFIX):
            if lowest_cleaned is not None and _file_offset(path) >= lowest_cleaned:
                logger.info("deleting %s: its swap was interrupted before it completed", path.name)
                path.unlink(missing_ok=True)
                changed = True
            else:
                swaps.append(path)
    # A swap replaces the segment at its own base offset even when the clean left it empty
    # (its next offset is its base): that segment's index files must not outlive it.
    ranges = [
        (_file_offset(path), max(_next_offset_of(path), _file_offset(path) + 1))
        for path in swaps
        if path.name.endswith(".log" + SWAP_SUFFIX)
    ]
    if ranges:
        start, end = min(r[0] for r in ranges), max(r[1] for r in ranges)
        for path in files:
            name = path.name
            if name.endswith(SEGMENT_FILE_SUFFIXES):
                if start <= _file_offset(path) < end and path.exists():
                    logger.info("deleting %s: a cleaned segment replaces it", name)
                    path.unlink()
    for path in swaps:
        logger.info("completing the interrupted swap of %s", path.name)
        os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
        changed = True
    if changed:
        fsync_directory(directory)


def _file_offset(path: pathlib.Path) -> int:
    return int(path.name.split(".")[0])


def _next_offset_of(path: pathlib.Path) -> int:
    """The offset after the last whole batch of a segment file (its base offset if none)."""
    data = path.read_bytes()
    next_offset, position = _file_offset(path), 0
    while position < len(data):
        try:
            header = _whole_header(data, position)
        except CorruptRecordError:
            break
        next_offset, position = header.next_offset, position + header.size
    return next_offset


def _write_all(file, data: bytes) -> None:
    """Raw (unbuffered) writes may be partial."""
    view = memoryview(data)
    while view:
        view = view[file.write(view) :]


class MemoryStore:
    """Bytes in memory; `flushed` marks what would have survived a crash."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.flushed = 0
        self.index: bytearray | None = None
        self.time_index: bytearray | None = None

    def size(self) -> int:
        return len(self.data)

    def read(self, position: int, size: int) -> bytes:
        return bytes(self.data[position : position + size])

    def append(self, data: bytes) -> None:
        self.data += data

    def truncate(self, size: int) -> None:
        del self.data[size:]
        self.flushed = min(self.flushed, size)

    def flush(self) -> None:
        self.flushed = len(self.data)

    def close(self) -> None:
        pass

    def delete(self) -> None:
        self.data.clear()
        self.flushed = 0
        self.index = self.time_index = None

    def read_index(self) -> bytes | None:
        return None if self.index is None else bytes(self.index)

    def append_index(self, entry: bytes) -> None:
        if self.index is None:
            self.index = bytearray()
        self.index += entry

    def write_index(self, data: bytes) -> None:
        self.index = bytearray(data)

    def read_time_index(self) -> bytes | None:
        return None if self.time_index is None else bytes(self.time_index)

    def append_time_index(self, entry: bytes) -> None:
        if self.time_index is None:
            self.time_index = bytearray()
        self.time_index += entry

    def write_time_index(self, data: bytes) -> None:
        self.time_index = bytearray(data)

    def rename(self, suffix: str) -> None:
        pass  # a memory log swaps segments in one step: nothing to recover

    def crash(self, rng: random.Random, torn_tail: bool) -> None:
        """Loses what was not flushed: the OS may have written any prefix of it (a torn tail
        when `torn_tail`), or nothing at all."""
        unflushed = len(self.data) - self.flushed
        kept = rng.randint(0, unflushed) if torn_tail else 0
        del self.data[self.flushed + kept :]
        # The offset index is derived data: recovery rebuilds it. The time index is kept, as
        # a file survives a crash: what recovery revalidates it rewrites; below the recovery
        # point nothing was lost, and a start-up finds it as it was.
        self.index = None


class Segment:
    def __init__(
        self,
        store: SegmentStore,
        base_offset: int,
        index_interval_bytes: int,
        max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
    ) -> None:
        self.store = store
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        # segment.index.bytes: bounds both indexes; a full one rolls the segment.
        self.max_index_entries = max_index_bytes // _INDEX_ENTRY.size
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        # The last offset of the first batch holding `max_timestamp` (Kafka's
        # offsetOfMaxTimestampSoFar for magic 2 batches).
        self.offset_of_max_timestamp = base_offset
        self.time_index = TimeIndex(base_offset, max_index_bytes)
        self.rolling_timestamp: int | None = None  # first batch's max timestamp
        # When the segment was created or, for one opened from disk, first appended to (the
        # caller's clock): segment.ms counts from here when the first batch has no timestamp.
        self.created_ms: int | None = None
        self._index_offsets: list[int] = []  # last offset of the batch at each position
        self._index_positions: list[int] = []
        self._bytes_since_index_entry = 0
        self.deleted = False  # (a clean reading it must not swap over it)

    # -- appending -------------------------------------------------------------------

    def can_hold(self, header: BatchHeader) -> bool:
        return header.last_offset - self.base_offset <= _MAX_RELATIVE_OFFSET

    @property
    def index_full(self) -> bool:
        """Whether the offset or the time index is full (Kafka's shouldRoll then rolls)."""
        return len(self._index_offsets) >= self.max_index_entries or self.time_index.is_full

    def append(self, header: BatchHeader, batch: bytes) -> None:
        # Files first, memory after: an OSError (EMFILE opening the index, ENOSPC) leaves
        # this segment as it was. An index entry written for a batch that then was not is
        # harmless: the index is derived, and checked against the batches when reloaded.
        indexed = self._bytes_since_index_entry > self.index_interval_bytes or not (
            self._index_offsets
        )
        time_entry = b""
        if indexed and not self.time_index.is_full:
            # Kafka's LogSegment.append: the time index takes the largest timestamp so far,
            # this batch's included, where the offset index takes an entry.
            time_entry = self.time_index.maybe_append(*self._max_timestamp_with(header))
        try:
            if indexed:
                self.store.append_index(
                    _INDEX_ENTRY.pack(header.last_offset - self.base_offset, self.size)
                )
            if time_entry:
                self.store.append_time_index(time_entry)
            self.store.append(batch)
        except BaseException:
            if time_entry:
                self.time_index.truncate_to(self.time_index.last_entry.offset)
            raise
        if indexed:
            self._add_index_entry(header.last_offset, self.size, persist=False)
        self._account(header)

    def _max_timestamp_with(self, header: BatchHeader) -> tuple[int, int]:
        """(largest timestamp, the offset of its batch) once `header`'s batch is counted."""
        if header.max_timestamp > self.max_timestamp:
            return header.max_timestamp, header.last_offset
        return self.max_timestamp, self.offset_of_max_timestamp

    def _account(self, header: BatchHeader) -> None:
        self.size += header.size
        self._bytes_since_index_entry += header.size
        self.next_offset = header.next_offset
        self.max_timestamp, self.offset_of_max_timestamp = self._max_timestamp_with(header)
        if self.rolling_timestamp is None:
            self.rolling_timestamp = header.max_timestamp

    def seal(self) -> None:
        """Writes the time index's last entry, the segment's largest timestamp (Kafka's
        onBecomeInactiveSegment and close): done when the segment is rolled, closed or
        swapped in by the cleaner, so a lookup past the last sparse entry starts at the
        batch holding the segment's largest timestamp."""
        entry = self._seal_time_index()
        if entry:
            self.store.append_time_index(entry)

    def _seal_time_index(self) -> bytes:
        return self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )

    def _add_index_entry(self, last_offset: int, position: int, persist: bool) -> None:
        self._index_offsets.append(last_offset)
        self._index_positions.append(position)
        self._bytes_since_index_entry = 0
        if persist:
            self.store.append_index(_INDEX_ENTRY.pack(last_offset - self.base_offset, position))

    # -- reading ---------------------------------------------------------------------

    def lookup(self, offset: int) -> int:
        """A byte position at or before the batch holding `offset` (sparse index)."""
        index = bisect.bisect_right(self._index_offsets, offset) - 1
        if index >= 0 and self._index_offsets[index] == offset:
            return self._index_positions[index]
        # The entry at `index` names a batch ending at or before `offset`: start there.
        return self._index_positions[index] if index >= 0 else 0

    def headers_from(self, position: int):
        """(position, header) of each batch from `position` on, up to one whose length is
        impossible (damaged), included."""
        while position + HEADER_SIZE <= self.size:
            header = parse_header(self.store.read(position, HEADER_SIZE))
            yield position, header
            if header.size < HEADER_SIZE:
                return
            position += header.size

    def timestamp_scan_position(self, target: int, start_offset: int) -> int:
        """Where a search for the first record whose timestamp is at least `target`, at or
        after `start_offset`, may start reading batches (Kafka's findOffsetByTimestamp): at
        the batch of the last time index entry not above `target` (every record before it
        has a smaller timestamp)."""
        entry = self.time_index.lookup(target)
        return self.lookup(max(entry.offset, start_offset))

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`."""
        for position, header in self.headers_from(self.lookup(offset)):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None, first: bool
    ) -> list[bytes]:
        """Whole batches from the one holding `start_offset`, at most `max_bytes` (but one
        batch regardless when `first`), none reaching `max_offset`."""
        found = self.find(start_offset)
        if found is None:
            return []
        start, _ = found
        end = start
        for position, header in self.headers_from(start):
            if header.size < HEADER_SIZE or position + header.size > self.size:
                # A damaged length (bytes below the recovery point are not re-validated
                # at start-up): serve what precedes it; the batch itself is an error.
                if position == start:
                    raise CorruptRecordError(
                        f"segment {self.base_offset:020d}: reading offset {start_offset}, the "
                        f"record batch at byte {position} has an impossible length "
                        f"{header.length}"
                    )
                break
            if max_offset is not None and header.last_offset >= max_offset:
                break
            if position + header.size - start > max_bytes and not (first and position == start):
                break
            end = position + header.size
        if end == start:
            return []
        data = self.store.read(start, end - start)
        return [
            data[p - start : p - start + h.size] for p, h in self.headers_from_buffer(data, start)
        ]

    @staticmethod
    def headers_from_buffer(data: bytes, start: int):
        position = 0
        while position < len(data):
            header = parse_header(data, position)
            yield start + position, header
            position += header.size

    # -- truncation, recovery --------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drops the batches holding `offset` and later ones."""
        found = self.find(offset)
        if found is None:
            return
        position, _ = found
        self.store.truncate(position)
        self._reload(validate=False)

    def recover(self, validate: bool) -> int:
        """Re-reads the segment (checking every CRC when `validate`), drops a torn or corrupt
        tail and rebuilds the index. Returns the number of bytes dropped."""
        return self._reload(validate)

    def load(self) -> None:
        """Opens an existing segment trusting its bytes; the indexes are rebuilt if missing
        or inconsistent (Kafka's sanityCheck failing: a warning, then the rebuild)."""
        stored = self.store.read_index()
        stored_time_index = self.store.read_time_index()
        self._reload(
            validate=False,
            stored_index=stored,
            stored_time_index=stored_time_index,
            keep_damage=True,
        )

    def _reload(
        self,
        validate: bool,
        stored_index: bytes | None = None,
        stored_time_index: bytes | None = None,
        keep_damage: bool = False,
    ) -> int:
        """`keep_damage`: a malformed batch is left in place (a segment below the recovery
        point was flushed whole: damage there is corruption, not a torn write, and deleting
        it would silently drop the records after it); reads stop at it and name it."""
        data = self.store.read(0, self.store.size())
        if not data:
            self.created_ms = None  # emptied: its time starts again (Kafka's truncateTo)
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.time_index.clear()
        self.rolling_timestamp = None
        self._index_offsets.clear()
        self._index_positions.clear()
        self._bytes_since_index_entry = 0
        position = 0
        while position < len(data):
            try:
                header = (
                    validate_batch(data, position) if validate else _whole_header(data, position)
                )
            except CorruptRecordError as error:
                logger.warning(
                    "segment %020d: %s %d bytes from byte %d: %s",
                    self.base_offset,
                    "a read will stop at" if keep_damage else "dropping",
                    len(data) - position,
                    position,
                    error,
                )
                break
            if header.base_offset < self.next_offset or not self.can_hold(header):
                logger.warning(
                    "segment %020d: batch at byte %d has out-of-order offset %d; dropping the tail",
                    self.base_offset,
                    position,
                    header.base_offset,
                )
                break
            if self._bytes_since_index_entry > self.index_interval_bytes or not self._index_offsets:
                self._add_index_entry(header.last_offset, position, persist=False)
                if not self.time_index.is_full:
                    self.time_index.maybe_append(*self._max_timestamp_with(header))
            self._account(header)
            position += header.size
        dropped = len(data) - position
        if dropped and keep_damage:
            self.size = len(data)
            dropped = 0
        if dropped:
            self.store.truncate(position)
        rebuilt = self._index_bytes()
        if stored_index is None or stored_index != rebuilt:
            self.store.write_index(rebuilt)
        self._reload_time_index(stored_time_index if keep_damage else None, checked=keep_damage)
        return dropped

    def _reload_time_index(self, stored: bytes | None, checked: bool) -> None:
        """Writes the time index rebuilt from the batches, sealed (its last entry the
        segment's largest timestamp), unless `stored` holds it already. `checked` (a
        segment opened below the recovery point, whose index Kafka would trust): a stored
        index that is missing or is not the rebuilt one is named in a warning."""
        unsealed = self.time_index.encode()
        self._seal_time_index()
        rebuilt = self.time_index.encode()
        if stored is not None and stored in (rebuilt, unsealed):
            if stored != rebuilt:  # written by appends that no roll or close sealed
                self.store.append_time_index(rebuilt[len(stored) :])
            return
        if checked and (stored is not None or self.size):
            logger.warning(
                "segment %020d: rebuilding its time index: %s",
                self.base_offset,
                "the file is missing" if stored is None else _time_index_damage(stored, self),
            )
        self.store.write_time_index(rebuilt)

    def _index_bytes(self) -> bytes:
        return b"".join(
            _INDEX_ENTRY.pack(offset - self.base_offset, position)
            for offset, position in zip(self._index_offsets, self._index_positions, strict=True)
        )

    def flush(self) -> None:
        self.store.flush()

    def close(self) -> None:
        self.store.close()

    def delete(self) -> None:
        self.deleted = True
        self.store.delete()


def _time_index_damage(stored: bytes, segment: Segment) -> str:
    """Why `stored` is not `segment`'s time index, for the warning."""
    try:
        TimeIndex.decode(stored, segment.base_offset)
    except CorruptTimeIndexError as error:
        return f"it is corrupt: {error}"
    return "its entries do not match the segment's batches"


def _whole_header(data: bytes, position: int) -> BatchHeader:
    header = parse_header(data, position)
    if header.length < HEADER_SIZE - 12 or position + header.size > len(data):
        raise CorruptRecordError(f"record batch at byte {position} is truncated or malformed")
    return header
