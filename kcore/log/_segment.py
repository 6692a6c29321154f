"""A log segment: batches appended back to back plus a sparse offset index.

What a segment decides (index, lookup, truncation, recovery) lives in `Segment`; where the
bytes live is a `SegmentStore`: files on disk (`FileStore`: `%020d.log` + `%020d.index`) or
memory with a flushed watermark (`MemoryStore`, for simulations that crash brokers)."""

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

logger = logging.getLogger("kcore.log.segment")

_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, byte position (Kafka's OffsetIndex)
_MAX_RELATIVE_OFFSET = 2**31 - 1


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
    def rename(self, suffix: str) -> None: ...


class FileStore:
    """Plain blocking files; appends only at the end; fsync only in `flush`.

    Unbuffered: each write reaches the operating system at once, which is what a crashed
    process leaves behind. A Python-side buffer would instead be written whenever the
    object is garbage-collected, possibly after a restarted broker truncated the file."""

    def __init__(self, directory: pathlib.Path, base_offset: int, suffix: str = "") -> None:
        self.log_path = directory / segment_file_name(base_offset, ".log" + suffix)
        self.index_path = directory / segment_file_name(base_offset, ".index" + suffix)
        self._suffix = suffix
        self._log = open(self.log_path, "a+b", buffering=0)
        self._index = None

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

    def close(self) -> None:
        self._log.close()
        if self._index is not None:
            self._index.close()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.index_path.unlink(missing_ok=True)

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

    def rename(self, suffix: str) -> None:
        """Gives the files `suffix` in place of the current one (Kafka's
        changeFileSuffixes: the log first, then the index), open files staying open, and
        makes the renames durable."""
        renamed = []
        for path in (self.log_path, self.index_path):
            target = path.with_name(path.name[: len(path.name) - len(self._suffix)] + suffix)
            if path.exists():
                os.replace(path, target)
            renamed.append(target)
        self.log_path, self.index_path = renamed
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
    ranges = [
        (_file_offset(path), _next_offset_of(path))
        for path in swaps
        if path.name.endswith(".log" + SWAP_SUFFIX)
    ]
    if ranges:
        start, end = min(r[0] for r in ranges), max(r[1] for r in ranges)
        for path in files:
            name = path.name
            if name.endswith((".log", ".index")):
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

    def read_index(self) -> bytes | None:
        return None if self.index is None else bytes(self.index)

    def append_index(self, entry: bytes) -> None:
        if self.index is None:
            self.index = bytearray()
        self.index += entry

    def write_index(self, data: bytes) -> None:
        self.index = bytearray(data)

    def rename(self, suffix: str) -> None:
        pass  # a memory log swaps segments in one step: nothing to recover

    def crash(self, rng: random.Random, torn_tail: bool) -> None:
        """Loses what was not flushed: the OS may have written any prefix of it (a torn tail
        when `torn_tail`), or nothing at all."""
        unflushed = len(self.data) - self.flushed
        kept = rng.randint(0, unflushed) if torn_tail else 0
        del self.data[self.flushed + kept :]
        self.index = None  # the index is derived data: recovery rebuilds it


class Segment:
    def __init__(self, store: SegmentStore, base_offset: int, index_interval_bytes: int) -> None:
        self.store = store
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
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

    def append(self, header: BatchHeader, batch: bytes) -> None:
        # Files first, memory after: an OSError (EMFILE opening the index, ENOSPC) leaves
        # this segment as it was. An index entry written for a batch that then was not is
        # harmless: the index is derived, and checked against the batches when reloaded.
        indexed = self._bytes_since_index_entry > self.index_interval_bytes or not (
            self._index_offsets
        )
        if indexed:
            self.store.append_index(
                _INDEX_ENTRY.pack(header.last_offset - self.base_offset, self.size)
            )
        self.store.append(batch)
        if indexed:
            self._add_index_entry(header.last_offset, self.size, persist=False)
        self._account(header)

    def _account(self, header: BatchHeader) -> None:
        self.size += header.size
        self._bytes_since_index_entry += header.size
        self.next_offset = header.next_offset
        self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
        if self.rolling_timestamp is None:
            self.rolling_timestamp = header.max_timestamp

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
        """Opens an existing segment trusting its bytes; the index is rebuilt if missing or
        inconsistent."""
        stored = self.store.read_index()
        self._reload(validate=False, stored_index=stored, keep_damage=True)

    def _reload(
        self, validate: bool, stored_index: bytes | None = None, keep_damage: bool = False
    ) -> int:
        """`keep_damage`: a malformed batch is left in place (a segment below the recovery
        point was flushed whole: damage there is corruption, not a torn write, and deleting
        it would silently drop the records after it); reads stop at it and name it."""
        data = self.store.read(0, self.store.size())
        if not data:
            self.created_ms = None  # emptied: its time starts again (Kafka's truncateTo)
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = -1
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
        return dropped

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


def _whole_header(data: bytes, position: int) -> BatchHeader:
    header = parse_header(data, position)
    if header.length < HEADER_SIZE - 12 or position + header.size > len(data):
        raise CorruptRecordError(f"record batch at byte {position} is truncated or malformed")
    return header
