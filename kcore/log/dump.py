"""A segment file printed as Kafka's `kafka-dump-log.sh --files F` prints it (Kafka 3.5's
DumpLogSegments.dumpLog), so what one knows from Kafka's tool reads the same here: one line
per batch, and with `print_data_log` (or `deep_iteration`) one `| offset: ...` line per
record. A producer state snapshot (`N.snapshot`) is printed one line per producer, as
DumpLogSegments.dumpProducerIdSnapshot does, a time index (`N.timeindex`) one line per entry
as dumpTimeIndex does.

Pure: bytes in, lines out (`kcore dump-log` reads the files). Where Kafka's tool would stop
with a stack trace (a batch whose records cannot be read, an impossible batch size) this one
says so in a line and goes on, or stops at that batch: the tool exists for damaged segments.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import crc32c

from kcore.log._batch import (
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    batch_records,
    parse_header,
)
from kcore.log._errors import CorruptRecordError
from kcore.log._producer_snapshot import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
)
from kcore.log._time_index import ENTRY_SIZE, decode_entries

TIME_INDEX_SUFFIX = ".timeindex"

__all__ = [
    "SNAPSHOT_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "CorruptSnapshotError",
    "dump_log",
    "dump_producer_snapshot",
    "dump_time_index",
]

_MAX_INT = 2**31 - 1
_HEADER_UP_TO_MAGIC = 17  # Kafka's FileLogInputStream stops when fewer bytes remain
_MIN_BATCH_LENGTH = 14  # LegacyRecord.RECORD_OVERHEAD_V0: below it a size is corrupt
_CRC_END = 21
_CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
}
_SIZE_AND_MAGIC = struct.Struct(">8xi4xb")  # the length and magic of any message format
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def dump_log(
    data: bytes,
    file_name: str,
    *,
    print_data_log: bool = False,
    deep_iteration: bool = False,
) -> Iterator[str]:
    """The lines Kafka's tool prints for the segment `file_name` (its base name) holding
    `data`, after its "Dumping <path>" line. `deep_iteration` adds a line per record,
    `print_data_log` also its key and payload (as UTF-8 text, like Kafka's StringDecoder)."""
    base, _, suffix = file_name.partition(".")
    if suffix == "log" and base.isdigit():
        yield f"Log starting offset: {int(base)}"
    deep = deep_iteration or print_data_log
    position = 0
    while len(data) - position >= _HEADER_UP_TO_MAGIC:
        length, magic = _SIZE_AND_MAGIC.unpack_from(data, position)
        if length < _MIN_BATCH_LENGTH:
            yield (
                f"Found record size {length} smaller than minimum record overhead "
                f"({_MIN_BATCH_LENGTH}) at position {position}"
            )
            break
        if position + LOG_OVERHEAD + length > len(data):
            break  # a torn tail: Kafka's iterator stops before it
        if magic != MAGIC:
            yield f"position: {position} magic: {magic}: only magic 2 batches are dumped"
            break
        if LOG_OVERHEAD + length < HEADER_SIZE:
            yield (
                f"position: {position} size: {LOG_OVERHEAD + length}: smaller than a magic 2 "
                f"batch header ({HEADER_SIZE} bytes)"
            )
            break
        header = parse_header(data, position)
        batch = data[position : position + header.size]
        yield _batch_line(header, batch, position)
        if deep:
            yield from _record_lines(header, batch, print_data_log)
        position += header.size
    if position < len(data):
        yield f"Found {len(data) - position} invalid bytes at the end of {file_name}"


def _timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.is_log_append_time else "CreateTime"


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap past Integer.MAX_VALUE."""
    if sequence > _MAX_INT - increment:
        return increment - (_MAX_INT - sequence) - 1
    return sequence + increment


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _batch_line(header: BatchHeader, batch: bytes, position: int) -> str:
    last_sequence = (
        -1
        if header.base_sequence < 0
        else _increment_sequence(header.base_sequence, header.last_offset_delta)
    )
    delete_horizon = (
        f"OptionalLong[{header.base_timestamp}]"
        if header.attributes & DELETE_HORIZON_MASK
        else "OptionalLong.empty"
    )
    valid = crc32c.crc32c(batch[_CRC_END:]) == header.crc
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.record_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {last_sequence} producerId: {header.producer_id} "
        f"producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_java_bool(header.is_transactional)} "
        f"isControl: {_java_bool(header.is_control)} deleteHorizonMs: {delete_horizon} "
        f"position: {position} {_timestamp_type(header)}: {header.max_timestamp} "
        f"size: {header.size} magic: {header.magic} compresscodec: {header.compression} "
        f"crc: {header.crc} isvalid: {_java_bool(valid)}"
    )


def _record_lines(header: BatchHeader, batch: bytes, print_data_log: bool) -> Iterator[str]:
    try:
        records = batch_records(batch, header)
    except CorruptRecordError as error:
        yield f"| records cannot be read: {error}"
        return
    timestamp_type = _timestamp_type(header)
    for record in records:
        offset_delta = record.offset - header.base_offset
        sequence = (
            -1
            if header.base_sequence < 0
            else _increment_sequence(header.base_sequence, offset_delta)
        )
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        line = (
            f"| offset: {record.offset} {timestamp_type}: {record.timestamp} "
            f"keySize: {key_size} valueSize: {value_size} sequence: {sequence} "
            f"headerKeys: [{','.join(key for key, _ in record.headers)}]"
        )
        if header.is_control:
            line += _control_text(record.key, record.value)
        elif print_data_log:
            if record.key is not None:
                line += f" key: {record.key.decode('utf-8', 'replace')}"
            if record.value is not None:
                line += f" payload: {record.value.decode('utf-8', 'replace')}"
        yield line


def _control_text(key: bytes | None, value: bytes | None) -> str:
    """A control record as Kafka's tool shows it: a transaction marker's type and
    coordinator epoch, any other control type by name and id."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return " controlType: UNKNOWN(-1)"
    _, type_id = _CONTROL_KEY.unpack_from(key)
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    if name in ("ABORT", "COMMIT") and value is not None and len(value) >= _END_TXN_VALUE.size:
        _, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    return f" controlType: {name}({type_id})"


def dump_producer_snapshot(data: bytes, file_name: str) -> Iterator[str]:
    """The lines Kafka's tool prints for the producer snapshot `file_name` holding `data`:
    each producer's state and, if it has one, its last batch. A file that cannot be read
    raises CorruptSnapshotError before any line (Kafka's tool prints its message to stderr
    and goes on with the next file)."""
    return iter([_snapshot_line(entry) for entry in decode_snapshot(data, file_name)])


def _snapshot_line(entry: SnapshotEntry) -> str:
    txn_first_offset = (
        f"OptionalLong[{entry.current_txn_first_offset}]"
        if entry.current_txn_first_offset >= 0
        else "OptionalLong.empty"
    )
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} "
        f"currentTxnFirstOffset: {txn_first_offset} lastTimestamp: {entry.timestamp} "
    )
    if entry.has_batch:
        line += (
            f"firstSequence: {entry.first_sequence} lastSequence: {entry.last_sequence} "
            f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} "
            f"timestamp: {entry.timestamp}"
        )
    return line


def dump_time_index(data: bytes, file_name: str) -> Iterator[str]:
    """The lines Kafka's tool prints for the time index `file_name` holding `data`: one
    `timestamp: T offset: O` per entry, stopping at an entry naming the base offset again
    after the first (Kafka's: the zeroes of a preallocated file a crash left). Kafka's
    tool also checks each entry against the segment's batches; this one reads the index
    alone, and names trailing bytes short of an entry instead."""
    base = file_name.partition(".")[0]
    base_offset = int(base) if base.isdigit() else 0
    for slot, entry in enumerate(decode_entries(data, base_offset)):
        if slot > 0 and entry.offset == base_offset:
            return
        yield f"timestamp: {entry.timestamp} offset: {entry.offset}"
    if len(data) % ENTRY_SIZE:
        yield f"Found {len(data) % ENTRY_SIZE} invalid bytes at the end of {file_name}"
