"""The on-disk record format of the transaction log and snapshots, sans-IO.

A record is a 4-byte big-endian body length, the body's CRC32C (4 bytes, big-endian), then
the body: one msgpack object. Reading stops at the first record that is short or fails its
CRC. What that means depends on what follows: a torn tail (a crash in the middle of an
append: an incomplete last record, or space the file system allocated but never wrote) is
safe to cut off, since nothing after it was acknowledged; corruption followed by intact
records is not, since those records were.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import crc32c

import transport

_HEADER = struct.Struct(">II")
HEADER_BYTES = _HEADER.size


def encode_record(obj: Any) -> bytes:
    body = transport.pack(obj)
    return _HEADER.pack(len(body), crc32c.crc32c(body)) + body


def _record_at(data: bytes, offset: int) -> tuple[Any, int] | None:
    """The intact record starting at `offset` and where it ends, or None."""
    if offset + HEADER_BYTES > len(data):
        return None
    length, checksum = _HEADER.unpack_from(data, offset)
    end = offset + HEADER_BYTES + length
    if length == 0 or end > len(data):
        return None
    body = data[offset + HEADER_BYTES : end]
    if crc32c.crc32c(body) != checksum:
        return None
    try:
        return transport.unpack(body), end
    except Exception:  # a CRC collision on garbage: not a record
        return None


def iter_records(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(offset, end, record) of every intact record from the start of `data`, up to the
    first that is not."""
    offset = 0
    while (found := _record_at(data, offset)) is not None:
        record, end = found
        yield offset, end, record
        offset = end


def decode_records(data: bytes) -> tuple[list[Any], int]:
    """Every intact record from the start of `data`, and the length they span (where a
    torn or corrupt tail, if any, begins)."""
    records: list[Any] = []
    offset = 0
    while (found := _record_at(data, offset)) is not None:
        record, offset = found
        records.append(record)
    return records, offset


def is_torn_tail(data: bytes, offset: int) -> bool:
    """Whether the bytes of `data` from `offset` (where the intact records stop) are what a
    crash in the middle of an append leaves: an incomplete record with no intact record
    after it, or zeros (space allocated but never written). A complete record that fails
    its CRC, or any intact record further on, means the file was damaged after it was
    written: the records after the damage were acknowledged."""
    rest = data[offset:]
    if not rest.strip(b"\0"):
        return True
    if len(rest) >= HEADER_BYTES:
        length, _ = _HEADER.unpack_from(rest)
        if HEADER_BYTES + length <= len(rest):
            return False
    # The length may itself be the flipped part: look for an intact record further on.
    return all(_record_at(data, start) is None for start in range(offset + 1, len(data)))
