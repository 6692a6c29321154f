"""Record batches: Kafka's v2 batch header in front of ONE msgpack array of records.

The header fields and their order are Kafka's (DefaultRecordBatch), big-endian; the CRC32C
covers everything after the crc field, so the base offset and the partition leader epoch
(which precede it) can be rewritten by the broker without recomputing the CRC. The records
payload is a single msgpack array of `[offset_delta, timestamp_delta, key, value, headers]`
lists, packed once per batch, so the broker never unpacks records on append.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs
import crc32c
import msgpack

from kcore.log._errors import CorruptRecordError

MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# base_offset, length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, record_count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61, as Kafka's RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12  # base_offset + length: the bytes `length` does not count
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_AT = 12
_CRC_END = 21  # CRC32C covers [21:]


@attrs.frozen
class BatchHeader:
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.length + LOG_OVERHEAD


@attrs.frozen
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Any]


def build_batch(
    records: Sequence[tuple[Any, ...]],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
) -> bytes:
    """One batch from `(timestamp, key, value)` or `(timestamp, key, value, headers)` tuples,
    offsets numbered from `base_offset`."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp = records[0][0]
    rows = []
    max_timestamp = base_timestamp
    for delta, record in enumerate(records):
        timestamp, key, value = record[0], record[1], record[2]
        headers = record[3] if len(record) > 3 else []
        max_timestamp = max(max_timestamp, timestamp)
        rows.append([delta, timestamp - base_timestamp, key, value, headers])
    payload = msgpack.packb(rows, use_bin_type=True)
    body = _HEADER.pack(
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    batch = bytearray(body)
    batch += payload
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[_CRC_END:]))
    return bytes(batch)


def parse_header(data: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The header of the batch at `position`, without touching its records."""
    if len(data) - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch at byte {position} is truncated: {len(data) - position} bytes "
            f"left, a header needs {HEADER_SIZE}"
        )
    return BatchHeader(*_HEADER.unpack_from(data, position))


def validate_batch(data: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The header of the batch at `position` after checking its size, magic and CRC32C."""
    header = parse_header(data, position)
    where = f"record batch at offsets {header.base_offset}..{header.last_offset}"
    if header.length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"{where} has an impossible length {header.length}")
    if header.magic != MAGIC:
        raise CorruptRecordError(f"{where} has magic {header.magic}, expected {MAGIC}")
    end = position + header.size
    if end > len(data):
        raise CorruptRecordError(
            f"{where} is truncated: {len(data) - position} of {header.size} bytes present"
        )
    actual = crc32c.crc32c(memoryview(data)[position + _CRC_END : end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"{where} is corrupt: stored CRC32C {header.crc:#010x}, computed {actual:#010x}"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecordError(f"{where} has a negative offset delta or record count")
    return header


def split_batches(data: bytes | bytearray | memoryview) -> list[tuple[BatchHeader, bytes]]:
    """Validated batches of a buffer holding one or more whole batches back to back."""
    batches = []
    position = 0
    while position < len(data):
        header = validate_batch(data, position)
        whole = position == 0 and header.size == len(data) and isinstance(data, bytes)
        batches.append((header, data if whole else bytes(data[position : position + header.size])))
        position += header.size
    if not batches:
        raise CorruptRecordError("empty buffer: expected at least one record batch")
    return batches


def split_valid_batches(
    data: bytes | bytearray | memoryview,
) -> tuple[list[tuple[BatchHeader, bytes]], CorruptRecordError | None]:
    """The validated batches of `data` up to the first that fails validation, and that
    failure (None when every batch is sound): what precedes a corrupt batch is still good
    to deliver, as Kafka's consumer does before raising CorruptRecordException."""
    batches = []
    position = 0
    while position < len(data):
        try:
            header = validate_batch(data, position)
        except CorruptRecordError as error:
            return batches, error
        batches.append((header, bytes(data[position : position + header.size])))
        position += header.size
    return batches, None


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """The batch renumbered to start at `base_offset` (outside the CRC, so it stays valid)."""
    return _BASE_OFFSET.pack(base_offset) + batch[_BASE_OFFSET.size :]


def with_partition_leader_epoch(batch: bytes, epoch: int) -> bytes:
    """The batch stamped with the leader's epoch (outside the CRC, so it stays valid)."""
    end = _LEADER_EPOCH_AT + _LEADER_EPOCH.size
    return batch[:_LEADER_EPOCH_AT] + _LEADER_EPOCH.pack(epoch) + batch[end:]


def restamp(batch: bytes, base_offset: int, partition_leader_epoch: int) -> bytes:
    """The batch with a new base offset and leader epoch in one copy (the leader's append)."""
    stamped = bytearray(batch)
    _BASE_OFFSET.pack_into(stamped, 0, base_offset)
    _LEADER_EPOCH.pack_into(stamped, _LEADER_EPOCH_AT, partition_leader_epoch)
    return bytes(stamped)


def iter_records(batch: bytes | bytearray | memoryview) -> Iterator[Record]:
    """The records of one validated batch, with absolute offsets and timestamps."""
    header = parse_header(batch)
    payload = memoryview(batch)[HEADER_SIZE : header.size]
    try:
        rows = msgpack.unpackb(payload, raw=False, use_list=True)
    except (ValueError, msgpack.ExtraData) as error:
        raise CorruptRecordError(
            f"records of batch at offsets {header.base_offset}..{header.last_offset} "
            f"cannot be decoded: {error}"
        ) from error
    for offset_delta, timestamp_delta, key, value, headers in rows:
        yield Record(
            header.base_offset + offset_delta,
            header.base_timestamp + timestamp_delta,
            key,
            value,
            headers,
        )


def iter_batch_records(batches: Iterable[bytes]) -> Iterator[Record]:
    """The records of several batches, in order."""
    for batch in batches:
        yield from iter_records(batch)
