"""Record batches: Kafka's v2 record batch (magic 2), byte for byte.

The header fields and their order are Kafka's (DefaultRecordBatch), big-endian; the CRC32C
covers everything after the crc field, so the base offset and the partition leader epoch
(which precede it) can be rewritten by the broker without recomputing the CRC. The records
section after the header is Kafka's DefaultRecord encoding (`_records`), compressed as a
whole by the codec of attributes bits 0-2 (`_compression`). The broker stores and serves a
client's batch as it came and never decodes records on its hot path; only clients and tools
do (`iter_records`).

Attributes (int16): bits 0-2 the codec, bit 3 the timestamp type (LogAppendTime), bit 4
transactional, bit 5 control batch, bit 6 a delete horizon in the base timestamp (KIP-534).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs
import crc32c

from kcore import errors
from kcore.log._compression import (
    CODEC_MASK,
    COMPRESSION_TYPES,
    NONE,
    CodecError,
    codec_id,
    codec_name,
    compress,
    decompress,
)
from kcore.log._errors import CorruptRecordError
from kcore.log._records import Record, RecordsError, decode_records, encode_records

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
_CRC_AT = 17

TIMESTAMP_TYPE_MASK = 0x08  # LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


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

    @property
    def compression(self) -> str:
        """Kafka's name of the batch's codec: "none", "gzip", "snappy", "lz4" or "zstd"."""
        return codec_name(self.attributes & CODEC_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """A control batch (transaction markers) holds no data records."""
        return bool(self.attributes & CONTROL_MASK)

    @property
    def is_log_append_time(self) -> bool:
        """The broker's append time (`max_timestamp`) stamps every record, not its own."""
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)


def build_batch(
    records: Sequence[tuple[Any, ...]],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    compression: str = "none",
) -> bytes:
    """One batch from `(timestamp, key, value)` or `(timestamp, key, value, headers)` tuples
    (headers: `(str, bytes | None)` pairs), offsets numbered from `base_offset`, the records
    section compressed with `compression` (Kafka's names: "none", "gzip", "snappy", "lz4",
    "zstd"). `attributes` carries the other attribute bits (transactional, control); the
    codec bits come from `compression`. The base timestamp is the first record's, as the
    Java producer writes it."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if attributes & CODEC_MASK:
        raise ValueError(
            f"attributes {attributes:#x} set codec bits; name the codec with compression="
        )
    codec = codec_id(compression)
    base_timestamp = records[0][0]
    payload, max_timestamp = encode_records(records, base_timestamp)
    if codec != NONE:
        payload = compress(codec, payload)
    body = _HEADER.pack(
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes | codec,
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
    struct.pack_into(">I", batch, _CRC_AT, crc32c.crc32c(memoryview(batch)[_CRC_END:]))
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
    if header.attributes & CODEC_MASK >= len(COMPRESSION_TYPES):
        # Kafka's CompressionType.forId refuses it: no client could read the records.
        raise CorruptRecordError(
            f"{where} names compression codec {header.attributes & CODEC_MASK}, which is none "
            "of Kafka's"
        )
    return header


def check_produced_batch(header: BatchHeader, where: str) -> None:
    """What Kafka's LogValidator.validateBatch requires of a batch a client produced, beyond
    a sound CRC: an offset range that matches its record count, no control records, a
    sequence when it has a producer id; and, kcore having no transactions, no transactional
    batch. Raises InvalidRecordError naming `where` (the partition)."""
    count_from_offsets = header.last_offset_delta + 1
    if header.record_count <= 0:
        raise errors.InvalidRecordError(
            f"Invalid reported count for record batch: {header.record_count} in {where}"
        )
    if count_from_offsets != header.record_count:
        raise errors.InvalidRecordError(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.record_count} in {where}"
        )
    if header.is_control:
        raise errors.InvalidRecordError(
            f"Clients are not allowed to write control records in {where}"
        )
    if header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0:
        raise errors.InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id} in {where}"
        )
    if header.is_transactional:
        raise errors.InvalidRecordError(
            f"Transactional records are not supported (kcore has no transactions) in {where}"
        )


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


_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")


def with_log_append_time(batch: bytes, now_ms: int) -> bytes:
    """The batch as a LogAppendTime topic stores it (Kafka's setMaxTimestamp): the
    timestamp-type bit set and the max timestamp made the broker's clock, which every record
    then reads as its timestamp; the CRC, which covers both, is recomputed. The records
    themselves are not touched."""
    stamped = bytearray(batch)
    (attributes,) = _ATTRIBUTES.unpack_from(stamped, _ATTRIBUTES_AT)
    _ATTRIBUTES.pack_into(stamped, _ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_MASK)
    _TIMESTAMP.pack_into(stamped, _MAX_TIMESTAMP_AT, now_ms)
    struct.pack_into(">I", stamped, _CRC_AT, crc32c.crc32c(memoryview(stamped)[_CRC_END:]))
    return bytes(stamped)


def iter_records(batch: bytes | bytearray | memoryview) -> Iterator[Record]:
    """The data records of one validated batch, with absolute offsets and timestamps (a
    LogAppendTime batch's records all carry its max timestamp, as Kafka's iterator gives
    them). A control batch has none. Raises `CorruptRecordError` naming the batch's offsets
    when its records section does not decompress or decode."""
    header = parse_header(batch)
    if header.is_control:
        return
    yield from batch_records(batch, header)


def batch_records(batch: bytes | bytearray | memoryview, header: BatchHeader) -> list[Record]:
    """Every record of the batch `header` heads, control records included (what tools show).
    The section is decoded whole, so a corrupt batch raises before any of its records is
    delivered."""
    section = batch[HEADER_SIZE : header.size]
    try:
        codec = header.attributes & CODEC_MASK
        data = decompress(codec, section) if codec != NONE else bytes(section)
        return decode_records(
            data,
            header.record_count,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp if header.is_log_append_time else None,
        )
    except (CodecError, RecordsError) as error:
        raise CorruptRecordError(
            f"records of batch at offsets {header.base_offset}..{header.last_offset} "
            f"cannot be decoded: {error}"
        ) from error


def iter_batch_records(batches: Iterable[bytes]) -> Iterator[Record]:
    """The records of several batches, in order."""
    for batch in batches:
        yield from iter_records(batch)
