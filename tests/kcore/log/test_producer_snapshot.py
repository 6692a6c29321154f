"""The producer snapshot codec (Kafka 3.5's `N.snapshot` files, version 1 with CRC32C), and
`kcore dump-log` printing them as kafka-dump-log.sh does."""

from __future__ import annotations

import struct

import crc32c
import pytest

from kcore.cli import main
from kcore.log._producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
    snapshot_offset,
)
from kcore.log.dump import dump_producer_snapshot

NAME = "00000000000000000042.snapshot"
ENTRY = SnapshotEntry(
    producer_id=1000,
    producer_epoch=2,
    last_sequence=9,
    last_offset=41,
    offset_delta=4,
    timestamp=1_700_000_000_000,
)


def test_entries_round_trip():
    entries = [
        ENTRY,
        SnapshotEntry(7, 0, -1, -1, 0, -1),  # a producer without a batch
        SnapshotEntry(2**62, 32767, 2**31 - 1, 2**62, 2**31 - 1, -5, 12, 30),
    ]
    decoded = decode_snapshot(encode_snapshot(entries), NAME)
    assert decoded == sorted(entries, key=lambda entry: entry.producer_id)


def test_the_bytes_are_kafkas_layout():
    """ProducerStateManager's PID_SNAPSHOT_MAP_SCHEMA: version int16, crc uint32 (CRC32C of
    everything after it), then an ARRAY (int32 count) of entries: producer_id int64, epoch
    int16, last_sequence int32, last_offset int64, offset_delta int32, timestamp int64,
    coordinator_epoch int32, current_txn_first_offset int64."""
    assert crc32c.crc32c(b"123456789") == 0xE3069283  # Castagnoli's check value
    entries_part = bytes.fromhex(
        "00000001"  # one entry
        "00000000000003e8"  # producer id 1000
        "0002"  # epoch
        "00000009"  # last sequence
        "0000000000000029"  # last offset 41
        "00000004"  # offset delta
        "0000018bcfe56800"  # timestamp 1700000000000
        "ffffffff"  # coordinator epoch -1
        "ffffffffffffffff"  # no transaction
    )
    expected = b"\x00\x01" + struct.pack(">I", crc32c.crc32c(entries_part)) + entries_part
    assert encode_snapshot([ENTRY]) == expected
    assert len(expected) == 6 + 4 + 46
    # No producers: what Kafka writes at every roll of a partition without any.
    assert encode_snapshot([]) == b"\x00\x01" + struct.pack(">I", crc32c.crc32c(bytes(4))) + bytes(
        4
    )


def test_a_batch_is_rebuilt_from_the_last_sequence_and_offset_delta():
    assert (ENTRY.first_sequence, ENTRY.first_offset) == (5, 37)
    wrapped = SnapshotEntry(1, 0, 1, 10, 3, 0)  # sequences 2147483646, 2147483647, 0, 1
    assert wrapped.first_sequence == 2**31 - 2


def test_file_names_are_twenty_digit_offsets():
    assert snapshot_file_name(42) == NAME
    assert snapshot_offset(NAME) == 42
    assert snapshot_offset("00000000000000000042.log") is None
    assert snapshot_offset("x.snapshot") is None


def _with_crc(data: bytes) -> bytes:
    return data[:2] + struct.pack(">I", crc32c.crc32c(data[6:])) + data[6:]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:5], "shorter than the 10-byte header"),
        (lambda data: b"\x00\x02" + data[2:], "unknown file version 2"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), r"CRC is no longer valid"),
        (lambda data: _with_crc(data[:-3]), "2 entries announced, 89 bytes"),
        (lambda data: _with_crc(data + b"\x00"), "2 entries announced, 93 bytes"),
        (lambda data: _with_crc(data[:6] + struct.pack(">i", -1) + data[10:]), "-1 entries"),
    ],
)
def test_malformed_snapshots_are_a_clear_error_naming_the_file(damage, message):
    good = encode_snapshot([ENTRY, SnapshotEntry(7, 0, -1, -1, 0, -1)])
    with pytest.raises(CorruptSnapshotError, match=message) as raised:
        decode_snapshot(damage(good), "/data/t-0/" + NAME)
    assert f"/data/t-0/{NAME}" in str(raised.value)


DUMP_LINES = [
    "producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
    "OptionalLong.empty lastTimestamp: -1 ",
    "producerId: 1000 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: "
    "OptionalLong.empty lastTimestamp: 1700000000000 firstSequence: 5 lastSequence: 9 "
    "lastOffset: 41 offsetDelta: 4 timestamp: 1700000000000",
    "producerId: 2000 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: "
    "OptionalLong[40] lastTimestamp: 5 firstSequence: 2147483647 lastSequence: 0 "
    "lastOffset: 41 offsetDelta: 1 timestamp: 5",
]


def _dumped_snapshot() -> bytes:
    return encode_snapshot(
        [
            ENTRY,
            SnapshotEntry(7, 0, -1, -1, 0, -1),
            SnapshotEntry(2000, 1, 0, 41, 1, 5, 3, 40),  # as a transactional Kafka writes
        ]
    )


def test_dump_prints_kafkas_lines():
    """DumpLogSegments.dumpProducerIdSnapshot: the entry, then (a trailing space before it)
    its batch if it has one."""
    assert list(dump_producer_snapshot(_dumped_snapshot(), NAME)) == DUMP_LINES


def test_the_cli_dumps_snapshots_and_reports_a_corrupt_one(tmp_path, capsys):
    good = tmp_path / NAME
    good.write_bytes(_dumped_snapshot())
    bad = tmp_path / "00000000000000000050.snapshot"
    bad.write_bytes(_dumped_snapshot()[:-1])
    assert main(["dump-log", "--files", f"{bad},{good}"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"Dumping {bad}", f"Dumping {good}", *DUMP_LINES]
    assert captured.err.startswith(f"producer snapshot {bad.name}: Snapshot is corrupt (CRC")
