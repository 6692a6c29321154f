"""`kcore dump-log`: a segment printed line for line as Kafka 3.5's kafka-dump-log.sh prints
it (batch lines, `--print-data-log` record lines, control records, a torn tail)."""

from __future__ import annotations

import struct

import crc32c

from kcore.cli import main
from kcore.log import build_batch
from kcore.log.dump import dump_log


def _segment() -> bytes:
    """Three batches as a broker stores them: plain records with a key and headers; an
    idempotent transactional producer's batch whose sequence wraps; a COMMIT marker (a
    control batch: key version 0 type 1, value version 0 coordinator epoch 5); then five
    bytes of a torn write."""
    return (
        build_batch(
            [
                (1_700_000_000_000, b"user-1", b"hello", [("trace", b"abc"), ("empty", None)]),
                (1_700_000_000_004, None, b"world"),
            ],
            partition_leader_epoch=0,
        )
        + build_batch(
            [(1_700_000_000_010, b"k", None), (1_700_000_000_009, None, "naïve".encode())],
            base_offset=2,
            partition_leader_epoch=1,
            producer_id=7,
            producer_epoch=0,
            base_sequence=2_147_483_647,
            attributes=0x10,
        )
        + build_batch(
            [(1_700_000_000_020, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")],
            base_offset=4,
            partition_leader_epoch=1,
            producer_id=7,
            producer_epoch=0,
            attributes=0x30,
        )
        + b"\x00" * 5
    )


BATCH_LINES = [
    "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000004 size: 108 "
    "magic: 2 compresscodec: none crc: 1969623625 isvalid: true",
    "baseOffset: 2 lastOffset: 3 count: 2 baseSequence: 2147483647 lastSequence: 0 "
    "producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 1 isTransactional: true "
    "isControl: false deleteHorizonMs: OptionalLong.empty position: 108 "
    "CreateTime: 1700000000010 size: 82 magic: 2 compresscodec: none crc: 4040939561 "
    "isvalid: true",
    "baseOffset: 4 lastOffset: 4 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 "
    "producerEpoch: 0 partitionLeaderEpoch: 1 isTransactional: true isControl: true "
    "deleteHorizonMs: OptionalLong.empty position: 190 CreateTime: 1700000000020 size: 78 "
    "magic: 2 compresscodec: none crc: 3504351220 isvalid: true",
]
RECORD_LINES = [
    [
        "| offset: 0 CreateTime: 1700000000000 keySize: 6 valueSize: 5 sequence: -1 "
        "headerKeys: [trace,empty] key: user-1 payload: hello",
        "| offset: 1 CreateTime: 1700000000004 keySize: -1 valueSize: 5 sequence: -1 "
        "headerKeys: [] payload: world",
    ],
    [
        "| offset: 2 CreateTime: 1700000000010 keySize: 1 valueSize: -1 sequence: 2147483647 "
        "headerKeys: [] key: k",
        "| offset: 3 CreateTime: 1700000000009 keySize: -1 valueSize: 6 sequence: 0 "
        "headerKeys: [] payload: naïve",
    ],
    [
        "| offset: 4 CreateTime: 1700000000020 keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 5",
    ],
]
TAIL = "Found 5 invalid bytes at the end of 00000000000000000000.log"


def test_batch_lines_are_kafkas():
    assert list(dump_log(_segment(), "00000000000000000000.log")) == [
        "Log starting offset: 0",
        *BATCH_LINES,
        TAIL,
    ]


def test_print_data_log_adds_a_line_per_record():
    expected = ["Log starting offset: 0"]
    for batch_line, records in zip(BATCH_LINES, RECORD_LINES, strict=True):
        expected += [batch_line, *records]
    assert list(dump_log(_segment(), "00000000000000000000.log", print_data_log=True)) == [
        *expected,
        TAIL,
    ]


def test_deep_iteration_lists_records_without_their_data():
    lines = list(dump_log(_segment(), "00000000000000000000.log", deep_iteration=True))
    assert lines[2] == RECORD_LINES[0][0].removesuffix(" key: user-1 payload: hello")
    assert lines[-2] == RECORD_LINES[2][0]  # a control record shows its marker regardless


def test_codecs_timestamp_type_and_a_bad_crc_show():
    batch = bytearray(
        build_batch([(5, None, b"x"), (9, None, b"y")], base_offset=40, compression="zstd")
    )
    batch[22] |= 0x08  # LogAppendTime: every record shows the batch's max timestamp
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    batch[-1] ^= 0xFF  # ... and then damage the records: the stored CRC no longer matches
    lines = list(dump_log(bytes(batch), "00000000000000000040.log", print_data_log=True))
    assert lines[0] == "Log starting offset: 40"
    assert " LogAppendTime: 9 " in lines[1]
    stored_crc = int.from_bytes(batch[17:21], "big")
    assert lines[1].endswith(f"compresscodec: zstd crc: {stored_crc} isvalid: false")
    assert lines[2].startswith("| records cannot be read: records of batch at offsets 40..41")


def test_an_impossible_size_stops_the_dump():
    first = build_batch([(0, None, b"x")])
    segment = first + struct.pack(">qi", 1, 3) + b"\x00" * 20
    lines = list(dump_log(segment, "00000000000000000000.log"))
    assert lines[2] == (
        f"Found record size 3 smaller than minimum record overhead (14) at position {len(first)}"
    )
    assert lines[3] == "Found 32 invalid bytes at the end of 00000000000000000000.log"


def test_the_cli_dumps_files(tmp_path, capsys):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_segment())
    assert main(["dump-log", str(path), "--print-data-log"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Dumping {path}"
    assert out[1:] == list(dump_log(_segment(), path.name, print_data_log=True))
    # Kafka's own spelling: --files with commas; other files are ignored as Kafka does
    other = tmp_path / "00000000000000000000.index"
    other.write_bytes(b"")
    assert main(["dump-log", "--files", f"{path},{other}"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"Dumping {path}",
        "Log starting offset: 0",
        *BATCH_LINES,
        TAIL,
        f"Dumping {other}",
    ]
    assert captured.err == f"Ignoring unknown file {other}\n"
    assert main(["dump-log", str(tmp_path / "00000000000000000099.log")]) == 1
    assert "No such file" in capsys.readouterr().err
