"""The on-disk record format of the transaction log and snapshots, sans-IO.

A record is a 4-byte big-endian body length, the body's CRC32C (4 bytes, big-endian), then
the body: one msgpack object. Reading stops at the first record that is short or fails its
CRC: that is a torn tail (a crash mid-append), and everything before it is intact.
"""

from __future__ import annotations

import struct
from typing import Any

import crc32c

import transport

_HEADER = struct.Struct(">II")
HEADER_BYTES = _HEADER.size


def encode_record(obj: Any) -> bytes:
    body = transport.pack(obj)
    return _HEADER.pack(len(body), crc32c.crc32c(body)) + body


def decode_records(data: bytes) -> tuple[list[Any], int]:
    """Every intact record from the start of `data`, and the length they span (where a
    torn or corrupt tail, if any, begins)."""
    records: list[Any] = []
    offset = 0
    while offset + HEADER_BYTES <= len(data):
        length, checksum = _HEADER.unpack_from(data, offset)
        end = offset + HEADER_BYTES + length
        if end > len(data):
            break
        body = data[offset + HEADER_BYTES : end]
        if crc32c.crc32c(body) != checksum:
            break
        try:
            records.append(transport.unpack(body))
        except Exception:  # a CRC collision on garbage: still a corrupt tail
            break
        offset = end
    return records, offset
