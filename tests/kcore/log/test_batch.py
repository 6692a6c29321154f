import pytest

from kcore.log import (
    HEADER_SIZE,
    CorruptRecordError,
    Record,
    build_batch,
    iter_records,
    parse_header,
    split_batches,
    validate_batch,
    with_base_offset,
    with_partition_leader_epoch,
)

RECORDS = [(1000, b"k0", b"v0"), (1005, None, b"v1", [["h", b"x"]]), (998, b"k2", None)]


def test_round_trip():
    batch = build_batch(RECORDS, base_offset=40, producer_id=7, producer_epoch=1, base_sequence=3)
    header = validate_batch(batch)
    assert (header.base_offset, header.last_offset, header.record_count) == (40, 42, 3)
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1005)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 3)
    assert (header.magic, header.partition_leader_epoch, header.size) == (2, -1, len(batch))
    assert list(iter_records(batch)) == [
        Record(40, 1000, b"k0", b"v0", []),
        Record(41, 1005, None, b"v1", [["h", b"x"]]),
        Record(42, 998, b"k2", None, []),
    ]


def test_header_layout_is_kafkas():
    batch = build_batch([(5, None, b"x")], base_offset=0x0102030405060708)
    assert batch[:8] == bytes(range(1, 9))
    assert int.from_bytes(batch[8:12], "big") == len(batch) - 12
    assert batch[16] == 2  # magic
    assert HEADER_SIZE == 61


def test_rewriting_offset_and_epoch_keeps_the_crc_valid():
    batch = build_batch(RECORDS)
    rewritten = with_partition_leader_epoch(with_base_offset(batch, 100), 9)
    header = validate_batch(rewritten)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (
        100,
        9,
        parse_header(batch).crc,
    )
    assert [record.offset for record in iter_records(rewritten)] == [100, 101, 102]


@pytest.mark.parametrize("position", [21, 30, 61, -1])
def test_flipped_byte_is_caught(position):
    batch = bytearray(build_batch(RECORDS, base_offset=10))
    batch[position] ^= 0x40
    with pytest.raises(CorruptRecordError, match=r"offsets 10\.\.12"):
        validate_batch(batch)


def test_truncated_batch_is_caught():
    batch = build_batch(RECORDS)
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(batch[:-1])
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(batch[:20])


def test_split_batches():
    first, second = build_batch(RECORDS), build_batch([(1, b"a", b"b")], base_offset=3)
    assert [batch for _, batch in split_batches(first + second)] == [first, second]
    with pytest.raises(CorruptRecordError):
        split_batches(b"")
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])
