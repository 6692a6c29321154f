import attrs
import crc32c
import pytest

from kcore import errors
from kcore.log import (
    COMPRESSION_TYPES,
    HEADER_SIZE,
    CorruptRecordError,
    Record,
    build_batch,
    check_produced_batch,
    iter_batch_records,
    iter_records,
    parse_header,
    split_batches,
    validate_batch,
    with_base_offset,
    with_partition_leader_epoch,
)

RECORDS = [(1000, b"k0", b"v0"), (1005, None, b"v1", [("h", b"x")]), (998, b"k2", None)]


def test_round_trip():
    batch = build_batch(RECORDS, base_offset=40, producer_id=7, producer_epoch=1, base_sequence=3)
    header = validate_batch(batch)
    assert (header.base_offset, header.last_offset, header.record_count) == (40, 42, 3)
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1005)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 3)
    assert (header.magic, header.partition_leader_epoch, header.size) == (2, -1, len(batch))
    assert list(iter_records(batch)) == [
        Record(40, 1000, b"k0", b"v0", ()),
        Record(41, 1005, None, b"v1", (("h", b"x"),)),
        Record(42, 998, b"k2", None, ()),
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


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_every_codec_round_trips_and_is_named_in_the_header(compression):
    batch = build_batch(RECORDS, base_offset=7, compression=compression)
    header = validate_batch(batch)
    assert header.compression == compression
    assert header.attributes & 0x07 == COMPRESSION_TYPES.index(compression)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)] == [
        (7, 1000, b"k0", b"v0", ()),
        (8, 1005, None, b"v1", (("h", b"x"),)),
        (9, 998, b"k2", None, ()),
    ]


def test_compression_names_are_kafkas():
    assert COMPRESSION_TYPES == ("none", "gzip", "snappy", "lz4", "zstd")
    with pytest.raises(ValueError, match="brotli"):
        build_batch(RECORDS, compression="brotli")
    with pytest.raises(ValueError, match="codec bits"):
        build_batch(RECORDS, attributes=0x01)


def test_an_unknown_codec_id_fails_validation():
    batch = bytearray(build_batch(RECORDS, base_offset=10))
    batch[22] |= 0x05  # attributes' low byte: codec 5, which Kafka does not define
    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match=r"offsets 10\.\.12 names compression codec 5"):
        validate_batch(batch)
    assert parse_header(batch).compression == "unknown(5)"


def test_attribute_bits():
    plain = parse_header(build_batch(RECORDS))
    assert not (plain.is_transactional or plain.is_control or plain.is_log_append_time)
    transactional = parse_header(build_batch(RECORDS, attributes=0x10, compression="lz4"))
    assert transactional.is_transactional and not transactional.is_control
    assert transactional.attributes == 0x13
    control = parse_header(
        build_batch([(5, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], attributes=0x30)
    )
    assert control.is_control and control.is_transactional


def test_a_control_batch_yields_no_data_records():
    marker = build_batch([(5, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], attributes=0x30)
    assert list(iter_records(marker)) == []
    data = build_batch([(6, None, b"x")], base_offset=1)
    assert [r.value for r in iter_batch_records([marker, data])] == [b"x"]


def test_log_append_time_stamps_every_record_with_the_max_timestamp():
    # The broker (when a topic says LogAppendTime) sets bit 3 and the max timestamp; Kafka's
    # iterator then gives every record that time, whatever the producer wrote.
    batch = bytearray(build_batch(RECORDS))
    batch[22] |= 0x08
    batch[35:43] = (424242).to_bytes(8, "big")  # max_timestamp
    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    assert validate_batch(batch).is_log_append_time
    assert [r.timestamp for r in iter_records(batch)] == [424242] * 3


def test_headers_come_back_as_tuples_of_str_and_bytes_or_none():
    batch = build_batch([(0, None, b"v", [("a", b"1"), ("ü", None), ("a", b"")])])
    (record,) = iter_records(batch)
    assert record.headers == (("a", b"1"), ("ü", None), ("a", b""))
    with pytest.raises(TypeError, match="header key must be a str"):
        build_batch([(0, None, b"v", [(b"bytes-key", b"1")])])


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_a_batch_from_a_memoryview_or_bytearray_reads_the_same(compression):
    batch = build_batch(RECORDS, compression=compression)
    expected = list(iter_records(batch))
    assert list(iter_records(bytearray(batch))) == expected
    assert list(iter_records(memoryview(batch))) == expected


def _header_of(batch: bytes):
    return validate_batch(batch)


def test_a_sound_produced_batch_passes_the_checks_kafka_makes():
    batch = build_batch([(1, None, b"a"), (2, None, b"b")], producer_id=4, base_sequence=0)
    check_produced_batch(_header_of(batch), "t-0")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"record_count": 3}, "Inconsistent batch offset range"),
        ({"record_count": 0, "last_offset_delta": -1}, "Invalid reported count"),
        ({"attributes": 0x20}, "control records"),
        ({"attributes": 0x10}, "Transactional"),
        ({"base_sequence": -1}, "Invalid sequence number"),
    ],
)
def test_produced_batches_kafka_refuses_are_invalid_records(change, reason):
    header = attrs.evolve(
        _header_of(build_batch([(1, None, b"a"), (2, None, b"b")], producer_id=4, base_sequence=0)),
        **change,
    )
    with pytest.raises(errors.InvalidRecordError, match=reason):
        check_produced_batch(header, "t-0")


def test_a_log_append_time_batch_reads_the_brokers_clock_and_stays_valid():
    from kcore.log import with_log_append_time

    stamped = with_log_append_time(build_batch([(1, None, b"a"), (7, None, b"b")]), 1_000_000)
    header = validate_batch(stamped)  # the CRC was recomputed
    assert header.is_log_append_time and header.max_timestamp == 1_000_000
    assert [r.timestamp for r in iter_records(stamped)] == [1_000_000, 1_000_000]
