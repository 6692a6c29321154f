"""Producer state snapshots: Kafka's `<20-digit offset>.snapshot` files, byte for byte.

A snapshot holds the idempotent producers' state of a partition as of its offset (the
state of the log below it). Its layout is Kafka 3.5's ProducerStateManager schema, version
1, big-endian:

    version: int16 (1) | crc: uint32 | count: int32 | count entries of
    producer_id: int64 | epoch: int16 | last_sequence: int32 | last_offset: int64 |
    offset_delta: int32 | timestamp: int64 | coordinator_epoch: int32 |
    current_txn_first_offset: int64

The CRC32C covers everything after the crc field (from byte 6 to the end). An entry holds
only the producer's last batch (its first sequence and offset are the last ones minus
`offset_delta`); a producer with no batch has last_offset -1. Kafka's own
`kafka-dump-log.sh --files N.snapshot` reads these files, and kcore reads Kafka's.

`encode_snapshot` / `decode_snapshot` are the pure codec. `FileSnapshotStore` (the
partition directory) and `MemorySnapshotStore` (simulations: a written snapshot is fsynced,
so it survives a crash) are where the bytes live; which snapshots to take, load and delete
is the partition log's business.
"""

from __future__ import annotations

import os
import pathlib
import struct
from collections.abc import Iterable
from typing import Protocol

import attrs
import crc32c

SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_CRC_AT = 2
_CRC_END = 6  # the CRC covers [6:]
# producer id, epoch, last sequence, last offset, offset delta, timestamp, coordinator
# epoch, current transaction's first offset
_ENTRY = struct.Struct(">qhiqiqiq")
_INT32 = 2**31


class CorruptSnapshotError(ValueError):
    """A snapshot file that cannot be read (Kafka's CorruptSnapshotException); the message
    names the file."""


@attrs.frozen
class SnapshotEntry:
    """One producer's state in a snapshot (Kafka's ProducerStateEntry as it is written)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int  # -1: the producer has no batch (then last_sequence is -1)
    offset_delta: int  # the last batch's last offset minus its first
    timestamp: int  # the last batch's max timestamp
    coordinator_epoch: int = -1  # transactions: kcore has none
    current_txn_first_offset: int = -1

    @property
    def has_batch(self) -> bool:
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """Kafka's BatchMetadata.firstSeq (DefaultRecordBatch.decrementSequence): sequences
        wrap past Integer.MAX_VALUE."""
        return (self.last_sequence - self.offset_delta) % _INT32

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset(file_name: str) -> int | None:
    """The offset a snapshot file is named after; None if the name is not one."""
    stem, suffix = file_name[: -len(SNAPSHOT_SUFFIX)], file_name[-len(SNAPSHOT_SUFFIX) :]
    if suffix != SNAPSHOT_SUFFIX or not stem.isdigit():
        return None
    return int(stem)


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """A snapshot file's bytes; entries in ascending producer id (Kafka writes its hash
    map's order, which readers do not depend on)."""
    entries = sorted(entries, key=lambda entry: entry.producer_id)
    data = bytearray(_HEADER.pack(PRODUCER_SNAPSHOT_VERSION, 0, len(entries)))
    for entry in entries:
        data += _ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.last_sequence,
            entry.last_offset,
            entry.offset_delta,
            entry.timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
    struct.pack_into(">I", data, _CRC_AT, crc32c.crc32c(memoryview(data)[_CRC_END:]))
    return bytes(data)


def decode_snapshot(data: bytes, file_name: str) -> list[SnapshotEntry]:
    """The entries of the snapshot `file_name` holding `data`; a CorruptSnapshotError naming
    the file when it is truncated, of another version, or fails its CRC."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(
            f"producer snapshot {file_name}: Snapshot failed schema validation: "
            f"{len(data)} bytes, shorter than the {_HEADER.size}-byte header"
        )
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"producer snapshot {file_name}: Snapshot contained an unknown file version {version}"
        )
    computed_crc = crc32c.crc32c(memoryview(data)[_CRC_END:])
    if stored_crc != computed_crc:
        raise CorruptSnapshotError(
            f"producer snapshot {file_name}: Snapshot is corrupt (CRC is no longer valid). "
            f"Stored crc: {stored_crc}. Computed crc: {computed_crc}"
        )
    expected = _HEADER.size + count * _ENTRY.size
    if count < 0 or expected != len(data):
        raise CorruptSnapshotError(
            f"producer snapshot {file_name}: Snapshot failed schema validation: {count} "
            f"entries announced, {len(data) - _HEADER.size} bytes of entries held "
            f"({_ENTRY.size} each)"
        )
    return [
        SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + index * _ENTRY.size))
        for index in range(count)
    ]


class SnapshotStore(Protocol):
    def offsets(self) -> list[int]: ...
    def read(self, offset: int) -> bytes: ...
    def write(self, offset: int, data: bytes) -> None: ...
    def delete(self, offset: int) -> None: ...
    def name(self, offset: int) -> str: ...


class FileSnapshotStore:
    """`%020d.snapshot` files in a partition directory, each written whole (a temporary
    file, fsynced, then renamed: a crash never leaves half a snapshot under its name)."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = directory

    def name(self, offset: int) -> str:
        return str(self.directory / snapshot_file_name(offset))

    def offsets(self) -> list[int]:
        found = (snapshot_offset(path.name) for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"))
        return sorted(offset for offset in found if offset is not None)

    def read(self, offset: int) -> bytes:
        return (self.directory / snapshot_file_name(offset)).read_bytes()

    def write(self, offset: int, data: bytes) -> None:
        path = self.directory / snapshot_file_name(offset)
        temporary = path.with_name(path.name + ".tmp")  # removed at start-up if left
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        # The directory is not fsynced (nor is it by Kafka): a rename lost in a power cut
        # only loses this snapshot, and a load falls back to an older one or the log.
        os.replace(temporary, path)

    def delete(self, offset: int) -> None:
        (self.directory / snapshot_file_name(offset)).unlink(missing_ok=True)


class MemorySnapshotStore:
    """Snapshots in memory: written durably (as the file store fsyncs), so a simulated
    crash keeps them all."""

    def __init__(self) -> None:
        self.snapshots: dict[int, bytes] = {}

    def name(self, offset: int) -> str:
        return snapshot_file_name(offset)

    def offsets(self) -> list[int]:
        return sorted(self.snapshots)

    def read(self, offset: int) -> bytes:
        return self.snapshots[offset]

    def write(self, offset: int, data: bytes) -> None:
        self.snapshots[offset] = data

    def delete(self, offset: int) -> None:
        self.snapshots.pop(offset, None)
