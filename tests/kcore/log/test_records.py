"""Kafka's DefaultRecord encoding: zig-zag varints as Kafka's ByteUtils writes them, golden
bytes, round trips of awkward records, and batches checked by implementations nobody here
wrote (kio's record-batch reader, kafka-python's DefaultRecordBatch and its builder)."""

from __future__ import annotations

import random
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcore.log import CorruptRecordError, build_batch, iter_records, validate_batch
from kcore.log._records import _read_varint, varint_size, zigzag_varint

INT_MAX, INT_MIN = 2**31 - 1, -(2**31)
LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)

# (value, bytes) as Kafka's ByteUtils.writeVarint / writeVarlong produce them.
VARINTS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (300, "d804"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (INT_MAX, "feffffff0f"),
    (INT_MIN, "ffffffff0f"),
    (LONG_MAX, "feffffffffffffffff01"),
    (LONG_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "encoded"), VARINTS)
def test_zigzag_varints_are_kafkas(value, encoded):
    assert zigzag_varint(value).hex() == encoded
    assert varint_size(value) == len(encoded) // 2
    assert _read_varint(bytes.fromhex(encoded) + b"\xff", 0) == (value, len(encoded) // 2)


def test_varints_round_trip_around_every_byte_boundary():
    values = {0, LONG_MAX, LONG_MIN}
    for bits in range(1, 64):
        values.update({2**bits - 1, 2**bits, -(2**bits), -(2**bits) - 1})
    for value in sorted(v for v in values if LONG_MIN <= v <= LONG_MAX):
        encoded = zigzag_varint(value)
        assert _read_varint(encoded, 0) == (value, len(encoded)), value


def _golden_batch() -> bytes:
    """Two records assembled by hand from Kafka's format description (not by our encoder):
    the first with a key, a value and two headers (one null), the second 5 ms earlier with
    a null key and an empty value."""
    first = bytes.fromhex(
        "00"  # attributes
        "00"  # timestamp delta 0
        "00"  # offset delta 0
        "06" + b"key".hex() +  # key length 3
        "0a" + b"value".hex() +  # value length 5
        "04"  # two headers
        "02" + b"h".hex() + "02" + b"v".hex() +
        "02" + b"n".hex() + "01"  # header "n", null value
    )  # fmt: skip
    second = bytes.fromhex("000902010000")  # delta -5, offset 1, null, b"", none
    records = bytes([len(first) * 2]) + first + bytes([len(second) * 2]) + second
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes
            1,  # last offset delta
            1_700_000_000_123,  # base timestamp
            1_700_000_000_123,  # max timestamp
            42,  # producer id
            3,  # producer epoch
            17,  # base sequence
            2,  # record count
        )
        + records
    )
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return (
        struct.pack(">qiib", 100, length, 9, 2)
        + struct.pack(">I", crc32c.crc32c(after_crc))
        + after_crc
    )


GOLDEN_RECORDS = [
    (1_700_000_000_123, b"key", b"value", [("h", b"v"), ("n", None)]),
    (1_700_000_000_118, None, b""),
]


def test_a_built_batch_is_kafkas_bytes():
    batch = build_batch(
        GOLDEN_RECORDS,
        base_offset=100,
        partition_leader_epoch=9,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
    )
    assert batch.hex() == _golden_batch().hex()


def test_the_golden_batch_reads_back():
    assert [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(_golden_batch())
    ] == [
        (100, 1_700_000_000_123, b"key", b"value", (("h", b"v"), ("n", None))),
        (101, 1_700_000_000_118, None, b"", ()),
    ]


AWKWARD = [
    (0, b"", b"", []),  # empty, not null
    (-5, None, None, [("", b""), ("k", None)]),  # a negative delta, nulls, an empty header key
    (2**40, b"k" * 20_000, b"v" * 300_000, [("big", b"h" * 70_000)]),  # multi-byte lengths
    (-(2**40), "ключ".encode(), "значение".encode(), [("ключ", "значение".encode())]),
    (LONG_MAX // 4, None, bytes(range(256)) * 4, []),
]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_awkward_records_round_trip(compression):
    records = [(1000 + t, k, v, h) for t, k, v, h in AWKWARD]
    batch = build_batch(records, base_offset=2**40, compression=compression)
    header = validate_batch(batch)
    assert header.max_timestamp == max(r[0] for r in records)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)] == [
        (2**40 + i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(records)
    ]


def test_more_records_than_the_small_varint_table():
    records = [(i * 1000, b"%d" % i, b"x" * (i % 300)) for i in range(20_000)]
    batch = build_batch(records)
    read = list(iter_records(batch))
    assert len(read) == 20_000
    assert read[-1].offset == 19_999 and read[-1].timestamp == 19_999_000
    assert read[17_000].key == b"17000" and read[17_000].value == b"x" * (17_000 % 300)


def _with_section(batch: bytes, section: bytes, record_count: int | None = None) -> bytes:
    """`batch` with another records section (and record count), length and CRC fixed."""
    head = bytearray(batch[:61])
    struct.pack_into(">i", head, 8, 49 + len(section))
    if record_count is not None:
        struct.pack_into(">i", head, 57, record_count)
    whole = head + section
    struct.pack_into(">I", whole, 17, crc32c.crc32c(bytes(whole[21:])))
    return bytes(whole)


BASE = build_batch([(10, b"a", b"b"), (11, None, b"c", [("h", b"x")])], base_offset=50)
SECTION = BASE[61:]


@pytest.mark.parametrize(
    ("section", "count", "why"),
    [
        (SECTION, 3, "ends inside a record"),  # one record fewer than counted
        (SECTION + b"\x00", 2, "1 bytes left"),  # trailing garbage
        (SECTION[:-1], 2, "claims 11 bytes, 10 left"),  # truncated
        (b"\x7e" + SECTION[1:], 2, "claims 63 bytes"),  # a record longer than the section
        (b"\x0e" + SECTION[1:], 2, "should be 7 bytes"),  # a length that disagrees
        (b"\xff" * 11, 1, "longer than 10 bytes"),
        (SECTION.replace(b"\x02h", b"\x02\xff"), 2, "not UTF-8"),
        (SECTION.replace(b"\x02h", b"\x03h"), 2, "negative header key size"),
    ],
    ids=[
        "count",
        "trailing",
        "truncated",
        "overlong",
        "length",
        "varint",
        "utf8",
        "negative key size",
    ],
)
def test_an_undecodable_section_is_a_corrupt_record_error(section, count, why):
    batch = _with_section(BASE, section, count)
    validate_batch(batch)  # the header and CRC are sound: only the records are not
    with pytest.raises(CorruptRecordError, match=rf"offsets 50\.\.51 cannot be decoded: .*{why}"):
        list(iter_records(batch))


def test_random_damage_is_a_corrupt_record_error_or_records_never_a_crash():
    rng = random.Random(7)
    batch = build_batch(
        [(i, b"k%d" % i, b"v" * i, [("h", b"x")] * (i % 3)) for i in range(20)], base_offset=5
    )
    section = batch[61:]
    for _ in range(2000):
        damaged = bytearray(section)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            list(iter_records(_with_section(batch, bytes(damaged))))
        except CorruptRecordError as error:
            assert "offsets 5..24" in str(error)


# -- independent readers and writers ---------------------------------------------------


def test_kio_reads_our_batch():
    readers = pytest.importorskip("kio.records.readers")
    records = [
        (1_700_000_000_000, b"key", b"value", [("h1", b"x"), ("h2", None)]),
        (1_700_000_003_000, None, None),
        (1_699_999_999_000, b"", b"v" * 5000, []),
    ]
    batch = build_batch(
        records,
        base_offset=77,
        partition_leader_epoch=4,
        producer_id=9,
        producer_epoch=2,
        base_sequence=30,
    )
    parsed, size = readers.read_batch(batch, 0)  # checks the CRC and every length
    assert size == len(batch)
    assert (parsed.base_offset, parsed.partition_leader_epoch, parsed.last_offset_delta) == (
        77,
        4,
        2,
    )
    assert (parsed.producer_id, parsed.producer_epoch, parsed.base_sequence) == (9, 2, 30)
    assert (parsed.base_timestamp, parsed.max_timestamp) == (1_700_000_000_000, 1_700_000_003_000)
    assert [(r.offset, r.key, r.value) for r in parsed.records] == [
        (77, b"key", b"value"),
        (78, None, None),
        (79, b"", b"v" * 5000),
    ]
    assert [(h.key, h.value) for h in parsed.records[0].headers] == [(b"h1", b"x"), (b"h2", None)]
    # kio keeps whole seconds of the timestamps it resolves
    assert [int(r.timestamp.timestamp()) for r in parsed.records] == [
        t // 1000 for t, *_ in records
    ]


def _kafka_python_codecs():
    codec = pytest.importorskip("kafka.codec")
    available = {"none": 0, "gzip": 1}
    for name, code, present in [
        ("snappy", 2, codec.has_snappy()),
        ("lz4", 3, codec.has_lz4()),
        ("zstd", 4, codec.has_zstd()),
    ]:
        if present:
            available[name] = code
    return available


def _kafka_python_view(batch_bytes):
    from kafka.record.default_records import DefaultRecordBatch

    batch = DefaultRecordBatch(batch_bytes)
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


RECORDS = [
    (1_700_000_000_000 + i * 7 - (i % 5) * 11, None if i % 4 == 0 else b"key-%d" % i,
     None if i % 6 == 1 else b"value-%d-" % i * (i % 9), [("h", b"%d" % i), ("z", None)][: i % 3])
    for i in range(120)
]  # fmt: skip


def test_kafka_python_reads_our_batches():
    for name in _kafka_python_codecs():
        batch = build_batch(
            RECORDS,
            base_offset=1000,
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            compression=name,
        )
        assert _kafka_python_view(batch) == [
            (1000 + i, t, k, v, h) for i, (t, k, v, h) in enumerate(RECORDS)
        ], name


def test_we_read_kafka_pythons_batches():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    for name, code in _kafka_python_codecs().items():
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=code,
            is_transactional=False,
            producer_id=5,
            producer_epoch=1,
            base_sequence=12,
            batch_size=1 << 22,
        )
        for i, (timestamp, key, value, headers) in enumerate(RECORDS):
            assert builder.append(i, timestamp, key, value, headers) is not None
        batch = bytes(builder.build())
        header = validate_batch(batch)
        # kafka-python sends a batch uncompressed when compressing does not make it smaller
        assert header.compression in (name, "none")
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 1, 12)
        assert [
            (r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)
        ] == [(i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(RECORDS)], name


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-(2**45), 2**45),
            st.none() | st.binary(max_size=300),
            st.none() | st.binary(max_size=3000),
            st.lists(
                st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3
            ),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(["none", "gzip"]),
)
def test_any_records_round_trip_and_kafka_python_agrees(records, compression):
    batch = build_batch(records, base_offset=3, compression=compression)
    expected = [(3 + i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(records)]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)] == (
        expected
    )
    pytest.importorskip("kafka")
    assert _kafka_python_view(batch) == [(o, t, k, v, list(h)) for o, t, k, v, h in expected]
