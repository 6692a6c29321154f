"""Kafka's DefaultRecord (magic 2): the records section of a record batch, uncompressed.

Each record is

    length            varint   bytes of the rest of the record
    attributes        int8     unused, 0
    timestampDelta    varlong  from the batch's base timestamp
    offsetDelta       varint   from the batch's base offset
    keyLength         varint   -1 for a null key
    key               bytes
    valueLength       varint   -1 for a null value
    value             bytes
    headerCount       varint
    headers           per header: keyLength varint + UTF-8 key,
                                  valueLength varint (-1 for null) + value

with varints zig-zag encoded as in Kafka's ByteUtils (protobuf's sint32 / sint64). Encoding
is the producer's hot path (once per batch of up to thousands of records), so it avoids
per-record objects and function calls: the varints of small numbers (lengths, deltas) are
looked up in tables built at import, each record is one `bytes.join`, and the batch one more.
Decoding reads one- and two-byte varints inline, by table, for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

__all__ = [
    "Record",
    "RecordsError",
    "decode_records",
    "encode_records",
    "varint_size",
    "zigzag_varint",
]


@attrs.frozen
class Record:
    """One record of a batch, with its absolute offset and timestamp. `headers` is a tuple
    of `(str key, bytes | None value)` pairs."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RecordsError(ValueError):
    """A records section that does not decode (the caller names the batch)."""


def zigzag_varint(n: int) -> bytes:
    """Kafka's ByteUtils.writeVarlong (and writeVarint, for numbers that fit an int32)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def varint_size(n: int) -> int:
    """Bytes of `zigzag_varint(n)` (Kafka's ByteUtils.sizeOfVarlong)."""
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


# Zig-zag varints of 0 .. _SMALL-1, every number a varint holds in one or two bytes: lengths
# under 8 KiB and the offset deltas of a batch of up to 8 Ki records are a list index away.
# Bigger numbers take 3 bytes or more and are computed (a value that long costs more to copy).
# The three encoding tables and the decoding one take about 1.5 MB, paid once at import.
_SMALL = 1 << 13
_VARINT = [zigzag_varint(n) for n in range(_SMALL)]
# The attributes byte (0) followed by a timestamp delta: the two always travel together.
_ATTRS_VARINT = [b"\x00" + v for v in _VARINT]
_NULL = b"\x01"  # zigzag_varint(-1): a null key or value
_NULL_KEY_VARINT = [_NULL + v for v in _VARINT]  # a null key, then a value's length
_NO_HEADERS = b"\x00"

# Varints decoded by table: one byte b (< 0x80) -> _DECODE_1[b]; two bytes b, c (b >= 0x80,
# c < 0x80) -> _DECODE_2[b][c]. Zig-zag: z -> (z >> 1) ^ -(z & 1).
_DECODE_1 = [(z >> 1) ^ -(z & 1) for z in range(0x80)]
_DECODE_2: list[list[int]] = [[] for _ in range(0x80)] + [
    [(z >> 1) ^ -(z & 1) for z in ((low & 0x7F) | (high << 7) for high in range(0x80))]
    for low in range(0x80, 0x100)
]


def _encode_headers(headers: Sequence[Any]) -> bytes:
    """A record's header count and headers."""
    small = _SMALL
    varint = _VARINT
    n = len(headers)
    parts = [varint[n] if n < small else zigzag_varint(n)]
    append = parts.append
    for key, value in headers:
        try:
            raw = key.encode("utf-8")
        except AttributeError:
            raise TypeError(f"a header key must be a str, got {key!r}") from None
        n = len(raw)
        append(varint[n] if n < small else zigzag_varint(n))
        append(raw)
        if value is None:
            append(_NULL)
        else:
            n = len(value)
            append(varint[n] if n < small else zigzag_varint(n))
            append(value)
    return b"".join(parts)


def encode_records(records: Sequence[tuple[Any, ...]], base_timestamp: int) -> tuple[bytes, int]:
    """The uncompressed records section for `(timestamp, key, value[, headers])` tuples,
    numbered from offset delta 0, and their largest timestamp."""
    parts: list[bytes] = []
    append = parts.append
    join = b"".join
    small = _SMALL
    varint = _VARINT
    attrs_varint = _ATTRS_VARINT
    null_key_varint = _NULL_KEY_VARINT
    max_timestamp = base_timestamp
    for delta, record in enumerate(records):
        timestamp = record[0]
        key = record[1]
        value = record[2]
        headers = _encode_headers(record[3]) if len(record) > 3 and record[3] else _NO_HEADERS
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        td = timestamp - base_timestamp
        head = attrs_varint[td] if 0 <= td < small else b"\x00" + zigzag_varint(td)
        od = varint[delta] if delta < small else zigzag_varint(delta)
        if key is None:
            if value is None:
                body = join((head, od, _NULL, _NULL, headers))
            else:
                n = len(value)
                lv = null_key_varint[n] if n < small else _NULL + zigzag_varint(n)
                body = join((head, od, lv, value, headers))
        else:
            n = len(key)
            kv = varint[n] if n < small else zigzag_varint(n)
            if value is None:
                body = join((head, od, kv, key, _NULL, headers))
            else:
                n = len(value)
                vv = varint[n] if n < small else zigzag_varint(n)
                body = join((head, od, kv, key, vv, value, headers))
        n = len(body)
        append(varint[n] if n < small else zigzag_varint(n))
        append(body)
    return join(parts), max_timestamp


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    """A zig-zag varint of up to 10 bytes (a varlong) at `position`: (value, next position)."""
    z = 0
    shift = 0
    while True:
        if shift > 63:
            raise RecordsError(f"varint at byte {position} is longer than 10 bytes")
        byte = data[position]
        position += 1
        z |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (z >> 1) ^ -(z & 1), position
        shift += 7


def _read_headers(data: bytes, position: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """A record's headers at `position` (its header count): (headers, next position)."""
    decode_1 = _DECODE_1
    read_varint = _read_varint
    byte = data[position]
    if byte < 0x80:
        count = decode_1[byte]
        position += 1
    else:
        count, position = read_varint(data, position)
    if count < 0:
        raise RecordsError(f"invalid header count {count}")
    headers = []
    append = headers.append
    for _ in range(count):
        byte = data[position]
        if byte < 0x80:
            n = decode_1[byte]
            position += 1
        else:
            n, position = read_varint(data, position)
        if n < 0:
            raise RecordsError(f"invalid negative header key size {n}")
        key = data[position : position + n].decode("utf-8")
        position += n
        byte = data[position]
        if byte < 0x80:
            n = decode_1[byte]
            position += 1
        else:
            n, position = read_varint(data, position)
        if n < 0:
            append((key, None))
        else:
            append((key, data[position : position + n]))
            position += n
    return tuple(headers), position


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp: int | None = None,
) -> list[Record]:
    """The `count` records of an uncompressed records section. `timestamp`, when given,
    stamps every record (a LogAppendTime batch's max timestamp, as Kafka's iterator does).

    Strict as Kafka's DefaultRecord.readFrom: each record must end where its length says and
    the section where its last record does. Raises `RecordsError`."""
    try:
        records, position = _decode(data, count, base_offset, base_timestamp, timestamp)
    except IndexError:
        raise RecordsError(f"records section of {len(data)} bytes ends inside a record") from None
    except UnicodeDecodeError as error:
        raise RecordsError(f"a header key is not UTF-8: {error}") from None
    if position != len(data):
        raise RecordsError(
            f"{len(data) - position} bytes left after the {count} records the batch counts"
        )
    return records


def _decode(
    data: bytes, count: int, base_offset: int, base_timestamp: int, timestamp: int | None
) -> tuple[list[Record], int]:
    # Every varint is read inline, by table, when it takes one or two bytes (deltas under
    # 8192, lengths under 8 KiB): a call per field cost more than the rest of the record.
    decode_1 = _DECODE_1
    decode_2 = _DECODE_2
    read_varint = _read_varint
    # Each varint below is read inline (one- and two-byte fast paths, the general case only
    # past them) rather than through a helper: a call per field was most of decoding's cost.
    # Records are built without attrs' __init__ (a frozen class sets each field through
    # object.__setattr__, a third of the decoding time): a bare instance and the slots' own
    # setters, which is what __init__ does without the indirection (Record has no
    # validators or converters to skip).
    new = object.__new__
    record_type = Record
    set_offset = Record.offset.__set__  # type: ignore[attr-defined]
    set_timestamp = Record.timestamp.__set__  # type: ignore[attr-defined]
    set_key = Record.key.__set__  # type: ignore[attr-defined]
    set_value = Record.value.__set__  # type: ignore[attr-defined]
    set_headers = Record.headers.__set__  # type: ignore[attr-defined]
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    size = len(data)
    records = []
    append = records.append
    position = 0
    for _ in range(count):
        byte = data[position]
        if byte < 0x80:
            length = decode_1[byte]
            position += 1
        elif (high := data[position + 1]) < 0x80:
            length = decode_2[byte][high]
            position += 2
        else:
            length, position = read_varint(data, position)
        end = position + length
        if length < 0 or end > size:
            raise RecordsError(
                f"record at byte {position} claims {length} bytes, {size - position} left"
            )
        position += 1  # attributes: no record-level attribute is defined in magic 2
        byte = data[position]
        if byte < 0x80:
            timestamp_delta = decode_1[byte]
            position += 1
        elif (high := data[position + 1]) < 0x80:
            timestamp_delta = decode_2[byte][high]
            position += 2
        else:
            timestamp_delta, position = read_varint(data, position)
        byte = data[position]
        if byte < 0x80:
            offset_delta = decode_1[byte]
            position += 1
        elif (high := data[position + 1]) < 0x80:
            offset_delta = decode_2[byte][high]
            position += 2
        else:
            offset_delta, position = read_varint(data, position)
        byte = data[position]
        if byte < 0x80:
            n = decode_1[byte]
            position += 1
        elif (high := data[position + 1]) < 0x80:
            n = decode_2[byte][high]
            position += 2
        else:
            n, position = read_varint(data, position)
        if n < 0:
            key = None
        else:
            key = data[position : position + n]
            position += n
        byte = data[position]
        if byte < 0x80:
            n = decode_1[byte]
            position += 1
        elif (high := data[position + 1]) < 0x80:
            n = decode_2[byte][high]
            position += 2
        else:
            n, position = read_varint(data, position)
        if n < 0:
            value = None
        else:
            value = data[position : position + n]
            position += n
        if data[position] == 0:
            headers = no_headers
            position += 1
        else:
            headers, position = _read_headers(data, position)
        if position != end:
            raise RecordsError(
                f"record at offset delta {offset_delta} should be {length} bytes, "
                f"its fields take {length + position - end}"
            )
        record = new(record_type)
        set_offset(record, base_offset + offset_delta)
        set_timestamp(record, base_timestamp + timestamp_delta if timestamp is None else timestamp)
        set_key(record, key)
        set_value(record, value)
        set_headers(record, headers)
        append(record)
    return records, position
